// The self-hosted gateway end to end: the built Worker run by `scripts/serve.sh` (the pinned
// workerd, the command the container image runs), over the fault-injecting mock provider, all
// on 127.0.0.1. The subset of the Miniflare suites that must hold wherever the Worker runs —
// gateway auth, failover, the breaker shared across requests, streaming with continuation,
// /health, /status, /metrics — and the breaker's and the spend cap's state surviving a
// SIGTERM and a restart on the same state directory. Build first (scripts/build-worker.sh).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { eventually, GATEWAY_KEY, gatewayConfig, MOCK_KEY, startMock, startSelfHosted, tempDir } from "./gateway-harness.mjs";
import { keyDigest } from "./mock-provider.mjs";
import { answer, anthropicStream, assertNeverTruncated, openaiStream } from "./stream-readers.mjs";

const HEALTHCHECK = fileURLToPath(new URL("../../scripts/selfhost-health.mjs", import.meta.url));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const CHAT = { model: "default", messages: [{ role: "user", content: "hello" }] };

async function post(gw, body, headers = { authorization: `Bearer ${GATEWAY_KEY}` }) {
  const res = await gw.fetch(0, "http://gateway/v1/chat/completions", {
    method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body),
  });
  return { status: res.status, servedBy: res.headers.get("x-served-by"), attempts: Number(res.headers.get("x-attempts")), body: await res.json() };
}

async function health(gw) {
  const res = await gw.fetch(0, "http://gateway/health", { headers: { "x-api-key": GATEWAY_KEY } });
  assert.equal(res.status, 200);
  return res.json();
}
const providers = (h) => Object.fromEntries(h.providers.map((p) => [p.provider, p]));

