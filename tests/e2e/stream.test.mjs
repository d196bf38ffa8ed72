// Streaming end to end: the built Worker in workerd (Miniflare) with its Durable Object, the
// mock provider's stream faults on 127.0.0.1, the official `openai` and `@anthropic-ai/sdk`
// streaming clients. The text a client assembles is the complete answer or the stream
// raises an error: never a truncated answer presented as complete.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

import { PROMPT, answer, anthropicStream, assertNeverTruncated, openaiStream } from "./stream-readers.mjs";


describe("streams through the edge", { timeout: 120000 }, () => {
  let mock, gw, openai, anthropic;
  before(async () => {
    mock = await startMock({ config: { providers: {} } });
    const config = gatewayConfig(mock, {
      providers: {
        ok: "openai", "ok-a": "anthropic", cut: "openai", "cut-a": "anthropic", lost: "openai", other: "openai",
        stall: "anthropic", malformed: "openai", nodone: "openai", slow: "openai", fast: "anthropic", gone: "openai",
      },
      routes: {
        ok: [{ provider: "ok", model: "m-ok" }],
        "ok-a": [{ provider: "ok-a", model: "claude-ok" }],
        cut: [{ provider: "cut", model: "m-cut" }],
        "cut-a": [{ provider: "cut-a", model: "claude-cut" }],
        lost: [{ provider: "lost", model: "m-lost" }, { provider: "other", model: "m-other" }],
        stall: [{ provider: "stall", model: "claude-stall" }, { provider: "stall", model: "claude-stall-b" }],
        malformed: [{ provider: "malformed", model: "m-mal" }],
        nodone: [{ provider: "nodone", model: "m-nodone" }],
        slow: [{ provider: "slow", model: "m-slow", firstTokenTimeoutMs: 800 }, { provider: "fast", model: "claude-fast" }],
        gone: [{ provider: "gone", model: "m-gone" }],
      },
      retry: { maxAttempts: 2, baseDelayMs: 20, maxDelayMs: 200 },
      breaker: { failureThreshold: 50, cooldownMs: 60000, maxCooldownMs: 60000 },
    });
    config.idleTimeoutMs = 1000;
    gw = await startGateway(config);
    openai = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0, timeout: 20000 });
    anthropic = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: gw.url, maxRetries: 0, timeout: 20000 });
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("a healthy stream, with usage, to both SDKs", async () => {
    const o = await openaiStream(openai, "ok");
    assert.equal(o.error, null);
    assert.equal(o.text, answer("ok"));
    assert.equal(o.finish, "stop");
    assert.ok(o.usage?.completion_tokens > 0);
    const a = await anthropicStream(anthropic, "ok-a");
    assert.equal(a.error, null);
    assert.equal(a.text, answer("ok-a"));
    assert.equal(a.finish, "end_turn");
    assert.ok(a.usage?.output_tokens > 0);
    // Either provider serves either client format.
    const cross = await anthropicStream(anthropic, "ok");
    assert.equal(cross.text, answer("ok"));
  });

  test("a same-format stream reaches the client byte for byte, with true headers", async () => {
    // What the mock sends for this request, asked directly, against what the client gets
    // through the gateway: the same bytes but for the mock's per-request id and clock.
    const same = (text) => text.replace(/chatcmpl-mock-ok-\d+|msg_mock_ok-a_\d+/g, "ID").replace(/"created":\d+/g, '"created":0');
    const cases = [
      { path: "/v1/chat/completions", provider: "ok", route: "ok", model: "m-ok", extra: { stream_options: { include_usage: true } } },
      { path: "/v1/messages", provider: "ok-a", route: "ok-a", model: "claude-ok", extra: { max_tokens: 256 } },
    ];
    for (const c of cases) {
      const body = (model) => JSON.stringify({ model, stream: true, messages: [{ role: "user", content: PROMPT }], ...c.extra });
      const headers = { "content-type": "application/json", authorization: `Bearer ${GATEWAY_KEY}`, "x-api-key": GATEWAY_KEY, "anthropic-version": "2023-06-01" };
      const direct = await fetch(`${mock.providerUrl(c.provider)}${c.path}`, { method: "POST", headers, body: body(c.model) });
      const sent = await direct.text();
      const res = await fetch(`${gw.url}${c.path}`, { method: "POST", headers, body: body(c.route) });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("x-attempts"), "1");
      assert.equal(res.headers.get("x-served-by"), `${c.provider}/${c.model}`);
      const got = await res.text();
      assert.ok(sent.length > 200, sent);
      assert.equal(same(got), same(sent), `${c.path}: what the mock sent is what the client got`);
    }
  });

  test("a stream cut mid-answer is finished by a matched restart (no prefill)", async () => {
    mock.setFault("cut", { faults: [{ mode: "stream", cutAfterChunks: 2, firstN: 1 }] });
    const r = await openaiStream(openai, "cut");
    assertNeverTruncated(r, answer("cut"));
    assert.equal(r.error, null, String(r.error));
    assert.equal(mock.stats("cut").total, 2);
  });

  test("a stream cut mid-answer is continued with prefill where the model accepts it", async () => {
    mock.setFault("cut-a", { faults: [{ mode: "stream", cutAfterChunks: 2, firstN: 1 }] });
    const r = await anthropicStream(anthropic, "cut-a");
    assertNeverTruncated(r, answer("cut-a"));
    assert.equal(r.error, null, String(r.error));
    const sent = mock.stats("cut-a").lastRequest.body.messages;
    assert.equal(sent.at(-1).role, "assistant", "the second attempt carried the prefill");
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

  test("a stall mid-answer is detected by the idle deadline and continued on the next entry", async () => {
    mock.setFault("stall", { faults: [{ mode: "stream", stallAfterChunks: 2, firstN: 1 }] });
    const t0 = Date.now();
    const r = await anthropicStream(anthropic, "stall");
    assertNeverTruncated(r, answer("stall"));
    assert.equal(r.error, null, String(r.error));
    assert.ok(Date.now() - t0 < 5000, `took ${Date.now() - t0} ms`);
    // Not retried at the entry that went silent: the next one continued it, from the prefill.
    const stats = mock.stats("stall");
    assert.equal(stats.total, 2);
    assert.equal(stats.lastRequest.body.model, "claude-stall-b");
    assert.equal(stats.lastRequest.body.messages.at(-1).role, "assistant");
  });

  test("a malformed chunk fails the attempt and the answer is continued whole", async () => {
    // The chunk held part of the answer: skipped, the answer would end looking complete without it.
    mock.setFault("malformed", { faults: [{ mode: "stream", malformedChunkAt: 2, firstN: 1 }] });
    const r = await openaiStream(openai, "malformed");
    assert.equal(r.error, null, String(r.error));
    assert.equal(r.finish, "stop");
    assert.equal(r.text, answer("malformed"));
  });

  test("a body that ends without [DONE] but with a finish is final at once, with usage", async () => {
    mock.setFault("nodone", { faults: [{ mode: "stream", noDone: true }] });
    const t0 = Date.now();
    const r = await openaiStream(openai, "nodone");
    assert.equal(r.error, null, String(r.error));
    assert.equal(r.text, answer("nodone"));
    assert.ok(r.usage, "usage still reported");
    assert.ok(Date.now() - t0 < 900, `no idle wait: ${Date.now() - t0} ms`);
  });

  test("a first token later than its deadline is abandoned for the fallback", async () => {
    mock.setFault("slow", { faults: [{ mode: "stream", slowFirstTokenMs: 5000 }] });
    const t0 = Date.now();
    const r = await openaiStream(openai, "slow");
    assert.equal(r.error, null, String(r.error));
    assert.equal(r.text, answer("fast"));
    assert.ok(Date.now() - t0 < 3000, `took ${Date.now() - t0} ms`);
  });

  test("a client that goes away aborts the upstream request", async () => {
    mock.setFault("gone", { chunkDelayMs: 300, faults: [] });
    const ctrl = new AbortController();
    const stream = await openai.chat.completions.create(
      { model: "gone", stream: true, messages: [{ role: "user", content: PROMPT }] },
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
