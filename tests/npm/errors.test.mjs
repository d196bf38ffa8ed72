// Errors that say what happened: validated JS answers, the aggregate's status, retryable and
// cause, messages without repeated prefixes, `reached`, ConfigError's place, events naming the
// entry, a disposed client, and health() counting as documented.
import assert from "node:assert/strict";
import net from "node:net";
import { test } from "node:test";
import { inspect } from "node:util";

import m, { scripted, user } from "./pkg.mjs";

const {
  ResilientClient, LLMError, AllProvidersFailedError, ClientRequestError, ConfigError,
  TimeoutError, ServerError, NetworkError,
} = m;

const answering = (name, value) => ({ name, calls: 0, chat() { this.calls++; return Promise.resolve(value); } });
const hanging = (name) => ({
  name,
  chat: (_req, signal) => new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason))),
});

test("a JS provider's answer is validated: no string text, or a bad usage, fails over as a decode error", async () => {
  for (const bad of [{ nottext: 1 }, { text: 5 }, { text: "x", usage: { tokens: "many" } }, null, "just a string"]) {
    const p = answering("p", bad);
    const backup = answering("backup", { text: "from backup" });
    const client = new ResilientClient({ retry: { maxAttempts: 1 } }, { providers: [p, backup] });
    const res = await client.chat(user("x"));
    assert.equal(res.text, "from backup", inspect(bad));
    assert.equal(res.attempts[0].kind, "decode", inspect(bad));
    assert.equal(p.calls, 1);
  }
  const tools = answering("tools", { toolCalls: [{ id: "c1", name: "f", arguments: "{}" }] });
  const res = await new ResilientClient({}, { providers: [tools] }).chat(user("x"));
  assert.equal(res.text, "");
  assert.equal(res.toolCalls[0].name, "f");
});

test("a lone 401: an AllProvidersFailedError with status 401, not retryable, the failure as its cause", async () => {
  const p = scripted("p", [{ status: 401, message: "invalid key" }]);
  const err = await new ResilientClient({}, { providers: [p] }).chat(user("x")).catch((e) => e);
  assert.ok(err instanceof AllProvidersFailedError, inspect(err));
  assert.equal(err.status, 401);
  assert.equal(err.retryable, false);
  assert.ok(err.cause instanceof ClientRequestError, inspect(err.cause));
  assert.equal(err.cause.status, 401);
  assert.equal(err.cause.provider, "p");
  assert.equal(err.message, "the only provider failed: authentication failed (p: HTTP 401: invalid key)");
});

test("what a JS provider threw is kept as the cause (Error.cause) of the error the caller gets", async () => {
  const thrown = Object.assign(new Error("invalid key"), { status: 401 });
  const p = { name: "p", chat: () => Promise.reject(thrown) };
  const err = await new ResilientClient({}, { providers: [p] }).chat(user("x")).catch((e) => e);
  assert.ok(err instanceof AllProvidersFailedError, inspect(err));
  assert.ok(err.cause instanceof ClientRequestError, inspect(err.cause));
  assert.equal(err.cause.cause, thrown, "the provider's failure keeps what it threw");
  // Thrown synchronously, and unwrapped: the provider's own class, whose cause is the value.
  const sync = { name: "s", chat: () => { throw thrown; } };
  const own = await new ResilientClient({}, { providers: [sync], unwrapSingleProvider: true })
    .chat(user("x"))
    .catch((e) => e);
  assert.ok(own instanceof ClientRequestError, inspect(own));
  assert.equal(own.cause, thrown);
  // The hooks' errors too.
  const seen = [];
  const onProviderError = (e) => seen.push(e.error.cause);
  await new ResilientClient({}, { providers: [p], onProviderError }).chat(user("x")).catch(() => {});
  assert.deepEqual(seen, [thrown]);
});

test("a rejection's stack names the function that made the call", async () => {
  const client = new ResilientClient({ retry: { maxAttempts: 1 } }, { providers: [scripted("p", [{ status: 500 }])] });
  async function askTheModelFromHere() {
    await client.chat(user("x"));
  }
  const err = await askTheModelFromHere().catch((e) => e);
  assert.ok(err instanceof AllProvidersFailedError, inspect(err));
  assert.match(err.stack, /askTheModelFromHere/);
  assert.ok(err.stack.startsWith("AllProvidersFailedError: "), err.stack);
  async function readTheStreamFromHere() {
    for await (const _ of client.stream(user("x")));
  }
  const streamed = await readTheStreamFromHere().catch((e) => e);
  assert.ok(streamed instanceof LLMError, inspect(streamed));
  assert.match(streamed.stack, /readTheStreamFromHere/);
  function finalFromHere() {
    return client.stream(user("x")).finalResponse;
  }
  assert.match((await finalFromHere().catch((e) => e)).stack, /finalFromHere/);
});