describe("self-hosted (scripts/serve.sh on workerd): the e2e subset", { timeout: 120000 }, () => {
  let mock, gw, openai, anthropic;
  before(async () => {
    mock = await startMock({ config: { providers: { dead: { faults: [{ mode: "status", status: 503 }] } } } });
    const config = gatewayConfig(mock, {
      providers: { dead: "openai", backup: "anthropic", ok: "openai", "cut-a": "anthropic" },
      routes: {
        default: [{ provider: "dead", model: "dead-model" }, { provider: "backup", model: "backup-model" }],
        ok: [{ provider: "ok", model: "m-ok" }],
        "cut-a": [{ provider: "cut-a", model: "claude-cut" }, { provider: "cut-a", model: "claude-cut-b" }],
      },
      retry: { maxAttempts: 1 },
      breaker: { failureThreshold: 2, cooldownMs: 60000, maxCooldownMs: 60000 },
    });
    gw = await startSelfHosted(config);
    openai = new OpenAI({ apiKey: GATEWAY_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0, timeout: 20000 });
    anthropic = new Anthropic({ apiKey: GATEWAY_KEY, baseURL: gw.url, maxRetries: 0, timeout: 20000 });
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  test("gateway auth: 401 without the key or with a wrong one, 200 with it (secrets from the environment)", async () => {
    assert.equal((await post(gw, { ...CHAT, model: "ok" }, {})).status, 401);
    assert.equal((await post(gw, { ...CHAT, model: "ok" }, { authorization: "Bearer wrong" })).status, 401);
    assert.equal((await gw.fetch(0, "http://gateway/health")).status, 401);
    const ok = await post(gw, { ...CHAT, model: "ok" });
    assert.equal(ok.status, 200);
    assert.equal(ok.servedBy, "ok/m-ok");
    // The mock saw the key the gateway holds only in its environment.
    assert.deepEqual(mock.received("ok").at(-1).keyDigests, { authorization: keyDigest(`Bearer ${MOCK_KEY}`) });
  });

  test("failover past a dead provider, then its breaker, shared by the requests after, skips it", async () => {
    for (let i = 0; i < 2; i++) {
      const r = await post(gw, CHAT);
      assert.equal(r.status, 200);
      assert.equal(r.servedBy, "backup/backup-model");
      assert.equal(r.attempts, 2, "dead, then backup");
    }
    assert.equal(mock.stats("dead").total, 2);
    // Requests in flight together and one after another all see the open breaker.
    const burst = await Promise.all(Array.from({ length: 6 }, () => post(gw, CHAT)));
    for (const r of burst) {
      assert.equal(r.servedBy, "backup/backup-model");
      assert.equal(r.attempts, 1, "skipped without a call");
    }
    assert.equal(mock.stats("dead").total, 2, "the open breaker stops calls");
    assert.equal(providers(await health(gw)).dead.state, "open");
  });

  test("streams: a healthy one to both SDKs, and one cut mid-answer continued", async () => {
    const o = await openaiStream(openai, "ok");
    assert.equal(o.error, null, String(o.error));
    assert.equal(o.text, answer("ok"));
    assert.equal(o.finish, "stop");
    assert.ok(o.usage?.completion_tokens > 0);
    mock.setFault("cut-a", { faults: [{ mode: "stream", cutAfterChunks: 2, firstN: 1 }] });
    const a = await anthropicStream(anthropic, "cut-a");
    assertNeverTruncated(a, answer("cut-a"));
    assert.equal(a.error, null, String(a.error));
    assert.equal(mock.stats("cut-a").total, 2, "continued by a second attempt");
    assert.equal(mock.stats("cut-a").lastRequest.body.messages.at(-1).role, "assistant", "with the prefill");
  });

  test("/health, /status, /status/data and /metrics", async () => {
    const h = await health(gw);
    assert.equal(h.status, "degraded", "one provider is open");
    const p = providers(h);
    assert.deepEqual(Object.keys(p).sort(), ["backup", "cut-a", "dead", "ok"]);
    assert.equal(p.dead.lastFailure.kind, "server");
    assert.ok(p.backup.latencyMs.p50 >= 0);
    const page = await gw.fetch(0, "http://gateway/status", { headers: { "x-api-key": GATEWAY_KEY } });
    assert.equal(page.status, 200);
    assert.match(page.headers.get("content-type"), /text\/html/);
    assert.match(await page.text(), /<html/i);
    const data = await gw.fetch(0, "http://gateway/status/data", { headers: { "x-api-key": GATEWAY_KEY } });
    assert.equal(data.status, 200);
    assert.ok(Array.isArray((await data.json()).providers));
    assert.equal((await gw.fetch(0, "http://gateway/metrics")).status, 401);
    const res = await gw.fetch(0, "http://gateway/metrics", { headers: { "x-api-key": GATEWAY_KEY } });
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.match(text, /^llm_gateway_attempts_total\{provider="dead",model="[^"]+",outcome="server"\} [1-9]/m);
    assert.match(text, /^llm_gateway_wasm_memory_bytes \d+$/m);
    assert.ok(!text.includes(GATEWAY_KEY));
  });

  test("the image's HEALTHCHECK command: healthy with the client key from GATEWAY_KEY, not without", async () => {
    const health = (env) => new Promise((resolve) => {
      execFile(process.execPath, [HEALTHCHECK, `${gw.url}/health`], { env: { PATH: process.env.PATH, ...env } },
        (err, stdout) => resolve({ code: err ? err.code : 0, stdout }));
    });
    assert.deepEqual(await health({ GATEWAY_KEY }), { code: 0, stdout: "health: 200 degraded\n" });
    assert.equal((await health({})).code, 1);
    assert.equal((await health({ HEALTHCHECK_KEY_ENV: "OTHER", OTHER: GATEWAY_KEY })).code, 0);
  });

  test("logs: one JSON line per request on stdout, no key in them", async () => {
    await eventually(() => gw.logs.filter((l) => l.includes('"msg":"request"')).length >= 10);
    const lines = gw.logs.filter((l) => l.includes('"msg":"request"')).map((l) => JSON.parse(l.slice(l.indexOf("{"))));
    assert.ok(lines.some((l) => l.servedBy === "backup/backup-model" && l.attempts === 2));
    assert.ok(!gw.logs.some((l) => l.includes(GATEWAY_KEY) || l.includes("mock-key")));
  });
});

describe("self-hosted: state on disk survives a restart", { timeout: 120000 }, () => {
  let mock;
  before(async () => {
    mock = await startMock({ config: { providers: { dead: { faults: [{ mode: "status", status: 503 }] } } } });
  });
  after(async () => mock?.close());

  test("the open breaker and the spend cap's total, after SIGTERM and a new process on the same state", async () => {
    const tmp = tempDir();
    // 1 token in, 3 out per mock answer at $1000 per million each: $0.004 a request.
    const models = { "up-model": { inputPricePerMtok: 1000, outputPricePerMtok: 1000 } };
    const config = gatewayConfig(mock, {
      providers: { dead: "openai", backup: "openai", up: { kind: "openai", models } },
      routes: {
        default: [{ provider: "dead", model: "dead-model" }, { provider: "backup", model: "backup-model" }],
        capped: [{ provider: "up", model: "up-model" }],
      },
      retry: { maxAttempts: 1 },
      breaker: { failureThreshold: 2, cooldownMs: 120000, maxCooldownMs: 120000 },
    });
    config.cost = { routes: { capped: { dailyBudgetUsd: 100 } } };
    const gw = await startSelfHosted(config, { state: tmp.dir });
    try {
      for (let i = 0; i < 2; i++) assert.equal((await post(gw, CHAT)).servedBy, "backup/backup-model");
      for (let i = 0; i < 3; i++) assert.equal((await post(gw, { ...CHAT, model: "capped" })).status, 200);
      const before = await eventually(async () => {
        const h = await health(gw);
        const dead = providers(h).dead;
        const spend = h.spend?.[0];
        return dead.state === "open" && spend?.spentUsd >= 0.012 - 1e-9 && { openUntil: dead.openUntil, spentUsd: spend.spentUsd };
      });
      await sleep(300); // the breaker's report reaches its object in the background
      const calls = mock.stats("dead").total;
      const pid = gw.pid;

      await gw.restart();
      assert.equal(gw.exitCode, 0, "SIGTERM: a clean exit");
      assert.notEqual(gw.pid, pid, "a new process");
      const store = path.join(tmp.dir, "durable-objects", "resilient-llm-BreakerStore");
      assert.ok(existsSync(store) && readdirSync(store).some((f) => f.endsWith(".sqlite")), "SQLite files in the state directory");

      // The same opening, read back from disk (not a new one, which would end later).
      const after = await eventually(async () => {
        const dead = providers(await health(gw)).dead;
        return dead.state === "open" && dead;
      });
      assert.ok(Math.abs(after.openUntil - before.openUntil) < 500, `${after.openUntil} vs ${before.openUntil}`);
      for (let i = 0; i < 3; i++) {
        const r = await post(gw, CHAT);
        assert.equal(r.servedBy, "backup/backup-model");
        assert.equal(r.attempts, 1);
      }
      assert.equal(mock.stats("dead").total, calls, "no call to the dead provider after the restart");
      // The day's spending carried over: one more request adds to it, not starts it.
      assert.equal((await post(gw, { ...CHAT, model: "capped" })).status, 200);
      const spent = await eventually(async () => {
        const s = (await health(gw)).spend?.[0]?.spentUsd;
        return s >= before.spentUsd + 0.004 - 1e-9 && s;
      });
      assert.ok(Math.abs(spent - (before.spentUsd + 0.004)) < 1e-6, `spent ${spent} after ${before.spentUsd}`);
      // No secret went to disk: the generated configuration names them only.
      const capnp = readFileSync(path.join(tmp.dir, "workerd.capnp"), "utf8");
      assert.ok(capnp.includes('(name = "GATEWAY_KEY", fromEnvironment = "GATEWAY_KEY")'));
      assert.ok(!capnp.includes(GATEWAY_KEY) && !capnp.includes('"mock-key"'));
    } finally {
      await gw.close();
      tmp.remove();
    }
  });
});
