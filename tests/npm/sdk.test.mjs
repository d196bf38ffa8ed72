// `client.fetch` under the official OpenAI and Anthropic Node SDKs: whole and streamed answers,
// a failover, and an error in each SDK's own class. The providers are the mock provider server
// (127.0.0.1, free port); the SDKs' base URL host is never contacted.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

import { startMock } from "../e2e/mock-provider.mjs";
import m from "./pkg.mjs";

const { ResilientClient, createFetch } = m;

let mock;
before(async () => {
  mock = await startMock({ port: 0, config: { providers: {} } });
});
after(async () => {
  await mock.close();
});

/** A client whose default route is `down` (an OpenAI-compatible provider), then `up` (Anthropic). */
function failingOver() {
  return new ResilientClient({
    providers: {
      down: { kind: "openai-compatible", preset: "custom", baseUrl: mock.providerUrl("down") },
      up: { kind: "anthropic", baseUrl: mock.providerUrl("up"), apiKey: "test-key" },
    },
    routes: { default: [{ provider: "down", model: "m-down" }, { provider: "up", model: "m-up" }] },
    retry: { maxAttempts: 1 },
  });
}

const openai = (fetch) => new OpenAI({ baseURL: "https://resilient.invalid/v1", apiKey: "unused", fetch, maxRetries: 0 });
const anthropic = (fetch) =>
  new Anthropic({ baseURL: "https://resilient.invalid", apiKey: "unused", fetch, maxRetries: 0 });

test("OpenAI SDK: a whole answer fails over from a 503 to the next provider", async () => {
  mock.reset();
  mock.setFault("down", { mode: "status", status: 503 });
  const client = failingOver();
  const res = await openai(client.fetch).chat.completions.create({
    model: "default",
    messages: [{ role: "user", content: "hello" }],
  });
  assert.equal(res.object, "chat.completion");
  assert.equal(res.choices[0].message.content, "[up] echo: hello");
  assert.equal(mock.stats("down").total, 1);
  const health = client.health();
  assert.equal(health.find((h) => h.provider === "down").failures, 1);
});

test("OpenAI SDK: a streamed answer, translated from Anthropic events after a failover", async () => {
  mock.reset();
  mock.setFault("down", { mode: "status", status: 503 });
  const stream = await openai(failingOver().fetch).chat.completions.create({
    model: "default",
    messages: [{ role: "user", content: "stream me" }],
    stream: true,
  });
  let text = "";
  let finish = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? "";
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(text, "[up] echo: stream me");
  assert.equal(finish, "stop");
});

test("OpenAI SDK: every provider failing is the SDK's own APIError with the gateway's status", async () => {
  mock.reset();
  mock.setFault("down", { mode: "status", status: 503 });
  mock.setFault("up", { mode: "status", status: 529 });
  const err = await openai(failingOver().fetch)
    .chat.completions.create({ model: "default", messages: [{ role: "user", content: "x" }] })
    .catch((e) => e);
  assert.ok(err instanceof OpenAI.APIError, String(err));
  assert.equal(err.status, 503);
  assert.match(err.message, /all 2 providers failed/);
});

test("OpenAI SDK: an unknown route is a NotFoundError", async () => {
  const err = await openai(failingOver().fetch)
    .chat.completions.create({ model: "nope", messages: [{ role: "user", content: "x" }] })
    .catch((e) => e);
  assert.ok(err instanceof OpenAI.NotFoundError, String(err));
});

test("Anthropic SDK: a whole answer fails over, translated from OpenAI's format", async () => {
  mock.reset();
  const client = new ResilientClient({
    providers: {
      down: { kind: "anthropic", baseUrl: mock.providerUrl("down"), apiKey: "test-key" },
      up: { kind: "openai-compatible", preset: "custom", baseUrl: mock.providerUrl("up") },
    },
    routes: { default: [{ provider: "down", model: "m-down" }, { provider: "up", model: "m-up" }] },
    retry: { maxAttempts: 1 },
  });
  mock.setFault("down", { mode: "status", status: 529 });
  const res = await anthropic(client.fetch).messages.create({
    model: "default",
    max_tokens: 64,
    messages: [{ role: "user", content: "hello" }],
  });
  assert.equal(res.type, "message");
  assert.equal(res.content[0].type, "text");
  assert.equal(res.content[0].text, "[up] echo: hello");
});

