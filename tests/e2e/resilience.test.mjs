// End to end, through the built Worker in workerd (Miniflare): no client can degrade the
// service other clients get, and the gateway keeps serving when its breaker Durable Object
// throws, hangs, fails or is missing. Each attack is tried with a valid client key; the route
// that uses the attacked provider as its fallback must stay served by it.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { eventually, GATEWAY_KEY, gatewayConfig, MOCK_KEY, startGateway, startMock } from "./gateway-harness.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function post(gw, path, body, headers = {}, isolate = 0) {
  const res = await gw.fetch(isolate, `http://gateway${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${GATEWAY_KEY}`, ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, headers: res.headers, text, body: json };
}

const openai = (gw, model, headers, extra = {}, isolate = 0) =>
  post(gw, "/v1/chat/completions", { model, messages: [{ role: "user", content: "hi" }], ...extra }, headers, isolate);
const anthropic = (gw, model, headers, extra = {}, isolate = 0) =>
  post(gw, "/v1/messages", { model, max_tokens: 64, messages: [{ role: "user", content: "hi" }], ...extra },
    { "anthropic-version": "2023-06-01", ...headers }, isolate);

async function health(gw, isolate = 0) {
  const res = await gw.fetch(isolate, "http://gateway/health", { headers: { "x-api-key": GATEWAY_KEY } });
  assert.equal(res.status, 200);
  const body = await res.json();
  return Object.fromEntries(body.providers.map((p) => [p.provider, p]));
}

/** `shared` serves route `main` and is the fallback of route `fb`, whose first entry is dead. */
function attackConfig(mock, extra = {}) {
  return {
    ...gatewayConfig(mock, {
      providers: { shared: "openai", dead: "openai", open: "openai" },
      routes: {
        main: [{ provider: "shared", model: "listed" }],
        fb: [{ provider: "dead", model: "d" }, { provider: "shared", model: "listed" }],
        anything: [{ provider: "open", model: "o" }],
      },
      breaker: { failureThreshold: 3, cooldownMs: 60000, maxCooldownMs: 60000 },
      retry: { maxAttempts: 1 },
    }),
    ...extra,
  };
}

async function assertFallbackHealthy(gw, mock) {
  await sleep(400); // upstream calls the attacks abandoned have landed at the mock
  const before = mock.stats("shared").total;
  for (let i = 0; i < 3; i++) {
    const r = await openai(gw, "fb");
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers.get("x-served-by"), "shared/listed");
  }
  assert.equal(mock.stats("shared").total, before + 3, "the fallback was called, not skipped");
  const h = (await health(gw)).shared;
  assert.equal(h.state, "closed");
  assert.equal(h.consecutiveFailures, 0);
}

describe("no client can degrade service for others", { timeout: 120000 }, () => {
  let mock, gw, open;
  before(async () => {
    mock = await startMock({
      config: {
        providers: {
          shared: { models: ["listed"] },
          dead: { faults: [{ mode: "status", status: 503 }] },
        },
      },
    });
    gw = await startGateway(attackConfig(mock));
    open = await startGateway(attackConfig(mock, { allowAnyModel: true }));
  });
  after(async () => {
    await gw?.close();
    await open?.close();
    await mock?.close();
  });

  test("provider/model names only listed models: a made-up one is a 404 in the client's format", async () => {
    const before = mock.stats("shared").total;
    for (let i = 0; i < 5; i++) {
      const o = await openai(gw, "shared/does-not-exist");
      assert.equal(o.status, 404, o.text);
      assert.equal(o.body.error.code, "model_not_found");
      const a = await anthropic(gw, "shared/does-not-exist");
      assert.equal(a.status, 404, a.text);
      assert.equal(a.body.type, "error");
      assert.equal(a.body.error.type, "not_found_error");
    }
    assert.equal(mock.stats("shared").total, before, "no made-up name reached the provider");
    assert.equal((await openai(gw, "shared/listed")).status, 200);
    await assertFallbackHealthy(gw, mock);
  });

  test("with allowAnyModel, the provider's 404 for a made-up model is the client's 404 and trips nothing", async () => {
    for (let i = 0; i < 5; i++) {
      const o = await openai(open, "shared/does-not-exist");
      assert.equal(o.status, 404, o.text);
      assert.ok(o.body.error, o.text);
      const a = await anthropic(open, "shared/also-made-up", {}, { stream: true });
      assert.equal(a.status, 404, a.text);
      assert.equal(a.body.type, "error");
    }
    await assertFallbackHealthy(open, mock);
  });

  test("a client's own x-request-timeout-ms: 1 is a 504 and trips nothing", async () => {
    mock.setFault("shared", { latencyMs: 300 });
    try {
      for (let i = 0; i < 5; i++) {
        const o = await openai(gw, "main", { "x-request-timeout-ms": "1" });
        assert.equal(o.status, 504, o.text);
        assert.ok(o.body.error, o.text);
        const a = await anthropic(gw, "main", { "x-request-timeout-ms": "1" }, { stream: true });
        assert.equal(a.status, 504, a.text);
        assert.equal(a.body.type, "error");
      }
    } finally {
      mock.reset("shared");
    }
    await assertFallbackHealthy(gw, mock);
  });

  test("clients that go away mid-stream trip nothing", async () => {
    mock.setFault("shared", { chunkDelayMs: 50, answerTokens: 40 });
    try {
      for (let i = 0; i < 5; i++) {
        const ctl = new AbortController();
        const res = await fetch(`${gw.url}/v1/chat/completions`, {
          method: "POST",
          signal: ctl.signal,
          headers: { "content-type": "application/json", authorization: `Bearer ${GATEWAY_KEY}` },
          body: JSON.stringify({ model: "main", stream: true, messages: [{ role: "user", content: "hi" }] }),
        });
        assert.equal(res.status, 200);
        const reader = res.body.getReader();
        await reader.read();
        ctl.abort();
        await reader.read().catch(() => {});
      }
      await sleep(300);
    } finally {
      mock.reset("shared");
    }
    await assertFallbackHealthy(gw, mock);
  });

  test("x-served-by is a valid header for any model name", async () => {
    for (const model of ["é\u0001x%", "a\r\nx-injected: 1", "tab\there", "中文"]) {
      const r = await openai(open, `open/${model}`);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers.get("x-injected"), null);
      const served = r.headers.get("x-served-by");
      assert.match(served, /^[\x21-\x7e]+$/);
      assert.equal(decodeURIComponent(served), `open/${model}`);
    }
  });
});

