// Capacity-aware routing end to end (issue 30): the built Worker in workerd (Miniflare), two
// isolates sharing their Durable Objects, the mock provider's rate-limit pools (mock-pool.mjs)
// counting down in `anthropic-ratelimit-*` and `x-ratelimit-*` headers. The official OpenAI SDK
// asks a route of two pools: an Anthropic one short of tokens and an OpenAI one short of
// requests. Each next request goes to the pool that can take it before any 429 reaches the
// gateway, in the isolate that read the headers and in the one that never did; with the
// steering off, the same traffic meets a 429. Everything on 127.0.0.1.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { GATEWAY_KEY, eventually, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

// Each request asks max_tokens 500 and costs the pool about 510 tokens: five fit in 3,000, the
// sixth does not. The OpenAI pool takes four requests. Both fill again a window after first use.
const WINDOW_MS = 15000;
const POOLS = {
  anth: { pool: { tokens: 3000, windowMs: WINDOW_MS } },
  oai: { pool: { requests: 4, windowMs: WINDOW_MS } },
};
const SERVED = { anth: "anth/claude-x", oai: "oai/gpt-x" };

function gatewayFor(mock, steer) {
  const config = gatewayConfig(mock, {
    providers: { anth: "anthropic", oai: "openai" },
    routes: { r: [{ provider: "anth", model: "claude-x" }, { provider: "oai", model: "gpt-x" }] },
    // The breakers stay out of it: a 429 here is the pool's, not an outage.
    breaker: { failureThreshold: 100, cooldownMs: 60000, maxCooldownMs: 60000 },
  });
  config.steerByCapacity = steer;
  return startGateway(config, { isolates: 2 });
}

/** The official SDK, through isolate `i`. */
function client(gw, i) {
  return new OpenAI({
    apiKey: GATEWAY_KEY, baseURL: "http://gateway/v1", maxRetries: 0, timeout: 20000,
    fetch: (url, init) => gw.fetch(i, url, init),
  });
}

async function ask(sdk, n) {
  const { response } = await sdk.chat.completions
    .create({ model: "r", max_tokens: 500, messages: [{ role: "user", content: `question ${n}` }] })
    .withResponse();
  return response.headers.get("x-served-by");
}

const refused = (mock) => mock.stats("anth").poolRefused + mock.stats("oai").poolRefused;

describe("steering by the providers' rate-limit headers, fleet-wide", { timeout: 120000 }, () => {
  let mock, gw;
  before(async () => {
    mock = await startMock({ config: { providers: POOLS } });
    gw = await gatewayFor(mock, true);
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("each request goes to a pool that can take it before any 429, in both isolates", async () => {
    const [one, two] = [client(gw, 0), client(gw, 1)];
    for (let n = 1; n <= 5; n++) assert.equal(await ask(one, n), SERVED.anth, `request ${n}`);
    // Isolate 0 read ~450 tokens left; its reading reaches the object with its verdicts' batch,
    // which goes out after a second, once a request (here a look at /health) is done.
    const health = (i) => gw.fetch(i, "http://gateway/health", { headers: { "x-api-key": GATEWAY_KEY } });
    await eventually(async () => {
      await (await health(0)).arrayBuffer();
      const view = JSON.parse((await gw.fleet("anth/claude-x", "view")).text);
      return view.pool?.tokens?.remaining < 510;
    }, 5000);
    // Isolate 1 never saw an answer of anth's. Its view of anth refreshes on its first
    // request (which may still go to anth: the pool holds 450 tokens, not 510, so that
    // request would be refused), so it asks after one refresh has landed: its health shows
    // the fleet's reading.
    await eventually(async () => {
      const h = await (await health(1)).json();
      const model = h.providers.find((p) => p.provider === "anth").models[0];
      return model.pool?.tokens?.remaining < 510;
    }, 5000);
    assert.equal(await ask(two, 6), SERVED.oai, "isolate 1 steered by isolate 0's reading");
    for (let n = 7; n <= 9; n++) assert.equal(await ask(n % 2 ? one : two, n), SERVED.oai, `request ${n}`);
    assert.equal(mock.stats("anth").total, 5, "anth was not asked past its pool");
    assert.equal(mock.stats("oai").total, 4);
    assert.equal(refused(mock), 0, "no 429 reached the gateway");

    // Both pools are spent now: nothing is skipped for capacity alone. The route's order
    // stands, anth refuses and the request fails over to oai, which refuses too: a 503 that
    // names both and says when to come back.
    await assert.rejects(ask(one, 10), (e) => e.status === 503 && /anth: HTTP 429.*oai: HTTP 429/.test(e.message)
      && Number(e.headers.get("retry-after")) > 0);
    assert.equal(refused(mock), 2);
  });

  test("a pool is back by itself once its window has passed", async () => {
    // The reset the headers named has passed: anth is first again without any request.
    await new Promise((r) => setTimeout(r, WINDOW_MS + 500));
    assert.equal(await ask(client(gw, 1), 11), SERVED.anth);
  });
});

describe("the same traffic with steerByCapacity off", { timeout: 60000 }, () => {
  let mock, gw;
  before(async () => {
    mock = await startMock({ config: { providers: POOLS } });
    gw = await gatewayFor(mock, false);
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("meets the 429 it could have seen coming", async () => {
    const one = client(gw, 0);
    for (let n = 1; n <= 5; n++) assert.equal(await ask(one, n), SERVED.anth);
    assert.equal(await ask(one, 6), SERVED.oai, "failed over after a 429");
    assert.equal(mock.stats("anth").poolRefused, 1);
  });
});
