// The response cache of `client.fetch`, in Node, with the official OpenAI SDK as the client and
// the mock provider (127.0.0.1, free port) counting the calls that reach it: a miss then a hit,
// the in-memory LRU's bounds by entries and by bytes, a store of the caller's own (get/put),
// one that fails (a miss, never an error), the configuration mistakes named; and `client.chat()`
// on the same cache: hit, miss, stale, the caller's controls.
import assert from "node:assert/strict";
import { after, before, beforeEach, test } from "node:test";

import OpenAI from "openai";

import { startMock } from "../e2e/mock-provider.mjs";
import m from "./pkg.mjs";

const { ResilientClient, ConfigError } = m;

let mock;
before(async () => {
  mock = await startMock({ port: 0, config: { providers: {} } });
});
after(async () => {
  await mock.close();
});
beforeEach(() => mock.clearReceived());

const calls = () => mock.received("p").length;

function client({ limits, store, cache } = {}) {
  return new ResilientClient(
    {
      providers: { p: { kind: "openai-compatible", preset: "custom", baseUrl: mock.providerUrl("p") } },
      routes: { default: [{ provider: "p", model: "m" }] },
      cache: cache ?? { default: { ttlSeconds: 60 } },
      retry: { maxAttempts: 1 },
      ...(limits ? { limits } : {}),
    },
    store ? { cacheStore: store } : undefined,
  );
}

const sdk = (c) => new OpenAI({ baseURL: "https://resilient.invalid/v1", apiKey: "unused", fetch: c.fetch, maxRetries: 0 });
const ask = (o, content) => o.chat.completions.create({ model: "default", messages: [{ role: "user", content }] }).withResponse();

test("a miss, then a hit: the provider is asked once", async () => {
  const o = sdk(client());
  const first = await ask(o, "once");
  assert.equal(first.response.headers.get("x-cache"), "miss");
  const second = await ask(o, "once");
  assert.equal(second.response.headers.get("x-cache"), "hit");
  assert.equal(second.response.headers.get("age"), "0");
  assert.deepEqual(second.data, first.data);
  assert.equal(calls(), 1);
});

test("the LRU keeps at most cacheMaxEntries answers, the least recently used dropped first", async () => {
  const o = sdk(client({ limits: { cacheMaxEntries: 2 } }));
  for (const q of ["a", "b", "a", "c"]) await ask(o, q); // c drops b, the least recently used
  assert.equal(calls(), 3);
  assert.equal((await ask(o, "a")).response.headers.get("x-cache"), "hit");
  assert.equal((await ask(o, "c")).response.headers.get("x-cache"), "hit");
  assert.equal((await ask(o, "b")).response.headers.get("x-cache"), "miss");
  assert.equal(calls(), 4);
});

test("an answer larger than cacheMaxBytes is never kept", async () => {
  const o = sdk(client({ limits: { cacheMaxBytes: 1024 } }));
  const long = "word ".repeat(400);
  await ask(o, long);
  assert.equal((await ask(o, long)).response.headers.get("x-cache"), "miss");
  await ask(o, "short");
  assert.equal((await ask(o, "short")).response.headers.get("x-cache"), "hit");
  assert.equal(calls(), 3);
});

test("a store of the caller's own gets and puts the answers", async () => {
  const kept = new Map();
  const log = [];
  const store = {
    async get(key) {
      log.push(["get", key]);
      return kept.get(key) ?? null;
    },
    put(key, value, ttlSeconds) {
      log.push(["put", key, ttlSeconds]);
      assert.ok(value instanceof Uint8Array);
      kept.set(key, value);
    },
  };
  const o = sdk(client({ store, cache: { default: { ttlSeconds: 30, staleIfErrorSeconds: 90 } } }));
  await ask(o, "mine");
  assert.equal(kept.size, 1);
  const [key] = kept.keys();
  assert.match(key, /^[0-9a-f]{64}$/, "a SHA-256 digest, nothing of the request in clear");
  assert.deepEqual(log.find((l) => l[0] === "put"), ["put", key, 120], "kept for the TTL and the stale window");
  const hit = await ask(o, "mine");
  assert.equal(hit.response.headers.get("x-cache"), "hit");
  assert.equal(calls(), 1);
  // A second client over the same store is served what the first stored.
  const other = sdk(client({ store, cache: { default: { ttlSeconds: 30, staleIfErrorSeconds: 90 } } }));
  assert.equal((await ask(other, "mine")).response.headers.get("x-cache"), "hit");
  assert.equal(calls(), 1);
});

