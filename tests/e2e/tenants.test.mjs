// Named clients through the built Worker in workerd (Miniflare), with the official Node SDKs
// as the clients and the mock provider counting what reaches it: each client key is its own
// client; one over its requests per minute gets the SDK's RateLimitError with `retry-after`
// and OpenAI's `x-ratelimit-*` headers (an Anthropic client gets its own format's); a route it
// may not use is the SDK's PermissionDeniedError; an unlimited client is served meanwhile;
// /health and /metrics name the clients and never their keys. Build first
// (scripts/test-worker.sh does): build/index.js.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

const BATCH_KEY = "e2e-batch-key";
const WEB_KEY = "e2e-web-key";
const user = (content) => [{ role: "user", content }];

describe("named clients through the Worker, official SDKs", { timeout: 120000 }, () => {
  let mock, gw, batch, web, anthropicBatch;
  before(async () => {
    mock = await startMock({ config: { providers: { p: {} } } });
    const config = gatewayConfig(mock, {
      providers: { p: "openai" },
      routes: { main: [{ provider: "p", model: "gpt" }], side: [{ provider: "p", model: "gpt-side" }] },
      retry: { maxAttempts: 1 },
    });
    config.gateway = {
      clientKeysEnv: ["GATEWAY_KEY"],
      clients: [
        { name: "web", keysEnv: ["WEB_KEY"] },
        { name: "batch", keysEnv: ["BATCH_KEY"], routes: ["main"],
          limits: { requestsPerMinute: 3, tokensPerMinute: 100000 } },
      ],
    };
    gw = await startGateway(config, { bindings: { BATCH_KEY, WEB_KEY } });
    const openai = (apiKey) => new OpenAI({ apiKey, baseURL: `${gw.url}/v1`, maxRetries: 0, timeout: 20000 });
    batch = openai(BATCH_KEY);
    web = openai(WEB_KEY);
    anthropicBatch = new Anthropic({ apiKey: BATCH_KEY, baseURL: gw.url, maxRetries: 0, timeout: 20000 });
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("a client over its requests per minute gets RateLimitError with retry-after", async () => {
    const ask = { model: "main", messages: user("count me"), max_tokens: 16 };
    for (let i = 0; i < 3; i++) {
      const { response } = await batch.chat.completions.create(ask).withResponse();
      assert.equal(response.headers.get("x-ratelimit-limit-requests"), "3");
      assert.equal(response.headers.get("x-ratelimit-remaining-requests"), String(2 - i));
      assert.equal(response.headers.get("x-ratelimit-limit-tokens"), "100000");
      assert.match(response.headers.get("x-ratelimit-reset-requests"), /^\d+m\d+(\.\d+)?s$|^\d+(\.\d+)?s$/);
    }
    const before = mock.received("p").length;
    await assert.rejects(batch.chat.completions.create(ask), (e) => {
      assert.ok(e instanceof OpenAI.RateLimitError, `${e}`);
      assert.equal(e.status, 429);
      assert.equal(e.code, "rate_limit_exceeded");
      assert.match(e.message, /"batch" is over its 3 requests per minute/);
      assert.ok(Number(e.headers.get("retry-after")) >= 1);
      assert.ok(Number(e.headers.get("retry-after-ms")) > 0);
      assert.equal(e.headers.get("x-ratelimit-remaining-requests"), "0");
      return true;
    });
    assert.equal(mock.received("p").length, before, "a refused request reaches no provider");
    // Another client is not held back by it.
    const other = await web.chat.completions.create(ask);
    assert.equal(other.choices[0].message.role, "assistant");
    // The Anthropic SDK sees the refusal in its own format.
    await assert.rejects(
      anthropicBatch.messages.create({ model: "main", max_tokens: 16, messages: user("me too") }),
      (e) => {
        assert.ok(e instanceof Anthropic.RateLimitError, `${e}`);
        assert.equal(e.error?.error?.type, "rate_limit_error");
        assert.ok(e.headers.get("retry-after"));
        return true;
      },
    );
  });

  test("a route the client was not given is PermissionDeniedError", async () => {
    await assert.rejects(
      batch.chat.completions.create({ model: "side", messages: user("not mine") }),
      (e) => {
        assert.ok(e instanceof OpenAI.PermissionDeniedError, `${e}`);
        assert.equal(e.code, "route_not_allowed");
        return true;
      },
    );
    const ok = await web.chat.completions.create({ model: "side", messages: user("mine") });
    assert.ok(ok.choices.length);
  });

  test("/health and /metrics name each client, never its key", async () => {
    const res = await gw.fetch(0, "http://gateway/health", { headers: { "x-api-key": GATEWAY_KEY } });
    const text = await res.text();
    for (const key of [BATCH_KEY, WEB_KEY, GATEWAY_KEY]) assert.ok(!text.includes(key), "no key in /health");
    const clients = JSON.parse(text).clients;
    const batchRow = clients.find((c) => c.name === "batch");
    assert.equal(batchRow.requests, 3);
    assert.equal(batchRow.refused.requests, 2, "the OpenAI and the Anthropic refusal");
    assert.equal(batchRow.refused.route, 1);
    assert.deepEqual(batchRow.limits, { requestsPerMinute: 3, tokensPerMinute: 100000 });
    assert.ok(batchRow.tokens > 0, "the mock's reported usage");
    assert.equal(clients.find((c) => c.name === "web").requests, 2);
    const metrics = await (await gw.fetch(0, "http://gateway/metrics", { headers: { "x-api-key": GATEWAY_KEY } })).text();
    assert.match(metrics, /llm_gateway_client_rejections_total\{client="batch",reason="requests"\} 2/);
    assert.match(metrics, /llm_gateway_client_requests_total\{client="web"\} 2/);
    for (const key of [BATCH_KEY, WEB_KEY]) assert.ok(!metrics.includes(key), "no key in /metrics");
    const line = gw.logs.find((l) => l.includes('"client":"batch"') && l.includes('"refused":"requests"'));
    assert.ok(line, "the log line names the client and the limit");
    assert.ok(!gw.logs.some((l) => l.includes(BATCH_KEY)), "no key in any log line");
  });
});
