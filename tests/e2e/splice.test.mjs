// Streams with splicing on (the Worker's STREAM_SPLICE=on, src/worker/out.rs): past the commit
// point a same-format stream's rest is piped to the client natively, its bytes never crossing
// into wasm, while the gateway reads a copy when its idle timer fires and at the end. The
// behaviours of tests/e2e/stream.test.mjs that a pipe can keep are checked here with it on:
// byte-exact passthrough, a long answer whole, a cut continued (restart and prefill), an error
// when nothing can continue, a stall continued, no [DONE], a client going away. What it cannot
// keep is checked as what it is: a malformed chunk already piped reaches the client.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { GATEWAY_KEY, eventually, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

import { PROMPT, answer, anthropicStream, assertNeverTruncated, openaiStream } from "./stream-readers.mjs";

const HEADERS = { "content-type": "application/json", authorization: `Bearer ${GATEWAY_KEY}`, "x-api-key": GATEWAY_KEY, "anthropic-version": "2023-06-01" };

/** The stream-end log line of the request the response `res` answered (workerd's output comes in late). */
async function endLine(gw, res) {
  const id = res.headers.get("x-request-id");
  const line = await eventually(() => gw.logs.find((l) => l.includes('"stream end"') && l.includes(id)));
  return JSON.parse(line.slice(line.indexOf("{")));
}