test("a store that throws is a miss, never an error", async () => {
  const warned = [];
  const warn = console.warn;
  console.warn = (...args) => warned.push(args.join(" "));
  try {
    const store = {
      get() {
        throw new Error("redis is down");
      },
      async put() {
        throw new Error("redis is down");
      },
    };
    const o = sdk(client({ store }));
    const res = await ask(o, "anyway");
    assert.equal(res.response.status, 200);
    assert.equal(res.response.headers.get("x-cache"), "miss");
    await new Promise((r) => setTimeout(r, 20));
    assert.ok(warned.some((w) => /cacheStore\.get failed/.test(w)), warned.join("\n"));
    assert.ok(warned.some((w) => /cacheStore\.put failed/.test(w)), warned.join("\n"));
  } finally {
    console.warn = warn;
  }
});

test("configuration mistakes are named with their paths", () => {
  const issues = (f) => {
    try {
      f();
    } catch (e) {
      assert.ok(e instanceof ConfigError, String(e));
      return e.issues.map((i) => i.path);
    }
    assert.fail("no ConfigError");
  };
  assert.deepEqual(issues(() => client({ store: { get() {} } })), ["options.cacheStore"]);
  assert.deepEqual(issues(() => client({ store: { get() {}, put() {} }, cache: {} })), ["options.cacheStore"]);
  assert.deepEqual(issues(() => client({ cache: { nowhere: { ttlSeconds: 5 } } })), ["cache.nowhere"]);
  assert.deepEqual(issues(() => client({ cache: { default: { ttlSeconds: 0 } } })), ["cache.default.ttlSeconds"]);
  assert.deepEqual(issues(() => client({ limits: { cacheMaxBytes: 10 } })), ["limits.cacheMaxBytes"]);
});

test("client.chat() caches too: a hit, the caller's controls, and stale when every entry fails", async () => {
  const c = new ResilientClient({
    providers: { p: { kind: "openai-compatible", preset: "custom", baseUrl: mock.providerUrl("p"),
                      models: { m: { inputPricePerMtok: 2, outputPricePerMtok: 8 } } } },
    routes: { default: [{ provider: "p", model: "m" }], plain: [{ provider: "p", model: "m" }] },
    cache: { default: { ttlSeconds: 1, staleIfErrorSeconds: 60 } },
    retry: { maxAttempts: 1 },
  });
  const chat = (content, options) => c.chat({ model: "default", messages: [{ role: "user", content }] }, options);
  const first = await chat("chat once");
  assert.equal(first.cache.result, "miss");
  const hit = await chat("chat once");
  assert.equal(hit.cache.result, "hit");
  assert.equal(hit.cache.ageSeconds, 0);
  assert.equal(hit.text, first.text);
  assert.deepEqual(hit.attempts, [], "a hit makes no attempt");
  assert.ok(hit.cache.savedUsd > 0, JSON.stringify(hit.cache));
  assert.equal(calls(), 1);

  assert.equal((await chat("chat once", { cache: { noCache: true } })).cache.result, "bypass");
  assert.equal(calls(), 2, "noCache asks again");
  await chat("not kept", { cache: { noStore: true } });
  assert.equal((await chat("not kept")).cache.result, "miss", "noStore kept nothing");
  assert.equal(calls(), 4);

  // Past the 1 s TTL, every entry failing: the stored answer, stale.
  await new Promise((r) => setTimeout(r, 1100));
  mock.setFault("p", { mode: "status", status: 503 });
  try {
    const stale = await chat("chat once");
    assert.equal(stale.cache.result, "stale");
    assert.ok(stale.cache.ageSeconds >= 1);
    assert.match(stale.cache.error, /503|server|failed/i, stale.cache.error);
    assert.equal(stale.text, first.text);
    await assert.rejects(chat("chat once", { cache: { noCache: true } }), /503|failed/i, "never stale after noCache");
  } finally {
    mock.reset("p");
  }
  const plain = await c.chat({ model: "plain", messages: [{ role: "user", content: "x" }] });
  assert.equal(plain.cache, undefined, "a route that does not cache says nothing");
  await assert.rejects(chat("x", { cache: { nocache: true } }), /options\.cache\.nocache: unknown field/);
  await assert.rejects(chat("x", { cache: { ttlSeconds: 0 } }), /options\.cache\.ttlSeconds/);
});