test("unwrapSingleProvider: a single-entry route rejects with the provider's own class", async () => {
  const client = new ResilientClient({ timeoutMs: 20, retry: { maxAttempts: 1 } }, { providers: [hanging("slow")], unwrapSingleProvider: true });
  const err = await client.chat(user("x")).catch((e) => e);
  assert.ok(err instanceof TimeoutError, inspect(err));
  assert.equal(err.provider, "slow");
  assert.equal(err.attempts.length, 1);
  assert.equal(err.message, "slow: timed out: no response within 20 ms");
  // Two entries still give the aggregate, whose cause is the last failure.
  const two = new ResilientClient({ timeoutMs: 20, retry: { maxAttempts: 1 } }, {
    providers: [scripted("a", [{ status: 500 }]), hanging("b")],
    unwrapSingleProvider: true,
  });
  const agg = await two.chat(user("x")).catch((e) => e);
  assert.ok(agg instanceof AllProvidersFailedError, inspect(agg));
  assert.ok(agg.cause instanceof TimeoutError);
  assert.equal(agg.retryable, true);
  assert.equal(agg.status, 503);
  assert.throws(() => new ResilientClient({}, { providers: [hanging("x")], unwrapSingleProvider: "yes" }),
    (e) => e instanceof ConfigError && e.issues[0].path === "options.unwrapSingleProvider");
});

test("messages are written once: no doubled prefixes, a skipped breaker as a duration", async () => {
  const net1 = scripted("n", [new TypeError("fetch failed")]);
  const err = await new ResilientClient({ retry: { maxAttempts: 1 } }, { providers: [net1] }).chat(user("x")).catch((e) => e);
  assert.equal(err.message, "the only provider failed: network error (n: TypeError: fetch failed)");
  assert.ok(err.cause instanceof NetworkError);
  assert.doesNotMatch(err.failures[0].message, /network error/);

  const timeout = await new ResilientClient({ timeoutMs: 15, retry: { maxAttempts: 1 } }, { providers: [hanging("s")] })
    .chat(user("x")).catch((e) => e);
  assert.equal(timeout.message, "the only provider failed: timed out (s: no response within 15 ms)");

  const flaky = scripted("flaky", [{ status: 500 }]);
  const client = new ResilientClient(
    { retry: { maxAttempts: 1 }, breaker: { failureThreshold: 1, cooldownMs: 30000 } },
    { providers: [flaky] },
  );
  await client.chat(user("x")).catch(() => {});
  const skipped = await client.chat(user("x")).catch((e) => e);
  assert.equal(skipped.failures[0].kind, "circuit_open");
  assert.match(skipped.failures[0].message, /^skipped, open for another \d+ ms$/);
  assert.doesNotMatch(skipped.message, /\d{13}/);
});

test("reached is false when a JS provider's connection was refused", async () => {
  const port = await new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
  const refused = { name: "refused", chat: (_r, signal) => fetch(`http://127.0.0.1:${port}/`, { signal }).then(() => ({ text: "?" })) };
  const reset = scripted("reset", [Object.assign(new TypeError("fetch failed"), { cause: { code: "ECONNRESET", message: "socket hang up" } })]);
  const err = await new ResilientClient({ retry: { maxAttempts: 1 } }, { providers: [refused, reset] }).chat(user("x")).catch((e) => e);
  assert.deepEqual(err.failures.map((f) => [f.provider, f.kind, f.reached]), [["refused", "transport", false], ["reset", "transport", true]]);
});

test("ConfigError is an LLMError of kind config, not retryable", () => {
  const err = (() => {
    try {
      new ResilientClient({ retry: { maxAttempts: 0 } }, { providers: [hanging("x")] });
    } catch (e) {
      return e;
    }
  })();
  assert.ok(err instanceof ConfigError && err instanceof LLMError && err instanceof Error);
  assert.equal(err.kind, "config");
  assert.equal(err.retryable, false);
  assert.ok(err.issues.length > 0);
  assert.equal(JSON.parse(JSON.stringify(err)).issues.length, err.issues.length);
});

