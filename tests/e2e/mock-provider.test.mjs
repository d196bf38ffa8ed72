// Tests of the mock provider server itself: node --test tests/e2e/mock-provider.test.mjs
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { startMock } from "./mock-provider.mjs";

const DEMO_CONFIG = new URL("../../demo/mock-config.json", import.meta.url);
const MOCK_SCRIPT = new URL("./mock-provider.mjs", import.meta.url);

// ---------------------------------------------------------------- helpers

function openaiBody(text = "hello there", extra = {}) {
  return { model: "gpt-test", messages: [{ role: "system", content: "be brief" }, { role: "user", content: text }], ...extra };
}

function anthropicBody(text = "hello there", extra = {}) {
  return { model: "claude-test", max_tokens: 256, messages: [{ role: "user", content: [{ type: "text", text }] }], ...extra };
}

function post(url, body, { headers = {}, signal } = {}) {
  return fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: typeof body === "string" ? body : JSON.stringify(body), signal });
}

function chat(mock, name, body, opts) {
  return post(`${mock.url}/p/${name}/v1/chat/completions`, body, opts);
}

function messages(mock, name, body, opts) {
  return post(`${mock.url}/p/${name}/v1/messages`, body, opts);
}

/** Parses complete SSE text into [{event, data}] (data lines joined with "\n"). */
function parseSse(text) {
  const events = [];
  for (const block of text.split(/\r?\n\r?\n/)) {
    if (!block.trim()) continue;
    const ev = { event: null, data: [] };
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith("event:")) ev.event = line.slice(6).trim();
      else if (line.startsWith("data:")) ev.data.push(line.slice(5).replace(/^ /, ""));
      else assert.fail(`unexpected SSE line ${JSON.stringify(line)}`);
    }
    events.push({ event: ev.event, data: ev.data.join("\n") });
  }
  return events;
}

/**
 * Reads a streaming response until it ends, fails, or sends nothing for idleMs.
 * Returns { text, events, ended, failed, stalled }; a stalled read is cancelled.
 */
async function readStream(res, { idleMs = 2000 } = {}) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  const outcome = { ended: false, failed: false, stalled: false };
  for (let i = 0; i < 10_000; i++) {
    const idle = sleep(idleMs, "idle", { ref: false });
    let step;
    try {
      step = await Promise.race([reader.read(), idle]);
    } catch {
      outcome.failed = true;
      break;
    }
    if (step === "idle") {
      outcome.stalled = true;
      await reader.cancel().catch(() => {});
      break;
    }
    if (step.done) {
      outcome.ended = true;
      break;
    }
    text += decoder.decode(step.value, { stream: true });
  }
  const complete = text.slice(0, text.lastIndexOf("\n\n") + 2);
  return { text, events: parseSse(complete), ...outcome };
}

function contentOf(format, events) {
  if (format === "openai") {
    return events.filter((e) => e.data !== "[DONE]").map((e) => JSON.parse(e.data).choices[0]?.delta?.content ?? "").join("");
  }
  return events.filter((e) => e.event === "content_block_delta").map((e) => JSON.parse(e.data).delta.text).join("");
}

async function withMock(config, fn) {
  const mock = await startMock({ config });
  try {
    return await fn(mock);
  } finally {
    await mock.close();
  }
}

async function statuses(n, send) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const res = await send();
    await res.arrayBuffer();
    out.push(res.status);
  }
  return out;
}

// ---------------------------------------------------------------- normal answers

