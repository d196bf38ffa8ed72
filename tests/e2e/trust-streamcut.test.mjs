// Issue 27, items 2 and 7, end to end: the built Worker in workerd (Miniflare) in front of the
// mock provider, read with the official SDKs. An upstream that sends one token and then its
// end (`[DONE]`, `message_stop`; the mock's `endAfterChunks`) with no finish reason is a cut:
// the answer is continued, or the stream ends with the client format's error event — never a
// made-up stop reason (`stop`, `end_turn`, `response.completed`), and the end log line is not
// `complete`. Item 7: a stream whose client goes away mid-answer still writes its end line
// (`client_closed`), and its upstream request is aborted.
// Build first (scripts/build-worker.sh): build/index.js.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { GATEWAY_KEY, eventually, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";
import { PROMPT, answer, anthropicStream, assertNeverTruncated, openaiStream } from "./stream-readers.mjs";

/** The stream-end log line of the request `res` answered (workerd's output comes in late). */
async function endLine(gw, res) {
  const id = res.headers.get("x-request-id");
  assert.ok(id, "the answer names its request");
  const line = await eventually(() => gw.logs.find((l) => l.includes('"stream end"') && l.includes(id)), 5000);
  return JSON.parse(line.slice(line.indexOf("{")));
}

/** An OpenAI Chat stream read as stream-readers.mjs does, with its response for the log line. */
async function openaiCut(client, model) {
  const out = { text: "", finish: null, error: null, res: null };
  try {
    const { data: stream, response } = await client.chat.completions
      .create({ model, stream: true, messages: [{ role: "user", content: PROMPT }] })
      .withResponse();
    out.res = response;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (choice?.delta?.content) out.text += choice.delta.content;
      if (choice?.finish_reason) out.finish = choice.finish_reason;
    }
  } catch (e) {
    out.error = e;
  }
  return out;
}

/** An Anthropic Messages stream, the same way. */
async function anthropicCut(client, model) {
  const out = { text: "", finish: null, stopped: false, error: null, res: null };
  try {
    const { data: stream, response } = await client.messages
      .create({ model, max_tokens: 256, stream: true, messages: [{ role: "user", content: PROMPT }] })
      .withResponse();
    out.res = response;
    for await (const ev of stream) {
      if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") out.text += ev.delta.text;
      if (ev.type === "message_delta") out.finish = ev.delta.stop_reason;
      if (ev.type === "message_stop") out.stopped = true;
    }
  } catch (e) {
    out.error = e;
  }
  return out;
}

/** A Responses stream: its event types, text, and the error it raised. */
async function responsesCut(client, model) {
  const out = { text: "", types: [], error: null, res: null };
  try {
    const { data: stream, response } = await client.responses
      .create({ model, stream: true, input: PROMPT })
      .withResponse();
    out.res = response;
    for await (const ev of stream) {
      out.types.push(ev.type);
      if (ev.type === "response.output_text.delta") out.text += ev.delta;
    }
  } catch (e) {
    out.error = e;
  }
  return out;
}

