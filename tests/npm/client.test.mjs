// The built nodejs package from JS: failover, the aggregate error, Retry-After, abort.
import assert from "node:assert/strict";
import { test } from "node:test";
import { inspect } from "node:util";

import m, { scripted, user } from "./pkg.mjs";

const { ResilientClient, LLMError, AllProvidersFailedError, RateLimitError, ServerError,
  ClientRequestError, AbortError, ConfigError, NetworkError } = m;

test("fails over across JS providers, with onRetry / onProviderError / onFailover / onEvent hooks", async () => {
  const primary = scripted("primary", [{ status: 529, message: "overloaded" }]);
  const backup = scripted("backup", ["from backup"]);
  const seen = { retry: [], providerError: [], failover: [], all: [] };
  const client = new ResilientClient(
    { retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 5 } },
    {
      providers: [primary, backup],
      onRetry: (e) => seen.retry.push(e),
      onProviderError: (e) => seen.providerError.push(e),
      onFailover: (e) => seen.failover.push(e),
      onEvent: (e) => seen.all.push(e.type),
    },
  );
  const res = await client.chat(user("hi"));
  assert.equal(res.text, "from backup");
  assert.equal(res.provider, "backup");
  assert.deepEqual(res.servedBy, { provider: "backup", model: "backup", label: null });
  assert.deepEqual(res.attempts.map((a) => [a.provider, a.attempt, a.ok]),
    [["primary", 1, false], ["primary", 2, false], ["backup", 1, true]]);
  assert.equal(primary.calls, 2);
  assert.equal(seen.retry.length, 1);
  assert.ok(seen.retry[0].error instanceof ServerError);
  assert.equal(seen.retry[0].error.status, 529);
  assert.equal(seen.providerError[0].provider, "primary");
  assert.deepEqual([seen.failover[0].from, seen.failover[0].to], ["primary", "backup"]);
  assert.deepEqual(seen.all, ["retry", "provider_failed", "failover"]);
  const health = client.health();
  assert.deepEqual(health.map((h) => [h.provider, h.failures]), [["backup", 0], ["primary", 2]]);
});

test("routes name JS providers and models; per-call route", async () => {
  const a = scripted("a", ["A"]);
  const b = scripted("b", ["B"]);
  const client = new ResilientClient(
    { routes: { default: [{ provider: "a", model: "a-1" }], fast: [{ provider: "b", model: "b-small" }] } },
    { providers: [a, b] },
  );
  assert.equal((await client.chat(user("x"))).model, "a-1");
  assert.equal((await client.chat({ ...user("x"), model: "fast" })).text, "B");
  assert.equal((await client.chat(user("x"), { route: "fast" })).model, "b-small");
  await assert.rejects(client.chat({ ...user("x"), model: "nope" }),
    (e) => e instanceof ClientRequestError && e.kind === "unknown_route" && e.status === 404);
});

test("AllProvidersFailedError lists every attempt and reads well", async () => {
  const a = scripted("a", [{ status: 401, message: "invalid x-api-key" }]);
  const b = scripted("b", [new TypeError("fetch failed")]);
  const client = new ResilientClient(
    { retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 2 } },
    { providers: [a, b] },
  );
  const err = await client.chat(user("x")).catch((e) => e);
  assert.ok(err instanceof AllProvidersFailedError);
  assert.ok(err instanceof LLMError);
  assert.ok(err instanceof Error);
  assert.equal(err.name, "AllProvidersFailedError");
  assert.equal(err.status, 503);
  assert.equal(err.retryable, true);
  assert.deepEqual(
    err.failures.map((f) => [f.provider, f.kind, f.status ?? null, f.reached]),
    [["a", "auth", 401, true], ["b", "transport", null, true], ["b", "transport", null, true]],
  );
  assert.equal(typeof err.failures[0].durationMs, "number");
  assert.match(err.failures[0].message, /invalid x-api-key/);
  assert.match(err.message, /all 2 providers failed/);
  assert.match(inspect(err), /AllProvidersFailedError: all 2 providers failed[\s\S]*failures: \[/);
  assert.equal(JSON.parse(JSON.stringify(err)).failures.length, 3);
});