describe("streams spliced at the edge", { timeout: 120000 }, () => {
  let mock, gw, openai, anthropic;
  before(async () => {
    mock = await startMock({ config: { providers: {} } });
    const config = gatewayConfig(mock, {
      providers: {
        ok: "openai", "ok-a": "anthropic", long: "openai", cut: "openai", "cut-a": "anthropic", lost: "openai",
        other: "openai", stall: "anthropic", malformed: "openai", nodone: "openai", gone: "openai",
      },
      routes: {
        ok: [{ provider: "ok", model: "m-ok" }],
        "ok-a": [{ provider: "ok-a", model: "claude-ok" }],
        long: [{ provider: "long", model: "m-long" }],
        cut: [{ provider: "cut", model: "m-cut" }],
        "cut-a": [{ provider: "cut-a", model: "claude-cut" }],
        lost: [{ provider: "lost", model: "m-lost" }, { provider: "other", model: "m-other" }],
        stall: [{ provider: "stall", model: "claude-stall" }, { provider: "stall", model: "claude-stall-b" }],
        malformed: [{ provider: "malformed", model: "m-mal" }],
        nodone: [{ provider: "nodone", model: "m-nodone" }],
        gone: [{ provider: "gone", model: "m-gone" }],
      },
      retry: { maxAttempts: 2, baseDelayMs: 20, maxDelayMs: 200 },
      breaker: { failureThreshold: 50, cooldownMs: 60000, maxCooldownMs: 60000 },
    });
    config.idleTimeoutMs = 1000;
    gw = await startGateway(config, { vars: { STREAM_SPLICE: "on" } });
    openai = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0, timeout: 20000 });
    anthropic = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: gw.url, maxRetries: 0, timeout: 20000 });
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("same-format streams reach the client byte for byte, with true headers and usage logged", async () => {
    const same = (text) => text.replace(/chatcmpl-mock-[\w-]+?-\d+|msg_mock_[\w-]+?_\d+/g, "ID").replace(/"created":\d+/g, '"created":0');
    mock.setFault("long", { answerTokens: 3000, tokensPerChunk: 1, faults: [] });
    const cases = [
      { path: "/v1/chat/completions", provider: "ok", route: "ok", model: "m-ok", extra: { stream_options: { include_usage: true } } },
      { path: "/v1/messages", provider: "ok-a", route: "ok-a", model: "claude-ok", extra: { max_tokens: 256 } },
      { path: "/v1/chat/completions", provider: "long", route: "long", model: "m-long", extra: { stream_options: { include_usage: true } } },
    ];
    for (const c of cases) {
      const body = (model) => JSON.stringify({ model, stream: true, messages: [{ role: "user", content: PROMPT }], ...c.extra });
      const direct = await fetch(`${mock.providerUrl(c.provider)}${c.path}`, { method: "POST", headers: HEADERS, body: body(c.model) });
      const sent = await direct.text();
      const res = await fetch(`${gw.url}${c.path}`, { method: "POST", headers: HEADERS, body: body(c.route) });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("x-attempts"), "1");
      assert.equal(res.headers.get("x-served-by"), `${c.provider}/${c.model}`);
      const got = await res.text();
      assert.ok(sent.length > 200, sent);
      assert.equal(same(got), same(sent), `${c.path} ${c.route}: what the mock sent is what the client got`);
      const line = await endLine(gw, res);
      assert.equal(line?.outcome, "complete", JSON.stringify(line));
      assert.ok(line.usage?.outputTokens > 0, `usage read from the copy: ${JSON.stringify(line)}`);
    }
  });

  test("a long answer cut mid-way is continued after the piped bytes (matched restart)", async () => {
    mock.setFault("long", { answerTokens: 3000, tokensPerChunk: 1, faults: [{ mode: "stream", cutAfterChunks: 2000, firstN: 1 }] });
    const full = await (await fetch(`${mock.providerUrl("long")}/v1/chat/completions`, {
      method: "POST", headers: HEADERS, body: JSON.stringify({ model: "m-long", messages: [{ role: "user", content: PROMPT }] }),
    })).json();
    const r = await openaiStream(openai, "long");
    assert.equal(r.error, null, String(r.error));
    assert.equal(r.text, full.choices[0].message.content);
    assert.equal(r.finish, "stop");
    mock.setFault("long", { answerTokens: 3000, tokensPerChunk: 1, faults: [] });
  });

  test("a stream cut mid-answer is finished by a matched restart, or with prefill", async () => {
    mock.setFault("cut", { faults: [{ mode: "stream", cutAfterChunks: 2, firstN: 1 }] });
    const r = await openaiStream(openai, "cut");
    assert.equal(r.error, null, String(r.error));
    assertNeverTruncated(r, answer("cut"));
    mock.setFault("cut-a", { faults: [{ mode: "stream", cutAfterChunks: 2, firstN: 1 }] });
    const a = await anthropicStream(anthropic, "cut-a");
    assert.equal(a.error, null, String(a.error));
    assertNeverTruncated(a, answer("cut-a"));
    assert.equal(mock.stats("cut-a").lastRequest.body.messages.at(-1).role, "assistant", "the second attempt carried the prefill");
  });

  test("when nothing can continue the answer, the client gets an error, not a short success", async () => {
    mock.setFault("lost", { faults: [{ mode: "stream", cutAfterChunks: 2 }] });
    const o = await openaiStream(openai, "lost");
    assertNeverTruncated(o, answer("lost"));
    assert.ok(o.error, "the OpenAI SDK raised the stream's error event");
    const a = await anthropicStream(anthropic, "lost");
    assertNeverTruncated(a, answer("lost"));
    assert.ok(a.error, "the Anthropic SDK raised the stream's error event");
  });

  test("a stall mid-answer is found by the idle timer and continued on the next entry", async () => {
    mock.setFault("stall", { faults: [{ mode: "stream", stallAfterChunks: 2, firstN: 1 }] });
    const t0 = Date.now();
    const r = await anthropicStream(anthropic, "stall");
    assert.equal(r.error, null, String(r.error));
    assertNeverTruncated(r, answer("stall"));
    // Up to two idle periods (1 s here) after the last byte: the copy is read when the timer fires.
    assert.ok(Date.now() - t0 < 5000, `took ${Date.now() - t0} ms`);
    const stats = mock.stats("stall");
    assert.equal(stats.total, 2);
    assert.equal(stats.lastRequest.body.model, "claude-stall-b");
  });

  test("a body that ends without [DONE] but with a finish is final at once", async () => {
    mock.setFault("nodone", { faults: [{ mode: "stream", noDone: true }] });
    const t0 = Date.now();
    const r = await openaiStream(openai, "nodone");
    assert.equal(r.error, null, String(r.error));
    assert.equal(r.text, answer("nodone"));
    assert.ok(r.usage, "usage still reported");
    assert.ok(Date.now() - t0 < 900, `no idle wait: ${Date.now() - t0} ms`);
  });

  test("a malformed chunk already piped reaches the client: the spliced path cannot hold it back", async () => {
    mock.setFault("malformed", { faults: [{ mode: "stream", malformedChunkAt: 2, firstN: 1 }] });
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST", headers: HEADERS,
      body: JSON.stringify({ model: "malformed", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: PROMPT }] }),
    });
    const text = await res.text();
    const data = text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
    const bad = data.filter((d) => d !== "[DONE]" && (() => { try { JSON.parse(d); return false; } catch { return true; } })());
    assert.equal(bad.length, 1, `the malformed chunk went through as it came: ${text}`);
  });

  test("a client that goes away aborts the upstream request", async () => {
    mock.setFault("gone", { chunkDelayMs: 300, faults: [] });
    const ctrl = new AbortController();
    const stream = await openai.chat.completions.create(
      { model: "gone", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: PROMPT }] },
      { signal: ctrl.signal },
    );
    try {
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta?.content) ctrl.abort();
      }
    } catch {
      // the abort surfaces here
    }
    let stats;
    for (let i = 0; i < 50; i++) {
      stats = mock.stats("gone");
      if (stats.inFlight === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(stats.inFlight, 0, "the upstream request was aborted");
    assert.equal(stats.aborted, 1);
  });
});
