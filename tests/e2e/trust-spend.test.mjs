// A spend cap under concurrency through the Worker (Miniflare, two isolates sharing the real
// Durable Object namespace): a route capped at $1 a day over an upstream that reports a million
// tokens in and a million out for every request ($0.50 at $0.10/$0.40 per million). Each
// request ("hi", max_tokens 1M) holds $0.4000001 on the cap's spend object before it goes, so
// of 20 concurrent requests, split over the two isolates, only as many as fit are served; the
// overshoot that remains (spentUsd above the cap) comes from the input the estimate missed and
// is printed. After the cap answers 429, naming the model directly (`provider/model`, its own
// name) is refused too. (Red team, issue 27: all 20 served, spentUsd 800.)
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startUsageUpstream } from "./mock-usage.mjs";
import { eventually, GATEWAY_KEY, gatewayConfig, startGateway } from "./gateway-harness.mjs";

const CAP_USD = 1;
const COST_USD = 0.5; // 1M input tokens at $0.10 and 1M output at $0.40 per million
const HELD_USD = 0.4000001; // 1 input token estimated ("hi"), 1M output (max_tokens)

async function post(gw, isolate, model) {
  const res = await gw.fetch(isolate, "http://gateway/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${GATEWAY_KEY}` },
    body: JSON.stringify({ model, max_tokens: 1_000_000, messages: [{ role: "user", content: "hi" }] }),
  });
  return { status: res.status, body: await res.json() };
}

async function spent(gw, isolate) {
  const res = await gw.fetch(isolate, "http://gateway/health", { headers: { "x-api-key": GATEWAY_KEY } });
  assert.equal(res.status, 200);
  return (await res.json()).spend?.[0];
}

describe("a spend cap under 20 concurrent requests through two isolates", { timeout: 120000 }, () => {
  let upstream, gw;
  before(async () => {
    upstream = await startUsageUpstream({ delayMs: 300, tokens: 1_000_000 });
    const models = { big: { inputPricePerMtok: 0.1, outputPricePerMtok: 0.4 } };
    const config = gatewayConfig(upstream, {
      providers: { up: { kind: "openai", models } },
      routes: { capped: [{ provider: "up", model: "big" }] },
      retry: { maxAttempts: 1 },
    });
    config.cost = { routes: { capped: { dailyBudgetUsd: CAP_USD } } };
    gw = await startGateway(config, { isolates: 2 });
  });
  after(async () => {
    await gw?.close();
    await upstream?.close();
  });

  test("the holds admit only what fits; the overshoot is bounded", async () => {
    const outs = await Promise.all(Array.from({ length: 20 }, (_, i) => post(gw, i % 2, "capped")));
    const served = outs.filter((o) => o.status === 200).length;
    for (const o of outs.filter((o) => o.status !== 200)) {
      assert.equal(o.status, 429, JSON.stringify(o.body));
      assert.equal(o.body.error.code, "spend_cap_reached");
    }
    assert.equal(upstream.calls, served, "no call for a refused request");
    // Every settle has reached the object once both isolates' views show the same spending.
    let row;
    await eventually(async () => {
      const [a, b] = [await spent(gw, 0), await spent(gw, 1)];
      row = a;
      return a && b && a.spentUsd === served * COST_USD && b.spentUsd === a.spentUsd;
    }, 10000);
    const overshoot = row.spentUsd - CAP_USD;
    console.log(`20 concurrent requests, two isolates: ${served} served, spentUsd ${row.spentUsd} against a $${CAP_USD} cap (overshoot $${Math.max(0, overshoot).toFixed(6)})`);
    assert.ok(served >= 1, "the first that fits is served");
    assert.ok(served * HELD_USD <= CAP_USD, `holds fit under the cap: ${served}`);
    assert.ok(overshoot <= served * (COST_USD - HELD_USD) + 1e-9, `overshoot ${overshoot}`);
    assert.equal(row.exhausted, true);
  });

  test("once spent, every name of the capped entry is refused, through either isolate", async () => {
    const calls = upstream.calls;
    for (const [isolate, model] of [[0, "capped"], [1, "up/big"], [0, "big"], [1, "big"]]) {
      const r = await post(gw, isolate, model);
      assert.equal(r.status, 429, `${model} through ${isolate}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.code, "spend_cap_reached");
    }
    assert.equal(upstream.calls, calls, "no call once spent");
  });
});