test("events carry provider, model and label: two models of one provider fail over readably", async () => {
  const events = [];
  const p = { name: "p", chat: (req) => (req.model === "big" ? Promise.reject(Object.assign(new Error("busy"), { status: 503 })) : Promise.resolve({ text: `from ${req.model}` })) };
  const client = new ResilientClient(
    { routes: { default: [{ provider: "p", model: "big", label: "primary" }, { provider: "p", model: "small", label: "fallback" }] }, retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 2 } },
    { providers: [p], onEvent: (e) => events.push(e) },
  );
  assert.equal((await client.chat(user("x"))).text, "from small");
  const retry = events.find((e) => e.type === "retry");
  assert.deepEqual([retry.provider, retry.model, retry.label], ["p", "big", "primary"]);
  const failed = events.find((e) => e.type === "provider_failed");
  assert.deepEqual([failed.provider, failed.model, failed.label], ["p", "big", "primary"]);
  const failover = events.find((e) => e.type === "failover");
  assert.deepEqual(
    [failover.from, failover.fromModel, failover.fromLabel, failover.to, failover.toModel, failover.toLabel],
    ["p", "big", "primary", "p", "small", "fallback"],
  );
  assert.ok(failover.error instanceof ServerError);
});

test("a disposed client says so, and free() twice is harmless", async () => {
  const client = new ResilientClient({}, { providers: [answering("p", { text: "x" })] });
  client.free();
  client.free();
  const isDisposed = (e) => e instanceof ClientRequestError && e.kind === "disposed" && /client is disposed/.test(e.message);
  await assert.rejects(client.chat(user("x")), isDisposed);
  assert.throws(() => client.stream(user("x")), isDisposed);
  assert.throws(() => client.health(), isDisposed);
  assert.throws(() => client.fetch, isDisposed);
  if (typeof Symbol.dispose === "symbol") {
    const other = new ResilientClient({}, { providers: [answering("p", { text: "x" })] });
    other[Symbol.dispose]();
    other.free();
    assert.throws(() => other.health(), isDisposed);
  }
});

test("health(): the breaker's count restarts at each transition; the statistics run on", async () => {
  const p = scripted("p", [{ status: 500 }]);
  const q = scripted("q", ["from q"]);
  const client = new ResilientClient(
    { routes: { default: [{ provider: "p", model: "p" }] }, retry: { maxAttempts: 1 }, breaker: { failureThreshold: 2, cooldownMs: 60000 } },
    { providers: [p, q] },
  );
  const health = (name) => client.health().find((h) => h.provider === name);
  await client.chat(user("x")).catch(() => {});
  let h = health("p");
  assert.deepEqual([h.state, h.consecutiveFailures, h.requests, h.failures], ["closed", 1, 1, 1]);
  await client.chat(user("x")).catch(() => {});
  h = health("p");
  assert.deepEqual([h.state, h.consecutiveFailures, h.requests, h.failures], ["open", 0, 2, 2]);
  assert.ok(h.openUntil > Date.now());
  assert.equal(h.lastFailure.kind, "server");
  // Breakers are per model: the provider's one model carries the same state.
  assert.deepEqual(h.models.map((m) => [m.model, m.state, m.openUntil]), [["p", "open", h.openUntil]]);
  // A call that skips an open breaker is not one of its provider's requests.
  const both = new ResilientClient(
    { retry: { maxAttempts: 1 }, breaker: { failureThreshold: 1, cooldownMs: 60000 } },
    { providers: [scripted("r", [{ status: 500 }]), q] },
  );
  await both.chat(user("x"));
  const again = await both.chat(user("x"));
  assert.equal(again.attempts[0].kind, "circuit_open");
  assert.equal(both.health().find((x) => x.provider === "r").requests, 1);
});

test("a call's priority: sheddable calls are shed while the route fails, critical ones still sent", async () => {
  const failing = {
    name: "p",
    calls: 0,
    chat() {
      this.calls++;
      return Promise.reject(Object.assign(new Error("overloaded"), { status: 529 }));
    },
  };
  const client = new ResilientClient(
    { retry: { maxAttempts: 1 }, breaker: { failureThreshold: 10000 } },
    { providers: [failing] },
  );
  let shed = null;
  const end = Date.now() + 10000;
  while (!shed && Date.now() < end) {
    for (let i = 0; i < 6 && !shed; i++) {
      const e = await client.chat(user("x"), { priority: "sheddable" }).catch((e) => e);
      if (e.kind === "load_shed") shed = e;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.ok(shed instanceof LLMError, inspect(shed));
  assert.equal(shed.status, 503);
  assert.equal(shed.retryable, true);
  assert.ok(shed.retryAfterMs >= 1000 && shed.retryAfterMs <= 5000, inspect(shed));
  assert.match(shed.message, /is shedding sheddable requests/);
  const calls = failing.calls;
  const critical = await client.chat(user("x"), { priority: "critical" }).catch((e) => e);
  assert.notEqual(critical.kind, "load_shed");
  assert.equal(failing.calls, calls + 1, "a critical call is sent");
  await assert.rejects(client.chat(user("x"), { priority: "urgent" }), /options\.priority/);
});