test("Anthropic SDK: a streamed answer through messages.stream()", async () => {
  mock.reset();
  mock.setFault("down", { mode: "status", status: 503 });
  const stream = anthropic(failingOver().fetch).messages.stream({
    model: "default",
    max_tokens: 64,
    messages: [{ role: "user", content: "stream me" }],
  });
  const pieces = [];
  stream.on("text", (t) => pieces.push(t));
  const final = await stream.finalMessage();
  assert.equal(pieces.join(""), "[up] echo: stream me");
  assert.equal(final.content[0].text, "[up] echo: stream me");
  assert.equal(final.stop_reason, "end_turn");
});

/** A client.fetch over one route of `names` (Anthropic providers), one attempt each. */
function fetchOver(...names) {
  const providers = Object.fromEntries(
    names.map((n) => [n, { kind: "anthropic", baseUrl: mock.providerUrl(n), apiKey: "test-key" }]),
  );
  return createFetch({
    providers,
    routes: { default: names.map((n) => ({ provider: n, model: "m" })) },
    retry: { maxAttempts: 1 },
  });
}
const ask = { model: "default", max_tokens: 16, messages: [{ role: "user", content: "x" }] };

test("Anthropic SDK: a lone 401 is the SDK's AuthenticationError, as chat() rejects with status 401", async () => {
  mock.reset();
  mock.setFault("only", { mode: "status", status: 401 });
  const err = await anthropic(fetchOver("only")).messages.create(ask).catch((e) => e);
  assert.ok(err instanceof Anthropic.AuthenticationError, String(err));
  assert.equal(err.status, 401, "the status the failures share, not 503");
  assert.equal(err.error?.type, "error");
});

test("SDKs: a route of 429s is the SDK's RateLimitError; mixed failures stay 503", async () => {
  mock.reset();
  for (const n of ["a", "b"]) mock.setFault(n, { mode: "status", status: 429 });
  const err = await anthropic(fetchOver("a", "b")).messages.create(ask).catch((e) => e);
  assert.ok(err instanceof Anthropic.RateLimitError, String(err));
  assert.equal(err.status, 429);
  const viaOpenAi = await openai(fetchOver("a", "b"))
    .chat.completions.create({ model: "default", messages: [{ role: "user", content: "x" }] })
    .catch((e) => e);
  assert.ok(viaOpenAi instanceof OpenAI.RateLimitError, String(viaOpenAi));
  mock.setFault("only", { mode: "status", status: 401 });
  const lone = await openai(fetchOver("only"))
    .chat.completions.create({ model: "default", messages: [{ role: "user", content: "x" }] })
    .catch((e) => e);
  assert.ok(lone instanceof OpenAI.AuthenticationError, String(lone));
  mock.reset();
  mock.setFault("a", { mode: "status", status: 429 });
  mock.setFault("b", { mode: "status", status: 503 });
  const mixed = await anthropic(fetchOver("a", "b")).messages.create(ask).catch((e) => e);
  assert.equal(mixed.status, 503, "no status in common: the exhausted route's 503");
});

test("client.fetch: an aborted request rejects as fetch does, and a cancelled stream stops", async () => {
  mock.reset();
  mock.setFault("down", { mode: "hang" });
  const client = failingOver();
  const controller = new AbortController();
  const pending = client.fetch("https://resilient.invalid/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "default", messages: [{ role: "user", content: "x" }] }),
    signal: controller.signal,
  });
  setTimeout(() => controller.abort(new Error("user left")), 30);
  await assert.rejects(pending, /user left/);

  mock.reset();
  mock.setFault("up", { chunkDelayMs: 20, answerTokens: 200 });
  mock.setFault("down", { mode: "status", status: 503 });
  const res = await client.fetch("https://resilient.invalid/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "default", stream: true, messages: [{ role: "user", content: "x" }] }),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type"), /text\/event-stream/);
  const reader = res.body.getReader();
  const first = await reader.read();
  assert.ok(first.value.byteLength > 0);
  await reader.cancel();
  // The cancel reaches the provider: its request is aborted (bounded wait).
  for (let i = 0; i < 100 && mock.stats("up").aborted === 0; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(mock.stats("up").aborted, 1);
});