describe("a stream ended without a finish reason is a cut (issue 27)", { timeout: 120000 }, () => {
  let mock, gw, openai, anthropic;
  before(async () => {
    mock = await startMock({ config: { providers: {} } });
    const config = gatewayConfig(mock, {
      providers: { "end-o": "openai", "end-a": "anthropic", once: "openai", "once-a": "anthropic", slow: "openai" },
      routes: {
        "end-o": [{ provider: "end-o", model: "m-end" }],
        "end-a": [{ provider: "end-a", model: "claude-end" }],
        once: [{ provider: "once", model: "m-once" }],
        "once-a": [{ provider: "once-a", model: "claude-once" }],
        slow: [{ provider: "slow", model: "m-slow" }],
      },
      retry: { maxAttempts: 2, baseDelayMs: 20, maxDelayMs: 200 },
      breaker: { failureThreshold: 50, cooldownMs: 60000, maxCooldownMs: 60000 },
    });
    gw = await startGateway(config);
    openai = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0, timeout: 20000 });
    anthropic = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: gw.url, maxRetries: 0, timeout: 20000 });
    // Every stream of these two: one token, then the end with no finish reason.
    mock.setFault("end-o", { faults: [{ mode: "stream", endAfterChunks: 1 }] });
    mock.setFault("end-a", { faults: [{ mode: "stream", endAfterChunks: 1 }] });
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("OpenAI Chat client: an error, no finish_reason, no [DONE] taken for an end", async () => {
    for (const [route, how] of [["end-o", "passed through"], ["end-a", "translated"]]) {
      const r = await openaiCut(openai, route);
      assert.ok(r.error, `${how}: the SDK raised the stream's error event`);
      assert.ok(r.text.length > 0 && answer(route).startsWith(r.text), `${how}: committed before the cut: ${r.text}`);
      assert.equal(r.finish, null, `${how}: no made-up finish_reason`);
      const line = await endLine(gw, r.res);
      assert.equal(line.outcome, "interrupted", `${how}: ${JSON.stringify(line)}`);
    }
  });

  test("Anthropic Messages client: an error, no stop_reason, no message_stop", async () => {
    for (const [route, how] of [["end-a", "passed through"], ["end-o", "translated"]]) {
      const r = await anthropicCut(anthropic, route);
      assert.ok(r.error, `${how}: the SDK raised the stream's error event`);
      assert.ok(r.text.length > 0 && answer(route).startsWith(r.text), `${how}: ${r.text}`);
      assert.equal(r.finish, null, `${how}: no made-up stop_reason`);
      assert.equal(r.stopped, false, `${how}: no message_stop`);
      const line = await endLine(gw, r.res);
      assert.equal(line.outcome, "interrupted", `${how}: ${JSON.stringify(line)}`);
    }
  });

  test("Responses client: response.failed and the error event, never response.completed", async () => {
    for (const [route, how] of [["end-a", "translated"], ["end-o", "passed through"]]) {
      const r = await responsesCut(openai, route);
      assert.ok(r.error, `${how}: the SDK raised the stream's error event`);
      assert.ok(r.types.includes("response.output_text.delta"), `${how}: committed before the cut: ${r.types}`);
      assert.ok(!r.types.includes("response.completed"), `${how}: ${r.types}`);
      assert.ok(r.types.includes("response.failed"), `${how}: ${r.types}`);
      const line = await endLine(gw, r.res);
      assert.equal(line.outcome, "interrupted", `${how}: ${JSON.stringify(line)}`);
    }
  });

  test("a cut dressed as an end is continued when a retry can: the whole answer, its real finish", async () => {
    mock.setFault("once", { faults: [{ mode: "stream", endAfterChunks: 1, firstN: 1 }] });
    const o = await openaiStream(openai, "once");
    assertNeverTruncated(o, answer("once"));
    assert.equal(o.error, null, String(o.error));
    assert.equal(o.finish, "stop");
    assert.equal(mock.stats("once").total, 2, "continued by a second attempt");

    mock.setFault("once-a", { faults: [{ mode: "stream", endAfterChunks: 1, firstN: 1 }] });
    const a = await anthropicStream(anthropic, "once-a");
    assertNeverTruncated(a, answer("once-a"));
    assert.equal(a.error, null, String(a.error));
    assert.equal(a.finish, "end_turn");
    assert.equal(mock.stats("once-a").total, 2);
  });

  test("a client that goes away mid-stream: the end line says client_closed, the upstream is aborted", async () => {
    mock.setFault("slow", { chunkDelayMs: 200, answerTokens: 60, faults: [] });
    const before = mock.stats("slow").aborted;
    const controller = new AbortController();
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${GATEWAY_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "slow", stream: true, messages: [{ role: "user", content: PROMPT }] }),
      signal: controller.signal,
    });
    assert.equal(res.status, 200);
    const reader = res.body.getReader();
    const first = await reader.read();
    assert.ok(!first.done && first.value.length > 0, "the answer had started");
    controller.abort();
    const line = await endLine(gw, res);
    assert.equal(line.outcome, "client_closed", JSON.stringify(line));
    await eventually(() => mock.stats("slow").aborted > before, 5000);
  });
});