describe("normal answers", () => {
  let mock;
  before(async () => { mock = await startMock({ config: { providers: { primary: {}, secondary: {} } } }); });
  after(() => mock.close());

  test("OpenAI chat completion has the real shape and a deterministic echo", async () => {
    const res = await chat(mock, "primary", openaiBody("what is up"));
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type"), /application\/json/);
    assert.ok(res.headers.get("x-request-id"));
    const body = await res.json();
    assert.match(body.id, /^chatcmpl-/);
    assert.equal(body.object, "chat.completion");
    assert.equal(typeof body.created, "number");
    assert.equal(body.model, "gpt-test");
    assert.equal(body.choices.length, 1);
    assert.deepEqual(body.choices[0].message.role, "assistant");
    assert.equal(body.choices[0].message.content, "[primary] echo: what is up");
    assert.equal(body.choices[0].finish_reason, "stop");
    assert.equal(body.usage.total_tokens, body.usage.prompt_tokens + body.usage.completion_tokens);
  });

  test("Anthropic message has the real shape and names the provider", async () => {
    const res = await messages(mock, "secondary", anthropicBody("what is up", { system: "be brief" }));
    assert.equal(res.status, 200);
    assert.ok(res.headers.get("request-id"));
    const body = await res.json();
    assert.match(body.id, /^msg_/);
    assert.equal(body.type, "message");
    assert.equal(body.role, "assistant");
    assert.equal(body.model, "claude-test");
    assert.deepEqual(body.content, [{ type: "text", text: "[secondary] echo: what is up" }]);
    assert.equal(body.stop_reason, "end_turn");
    assert.equal(body.stop_sequence, null);
    assert.equal(typeof body.usage.input_tokens, "number");
    assert.equal(body.usage.output_tokens, 5);
  });

  test("max tokens cut the answer with the real finish reasons", async () => {
    const o = await (await chat(mock, "primary", openaiBody("a b c d e f", { max_tokens: 3 }))).json();
    assert.equal(o.choices[0].finish_reason, "length");
    assert.equal(o.usage.completion_tokens, 3);
    const a = await (await messages(mock, "primary", anthropicBody("a b c d e f", { max_tokens: 2 }))).json();
    assert.equal(a.stop_reason, "max_tokens");
    assert.equal(a.content[0].text, "[primary] echo: ");
  });

  test("requests are validated like the real APIs", async () => {
    const noMax = await messages(mock, "primary", { model: "m", messages: [{ role: "user", content: "hi" }] });
    assert.equal(noMax.status, 400);
    assert.equal((await noMax.json()).error.type, "invalid_request_error");
    const systemRole = await messages(mock, "primary", anthropicBody("x", { messages: [{ role: "system", content: "s" }, { role: "user", content: "u" }] }));
    assert.equal(systemRole.status, 400);
    await systemRole.arrayBuffer();
    const badJson = await chat(mock, "primary", "{not json");
    assert.equal(badJson.status, 400);
    assert.equal((await badJson.json()).error.type, "invalid_request_error");
    const noMessages = await chat(mock, "primary", { model: "m", messages: [] });
    assert.equal(noMessages.status, 400);
    await noMessages.arrayBuffer();
    const get = await fetch(`${mock.url}/p/primary/v1/chat/completions`);
    assert.equal(get.status, 405);
    await get.arrayBuffer();
    const nowhere = await fetch(`${mock.url}/nowhere`);
    assert.equal(nowhere.status, 404);
    await nowhere.arrayBuffer();
  });

  test("the models list comes in either shape", async () => {
    const o = await (await fetch(`${mock.url}/p/primary/v1/models`)).json();
    assert.equal(o.object, "list");
    assert.equal(o.data[0].object, "model");
    const a = await (await fetch(`${mock.url}/p/primary/v1/models`, { headers: { "anthropic-version": "2023-06-01" } })).json();
    assert.equal(a.data[0].type, "model");
    assert.equal(a.has_more, false);
  });

  test("health answers", async () => {
    assert.deepEqual(await (await fetch(`${mock.url}/health`)).json(), { ok: true });
  });
});

describe("provider settings", () => {
  test("latencyMs delays every answer", () => withMock({ providers: { p: { latencyMs: 150 } } }, async (mock) => {
    const t0 = Date.now();
    const res = await chat(mock, "p", openaiBody());
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    assert.ok(Date.now() - t0 >= 140, `answered after ${Date.now() - t0} ms`);
  }));

  test("requireKey: 401 in each format without a key, any key accepted, keys never recorded", () =>
    withMock({ providers: { locked: { requireKey: true }, open: {} } }, async (mock) => {
      const o = await chat(mock, "locked", openaiBody());
      assert.equal(o.status, 401);
      assert.equal((await o.json()).error.code, "invalid_api_key");
      const a = await messages(mock, "locked", anthropicBody());
      assert.equal(a.status, 401);
      assert.deepEqual(Object.keys(await a.json()), ["type", "error"]);
      const bearer = await chat(mock, "locked", openaiBody(), { headers: { authorization: "Bearer sk-very-secret-1" } });
      assert.equal(bearer.status, 200);
      await bearer.arrayBuffer();
      const xKey = await messages(mock, "locked", anthropicBody(), { headers: { "x-api-key": "sk-very-secret-2", "anthropic-version": "2023-06-01" } });
      assert.equal(xKey.status, 200);
      await xKey.arrayBuffer();
      const empty = await chat(mock, "locked", openaiBody(), { headers: { authorization: "Bearer " } });
      assert.equal(empty.status, 401);
      await empty.arrayBuffer();
      const open = await chat(mock, "open", openaiBody());
      assert.equal(open.status, 200);
      await open.arrayBuffer();

      const stats = await (await fetch(`${mock.url}/admin/locked/stats`)).text();
      assert.doesNotMatch(stats, /very-secret/);
      const last = JSON.parse(stats).lastRequest;
      assert.equal(last.headers.authorization, "[redacted]");
      assert.equal(last.headers["anthropic-version"], undefined); // the last request was the OpenAI one
    }));

  test("prefill: a trailing assistant message is accepted or rejected", () =>
    withMock({ providers: { yes: {}, no: { prefill: "reject" } } }, async (mock) => {
      const body = anthropicBody("hi", { messages: [{ role: "user", content: "hi" }, { role: "assistant", content: "Sure," }] });
      const ok = await messages(mock, "yes", body);
      assert.equal(ok.status, 200);
      assert.equal((await ok.json()).content[0].text, "[yes] echo: hi");
      const rejected = await messages(mock, "no", body);
      assert.equal(rejected.status, 400);
      assert.equal((await rejected.json()).error.type, "invalid_request_error");
      const plain = await messages(mock, "no", anthropicBody("hi"));
      assert.equal(plain.status, 200);
      await plain.arrayBuffer();
    }));

  test("models: an unknown model is a 404 in the provider's format", () =>
    withMock({ providers: { p: { models: ["gpt-test"] } } }, async (mock) => {
      const known = await chat(mock, "p", openaiBody());
      assert.equal(known.status, 200);
      await known.arrayBuffer();
      const unknown = await chat(mock, "p", openaiBody("x", { model: "gpt-nope" }));
      assert.equal(unknown.status, 404);
      assert.equal((await unknown.json()).error.code, "model_not_found");
      const a = await messages(mock, "p", anthropicBody("x"));
      assert.equal(a.status, 404);
      assert.equal((await a.json()).error.type, "not_found_error");
    }));
});