describe("the breaker Durable Object failing", { timeout: 180000 }, () => {
  let mock;
  const config = (m) => gatewayConfig(m, {
    providers: { flaky: "openai", backup: "anthropic" },
    routes: {
      r: [{ provider: "flaky", model: "f" }, { provider: "backup", model: "b" }],
      only: [{ provider: "backup", model: "b" }],
    },
    breaker: { failureThreshold: 3, cooldownMs: 60000, maxCooldownMs: 60000 },
    retry: { maxAttempts: 1 },
  });
  const outageLines = (gw) => gw.logs.filter((l) => l.includes("fleet breaker unreachable"));
  before(async () => {
    mock = await startMock({ config: { providers: { flaky: { faults: [{ mode: "status", status: 503 }] } } } });
  });
  after(async () => mock?.close());

  /** 12 requests while the objects fail: every one served, the sick provider skipped after three. */
  async function serveThrough(gw) {
    const before = mock.stats("flaky").total;
    const started = Date.now();
    for (let i = 0; i < 12; i++) {
      const r = await openai(gw, "r");
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers.get("x-served-by"), "backup/b");
    }
    assert.equal(mock.stats("flaky").total - before, 3, "the isolate-local breaker opened after three failures");
    assert.equal((await health(gw)).flaky.state, "open");
    return Date.now() - started;
  }

  // Isolates calling the owners directly: the isolate says it once. Through relays (the
  // owners out of reach behind them): each relay says it once of its model, and an isolate
  // whose relay had no view yet to answer with once of its own; never once per failed call.
  for (const relays of [false, true]) {
    for (const mode of ["throw", "hang", "fail"]) {
      const via = relays ? "through relays" : "called directly";
      test(`the object set to ${mode}, ${via}: served on local breakers, logged once, shared again when back`, async () => {
        const gw = await startGateway(config(mock), { isolates: 2, relays, vars: { FLEET_FAULTS: "on" } });
        try {
          for (const key of ["flaky/f", "backup/b"]) assert.equal((await gw.fleet(key, "fault", { mode })).status, 200);
          await serveThrough(gw);
          await sleep(1700); // past the view's TTL and a hung call's timeout: more failed calls
          assert.equal((await openai(gw, "r")).status, 200);
          await sleep(300);
          const lines = outageLines(gw).length;
          if (relays) assert.ok(lines >= 1 && lines <= 4, outageLines(gw).join("\n"));
          else assert.equal(lines, 1, outageLines(gw).join("\n"));
          // The object is back: the next calls reach it, that is said once, and what one
          // isolate reports, the other learns.
          for (const key of ["flaky/f", "backup/b"]) await gw.fleet(key, "fault", { mode: "none" });
          mock.setFault("backup", { faults: [{ mode: "status", status: 503 }] });
          try {
            await sleep(1700); // calls hung before are past their timeout
            for (let i = 0; i < 4; i++) await openai(gw, "only");
            await eventually(() => gw.logs.some((l) => l.includes("fleet breaker reachable again")), 5000);
            const view = await eventually(async () => {
              const v = JSON.parse((await gw.fleet("backup/b", "view")).text);
              return v.state.state !== "closed" && v;
            }, 5000);
            assert.equal(view.state.state, "open");
            await eventually(async () => (await health(gw, 1)).backup.state === "open", 5000);
          } finally {
            mock.setFault("backup", { faults: [] });
          }
          assert.equal(outageLines(gw).length, lines, "no new outage line once back");
        } finally {
          await gw.close();
        }
      });
    }
  }

  test("no BREAKERS binding at all: served on local breakers, logged once", async () => {
    const gw = await startGateway(config(mock), { fleet: false });
    try {
      await serveThrough(gw);
      await sleep(1200);
      for (let i = 0; i < 5; i++) assert.equal((await openai(gw, "r")).status, 200);
      await sleep(200);
      assert.equal(outageLines(gw).length, 1, outageLines(gw).join("\n"));
      assert.ok(!gw.logs.some((l) => l.includes(MOCK_KEY)), "no key in the log");
    } finally {
      await gw.close();
    }
  });

});
