// Capacity-aware routing in the npm package, on Node (one client's view): the mock provider's
// rate-limit pools (tests/e2e/mock-pool.mjs) count down in their headers; the client reads them
// and sends each next request to a pool that can take it before any 429, shows the pools in
// health(), and with steerByCapacity false meets the 429 instead. 127.0.0.1, a free port.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { startMock } from "../e2e/mock-provider.mjs";
import m from "./pkg.mjs";

const { ResilientClient } = m;

let mock;
before(async () => {
  mock = await startMock({ port: 0, config: { providers: {} } });
});
after(async () => {
  await mock.close();
});

// Each request asks maxTokens 500 and costs the Anthropic pool about 510 tokens: five fit in
// 3,000. The OpenAI pool takes four requests.
function pools() {
  mock.reset();
  mock.setFault("anth", { pool: { tokens: 3000, windowMs: 60000 } });
  mock.setFault("oai", { pool: { requests: 4, windowMs: 60000 } });
}

function client(steerByCapacity) {
  return new ResilientClient({
    providers: {
      anth: { kind: "anthropic", baseUrl: mock.providerUrl("anth"), apiKey: "test-key" },
      oai: { kind: "openai-compatible", preset: "custom", baseUrl: mock.providerUrl("oai") },
    },
    routes: { default: [{ provider: "anth", model: "claude-x" }, { provider: "oai", model: "gpt-x" }] },
    breaker: { failureThreshold: 100 },
    steerByCapacity,
  });
}

const ask = async (c, n) => (await c.chat({ maxTokens: 500, messages: [{ role: "user", content: `question ${n}` }] })).provider;
const refused = () => mock.stats("anth").poolRefused + mock.stats("oai").poolRefused;

test("each request goes to a pool that can take it, before any 429", async () => {
  pools();
  const c = client(undefined); // the default: steering on
  const served = [];
  for (let n = 1; n <= 9; n++) served.push(await ask(c, n));
  assert.deepEqual(served, ["anth", "anth", "anth", "anth", "anth", "oai", "oai", "oai", "oai"]);
  assert.equal(refused(), 0, "no 429 from either provider");
  const pool = (provider) => c.health().find((h) => h.provider === provider).models[0].pool;
  assert.ok(pool("anth").tokens.remaining < 510, JSON.stringify(pool("anth")));
  assert.equal(pool("anth").tokens.limit, 3000);
  assert.equal(pool("oai").requests.remaining, 0);
  assert.ok(pool("oai").requests.resetAt > Date.now());
  c.dispose?.();
});

test("with steerByCapacity false the same traffic meets a 429", async () => {
  pools();
  const c = client(false);
  for (let n = 1; n <= 5; n++) assert.equal(await ask(c, n), "anth");
  // Refused once (a failover moves on at once: Retry-After is past rateLimitWaitMs).
  assert.equal(await ask(c, 6), "oai");
  assert.equal(mock.stats("anth").poolRefused, 1);
  c.dispose?.();
});