// ---------------------------------------------------------------- status faults

describe("status faults", () => {
  const cases = [
    { rule: { status: 429, retryAfter: 2 }, format: "openai", headers: { "retry-after": "2" }, check: (b) => assert.equal(b.error.code, "rate_limit_exceeded") },
    { rule: { status: 429, retryAfterMs: 1500 }, format: "anthropic", headers: { "retry-after-ms": "1500" }, check: (b) => assert.equal(b.error.type, "rate_limit_error") },
    { rule: { status: 429, error: "insufficient_quota" }, format: "openai", check: (b) => assert.equal(b.error.type, "insufficient_quota") },
    { rule: { status: 500 }, format: "openai", check: (b) => assert.equal(b.error.type, "server_error") },
    { rule: { status: 500 }, format: "anthropic", check: (b) => assert.equal(b.error.type, "api_error") },
    { rule: { status: 503, retryAfter: 1 }, format: "openai", headers: { "retry-after": "1" }, check: (b) => assert.equal(b.error.type, "server_error") },
    { rule: { status: 529 }, format: "anthropic", check: (b) => assert.equal(b.error.type, "overloaded_error") },
    { rule: { status: 401 }, format: "anthropic", check: (b) => assert.equal(b.error.type, "authentication_error") },
    { rule: { status: 400, error: "context_length_exceeded" }, format: "openai", check: (b) => assert.deepEqual([b.error.code, b.error.param], ["context_length_exceeded", "messages"]) },
    { rule: { status: 400, error: "context_length_exceeded" }, format: "anthropic", check: (b) => assert.match(b.error.message, /prompt is too long/) },
    { rule: { status: 400, error: "content_policy", message: "no thanks" }, format: "openai", check: (b) => assert.deepEqual([b.error.code, b.error.message], ["content_policy_violation", "no thanks"]) },
    { rule: { status: 503, headers: { "x-should-retry": "false" } }, format: "anthropic", headers: { "x-should-retry": "false" }, check: (b) => assert.equal(b.error.type, "api_error") },
  ];
  for (const c of cases) {
    test(`${c.format} ${c.rule.status} ${c.rule.error ?? ""} ${JSON.stringify(c.headers ?? {})}`, () =>
      withMock({ providers: { p: { faults: [{ mode: "status", ...c.rule }] } } }, async (mock) => {
        const res = c.format === "openai" ? await chat(mock, "p", openaiBody()) : await messages(mock, "p", anthropicBody());
        assert.equal(res.status, c.rule.status);
        for (const [k, v] of Object.entries(c.headers ?? {})) assert.equal(res.headers.get(k), v);
        if (!c.headers?.["retry-after"]) assert.equal(res.headers.get("retry-after"), null);
        const body = await res.json();
        if (c.format === "openai") assert.deepEqual(Object.keys(body.error).sort(), ["code", "message", "param", "type"]);
        else assert.equal(body.type, "error");
        c.check(body);
      }));
  }

  test("firstN, then recovery; counters by status", () =>
    withMock({ providers: { flaky: { faults: [{ mode: "status", status: 503, firstN: 3 }] } } }, async (mock) => {
      assert.deepEqual(await statuses(5, () => chat(mock, "flaky", openaiBody())), [503, 503, 503, 200, 200]);
      const stats = mock.stats("flaky");
      assert.equal(stats.total, 5);
      assert.deepEqual(stats.byStatus, { 503: 3, 200: 2 });
      assert.deepEqual(stats.faults, { status: 3 });
      assert.equal(stats.inFlight, 0);
    }));

  test("rules apply in order: each sees only what earlier ones let through", () =>
    withMock({ providers: { p: { faults: [{ mode: "status", status: 503, firstN: 2 }, { mode: "status", status: 429, firstN: 1 }] } } }, async (mock) => {
      assert.deepEqual(await statuses(4, () => chat(mock, "p", openaiBody())), [503, 503, 429, 200]);
    }));

  test("probability p is seeded: the same seed gives the same sequence", async () => {
    const config = { seed: 7, providers: { p: { faults: [{ mode: "status", status: 500, p: 0.3 }] } } };
    const runs = [];
    for (let r = 0; r < 2; r++) runs.push(await withMock(config, (mock) => statuses(40, () => chat(mock, "p", openaiBody()))));
    assert.deepEqual(runs[0], runs[1]);
    const failures = runs[0].filter((s) => s === 500).length;
    assert.ok(failures > 3 && failures < 25, `${failures} failures of 40 at p = 0.3`);
    const other = await withMock({ ...config, seed: 8 }, (mock) => statuses(40, () => chat(mock, "p", openaiBody())));
    assert.notDeepEqual(other, runs[0]);
  });
});

