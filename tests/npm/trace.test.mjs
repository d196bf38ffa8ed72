// W3C trace context from the npm package, in Node, against the mock provider (127.0.0.1, free
// port): `client.chat()` and `client.stream()` with `options.traceparent` send each attempt a
// `traceparent` of its own span in the caller's trace (and the `tracestate`), none without it;
// an invalid one is the caller's error; `client.fetch` continues the SDK request's header.
import assert from "node:assert/strict";
import { after, before, beforeEach, test } from "node:test";

import OpenAI from "openai";

import { startMock } from "../e2e/mock-provider.mjs";
import m from "./pkg.mjs";

const { ResilientClient } = m;
const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = `00-${TRACE}-00f067aa0ba902b7-01`;

let mock, client;
before(async () => {
  mock = await startMock({ port: 0, config: { providers: { down: { faults: [{ mode: "status", status: 503 }] }, p: {} } } });
  const provider = (name) => ({ kind: "openai-compatible", preset: "custom", baseUrl: mock.providerUrl(name) });
  client = new ResilientClient({
    providers: { down: provider("down"), p: provider("p") },
    routes: { default: [{ provider: "down", model: "m" }, { provider: "p", model: "m" }] },
    retry: { maxAttempts: 1 },
  });
});
after(async () => {
  await mock.close();
});
beforeEach(() => mock.clearReceived());

const sent = () => [...mock.received("down"), ...mock.received("p")].map((r) => [r.headers.traceparent, r.headers.tracestate]);
const ask = { model: "default", messages: [{ role: "user", content: "trace me" }] };

test("client.chat() sends each attempt a span of its own in the caller's trace", async () => {
  const r = await client.chat(ask, { traceparent: PARENT, tracestate: "k=v" });
  assert.equal(r.servedBy.provider, "p");
  const attempts = sent();
  assert.equal(attempts.length, 2);
  const spans = attempts.map(([parent, state]) => {
    const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(parent ?? "");
    assert.ok(match, String(parent));
    assert.equal(match[1], TRACE);
    assert.notEqual(match[2], "00f067aa0ba902b7");
    assert.equal(state, "k=v");
    return match[2];
  });
  assert.notEqual(spans[0], spans[1]);

  mock.clearReceived();
  await client.chat(ask);
  assert.deepEqual(sent().map(([p]) => p), [undefined, undefined], "no trace context without one");
});

test("client.stream() carries it; an invalid traceparent or a cache option is refused", async () => {
  const s = client.stream(ask, { traceparent: PARENT });
  for await (const _ of s) { /* read to the end */ }
  assert.ok(sent().every(([p]) => p?.startsWith(`00-${TRACE}-`)), JSON.stringify(sent()));
  await assert.rejects(client.chat(ask, { traceparent: "00-nope" }), /options\.traceparent: not a W3C traceparent/);
  assert.throws(() => client.stream(ask, { traceparent: 42 }), /options\.traceparent: must be a string/);
  assert.throws(() => client.stream(ask, { cache: { noCache: true } }), /options\.cache: client\.stream\(\) does not use the response cache/);
});

test("client.fetch continues the official SDK's traceparent", async () => {
  const openai = new OpenAI({ baseURL: "https://resilient.invalid/v1", apiKey: "unused", fetch: client.fetch, maxRetries: 0,
    defaultHeaders: { traceparent: PARENT } });
  const { response } = await openai.chat.completions.create(ask).withResponse();
  assert.equal(response.headers.get("x-trace-id"), TRACE);
  assert.ok(sent().every(([p]) => p?.startsWith(`00-${TRACE}-`)), JSON.stringify(sent()));
});
