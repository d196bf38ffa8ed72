// End to end: the built Worker in workerd (Miniflare), its breaker Durable Object real, the
// fault-injecting mock provider on 127.0.0.1, the official `openai` and `@anthropic-ai/sdk`
// clients as clients. Build first (scripts/test-worker.sh does): build/index.js.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { eventually, GATEWAY_KEY, gatewayConfig, startGateway, startMock, tempDir } from "./gateway-harness.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function clients(url, key = GATEWAY_KEY) {
  return {
    openai: new OpenAI({ apiKey: key, baseURL: `${url}/v1`, maxRetries: 0, timeout: 20000 }),
    anthropic: new Anthropic({ apiKey: key, baseURL: url, maxRetries: 0, timeout: 20000 }),
  };
}

async function chat(openai, model, content = "hi") {
  const { data, response } = await openai.chat.completions
    .create({ model, messages: [{ role: "user", content }] })
    .withResponse();
  return { data, servedBy: response.headers.get("x-served-by"), attempts: Number(response.headers.get("x-attempts")) };
}

/** POST through one isolate of the gateway, as raw fetch (for shapes the SDKs refuse). */
async function post(gw, path, body, headers = {}, isolate = 0) {
  const res = await gw.fetch(isolate, `http://gateway${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${GATEWAY_KEY}`, ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

async function health(gw, isolate = 0) {
  const res = await gw.fetch(isolate, "http://gateway/health", { headers: { "x-api-key": GATEWAY_KEY } });
  assert.equal(res.status, 200);
  const body = await res.json();
  return Object.fromEntries(body.providers.map((p) => [p.provider, p]));
}

const total = (mock, name) => mock.stats(name).total;

describe("the failure table through the edge", { timeout: 120000 }, () => {
  let mock, gw, c;
  const backup = { provider: "backup", model: "backup-model" };
  before(async () => {
    mock = await startMock({
      config: {
        providers: {
          p429: { faults: [{ mode: "status", status: 429, retryAfter: 1, firstN: 1 }] },
          p429b: { faults: [{ mode: "status", status: 429, retryAfterMs: 600, firstN: 1 }] },
          "slow-o": { latencyMs: 200 },
          p500: { faults: [{ mode: "status", status: 500, firstN: 1 }] },
          p503: { faults: [{ mode: "status", status: 503 }] },
          hang: { faults: [{ mode: "hang" }] },
          stall: { faults: [{ mode: "stall", firstN: 1 }] },
          reset: { faults: [{ mode: "reset" }] },
          bad: { faults: [{ mode: "status", status: 400 }] },
          filter: { faults: [{ mode: "status", status: 400, error: "content_policy" }] },
          "ctx-small": { faults: [{ mode: "status", status: 400, error: "context_length_exceeded" }] },
          p401: { faults: [{ mode: "status", status: 401 }] },
        },
      },
    });
    const config = gatewayConfig(mock, {
      providers: {
        "healthy-o": "openai", "healthy-a": "anthropic", p429: "openai", p429b: "openai", "slow-o": "openai", p500: "anthropic", p503: "openai",
        fallback: "anthropic", hang: "openai", stall: "anthropic", reset: "openai", bad: "openai", filter: "openai",
        "ctx-small": "openai", "ctx-big": "anthropic", p401: "anthropic", backup: "openai",
      },
      routes: {
        default: [{ provider: "healthy-o", model: "gpt-mini" }],
        "claude-route": [{ provider: "healthy-a", model: "claude-haiku" }],
        r429: [{ provider: "p429", model: "m429" }, backup],
        r429b: [{ provider: "p429b", model: "m429b" }, backup],
        slow: [{ provider: "slow-o", model: "gpt-slow", timeoutMs: 400 }],
        r500: [{ provider: "p500", model: "m500" }, backup],
        r503: [{ provider: "p503", model: "m503" }, { provider: "fallback", model: "claude-fallback" }],
        rhang: [{ provider: "hang", model: "mhang", timeoutMs: 700 }, backup],
        rstall: [{ provider: "stall", model: "mstall", timeoutMs: 700 }, backup],
        rreset: [{ provider: "reset", model: "mreset" }, backup],
        r400: [{ provider: "bad", model: "mbad" }, backup],
        rfilter: [{ provider: "filter", model: "mfilter" }, backup],
        rctx: [{ provider: "ctx-small", model: "small-window" }, { provider: "ctx-big", model: "big-window" }],
        r401: [{ provider: "p401", model: "m401" }, backup],
      },
      breaker: { failureThreshold: 50, cooldownMs: 60000, maxCooldownMs: 60000 },
    });
    config.breakers = { p401: { failureThreshold: 1 } };
    gw = await startGateway(config);
    c = clients(gw.url);
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("healthy path, both SDKs, either provider format", async () => {
    const r = await chat(c.openai, "default", "hello");
    assert.equal(r.servedBy, "healthy-o/gpt-mini");
    assert.equal(r.attempts, 1);
    assert.match(r.data.choices[0].message.content, /hello/);
    assert.equal(r.data.model, "gpt-mini");
    // An Anthropic client served by an OpenAI-format provider, and the other way round.
    const { data, response } = await c.anthropic.messages
      .create({ model: "default", max_tokens: 64, messages: [{ role: "user", content: "hi there" }] })
      .withResponse();
    assert.equal(data.type, "message");
    assert.match(data.content[0].text, /hi there/);
    assert.equal(response.headers.get("x-served-by"), "healthy-o/gpt-mini");
    assert.ok(response.headers.get("x-request-id"));
    const o = await chat(c.openai, "claude-route");
    assert.equal(o.servedBy, "healthy-a/claude-haiku");
    assert.equal(o.data.object, "chat.completion");
  });

  test("429 with Retry-After: the same provider again after it", async () => {
    const t0 = Date.now();
    const r = await chat(c.openai, "r429");
    assert.ok(Date.now() - t0 >= 950, `waited ${Date.now() - t0} ms`);
    assert.equal(r.servedBy, "p429/m429");
    assert.equal(r.attempts, 2);
    assert.equal(total(mock, "p429"), 2);
  });

  test("a wait outlives another request whose earlier timer it could have shared", async () => {
    // workerd cancels the timers a request set when it ends. A timer shared across
    // requests (armed for the earliest deadline by whichever asked) would be the slow
    // request's 400 ms timeout; the 600 ms wait, later, would arm none and be left
    // without a timer when the slow request ends: workerd cancels such a request as hung.
    const slow = chat(c.openai, "slow"); // ~200 ms upstream, 400 ms attempt timeout
    await sleep(50);
    const waiting = chat(c.openai, "r429b"); // then a 600 ms Retry-After wait
    assert.equal((await slow).servedBy, "slow-o/gpt-slow");
    const r = await waiting;
    assert.equal(r.servedBy, "p429b/m429b");
    assert.equal(r.attempts, 2);
  });

  test("500 once, then success on the same provider", async () => {
    const r = await chat(c.openai, "r500");
    assert.equal(r.servedBy, "p500/m500");
    assert.equal(r.attempts, 2);
  });

  test("503 persistent: failover, the fallback's model reported", async () => {
    const r = await chat(c.openai, "r503");
    assert.equal(r.servedBy, "fallback/claude-fallback");
    assert.equal(r.data.model, "claude-fallback");
    assert.equal(r.attempts, 3);
    assert.equal(total(mock, "p503"), 2, "retried once, then failed over");
  });

  test("hang: the attempt times out and the chain fails over within the deadline", async () => {
    const t0 = Date.now();
    const r = await chat(c.openai, "rhang");
    const took = Date.now() - t0;
    assert.equal(r.servedBy, "backup/backup-model");
    assert.ok(took >= 650 && took < 5000, `took ${took} ms`);
    assert.equal(total(mock, "hang"), 1, "a timeout is not retried on the silent provider");
    await eventually(() => mock.stats("hang").aborted >= 1 || mock.stats("hang").inFlight === 0);
  });

  test("a stalled body: the attempt's time limit aborts it, and the same provider is retried", async () => {
    const t0 = Date.now();
    const r = await chat(c.openai, "rstall");
    const took = Date.now() - t0;
    assert.equal(r.servedBy, "stall/mstall");
    assert.equal(r.attempts, 2);
    assert.ok(took >= 650 && took < 5000, `took ${took} ms`);
    assert.equal(total(mock, "stall"), 2);
    await eventually(() => mock.stats("stall").aborted >= 1);
  });

  test("connection reset: retried, then failover", async () => {
    const r = await chat(c.openai, "rreset");
    assert.equal(r.servedBy, "backup/backup-model");
    assert.equal(total(mock, "reset"), 2);
  });

  test("400: not retried, not failed over", async () => {
    const before = total(mock, "backup");
    await assert.rejects(chat(c.openai, "r400"), (e) => e.status === 400);
    assert.equal(total(mock, "bad"), 1);
    assert.equal(total(mock, "backup"), before);
  });

  test("content-filter 400: the provider's reason returned as is", async () => {
    const before = total(mock, "backup");
    await assert.rejects(chat(c.openai, "rfilter"), (e) => {
      assert.equal(e.status, 400);
      assert.match(e.message, /content filtering policy/);
      assert.equal(e.code, "content_policy_violation");
      return true;
    });
    assert.equal(total(mock, "filter"), 1);
    assert.equal(total(mock, "backup"), before);
  });

  test("context length exceeded: the next entry, with the larger window, answers", async () => {
    const r = await chat(c.openai, "rctx");
    assert.equal(r.servedBy, "ctx-big/big-window");
    assert.equal(total(mock, "ctx-small"), 1);
  });

  test("401 from a provider: failover at once, and its breaker counts it", async () => {
    const r = await chat(c.openai, "r401");
    assert.equal(r.servedBy, "backup/backup-model");
    assert.equal(r.attempts, 2);
    const again = await chat(c.openai, "r401");
    assert.equal(again.servedBy, "backup/backup-model");
    assert.equal(again.attempts, 1, "its breaker (threshold 1) is open: skipped");
    assert.equal(total(mock, "p401"), 1);
    assert.equal((await health(gw)).p401.state, "open");
  });

  test("gateway auth: 401 in each client's format; both key headers work", async () => {
    const bad = clients(gw.url, "wrong-key");
    await assert.rejects(chat(bad.openai, "default"), (e) => e.status === 401 && e.error?.type === "authentication_error");
    await assert.rejects(
      bad.anthropic.messages.create({ model: "default", max_tokens: 5, messages: [{ role: "user", content: "x" }] }),
      (e) => e.status === 401 && e.error?.error?.type === "authentication_error",
    );
    const none = await gw.fetch(0, "http://gateway/v1/models");
    assert.equal(none.status, 401);
    const viaApiKey = await post(gw, "/v1/chat/completions", { model: "default", messages: [{ role: "user", content: "x" }] }, { authorization: "", "x-api-key": GATEWAY_KEY });
    assert.equal(viaApiKey.status, 200);
  });

  test("413 over the body limit, nothing forwarded; malformed JSON 400; unknown model 404; 405", async () => {
    const before = total(mock, "healthy-o");
    const huge = { model: "default", messages: [{ role: "user", content: "x".repeat(70 * 1024) }] };
    const tooBig = await post(gw, "/v1/chat/completions", huge);
    assert.equal(tooBig.status, 413);
    assert.equal(tooBig.body.error.code, "request_too_large");
    const tooBigA = await post(gw, "/v1/messages", { ...huge, max_tokens: 5 });
    assert.equal(tooBigA.status, 413);
    assert.equal(tooBigA.body.type, "error");
    const malformed = await post(gw, "/v1/chat/completions", "{\"model\": ");
    assert.equal(malformed.status, 400);
    assert.equal(malformed.body.error.type, "invalid_request_error");
    const malformedA = await post(gw, "/v1/messages", "[1,");
    assert.equal(malformedA.status, 400);
    assert.equal(malformedA.body.error.type, "invalid_request_error");
    const missing = await post(gw, "/v1/messages", { model: "default", max_tokens: 5 });
    assert.equal(missing.status, 400);
    await assert.rejects(chat(c.openai, "no-such-route"), (e) => e.status === 404);
    const wrong = await gw.fetch(0, "http://gateway/v1/chat/completions", { headers: { authorization: `Bearer ${GATEWAY_KEY}` } });
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.get("allow"), "POST");
    assert.equal(total(mock, "healthy-o"), before, "nothing was forwarded");
  });

  test("/v1/models lists the routes; /health reports every provider", async () => {
    const models = await c.openai.models.list();
    const ids = models.data.map((m) => m.id);
    assert.ok(ids.includes("default") && ids.includes("r503"), ids.join());
    const h = await health(gw);
    assert.equal(h.p503.lastFailure.kind, "server");
    assert.ok(h["healthy-o"].latencyMs.p50 >= 0);
    assert.ok(h.p503.errorRate > 0);
  });

  test("/metrics: the key required; this isolate's counters and its wasm memory", async () => {
    const refused = await gw.fetch(0, "http://gateway/metrics");
    assert.equal(refused.status, 401);
    const res = await gw.fetch(0, "http://gateway/metrics", { headers: { "x-api-key": GATEWAY_KEY } });
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.match(text, /^llm_gateway_attempts_total\{provider="p503",model="[^"]+",outcome="server"\} [1-9]/m);
    const memory = /^llm_gateway_wasm_memory_bytes (\d+)$/m.exec(text);
    assert.ok(memory, "no wasm memory gauge");
    // Whole 64 KiB pages, at least the first one.
    assert.ok(Number(memory[1]) >= 65536 && Number(memory[1]) % 65536 === 0, memory[1]);
    assert.ok(!text.includes(GATEWAY_KEY));
  });

  test("one JSON log line per request, no key in it", () => {
    const lines = gw.logs.filter((l) => l.includes('"msg":"request"'));
    assert.ok(lines.length >= 10);
    const parsed = lines.map((l) => JSON.parse(l.slice(l.indexOf("{"))));
    assert.ok(parsed.some((l) => l.servedBy === "fallback/claude-fallback" && l.attempts === 3 && l.latencyMs >= 0));
    assert.ok(!gw.logs.some((l) => l.includes(GATEWAY_KEY) || l.includes("mock-key")));
  });
});

describe("the breaker: opens, stops calls, recovers through one probe", { timeout: 60000 }, () => {
  let mock, gw, c;
  before(async () => {
    mock = await startMock({ config: { providers: { flap: { faults: [{ mode: "status", status: 503 }] } } } });
    const config = gatewayConfig(mock, {
      providers: { flap: "openai", backup: "anthropic" },
      routes: { default: [{ provider: "flap", model: "flap-model" }, { provider: "backup", model: "backup-model" }] },
      retry: { maxAttempts: 1 },
      breaker: { failureThreshold: 2, cooldownMs: 1500, maxCooldownMs: 3000 },
    });
    gw = await startGateway(config);
    c = clients(gw.url);
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("lifecycle", async () => {
    for (let i = 0; i < 2; i++) assert.equal((await chat(c.openai, "default")).servedBy, "backup/backup-model");
    assert.equal(total(mock, "flap"), 2);
    for (let i = 0; i < 5; i++) {
      const r = await chat(c.openai, "default");
      assert.equal(r.servedBy, "backup/backup-model");
      assert.equal(r.attempts, 1, "skipped without a call");
    }
    assert.equal(total(mock, "flap"), 2, "the open breaker stops calls");
    assert.equal((await health(gw)).flap.state, "open");

    // Cooldown over, still failing (slowly): six requests at once, one probe.
    await sleep(1600);
    mock.setFault("flap", { mode: "status", status: 503, latencyMs: 300 });
    const burst = await Promise.all(Array.from({ length: 6 }, () => chat(c.openai, "default")));
    assert.ok(burst.every((r) => r.servedBy === "backup/backup-model"));
    assert.equal(total(mock, "flap"), 3, "exactly one half-open probe");

    // It recovers; after the (doubled) cooldown one probe closes the breaker.
    mock.setFault("flap", { mode: "ok" });
    await sleep(3100);
    assert.equal((await chat(c.openai, "default")).servedBy, "flap/flap-model");
    for (let i = 0; i < 3; i++) assert.equal((await chat(c.openai, "default")).servedBy, "flap/flap-model");
    assert.equal(total(mock, "flap"), 7);
    assert.equal((await health(gw)).flap.state, "closed");
  });
});

describe("a burst meeting a dead provider: one call per request in flight, no retry", { timeout: 60000 }, () => {
  let mock, gw, c;
  before(async () => {
    // Slow enough that all eight calls are out before the first 503 is back; the
    // Retry-After makes every retry wait 300 ms, past the verdicts of the others.
    const dead = { mode: "status", status: 503, latencyMs: 150, retryAfterMs: 300 };
    mock = await startMock({ config: { providers: { dead: { faults: [dead] } } } });
    const config = gatewayConfig(mock, {
      providers: { dead: "openai", backup: "openai" },
      routes: { default: [{ provider: "dead", model: "dead-model" }, { provider: "backup", model: "backup-model" }] },
      retry: { maxAttempts: 3 },
      breaker: { failureThreshold: 3, cooldownMs: 60000, maxCooldownMs: 60000 },
    });
    gw = await startGateway(config);
    c = clients(gw.url);
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("eight at once: eight calls, none retried, then the breaker is open", async () => {
    const burst = await Promise.all(Array.from({ length: 8 }, () => chat(c.openai, "default")));
    assert.ok(burst.every((r) => r.servedBy === "backup/backup-model"));
    assert.ok(burst.every((r) => r.attempts === 2), "one call to dead, then backup");
    assert.equal(total(mock, "dead"), 8, "three attempts each would have been 24");
    assert.equal((await health(gw)).dead.state, "open");
    await chat(c.openai, "default");
    assert.equal(total(mock, "dead"), 8);
  });
});

describe("fleet state in the Durable Object", { timeout: 60000 }, () => {
  let mock;
  const routes = { default: [{ provider: "dead", model: "dead-model" }, { provider: "backup", model: "backup-model" }] };
  before(async () => {
    mock = await startMock({ config: { providers: { dead: { faults: [{ mode: "status", status: 503, latencyMs: 200 }] } } } });
  });
  after(async () => mock?.close());

  test("the breaker is still open after a restart with persisted storage", async () => {
    const tmp = tempDir();
    const config = gatewayConfig(mock, {
      providers: { dead: "openai", backup: "openai" }, routes, retry: { maxAttempts: 1 },
      breaker: { failureThreshold: 2, cooldownMs: 60000, maxCooldownMs: 60000 },
    });
    try {
      let gw = await startGateway(config, { persist: tmp.dir });
      let c = clients(gw.url);
      await chat(c.openai, "default");
      await chat(c.openai, "default");
      const openUntil = await eventually(async () => {
        const h = (await health(gw)).dead;
        return h.state === "open" && h.openUntil;
      });
      await sleep(300); // the transition's report reaches the object in the background
      await gw.close();
      const calls = total(mock, "dead");

      gw = await startGateway(config, { persist: tmp.dir });
      c = clients(gw.url);
      const h = await eventually(async () => {
        const d = (await health(gw)).dead;
        return d.state === "open" && d;
      });
      // The same opening read back from storage (the isolate's and the object's clocks
      // may differ by a millisecond), not a new one: that would end a minute from now.
      assert.ok(Math.abs(h.openUntil - openUntil) < 500, `${h.openUntil} vs ${openUntil}`);
      for (let i = 0; i < 3; i++) assert.equal((await chat(c.openai, "default")).servedBy, "backup/backup-model");
      assert.equal(total(mock, "dead"), calls, "no call to the dead provider after the restart");
      await gw.close();
    } finally {
      tmp.remove();
    }
  });

  test("two isolates share one object: one learns from the other, one probe between them", async () => {
    mock.reset("dead");
    const config = gatewayConfig(mock, {
      providers: { dead: "openai", backup: "openai" }, routes, retry: { maxAttempts: 1 },
      breaker: { failureThreshold: 2, cooldownMs: 1500, maxCooldownMs: 3000 },
    });
    const gw = await startGateway(config, { isolates: 2 });
    try {
      const start = total(mock, "dead");
      // Isolate a sees the failures; its breaker opens and tells the object.
      for (let i = 0; i < 2; i++) assert.equal((await post(gw, "/v1/chat/completions", { model: "default", messages: [{ role: "user", content: "x" }] }, {}, 0)).status, 200);
      assert.equal(total(mock, "dead"), start + 2);
      // Isolate b never called dead, yet learns within one refresh.
      await eventually(async () => (await health(gw, 1)).dead.state === "open");
      for (let i = 0; i < 3; i++) {
        const r = await post(gw, "/v1/chat/completions", { model: "default", messages: [{ role: "user", content: "x" }] }, {}, 1);
        assert.equal(r.headers.get("x-served-by"), "backup/backup-model");
      }
      assert.equal(total(mock, "dead"), start + 2, "b skipped the provider a found dead");
      // Cooldown over: requests through both isolates at once, one probe fleet-wide.
      await sleep(1700);
      const burst = [];
      for (let i = 0; i < 4; i++) {
        for (const iso of [0, 1]) burst.push(post(gw, "/v1/chat/completions", { model: "default", messages: [{ role: "user", content: "x" }] }, {}, iso));
      }
      const answers = await Promise.all(burst);
      assert.ok(answers.every((r) => r.status === 200));
      assert.equal(total(mock, "dead"), start + 3, "exactly one probe across both isolates");
    } finally {
      await gw.close();
    }
  });
});