// ---------------------------------------------------------------- connection faults

describe("connection faults", () => {
  test("hang: nothing comes back; the client's abort is counted", () =>
    withMock({ providers: { dead: { faults: [{ mode: "hang" }] } } }, async (mock) => {
      const t0 = Date.now();
      await assert.rejects(chat(mock, "dead", openaiBody(), { signal: AbortSignal.timeout(200) }), { name: "TimeoutError" });
      assert.ok(Date.now() - t0 >= 190);
      for (let i = 0; i < 100 && mock.stats("dead").inFlight > 0; i++) await sleep(10);
      const stats = mock.stats("dead");
      assert.equal(stats.inFlight, 0);
      assert.equal(stats.aborted, 1);
      assert.deepEqual(stats.byStatus, {});
      assert.deepEqual(stats.faults, { hang: 1 });
    }));

  test("close() ends hanging requests at once", async () => {
    const mock = await startMock({ config: { providers: { dead: { fault: { mode: "hang" } } } } });
    const pending = chat(mock, "dead", openaiBody()).then(() => "answered", () => "failed");
    for (let i = 0; i < 100 && mock.stats("dead").inFlight === 0; i++) await sleep(10);
    const t0 = Date.now();
    await mock.close();
    assert.equal(await pending, "failed");
    assert.ok(Date.now() - t0 < 1000);
  });

  test("slowFirstByteMs delays the answer", () =>
    withMock({ providers: { slow: { faults: [{ mode: "slow", slowFirstByteMs: 200, firstN: 1 }] } } }, async (mock) => {
      let t0 = Date.now();
      const res = await messages(mock, "slow", anthropicBody());
      assert.ok(Date.now() - t0 >= 190);
      assert.equal(res.status, 200);
      await res.arrayBuffer();
      t0 = Date.now();
      await (await messages(mock, "slow", anthropicBody())).arrayBuffer();
      assert.ok(Date.now() - t0 < 150, "only the first request is slow");
    }));

  test("reset: the socket is destroyed mid-request", () =>
    withMock({ providers: { p: { faults: [{ mode: "reset", firstN: 1 }] } } }, async (mock) => {
      await assert.rejects(chat(mock, "p", openaiBody()), TypeError);
      const ok = await chat(mock, "p", openaiBody());
      assert.equal(ok.status, 200);
      await ok.arrayBuffer();
      const stats = mock.stats("p");
      assert.deepEqual(stats.faults, { reset: 1 });
      assert.equal(stats.aborted, 0, "a reset by the mock is not a client abort");
    }));

  test("malformed: a 200 whose JSON is cut", () =>
    withMock({ providers: { p: { faults: [{ mode: "malformed" }] } } }, async (mock) => {
      for (const res of [await chat(mock, "p", openaiBody()), await messages(mock, "p", anthropicBody())]) {
        assert.equal(res.status, 200);
        assert.match(res.headers.get("content-type"), /application\/json/);
        const text = await res.text();
        assert.ok(text.length > 10);
        assert.throws(() => JSON.parse(text), SyntaxError);
      }
    }));
});

// ---------------------------------------------------------------- streams

