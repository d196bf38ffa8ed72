// Cost through the Worker (Miniflare, two isolates sharing the Durable Object namespace, the
// mock provider on 127.0.0.1): `x-cost-usd` is the mock's reported usage at the configured
// prices, to the picodollar; a route's daily budget, once spent through one isolate, answers
// 429 in the client's format through the other one too, which never spent anything itself
// (the spend object refuses its hold).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { eventually, GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

// Dollars per million tokens, as micro-dollars per million (= picodollars per token).
const PRICE = { input: 400_000n, cached: 100_000n, output: 1_600_000n };

/** Picodollars as the gateway prints dollars: an exact decimal without trailing zeros. */
function usd(pico) {
  const whole = pico / 1_000_000_000_000n;
  const frac = (pico % 1_000_000_000_000n).toString().padStart(12, "0").replace(/0+$/, "");
  return frac ? `${whole}.${frac}` : `${whole}`;
}

/** What an OpenAI usage object costs at PRICE, in picodollars. */
function costOf(usage) {
  const cached = BigInt(usage.prompt_tokens_details?.cached_tokens ?? 0);
  const plain = BigInt(usage.prompt_tokens) - cached;
  return plain * PRICE.input + cached * PRICE.cached + BigInt(usage.completion_tokens) * PRICE.output;
}

async function post(gw, isolate, body, path = "/v1/chat/completions") {
  const res = await gw.fetch(isolate, `http://gateway${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${GATEWAY_KEY}` },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

async function health(gw, isolate) {
  const res = await gw.fetch(isolate, "http://gateway/health", { headers: { "x-api-key": GATEWAY_KEY } });
  assert.equal(res.status, 200);
  return res.json();
}

const ask = (model, content = "what does this cost?") => ({ model, messages: [{ role: "user", content }] });
const small = (model) => ({ ...ask(model), max_tokens: 1 });

describe("cost through the Worker", { timeout: 120000 }, () => {
  let mock, gw;
  before(async () => {
    mock = await startMock({ config: { providers: { cheap: {}, capped: {} } } });
    const models = { "mini": { inputPricePerMtok: 0.4, outputPricePerMtok: 1.6, cachedInputPricePerMtok: 0.1 } };
    const config = gatewayConfig(mock, {
      providers: { cheap: { kind: "openai", models }, capped: { kind: "openai", models } },
      routes: { priced: [{ provider: "cheap", model: "mini" }], capped: [{ provider: "capped", model: "mini" }] },
      retry: { maxAttempts: 1 },
    });
    // Room for one request of `max_tokens` 1 (held at $0.0000036: 5 input tokens estimated at
    // $0.40, 1 output at $1.60 per million; it costs $0.0000032), not two.
    config.cost = { routes: { capped: { dailyBudgetUsd: 0.000005 } } };
    gw = await startGateway(config, { isolates: 2 });
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("x-cost-usd is the mock's reported usage at the configured prices", async () => {
    const r = await post(gw, 0, ask("priced"));
    assert.equal(r.status, 200);
    const usage = r.body.usage;
    assert.ok(usage.prompt_tokens > 0 && usage.completion_tokens > 0, JSON.stringify(usage));
    assert.equal(r.headers.get("x-cost-usd"), usd(costOf(usage)));
    assert.equal(r.headers.get("x-cost-usd-answer"), usd(costOf(usage)));
    const h = await health(gw, 0);
    const row = h.costs.find((c) => c.provider === "cheap");
    assert.equal(row.usd, Number(usd(costOf(usage))));
  });

  test("a spent budget answers 429 through every isolate, in the client's format", async () => {
    const first = await post(gw, 0, small("capped"));
    assert.equal(first.status, 200, "under budget before its first request");
    assert.ok(first.headers.get("x-cost-usd"));
    const calls = mock.stats("capped").total;

    const openai = await post(gw, 0, small("capped"));
    assert.equal(openai.status, 429);
    assert.equal(openai.body.error.code, "spend_cap_reached");
    assert.match(openai.body.error.message, /route "capped" has spent its daily budget of \$0\.000005/);
    assert.ok(Number(openai.headers.get("retry-after")) >= 1);
    const anthropic = await post(gw, 0, small("capped"), "/v1/messages");
    assert.equal(anthropic.status, 429);
    assert.equal(anthropic.body.type, "error");
    assert.equal(anthropic.body.error.type, "rate_limit_error");

    // The other isolate never spent on the route; the route's spend object refuses its hold.
    await eventually(async () => (await health(gw, 1)).spend?.[0]?.spentUsd > 0);
    const other = await post(gw, 1, small("capped"));
    assert.equal(other.status, 429);
    assert.equal(other.body.error.code, "spend_cap_reached");
    assert.equal(mock.stats("capped").total, calls, "no call once spent");
  });
});
