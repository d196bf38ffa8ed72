// client.stream() from JS: an async iterable over real SSE from the mock
// provider server (127.0.0.1, free port), with failover and interruption.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { startMock } from "../e2e/mock-provider.mjs";
import m, { scripted, user } from "./pkg.mjs";

const { ResilientClient, LLMError, AbortError } = m;

let mock;
before(async () => {
  mock = await startMock({ port: 0, config: { providers: {} } });
});
after(async () => {
  await mock.close();
});

/** A client over two mock OpenAI providers, `a` then `b`. */
function client(extra = {}) {
  return new ResilientClient({
    providers: {
      a: { kind: "openai-compatible", preset: "custom", baseUrl: mock.providerUrl("a") },
      b: { kind: "openai-compatible", preset: "custom", baseUrl: mock.providerUrl("b") },
    },
    routes: { default: [{ provider: "a", model: "m-a" }, { provider: "b", model: "m-b" }] },
    retry: { maxAttempts: 1 },
    idleTimeoutMs: 2000,
    ...extra,
  });
}

async function collect(iterable) {
  const events = [];
  let error;
  try {
    for await (const e of iterable) events.push(e);
  } catch (e) {
    error = e;
  }
  const text = events.filter((e) => e.type === "text").map((e) => e.text).join("");
  return { events, text, error };
}

test("a healthy stream yields start, text, finish and usage", async () => {
  await mock.reset();
  // The custom preset asks for no usage by default: asked here, it is reported.
  const asking = client();
  const withUsage = new ResilientClient({
    providers: { a: { kind: "openai-compatible", preset: "custom", baseUrl: mock.providerUrl("a"), streamUsage: true } },
    routes: { default: [{ provider: "a", model: "m-a" }] },
    retry: { maxAttempts: 1 },
  });
  const { events, text, error } = await collect(withUsage.stream(user("hello there")));
  assert.equal(error, undefined);
  assert.equal(text, "[a] echo: hello there");
  assert.deepEqual(events[0], { type: "start", model: "m-a" });
  assert.deepEqual(events.slice(-2).map((e) => e.type), ["finish", "usage"]);
  assert.equal(events.at(-2).reason, "stop");
  assert.ok(events.at(-1).usage.outputTokens > 0, JSON.stringify(events.at(-1)));
  // Not asked, none reported: no usage event rather than invented zeros.
  const plain = await collect(asking.stream(user("hello there")));
  assert.equal(plain.events.at(-1).type, "finish");
  assert.ok(plain.events.every((e) => e.type !== "usage"));
});

test("a provider failing before the first token is failed over", async () => {
  await mock.reset();
  mock.setFault("a", { mode: "status", status: 503 });
  const { text, error } = await collect(client().stream(user("x")));
  assert.equal(error, undefined);
  assert.equal(text, "[b] echo: x");
});

test("a cut stream is continued by the fallback or ends in an error, never a short success", async () => {
  await mock.reset();
  mock.setFault("a", { mode: "stream", cutAfterChunks: 1 });
  const continued = await collect(client().stream(user("one two three")));
  // b restarts from scratch with a different answer: it cannot extend what a said,
  // so the stream must end with an interruption error, not a clean end.
  assert.ok(continued.error instanceof LLMError, String(continued.error));
  assert.equal(continued.error.kind, "interrupted");
  assert.ok(continued.text.length > 0 && continued.text.length < "[a] echo: one two three".length);
  assert.ok(!continued.events.some((e) => e.type === "finish"));
});

test("a stream cut after its first text is continued: the whole answer, seen only through the hooks", async () => {
  await mock.reset();
  // The first attempt at `a` is cut after one chunk; the retry at `a` gives the same answer,
  // whose text the stream swallows until it extends what was delivered (a matched restart).
  mock.setFault("a", { mode: "stream", cutAfterChunks: 1, firstN: 1 });
  const retries = [];
  const seen = new ResilientClient(
    {
      providers: { a: { kind: "openai-compatible", preset: "custom", baseUrl: mock.providerUrl("a") } },
      routes: { default: [{ provider: "a", model: "m-a" }] },
      retry: { maxAttempts: 2, baseDelayMs: 1 },
      idleTimeoutMs: 2000,
    },
    { onRetry: (e) => retries.push(e) },
  );
  const stream = seen.stream(user("one two three"));
  const { text, error, events } = await collect(stream);
  assert.equal(error, undefined, "continued: no error");
  assert.equal(text, "[a] echo: one two three", "each piece once, the answer whole");
  assert.equal(events.filter((e) => e.type === "start").length, 1);
  assert.equal(events.filter((e) => e.type === "finish").length, 1);
  assert.equal(retries.length, 1, "the cut is reported to onRetry");
  assert.equal(retries[0].error.kind, "transport");
});

test("JS providers stream too: their whole answer, after failover", async () => {
  const c = new ResilientClient({}, { providers: [scripted("p", [{ status: 500 }]), scripted("q", ["from q"])] });
  const { text, error, events } = await collect(c.stream(user("hi")));
  assert.equal(error, undefined);
  assert.equal(text, "from q");
  assert.equal(events[0].type, "start");
});

test("breaking out of the loop aborts the upstream request", async () => {
  await mock.reset();
  mock.setFault("a", { chunkDelayMs: 200, faults: [] });
  const stream = client().stream(user("a b c d e f g h"));
  for await (const e of stream) {
    if (e.type === "text") break;
  }
  for (let i = 0; i < 50 && (await mock.stats("a")).inFlight > 0; i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
  const stats = await mock.stats("a");
  assert.equal(stats.inFlight, 0);
  assert.equal(stats.aborted, 1);
});

test("an AbortSignal aborts the stream", async () => {
  await mock.reset();
  mock.setFault("a", { mode: "stream", slowFirstTokenMs: 5000 });
  const ctrl = new AbortController();
  const it = client({ firstTokenTimeoutMs: 8000 }).stream(user("x"), { signal: ctrl.signal });
  setTimeout(() => ctrl.abort(new Error("user left")), 50);
  const { error } = await collect(it);
  assert.ok(error instanceof AbortError, String(error));
});