describe("streams", () => {
  test("OpenAI stream: well-formed chunks, [DONE] last, usage chunk on request", () =>
    withMock({ providers: { primary: {} } }, async (mock) => {
      const res = await chat(mock, "primary", openaiBody("stream me please", { stream: true, stream_options: { include_usage: true } }));
      assert.equal(res.status, 200);
      assert.match(res.headers.get("content-type"), /^text\/event-stream/);
      const { events, ended, text } = await readStream(res);
      assert.ok(ended);
      assert.ok(text.endsWith("data: [DONE]\n\n"));
      assert.equal(events.at(-1).data, "[DONE]");
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data));
      assert.ok(chunks.every((c) => c.object === "chat.completion.chunk" && c.model === "gpt-test" && c.id === chunks[0].id));
      assert.equal(chunks[0].choices[0].delta.role, "assistant");
      assert.equal(contentOf("openai", events), "[primary] echo: stream me please");
      assert.ok(chunks.filter((c) => c.choices[0]?.delta?.content).length >= 4, "text comes in several chunks");
      const finish = chunks.filter((c) => c.choices[0]?.finish_reason);
      assert.deepEqual(finish.map((c) => c.choices[0].finish_reason), ["stop"]);
      const usage = chunks.at(-1);
      assert.deepEqual(usage.choices, []);
      assert.equal(usage.usage.completion_tokens, 5);
    }));

  test("answerTokens and tokensPerChunk: a long answer in fewer, bigger chunks", () =>
    withMock({ providers: { long: { answerTokens: 1000, tokensPerChunk: 10 } } }, async (mock) => {
      const { events, ended } = await readStream(await chat(mock, "long", openaiBody("a b", { stream: true, stream_options: { include_usage: true } })));
      assert.ok(ended);
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data));
      const content = chunks.filter((c) => c.choices[0]?.delta?.content);
      assert.equal(content.length, 100);
      const words = contentOf("openai", events).split(" ");
      assert.equal(words.length, 1000);
      assert.deepEqual(words.slice(0, 5), ["[long]", "echo:", "a", "b", "[long]"]);
      assert.equal(chunks.at(-1).usage.completion_tokens, 1000);
      const whole = await (await chat(mock, "long", openaiBody("a b", { max_tokens: 7 }))).json();
      assert.equal(whole.choices[0].message.content, "[long] echo: a b [long] echo: a "); // cut as word pieces, as without answerTokens
      assert.equal(whole.choices[0].finish_reason, "length");
      const bad = await (await post(`${mock.url}/admin/long/fault`, { tokensPerChunk: 0 })).json();
      assert.match(bad.error, /tokensPerChunk/);
    }));

  test("OpenAI stream without include_usage has no usage", () =>
    withMock({}, async (mock) => {
      const { events } = await readStream(await chat(mock, "any", openaiBody("x", { stream: true })));
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data));
      assert.ok(chunks.every((c) => c.usage === undefined && c.choices.length === 1));
    }));

  test("Anthropic stream: the real event sequence with pings", () =>
    withMock({}, async (mock) => {
      const res = await messages(mock, "claude", anthropicBody("stream me please", { stream: true }));
      assert.match(res.headers.get("content-type"), /^text\/event-stream/);
      const { events, ended } = await readStream(res);
      assert.ok(ended);
      for (const e of events) assert.equal(JSON.parse(e.data).type, e.event);
      const names = events.map((e) => e.event).filter((n) => n !== "ping");
      assert.deepEqual(names, ["message_start", "content_block_start", ...Array(5).fill("content_block_delta"),
        "content_block_stop", "message_delta", "message_stop"]);
      assert.ok(events.filter((e) => e.event === "ping").length >= 1);
      assert.equal(contentOf("anthropic", events), "[claude] echo: stream me please");
      const start = JSON.parse(events[0].data).message;
      assert.equal(start.model, "claude-test");
      const delta = JSON.parse(events.find((e) => e.event === "message_delta").data);
      assert.equal(delta.delta.stop_reason, "end_turn");
      assert.equal(delta.usage.output_tokens, 5);
    }));

  for (const format of ["openai", "anthropic"]) {
    const send = (mock, body) => (format === "openai" ? chat(mock, "p", openaiBody("one two three four", { stream: true, ...body })) : messages(mock, "p", anthropicBody("one two three four", { stream: true, ...body })));
    const deltas = (events) => (format === "openai"
      ? events.filter((e) => e.data !== "[DONE]" && JSON.parse(e.data).choices[0]?.delta?.content)
      : events.filter((e) => e.event === "content_block_delta"));

    test(`${format} cutAfterChunks: the socket dies after k content chunks`, () =>
      withMock({ providers: { p: { faults: [{ mode: "stream", cutAfterChunks: 2 }] } } }, async (mock) => {
        const res = await send(mock);
        assert.equal(res.status, 200);
        const out = await readStream(res);
        assert.ok(out.failed, "the body errors");
        assert.equal(deltas(out.events).length, 2);
        assert.ok(!out.text.includes("[DONE]") && !out.text.includes("message_stop"));
      }));

    test(`${format} cutAfterChunks beyond the text: all text, no finish`, () =>
      withMock({ providers: { p: { faults: [{ mode: "stream", cutAfterChunks: 99 }] } } }, async (mock) => {
        const out = await readStream(await send(mock));
        assert.ok(out.failed);
        assert.equal(deltas(out.events).length, 6);
        assert.doesNotMatch(out.text, /finish_reason":"stop"|message_delta/);
      }));

    test(`${format} stallAfterChunks: the socket stays open, silent; the abort is counted`, () =>
      withMock({ providers: { p: { faults: [{ mode: "stream", stallAfterChunks: 1 }] } } }, async (mock) => {
        const out = await readStream(await send(mock), { idleMs: 300 });
        assert.ok(out.stalled);
        assert.equal(deltas(out.events).length, 1);
        for (let i = 0; i < 100 && mock.stats("p").inFlight > 0; i++) await sleep(10);
        assert.equal(mock.stats("p").aborted, 1);
      }));

    test(`${format} malformedChunkAt: exactly content chunk k is invalid JSON`, () =>
      withMock({ providers: { p: { faults: [{ mode: "stream", malformedChunkAt: 1 }] } } }, async (mock) => {
        const out = await readStream(await send(mock));
        assert.ok(out.ended);
        const data = out.events.map((e) => e.data).filter((d) => d !== "[DONE]");
        const bad = data.map((d, i) => [i, d]).filter(([, d]) => { try { JSON.parse(d); return false; } catch { return true; } });
        assert.equal(bad.length, 1);
        const goodBefore = data.slice(0, bad[0][0]).map((d) => JSON.parse(d));
        const contentBefore = format === "openai" ? goodBefore.filter((c) => c.choices[0]?.delta?.content) : goodBefore.filter((c) => c.type === "content_block_delta");
        assert.equal(contentBefore.length, 1);
      }));

    test(`${format} noDone: finish reason and usage, but no end marker`, () =>
      withMock({ providers: { p: { faults: [{ mode: "stream", noDone: true }] } } }, async (mock) => {
        const out = await readStream(await send(mock, format === "openai" ? { stream_options: { include_usage: true } } : {}));
        assert.ok(out.ended);
        assert.ok(!out.text.includes("[DONE]") && !out.text.includes("message_stop"));
        assert.match(out.text, format === "openai" ? /"finish_reason":"stop"/ : /"stop_reason":"end_turn"/);
        assert.match(out.text, format === "openai" ? /"completion_tokens":6/ : /"output_tokens":6/);
      }));

    test(`${format} slowFirstTokenMs: headers at once, the first token late`, () =>
      withMock({ providers: { p: { faults: [{ mode: "stream", slowFirstTokenMs: 250 }] } } }, async (mock) => {
        const t0 = Date.now();
        const res = await send(mock);
        assert.ok(Date.now() - t0 < 200, "headers are not delayed");
        const out = await readStream(res);
        assert.ok(Date.now() - t0 >= 240);
        assert.ok(out.ended);
        assert.equal(deltas(out.events).length, 6);
      }));
  }

  test("stream rules skip non-streaming requests and do not count them", () =>
    withMock({ providers: { p: { faults: [{ mode: "stream", cutAfterChunks: 0, firstN: 1 }] } } }, async (mock) => {
      const plain = await chat(mock, "p", openaiBody());
      assert.equal(plain.status, 200);
      await plain.arrayBuffer();
      assert.ok((await readStream(await chat(mock, "p", openaiBody("x", { stream: true })))).failed);
      assert.ok((await readStream(await chat(mock, "p", openaiBody("x", { stream: true })))).ended);
      assert.equal(mock.stats("p").streams, 2);
    }));
});

