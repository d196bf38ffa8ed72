// Routing that learns, end to end: the built Worker in workerd (Miniflare) with its Durable
// Object, the mock provider on 127.0.0.1. A hedged request is answered by the faster entry and
// the slower one's upstream request is aborted (the mock counts it); `x-hedge: off` opts out.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

const headers = { "content-type": "application/json", authorization: `Bearer ${GATEWAY_KEY}` };
const body = (model) => JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] });

/** Polls until `name` has no request in flight (bounded: 5 s). */
async function settled(mock, name) {
  let stats;
  for (let i = 0; i < 50; i++) {
    stats = mock.stats(name);
    if (stats.inFlight === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return stats;
}

describe("hedged requests through the edge", { timeout: 60000 }, () => {
  let mock, gw;
  before(async () => {
    mock = await startMock({ config: { providers: {} } });
    const config = gatewayConfig(mock, {
      providers: { slow: "openai", fast: "openai" },
      routes: { hedged: [{ provider: "slow", model: "m-slow" }, { provider: "fast", model: "m-fast" }] },
      timeoutMs: 5000,
    });
    config.hedge = { hedged: { after: 300, maxExtra: 1, budget: 1 } };
    gw = await startGateway(config);
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("the faster entry answers and the slower one's request is aborted", async () => {
    mock.setFault("slow", { latencyMs: 3000, faults: [] });
    const t0 = Date.now();
    const res = await fetch(`${gw.url}/v1/chat/completions`, { method: "POST", headers, body: body("hedged") });
    assert.equal(res.status, 200);
    const answer = await res.json();
    assert.equal(res.headers.get("x-served-by"), "fast/m-fast");
    assert.match(answer.choices[0].message.content, /^\[fast\] echo: hi/);
    assert.ok(Date.now() - t0 < 2500, `answered by the hedge, not the slow entry: ${Date.now() - t0} ms`);
    const slow = await settled(mock, "slow");
    assert.equal(slow.inFlight, 0);
    assert.equal(slow.aborted, 1, "the loser's upstream request was aborted");
    assert.equal(mock.stats("fast").total, 1);
  });

  test("x-hedge: off keeps a request to one entry", async () => {
    mock.setFault("slow", { latencyMs: 800, faults: [] });
    const before = mock.stats("fast").total;
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST", headers: { ...headers, "x-hedge": "off" }, body: body("hedged"),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-served-by"), "slow/m-slow");
    assert.equal(mock.stats("fast").total, before, "no hedge went out");
  });
});
