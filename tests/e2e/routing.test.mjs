// Routing that learns, end to end: the built Worker in workerd (Miniflare) with its Durable
// Object, the mock provider on 127.0.0.1. A hedged request is answered by the faster entry and
// the slower one's upstream request is aborted (the mock counts it), for whole answers and for
// streams slow to their first token; `x-hedge: off` opts out.
// A slow entry one isolate sees is demoted in the other through the Durable Object.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { GATEWAY_KEY, eventually, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

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

  test("a stream slow to its first token is hedged: the faster stream answers, the slower is aborted", async () => {
    mock.setFault("slow", { latencyMs: 3000, faults: [] });
    const abortedBefore = mock.stats("slow").aborted;
    const fastBefore = mock.stats("fast").total;
    const t0 = Date.now();
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST", headers,
      body: JSON.stringify({ model: "hedged", stream: true, messages: [{ role: "user", content: "hi" }] }),
    });
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.ok(text.trimEnd().endsWith("data: [DONE]"), text.slice(-200));
    const content = text.split("\n")
      .filter((l) => l.startsWith("data: {"))
      .map((l) => JSON.parse(l.slice(6)).choices?.[0]?.delta?.content ?? "")
      .join("");
    assert.match(content, /^\[fast\] echo: hi/, text.slice(0, 400));
    assert.ok(Date.now() - t0 < 2500, `answered by the hedge, not the slow entry: ${Date.now() - t0} ms`);
    assert.equal(mock.stats("fast").total, fastBefore + 1);
    const slow = await settled(mock, "slow");
    assert.equal(slow.inFlight, 0);
    assert.equal(slow.aborted, abortedBefore + 1, "the losing stream's upstream request was aborted");
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

describe("latency demotion shared through the Durable Object", { timeout: 60000 }, () => {
  let mock, gw;
  before(async () => {
    mock = await startMock({ config: { providers: {} } });
    const config = gatewayConfig(mock, {
      providers: { slow: "openai", fast: "openai" },
      routes: { r: [{ provider: "slow", model: "m-slow", latencySloMs: 100 }, { provider: "fast", model: "m-fast" }] },
    });
    config.latency = { window: 5, minSamples: 3, explore: 0 };
    gw = await startGateway(config, { isolates: 2 });
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  const ask = (isolate) => gw.fetch(isolate, "http://gateway/v1/chat/completions", {
    method: "POST", headers, body: body("r"),
  });
  const demoted = async (isolate) => {
    const res = await gw.fetch(isolate, "http://gateway/health", { headers: { "x-api-key": GATEWAY_KEY } });
    const h = await res.json();
    return h.providers.find((p) => p.provider === "slow").demoted;
  };

  test("one isolate's slow answers demote the entry in the other", async () => {
    mock.setFault("slow", { latencyMs: 400, faults: [] });
    for (let i = 0; i < 3; i++) {
      const res = await ask(0);
      assert.equal(res.headers.get("x-served-by"), "slow/m-slow");
      await res.arrayBuffer();
    }
    // Isolate 0's samples reach the object with its verdicts' next batch (within a second).
    await eventually(async () => {
      await (await ask(0)).arrayBuffer();
      const view = JSON.parse((await gw.fleet("slow/m-slow", "view")).text);
      return view.latencies?.latency?.demoted;
    }, 5000);
    const seen = mock.stats("slow").total;
    // Isolate 1 never called the slow entry; within a refresh it shows and follows the demotion.
    const shown = await eventually(() => demoted(1), 3000);
    assert.equal(shown[0].model, "m-slow");
    assert.ok(shown[0].p95Ms >= 400, JSON.stringify(shown));
    const res = await ask(1);
    assert.equal(res.headers.get("x-served-by"), "fast/m-fast");
    await res.arrayBuffer();
    assert.equal(mock.stats("slow").total, seen, "isolate 1 tried the demoted entry last");
  });
});