// ---------------------------------------------------------------- admin API and CLI

describe("admin API", () => {
  let mock;
  before(async () => { mock = await startMock({ config: { providers: { a: { latencyMs: 0 }, b: { fault: { mode: "status", status: 500 } } } } }); });
  after(() => mock.close());
  const admin = (path, body) => (body === undefined ? fetch(`${mock.url}/admin${path}`) : post(`${mock.url}/admin${path}`, body));

  test("POST /admin/<name>/fault changes faults at run time; counters restart", async () => {
    let res = await admin("/a/fault", { mode: "status", status: 503, firstN: 1, retryAfter: 3 });
    assert.equal(res.status, 200);
    assert.equal((await res.json()).faults[0].status, 503);
    assert.deepEqual(await statuses(2, () => chat(mock, "a", openaiBody())), [503, 200]);
    res = await admin("/a/fault", { mode: "status", status: 503, firstN: 1 });
    await res.arrayBuffer();
    assert.deepEqual(await statuses(2, () => chat(mock, "a", openaiBody())), [503, 200]);
  });

  test("a PROVIDER body keeps the settings it does not name", async () => {
    await (await admin("/a/fault", { latencyMs: 5, requireKey: true })).arrayBuffer();
    await (await admin("/a/fault", { faults: [] })).arrayBuffer();
    const settings = await (await admin("/a/fault")).json();
    assert.equal(settings.latencyMs, 5);
    assert.equal(settings.requireKey, true);
    assert.deepEqual(settings.faults, []);
  });

  test("bad fault bodies are refused with the reason", async () => {
    for (const body of [{ mode: "explode" }, { mode: "status", status: 200 }, { mode: "hang", firstn: 2 }, { faults: "no" }, { mode: "status", p: 2 }]) {
      const res = await admin("/a/fault", body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.ok((await res.json()).error);
    }
    const notJson = await post(`${mock.url}/admin/a/fault`, "{");
    assert.equal(notJson.status, 400);
    await notJson.arrayBuffer();
  });

  test("GET stats for one provider and for all; POST /admin/reset restores startup settings", async () => {
    await statuses(2, () => chat(mock, "b", openaiBody()));
    const one = await (await admin("/b/stats")).json();
    assert.equal(one.name, "b");
    assert.equal(one.total, 2);
    assert.deepEqual(one.byStatus, { 500: 2 });
    const all = await (await admin("/stats")).json();
    assert.ok(all.a && all.b);
    await (await admin("/b/fault", { mode: "ok" })).arrayBuffer();
    assert.deepEqual(await statuses(1, () => chat(mock, "b", openaiBody())), [200]);
    const reset = await admin("/reset", {});
    assert.equal(reset.status, 200);
    await reset.arrayBuffer();
    assert.equal((await (await admin("/b/stats")).json()).total, 0);
    assert.deepEqual(await statuses(1, () => chat(mock, "b", openaiBody())), [500]);
    const settingsA = await (await admin("/a/fault")).json();
    assert.equal(settingsA.requireKey, false);
  });

  test("POST /admin/<name>/reset touches only that provider", async () => {
    await statuses(1, () => chat(mock, "a", openaiBody()));
    await statuses(1, () => chat(mock, "b", openaiBody()));
    await (await admin("/a/reset", {})).arrayBuffer();
    assert.equal(mock.stats("a").total, 0);
    assert.ok(mock.stats("b").total > 0);
  });

  test("unknown admin routes are 404", async () => {
    const res = await admin("/a/explode");
    assert.equal(res.status, 404);
    await res.arrayBuffer();
  });
});

describe("command line and demo config", () => {
  test("the demo config is valid and flaky fails its first three requests", async () => {
    const config = JSON.parse(readFileSync(DEMO_CONFIG, "utf8"));
    assert.deepEqual(Object.keys(config.providers).sort(), ["dead", "flaky", "steady-anthropic", "steady-openai"]);
    await withMock(config, async (mock) => {
      const first = await statuses(3, () => chat(mock, "flaky", openaiBody()));
      assert.deepEqual(first, [503, 503, 503]);
      const later = await statuses(20, () => chat(mock, "flaky", openaiBody()));
      assert.ok(later.every((s) => s === 200 || s === 429));
      assert.ok(later.includes(200));
      const steady = await messages(mock, "steady-anthropic", anthropicBody());
      assert.equal(steady.status, 200);
      await steady.arrayBuffer();
    });
  });

  test("the CLI prints its URL, serves, and stops on SIGTERM", async () => {
    const child = spawn(process.execPath, [MOCK_SCRIPT.pathname, "--port", "0", "--config", DEMO_CONFIG.pathname], { stdio: ["ignore", "pipe", "inherit"] });
    try {
      const lines = createInterface({ input: child.stdout });
      const first = await Promise.race([new Promise((resolve) => lines.once("line", resolve)), sleep(5000, "timeout", { ref: false })]);
      const { listening } = JSON.parse(first);
      assert.match(listening, /^http:\/\/127\.0\.0\.1:\d+$/);
      const res = await chat({ url: listening }, "steady-openai", openaiBody("cli"));
      assert.equal((await res.json()).choices[0].message.content, "[steady-openai] echo: cli");
      const exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
      child.kill("SIGTERM");
      assert.equal(await Promise.race([exited, sleep(5000, "timeout", { ref: false })]), 0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });

  test("the CLI refuses bad config with exit code 2", async () => {
    const child = spawn(process.execPath, [MOCK_SCRIPT.pathname, "--config-json", '{"providers":{"x":{"faults":[{"mode":"nope"}]}}}'], { stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    child.stderr.on("data", (d) => { err += d; });
    const code = await new Promise((resolve) => child.once("exit", resolve));
    assert.equal(code, 2);
    assert.match(err, /unknown mode "nope"/);
  });
});

// ---------------------------------------------------------------- official SDK clients

// The SDKs come from package.json (scripts/setup.sh); without node_modules these tests skip.
const OpenAI = (await import("openai").catch(() => null))?.default;
const Anthropic = (await import("@anthropic-ai/sdk").catch(() => null))?.default;

describe("official SDK clients", { skip: !(OpenAI && Anthropic) && "openai / @anthropic-ai/sdk not installed (run scripts/setup.sh)" }, () => {
  let mock;
  before(async () => { mock = await startMock({ config: { providers: { gpt: { requireKey: true }, claude: { requireKey: true } } } }); });
  after(() => mock.close());
  const openaiClient = (opts = {}) => new OpenAI({ apiKey: "sk-test", baseURL: mock.openaiBaseUrl("gpt"), maxRetries: 0, ...opts });
  const anthropicClient = (opts = {}) => new Anthropic({ apiKey: "sk-ant-test", baseURL: mock.providerUrl("claude"), maxRetries: 0, ...opts });

  test("openai: create, stream with usage, typed errors, Retry-After honoured", async () => {
    mock.reset();
    const client = openaiClient();
    const done = await client.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "hi sdk" }] });
    assert.equal(done.choices[0].message.content, "[gpt] echo: hi sdk");
    let text = "";
    let usage = null;
    const stream = await client.chat.completions.create({ model: "gpt-test", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "hi stream" }] });
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      usage = chunk.usage ?? usage;
    }
    assert.equal(text, "[gpt] echo: hi stream");
    assert.equal(usage.completion_tokens, 4);

    mock.setFault("gpt", { mode: "status", status: 429, error: "insufficient_quota" });
    await assert.rejects(client.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "x" }] }),
      (err) => err instanceof OpenAI.RateLimitError && err.status === 429 && err.code === "insufficient_quota");

    mock.setFault("gpt", { mode: "status", status: 429, retryAfterMs: 20, firstN: 1 });
    const retried = await openaiClient({ maxRetries: 1 }).chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "again" }] });
    assert.equal(retried.choices[0].message.content, "[gpt] echo: again");
    assert.equal(mock.stats("gpt").lastRequest.headers.authorization, "[redacted]");
  });

  test("anthropic: create, stream, overloaded 529 as a typed error", async () => {
    mock.reset();
    const client = anthropicClient();
    const msg = await client.messages.create({ model: "claude-test", max_tokens: 64, messages: [{ role: "user", content: "hi sdk" }] });
    assert.equal(msg.content[0].text, "[claude] echo: hi sdk");
    const final = await client.messages.stream({ model: "claude-test", max_tokens: 64, messages: [{ role: "user", content: "hi stream" }] }).finalMessage();
    assert.equal(final.content[0].text, "[claude] echo: hi stream");
    assert.equal(final.stop_reason, "end_turn");
    assert.equal(final.usage.output_tokens, 4);

    mock.setFault("claude", { mode: "status", status: 529 });
    await assert.rejects(client.messages.create({ model: "claude-test", max_tokens: 64, messages: [{ role: "user", content: "x" }] }),
      (err) => err instanceof Anthropic.APIError && err.status === 529 && err.error?.error?.type === "overloaded_error");
    const seen = mock.stats("claude").lastRequest.headers; // this SDK sends its key as a bearer token
    assert.equal(seen["x-api-key"] ?? seen.authorization, "[redacted]");
    assert.doesNotMatch(JSON.stringify(mock.stats()), /sk-ant-test|sk-test/);
  });

  test("the SDKs see a cut stream as an error, not a short answer", async () => {
    mock.reset();
    mock.setFault("gpt", { mode: "stream", cutAfterChunks: 2 });
    const stream = await openaiClient().chat.completions.create({ model: "gpt-test", stream: true, messages: [{ role: "user", content: "one two three" }] });
    await assert.rejects(async () => { for await (const _ of stream); });
    mock.setFault("claude", { mode: "stream", cutAfterChunks: 2 });
    await assert.rejects(anthropicClient().messages.stream({ model: "claude-test", max_tokens: 64, messages: [{ role: "user", content: "one two three" }] }).finalMessage());
  });
});
