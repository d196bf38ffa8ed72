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
import { eventually, GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

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

// The same limits across two isolates sharing the real client objects: what one isolate
// admitted counts against the other's next requests, in the headers the SDK reads and in its
// RateLimitError; the overshoot of a requests-per-minute limit under alternating requests is
// measured and printed.
describe("a client's limit through two isolates, official SDK", { timeout: 120000 }, () => {
  const FLEET_KEY = "e2e-fleet-key";
  const BURST_KEY = "e2e-burst-key";
  let mock, gw;
  const sdk = (apiKey, isolate) =>
    new OpenAI({
      apiKey,
      baseURL: "http://gateway/v1",
      maxRetries: 0,
      timeout: 20000,
      fetch: (url, init) => gw.fetch(isolate, url, init),
    });
  // What the client's object holds from every isolate, asked as one that used nothing.
  const fleetRequests = async (client) => {
    const used = { requests: { minute: 0, this: 0, last: 0 }, tokens: { minute: 0, this: 0, last: 0 }, inFlight: 0, spend: { day: 0, spent: 0 } };
    const { status, text } = await gw.fleet(`client:${client}`, "client", { client, holder: "probe", used });
    assert.equal(status, 200, text);
    const others = JSON.parse(text);
    return others.requests.this + others.requests.last;
  };
  before(async () => {
    mock = await startMock({ config: { providers: { p: {} } } });
    const config = gatewayConfig(mock, {
      providers: { p: "openai" },
      routes: { main: [{ provider: "p", model: "gpt" }] },
      retry: { maxAttempts: 1 },
    });
    config.gateway = {
      clientKeysEnv: ["GATEWAY_KEY"],
      clients: [
        { name: "fleet", keysEnv: ["FLEET_KEY"], limits: { requestsPerMinute: 5 } },
        { name: "burst", keysEnv: ["BURST_KEY"], limits: { requestsPerMinute: 10 } },
      ],
    };
    gw = await startGateway(config, { isolates: 2, bindings: { FLEET_KEY, BURST_KEY } });
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("one isolate's requests count against the other's, as the SDK sees it", async () => {
    const [a, b] = [sdk(FLEET_KEY, 0), sdk(FLEET_KEY, 1)];
    const ask = { model: "main", messages: user("fleet"), max_tokens: 8 };
    const remaining = async (client) => {
      const { response } = await client.chat.completions.create(ask).withResponse();
      return response.headers.get("x-ratelimit-remaining-requests");
    };
    for (const left of ["4", "3", "2"]) assert.equal(await remaining(a), left);
    await eventually(async () => (await fleetRequests("fleet")) === 3);
    // B's first request is its own count's to decide while it asks the object; its headers
    // count a's three once the answer is in (it usually is by the time the provider answers).
    assert.ok(["4", "1"].includes(await remaining(b)));
    await eventually(async () => (await fleetRequests("fleet")) === 4);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(await remaining(b), "0", "five, less a's three and b's two");
    await assert.rejects(b.chat.completions.create(ask), (e) => {
      assert.ok(e instanceof OpenAI.RateLimitError, `${e}`);
      assert.match(e.message, /"fleet" is over its 5 requests per minute/);
      assert.ok(Number(e.headers.get("retry-after")) >= 1);
      assert.equal(e.headers.get("x-ratelimit-remaining-requests"), "0");
      return true;
    });
  });

  test("the overshoot of 20 alternating requests against 10 a minute is bounded", async () => {
    const clients = [sdk(BURST_KEY, 0), sdk(BURST_KEY, 1)];
    let served = 0;
    const before = mock.received("p").length;
    for (let i = 0; i < 20; i++) {
      try {
        await clients[i % 2].chat.completions.create({ model: "main", messages: user(`burst ${i}`), max_tokens: 8 });
        served += 1;
      } catch (e) {
        assert.ok(e instanceof OpenAI.RateLimitError, `${e}`);
      }
    }
    console.log(`two isolates, 20 alternating requests against 10 a minute: ${served} served (overshoot ${served - 10})`);
    assert.equal(mock.received("p").length - before, served, "a refused request reaches no provider");
    assert.ok(served >= 10, `the limit is used: ${served}`);
    assert.ok(served <= 12, `at most one request per isolate past the limit: ${served}`);
  });
});

// Load shed by priority through the Worker, three client keys through the official SDK: while
// the route's only provider answers 529 to everything, a sheddable client's flood is refused
// at the gateway (InternalServerError 503, code load_shed, with retry-after) and stops
// reaching the provider, while the critical client's requests still reach it every time; the
// standard client is shed only after sheddable is gone.
describe("a sheddable flood during an outage, official SDK", { timeout: 120000 }, () => {
  const KEYS = { CRIT_KEY: "e2e-crit-key", STD_KEY: "e2e-std-key", BULK_KEY: "e2e-bulk-key" };
  let mock, gw;
  before(async () => {
    mock = await startMock({ config: { providers: { p: { faults: [{ mode: "status", status: 529 }] } } } });
    const config = gatewayConfig(mock, {
      providers: { p: "openai" },
      routes: { main: [{ provider: "p", model: "gpt" }] },
      retry: { maxAttempts: 1 },
      // A breaker that stays closed: every admitted request reaches the provider.
      breaker: { failureThreshold: 10000, cooldownMs: 1000, maxCooldownMs: 1000 },
    });
    config.gateway = {
      clientKeysEnv: ["GATEWAY_KEY"],
      clients: [
        { name: "crit", keysEnv: ["CRIT_KEY"], priority: "critical" },
        { name: "std", keysEnv: ["STD_KEY"] },
        { name: "bulk", keysEnv: ["BULK_KEY"], priority: "sheddable" },
      ],
    };
    gw = await startGateway(config, { bindings: KEYS });
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("sheddable is refused first and critical still reaches the provider", async () => {
    const sdk = (apiKey) => new OpenAI({ apiKey, baseURL: `${gw.url}/v1`, maxRetries: 0, timeout: 20000 });
    const [crit, std, bulk] = [sdk(KEYS.CRIT_KEY), sdk(KEYS.STD_KEY), sdk(KEYS.BULK_KEY)];
    const ask = { model: "main", messages: user("flood"), max_tokens: 8 };
    const outcome = async (client) => {
      try {
        await client.chat.completions.create(ask);
        return "ok";
      } catch (e) {
        if (e instanceof OpenAI.InternalServerError && e.status === 503 && e.code === "load_shed") {
          assert.ok(Number(e.headers.get("retry-after")) >= 1);
          assert.ok(Number(e.headers.get("retry-after-ms")) >= 1000);
          return "shed";
        }
        return "failed";
      }
    };
    const seconds = [];
    const start = Date.now();
    for (let s = 0; s < 7; s++) {
      const tally = { crit: { shed: 0, reached: 0 }, std: { shed: 0 }, bulk: { shed: 0, reached: 0 } };
      for (let i = 0; i < 4; i++) {
        const before = mock.received("p").length;
        assert.notEqual(await outcome(crit), "shed", "critical is never shed");
        tally.crit.reached += mock.received("p").length - before;
        if ((await outcome(std)) === "shed") tally.std.shed += 1;
        for (let j = 0; j < 2; j++) {
          const b = mock.received("p").length;
          if ((await outcome(bulk)) === "shed") tally.bulk.shed += 1;
          tally.bulk.reached += mock.received("p").length - b;
        }
      }
      seconds.push(tally);
      // The depth moves once a second.
      const next = start + (s + 1) * 1050;
      await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())));
    }
    console.log(`an outage, second by second: ${JSON.stringify(seconds)}`);
    assert.ok(seconds.every((t) => t.crit.reached === 4), "every critical request reached the provider");
    assert.equal(seconds[0].bulk.shed, 0, "nothing is shed before the first second is judged");
    assert.equal(seconds.at(-1).bulk.shed, 8, "at the end every sheddable request is shed");
    assert.equal(seconds.at(-1).bulk.reached, 0);
    const firstStd = seconds.findIndex((t) => t.std.shed > 0);
    const allBulk = seconds.findIndex((t) => t.bulk.shed === 8);
    assert.ok(firstStd === -1 || firstStd >= allBulk, `standard only after sheddable: ${JSON.stringify(seconds)}`);
    const health = await (await gw.fetch(0, "http://gateway/health", { headers: { "x-api-key": GATEWAY_KEY } })).json();
    const row = health.shedding.find((r) => r.route === "main");
    assert.ok(row.depth >= 1, JSON.stringify(row));
    assert.equal(health.clients.find((c) => c.name === "bulk").priority, "sheddable");
    assert.ok(health.clients.find((c) => c.name === "bulk").refused.shed > 0);
  });
});