test("Retry-After from a JS provider is honoured exactly", async () => {
  const limited = scripted("limited", [new RateLimitError("slow down", { retryAfterMs: 120 }), "ok"]);
  const delays = [];
  const client = new ResilientClient(
    { retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1000 } },
    { providers: [limited], onRetry: (e) => delays.push(e.delayMs) },
  );
  const start = Date.now();
  const res = await client.chat(user("x"));
  const took = Date.now() - start;
  assert.equal(res.text, "ok");
  assert.deepEqual(delays, [120]);
  assert.ok(took >= 110, `waited ${took} ms`);
  assert.equal(res.attempts[0].kind, "rate_limited");
  assert.equal(res.attempts[0].retryAfterMs, 120);
});

test("a plain error with status 429 and retryAfterMs is a rate limit too", async () => {
  const p = scripted("p", [{ status: 429, retryAfterMs: 30, message: "429" }, "ok"]);
  const client = new ResilientClient({ retry: { baseDelayMs: 1 } }, { providers: [p] });
  const res = await client.chat(user("x"));
  assert.equal(res.attempts[0].retryAfterMs, 30);
  assert.equal(res.attempts[0].kind, "rate_limited");
});

test("retryable: false stops retries; a 400 stops the chain", async () => {
  const p = scripted("p", [{ status: 503, retryable: false }]);
  const q = scripted("q", [{ status: 422, message: "bad schema" }]);
  const r = scripted("r", ["never"]);
  const client = new ResilientClient({}, { providers: [p, q, r] });
  const err = await client.chat(user("x")).catch((e) => e);
  assert.ok(err instanceof ClientRequestError, inspect(err));
  assert.equal(err.provider, "q");
  assert.equal(err.status, 422);
  assert.equal(p.calls, 1);
  assert.equal(r.calls, 0);
  assert.deepEqual(err.attempts.map((a) => a.provider), ["p", "q"]);
});

test("aborting rejects with AbortError and aborts the provider's signal", async () => {
  const slow = scripted("slow", ["hang"]);
  const client = new ResilientClient({}, { providers: [slow] });
  const controller = new AbortController();
  const pending = client.chat(user("x"), { signal: controller.signal });
  setTimeout(() => controller.abort(new Error("user left")), 20);
  const err = await pending.catch((e) => e);
  assert.ok(err instanceof AbortError);
  assert.equal(err.name, "AbortError");
  assert.equal(err.cause.message, "user left");
  assert.equal(slow.aborted, 1);
  // An already-aborted signal rejects without a call.
  await assert.rejects(client.chat(user("x"), { signal: AbortSignal.abort() }), AbortError);
  assert.equal(slow.calls, 1);
});

test("an attempt timeout aborts the provider and fails over", async () => {
  const slow = scripted("slow", ["hang"]);
  const fast = scripted("fast", ["fast"]);
  const client = new ResilientClient({ timeoutMs: 30 }, { providers: [slow, fast] });
  const res = await client.chat(user("x"));
  assert.equal(res.text, "fast");
  assert.equal(slow.aborted, 1);
  assert.equal(res.attempts[0].kind, "timeout");
});

test("config and request mistakes name their path", () => {
  const p = scripted("p", ["ok"]);
  assert.throws(
    () => new ResilientClient({ routes: { default: [{ provider: "p", model: "m", retry: { maxAttempts: 0 } }] } }, { providers: [p] }),
    (e) => e instanceof ConfigError && e.issues[0].path === "routes.default[0].retry.maxAttempts",
  );
  assert.throws(() => new ResilientClient({ retries: 3 }, { providers: [p] }),
    (e) => e instanceof ConfigError && /unknown field `retries`/.test(e.message));
  assert.throws(() => new ResilientClient("{ not json", { providers: [p] }), ConfigError);
  assert.throws(() => new ResilientClient({}, { providers: [{ name: "x" }] }),
    (e) => e.issues[0].path === "options.providers[0].chat");
  const client = new ResilientClient({}, { providers: [p] });
  return assert.rejects(client.chat({ messages: [{ role: "user", content: 42 }] }),
    (e) => e instanceof ClientRequestError && /messages\[0\]\.content/.test(e.message));
});

test("a network TypeError is retried as a transport error", async () => {
  const p = scripted("p", [new TypeError("fetch failed"), "ok"]);
  const client = new ResilientClient({ retry: { baseDelayMs: 1 } }, { providers: [p] });
  const res = await client.chat(user("x"));
  assert.equal(res.attempts[0].kind, "transport");
  assert.equal(p.calls, 2);
  assert.ok(new NetworkError("x").retryable);
});
