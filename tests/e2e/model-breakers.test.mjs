// End to end, through the built Worker in workerd (Miniflare) with its breaker Durable Objects:
// breakers are per (provider, model). One openai-compatible provider serves a failing and a
// healthy model: the failing one's breaker opens, the healthy one keeps serving. A refused key
// (401) on one model takes the provider's other models out too.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

async function chat(gw, model) {
  const res = await gw.fetch(0, "http://gateway/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${GATEWAY_KEY}` },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
  });
  const text = await res.text();
  return { status: res.status, servedBy: res.headers.get("x-served-by"), text };
}

async function health(gw) {
  const res = await gw.fetch(0, "http://gateway/health", { headers: { "x-api-key": GATEWAY_KEY } });
  assert.equal(res.status, 200);
  const body = await res.json();
  return Object.fromEntries(body.providers.map((p) => [p.provider, p]));
}

const asked = (mock, name, model) => mock.received(name).filter((r) => r.body?.model === model).length;

describe("breakers per (provider, model)", { timeout: 120000 }, () => {
  let mock, gw;
  before(async () => {
    mock = await startMock({
      config: {
        providers: {
          shared: { faults: [{ mode: "status", status: 429, error: "rate_limit", model: "flaky" }] },
          locked: { faults: [{ mode: "status", status: 401, error: "auth", model: "one" }] },
          backup: {},
        },
      },
    });
    gw = await startGateway(gatewayConfig(mock, {
      providers: { shared: "openai", locked: "openai", backup: "openai" },
      routes: {
        flaky: [{ provider: "shared", model: "flaky", label: "fast" }, { provider: "backup", model: "b" }],
        steady: [{ provider: "shared", model: "steady" }],
        one: [{ provider: "locked", model: "one" }, { provider: "backup", model: "b" }],
        two: [{ provider: "locked", model: "two" }, { provider: "backup", model: "b" }],
      },
      breaker: { failureThreshold: 3, cooldownMs: 60000, maxCooldownMs: 60000 },
      retry: { maxAttempts: 1 },
    }));
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("a rate-limited model opens its own breaker; the provider's other model keeps serving", async () => {
    for (let i = 0; i < 3; i++) {
      const r = await chat(gw, "flaky");
      assert.equal(r.status, 200, r.text);
      assert.equal(r.servedBy, "backup/b");
      const s = await chat(gw, "steady");
      assert.equal(s.status, 200, s.text);
      assert.equal(s.servedBy, "shared/steady");
    }
    const h = (await health(gw)).shared;
    const models = Object.fromEntries(h.models.map((m) => [m.model, m]));
    assert.equal(models.flaky.state, "open");
    assert.equal(models.flaky.label, "fast");
    assert.equal(typeof models.flaky.openUntil, "number");
    assert.equal(models.steady.state, "closed");
    assert.equal(h.state, "open", "the provider shows its worst model");
    // Open: the failing model is skipped without a call, the healthy one still called.
    const before = asked(mock, "shared", "flaky");
    const r = await chat(gw, "flaky");
    assert.equal(r.servedBy, "backup/b");
    assert.equal(asked(mock, "shared", "flaky"), before, "skipped, not called");
    const s = await chat(gw, "steady");
    assert.equal(s.status, 200, s.text);
    assert.equal(s.servedBy, "shared/steady");
  });

  test("a refused key on one model opens every model of the provider", async () => {
    for (let i = 0; i < 3; i++) {
      const r = await chat(gw, "one");
      assert.equal(r.status, 200, r.text);
      assert.equal(r.servedBy, "backup/b");
    }
    const models = Object.fromEntries((await health(gw)).locked.models.map((m) => [m.model, m.state]));
    assert.deepEqual(models, { one: "open", two: "open" });
    const r = await chat(gw, "two");
    assert.equal(r.servedBy, "backup/b");
    assert.equal(asked(mock, "locked", "two"), 0, "never called: its provider's key is refused");
  });
});
