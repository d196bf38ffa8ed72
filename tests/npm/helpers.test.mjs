// client.stream()'s helpers: textStream, finalResponse, toReadableStream(), toResponse(), onFinish.
// JS providers stream their whole answer as one text event; a mock provider gives real SSE.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { startMock } from "../e2e/mock-provider.mjs";
import m, { scripted, user } from "./pkg.mjs";

const { ResilientClient, LLMError } = m;

let mock;
before(async () => {
  mock = await startMock({ port: 0, config: { providers: {} } });
});
after(async () => {
  await mock.close();
});

function mockClient() {
  return new ResilientClient({
    providers: { a: { kind: "openai-compatible", preset: "custom", baseUrl: mock.providerUrl("a"), streamUsage: true } },
    routes: { default: [{ provider: "a", model: "m-a" }] },
    retry: { maxAttempts: 1 },
  });
}

test("textStream yields only strings; finalResponse and onFinish get the whole answer", async () => {
  mock.reset();
  const finished = [];
  const s = mockClient().stream(user("one two three"), { onFinish: (a) => finished.push(a) });
  const pieces = [];
  for await (const t of s.textStream) pieces.push(t);
  assert.ok(pieces.length > 1, "the mock streams word by word");
  assert.ok(pieces.every((t) => typeof t === "string"));
  assert.equal(pieces.join(""), "[a] echo: one two three");
  const answer = await s.finalResponse;
  assert.equal(answer.text, "[a] echo: one two three");
  assert.equal(answer.finishReason, "stop");
  assert.equal(answer.model, "m-a");
  assert.ok(answer.usage.outputTokens > 0);
  assert.equal(finished.length, 1);
  assert.deepEqual(finished[0], answer);
});

test("finalResponse alone reads the stream", async () => {
  const p = scripted("p", ["whole answer"]);
  const answer = await new ResilientClient({}, { providers: [p] }).stream(user("x")).finalResponse;
  assert.equal(answer.text, "whole answer");
  assert.equal(p.calls, 1);
});

test("finalResponse rejects with the stream's error; an unobserved one is no unhandled rejection", async () => {
  const p = scripted("p", [{ status: 400, message: "bad" }]);
  const client = new ResilientClient({}, { providers: [p] });
  const s = client.stream(user("x"));
  await assert.rejects(s.finalResponse, (e) => e instanceof LLMError && e.status === 400);
  // Iterated to its error without asking for finalResponse: nothing else must surface.
  const t = client.stream(user("x"));
  await assert.rejects(async () => {
    for await (const _ of t);
  }, LLMError);
});

test("toReadableStream() gives the events; cancelling it aborts the upstream request", async () => {
  mock.reset();
  const events = [];
  const reader = mockClient().stream(user("read me")).toReadableStream().getReader();
  for (let i = 0; i < 100; i++) {
    const { done, value } = await reader.read();
    if (done) break;
    events.push(value);
  }
  assert.equal(events[0].type, "start");
  assert.deepEqual(events.slice(-2).map((e) => e.type), ["finish", "usage"]);

  mock.reset();
  mock.setFault("a", { chunkDelayMs: 20, answerTokens: 200 });
  const slow = mockClient().stream(user("x")).toReadableStream().getReader();
  await slow.read();
  await slow.cancel();
  for (let i = 0; i < 100 && mock.stats("a").aborted === 0; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(mock.stats("a").aborted, 1);
});

test("toResponse() is a Response of server-sent events, ending in event: error on a failure", async () => {
  mock.reset();
  const res = mockClient().stream(user("sse please")).toResponse({ headers: { "x-served": "yes" } });
  assert.ok(res instanceof Response);
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type"), /^text\/event-stream/);
  assert.equal(res.headers.get("x-served"), "yes");
  const body = await res.text();
  const frames = body.trim().split("\n\n").map((f) => {
    const [ev, data] = f.split("\n");
    return { event: ev.replace("event: ", ""), data: JSON.parse(data.replace("data: ", "")) };
  });
  assert.equal(frames[0].event, "start");
  assert.equal(frames.filter((f) => f.event === "text").map((f) => f.data.text).join(""), "[a] echo: sse please");
  assert.equal(frames.at(-2).event, "finish");

  // Cut after the first content: the stream ends in an error event, never a clean end.
  mock.reset();
  mock.setFault("a", { mode: "stream", cutAfterChunks: 2 });
  const cut = await mockClient().stream(user("one two three four")).toResponse().text();
  const last = cut.trim().split("\n\n").at(-1);
  assert.match(last, /^event: error\ndata: /);
  assert.equal(JSON.parse(last.split("\n")[1].slice(6)).kind, "interrupted");
});
