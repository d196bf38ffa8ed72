#!/usr/bin/env node
// The edge benchmark (issue 5): the built Worker (build/index.js + index_bg.wasm, from
// scripts/build-worker.sh) served by Miniflare with its real breaker Durable Object, in front
// of the fault-injecting mock provider (tests/e2e/mock-provider.mjs, in this process). A
// measurement, not a test: it prints figures and PASS/MISS against the targets, and
// exits non-zero only on errors (a healthy target answering anything but 200, a timeout,
// a set-up failure), never because a target was missed.
//
//   node scripts/bench-worker.mjs [--requests N] [--concurrency C] [--rounds R]
//                                 [--warmup W] [--max-seconds S] [--json]
//   (scripts/bench-worker.sh sets up the tools, builds the Worker when stale, then runs this)
//
// Four targets, all plain HTTP/1.1 POSTs of one OpenAI chat request from Node (keep-alive,
// one connection pool per target), all on 127.0.0.1:
//   (a) the mock provider directly;
//   (b) a trivial pass-through JS worker in Miniflare (fetch to the mock, response returned as
//       is): the runtime's floor;
//   (c) resilient-llm, route `healthy` = [healthy];
//   (d) resilient-llm, route `dead-first` = [dead (always 503), backup]: the breaker of `dead`
//       opens after the threshold and the chain skips it, with one probe per cooldown;
//   (e) a reference, not a product: a hand-written JS worker doing only the I/O any gateway
//       with these semantics must do (parse the request to route it, a new upstream request
//       with its own headers under an attempt timer, the answer read and checked, a new
//       response, one JSON log line), with no retry, breaker or translation;
//   (f) the same as (e) as a Rust/wasm Worker (benches/edge-reference, built by
//       scripts/bench-worker.sh), doing its I/O the way resilient-llm does: what that I/O costs
//       from Rust/wasm, apart from resilient-llm's own work.
// Interleaved: each round runs R requests against every target in turn (the order rotates
// each round), so machine noise hits all of them alike. Each target is first warmed up with W
// requests (for (d), this is where the breaker opens). Throughput = requests / wall time of
// the target's rounds; p50/p99 over all its measured requests; CPU per request:
//   Node    = this process (load generator + mock provider + Miniflare's Node side, which
//             reads the workers' log lines), from process.cpuUsage();
//   workerd = the target's own workerd child process (runtime + Worker + Durable Object; (b)
//             and (c)/(d) each have their own Miniflare, so their own process), utime+stime
//             from /proc/<pid>/stat, in clock ticks (usually 10 ms).
import http from "node:http";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";
import { GATEWAY_KEY, gatewayConfig, startMock } from "../tests/e2e/gateway-harness.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const COMPATIBILITY_DATE = "2026-08-01";
const REQUEST_TIMEOUT_MS = 10_000;

// The gateway's policies for (c) and (d). A fixed cooldown (max = base), so "one probe per
// cooldown" is exactly what the breaker allows; retries as in the e2e tests' default.
const BREAKER = { failureThreshold: 3, cooldownMs: 5000, maxCooldownMs: 5000 };
const RETRY = { maxAttempts: 2, baseDelayMs: 50, maxDelayMs: 2000 };

// The targets.
const THROUGHPUT_FLOOR_RATIO = 0.8; // (c) req/s >= 0.8 x (b)
const DEAD_P50_RATIO = 1.05; //        (d) p50 <= 1.05 x (c)

// ---------------------------------------------------------------- options

class UsageError extends Error {}

function parseArgs(argv) {
  const opts = { requests: 2000, concurrency: 8, rounds: 10, warmup: 500, maxSeconds: 300, json: false };
  const limits = { requests: [1, 100_000], concurrency: [1, 256], rounds: [1, 100], warmup: [0, 100_000], maxSeconds: [10, 3600] };
  const flags = { "--requests": "requests", "--concurrency": "concurrency", "--rounds": "rounds", "--warmup": "warmup", "--max-seconds": "maxSeconds" };
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    let inline;
    if (arg.includes("=")) [arg, inline] = [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)];
    if (arg === "--json") opts.json = true;
    else if (arg === "--help" || arg === "-h") opts.help = true;
    else if (Object.hasOwn(flags, arg)) {
      const raw = inline ?? argv[++i];
      if (raw === undefined) throw new UsageError(`${arg} needs a value`);
      const key = flags[arg];
      const n = Number(raw);
      const [lo, hi] = limits[key];
      if (!Number.isInteger(n) || n < lo || n > hi) throw new UsageError(`${arg}: a whole number in ${lo}..${hi}`);
      opts[key] = n;
    } else throw new UsageError(`unknown argument ${argv[i]} (try --help)`);
  }
  return opts;
}

// ---------------------------------------------------------------- CPU of processes

const CLK_TCK = (() => {
  try {
    const n = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
    return Number.isInteger(n) && n > 0 ? n : 100;
  } catch {
    return 100;
  }
})();

/** { ppid, comm, ticks (utime+stime) } of a process, or null when it is gone or /proc is not there. */
function procStat(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    const open = s.indexOf("(");
    const close = s.lastIndexOf(")");
    const rest = s.slice(close + 2).split(" "); // rest[0] is field 3 (state)
    return { comm: s.slice(open + 1, close), ppid: Number(rest[1]), ticks: Number(rest[11]) + Number(rest[12]) };
  } catch {
    return null;
  }
}

/** The PIDs of this process's children named `workerd` (Miniflare spawns workerd directly). */
function workerdChildren() {
  if (!existsSync("/proc")) return [];
  const out = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const st = procStat(name);
    if (st && st.ppid === process.pid && st.comm === "workerd") out.push(Number(name));
  }
  return out;
}

/** CPU time of `pid` in ms, or null. */
function procCpuMs(pid) {
  const st = pid ? procStat(pid) : null;
  return st ? (st.ticks * 1000) / CLK_TCK : null;
}

// ---------------------------------------------------------------- the servers

const FLOOR_SCRIPT = `
export default {
  async fetch(request, env) {
    return fetch(env.UPSTREAM, { method: request.method, headers: request.headers, body: request.body });
  },
};
`;

// (e): what reading, checking and logging cost in this runtime before any resilience logic.
const REFERENCE_SCRIPT = `
export default {
  async fetch(request, env) {
    const started = Date.now();
    let body;
    try {
      body = JSON.parse(await request.text());
    } catch {
      return Response.json({ error: { message: "malformed JSON", type: "invalid_request_error" } }, { status: 400 });
    }
    if (typeof body.model !== "string" || !Array.isArray(body.messages)) {
      return Response.json({ error: { message: "model and messages are required", type: "invalid_request_error" } }, { status: 400 });
    }
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), 30000);
    try {
      const upstream = await fetch(env.UPSTREAM, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer " + env.KEY },
        body: JSON.stringify({ model: "bench-model", messages: body.messages, max_completion_tokens: body.max_tokens }),
        signal: abort.signal,
      });
      const answer = JSON.parse(await upstream.text());
      if (upstream.status !== 200 || answer.error || !Array.isArray(answer.choices)) {
        return Response.json({ error: { message: "upstream failed", type: "api_error" } }, { status: 502 });
      }
      console.log(JSON.stringify({ level: "info", msg: "request", route: body.model, servedBy: "healthy/bench-model",
        attempts: 1, status: 200, latencyMs: Date.now() - started }));
      return new Response(JSON.stringify(answer), {
        headers: { "content-type": "application/json", "x-served-by": "healthy/bench-model", "x-attempts": "1" },
      });
    } finally {
      clearTimeout(timer);
    }
  },
};
`;

/** A drain for the workers' stdout/stderr that keeps only the last lines (for error reports). */
function stdio(tail) {
  return (stdout, stderr) => {
    for (const s of [stdout, stderr]) {
      s.setEncoding("utf8");
      s.on("data", (chunk) => {
        tail.push(chunk);
        if (tail.length > 20) tail.shift();
      });
    }
  };
}

/** Starts a Miniflare and returns it with its URL and the PID of the workerd it spawned. */
async function startMiniflare(options) {
  const before = new Set(workerdChildren());
  const tail = [];
  const mf = new Miniflare({ host: "127.0.0.1", port: 0, cf: false, handleRuntimeStdio: stdio(tail), ...options });
  let url;
  try {
    url = new URL((await mf.ready).toString());
  } catch (err) {
    await mf.dispose().catch(() => {});
    throw err;
  }
  const spawned = workerdChildren().filter((pid) => !before.has(pid));
  return { mf, url, pid: spawned.length === 1 ? spawned[0] : null, tail };
}

/** Starts the mock and both Miniflares into `servers` (filled as they start, for clean-up). */
async function startServers(servers) {
  const mock = await startMock({
    config: {
      providers: {
        direct: {},
        floor: {},
        reference: {},
        "reference-rust": {},
        healthy: {},
        backup: {},
        dead: { faults: [{ mode: "status", status: 503 }] },
      },
    },
  });
  servers.mock = mock;
  const config = gatewayConfig(mock, {
    providers: { healthy: "openai", dead: "openai", backup: "openai" },
    routes: {
      healthy: [{ provider: "healthy", model: "bench-model" }],
      "dead-first": [{ provider: "dead", model: "bench-model" }, { provider: "backup", model: "bench-model" }],
    },
    breaker: BREAKER,
    retry: RETRY,
  });
  servers.config = config;
  // A built Rust/wasm worker's modules.
  const wasm = (file) => ({ scriptPath: path.join(ROOT, file), modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"] }] });
  // A worker that calls the mock's provider `name` (UPSTREAM, with KEY as its key).
  const worker = (name, source) => startMiniflare({
    modules: true,
    compatibilityDate: COMPATIBILITY_DATE,
    bindings: { UPSTREAM: `${mock.providerUrl(name)}/v1/chat/completions`, KEY: "mock-key" },
    ...source,
  });
  servers.floor = await worker("floor", { script: FLOOR_SCRIPT });
  servers.reference = await worker("reference", { script: REFERENCE_SCRIPT });
  servers.referenceRust = await worker("reference-rust", wasm("benches/edge-reference/build/index.js"));
  servers.gateway = await startMiniflare({
    modules: true,
    ...wasm("build/index.js"),
    compatibilityDate: COMPATIBILITY_DATE,
    bindings: { CONFIG: JSON.stringify(config), MOCK_API_KEY: "mock-key", GATEWAY_KEY },
    durableObjects: { BREAKERS: { className: "BreakerStore", useSQLite: true } },
    durableObjectsPersist: false,
  });
  return servers;
}

// ---------------------------------------------------------------- the client

function chatBody(model) {
  return JSON.stringify({ model, messages: [{ role: "user", content: "benchmark: say something short" }] });
}

/** One POST; resolves with status, headers and the whole body once it has been read. */
function post(agent, url, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({
      agent,
      host: url.hostname,
      port: url.port,
      path: url.pathname,
      method: "POST",
      headers: {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
        authorization: `Bearer ${GATEWAY_KEY}`,
      },
    }, (res) => {
      const parts = [];
      res.on("data", (b) => parts.push(b));
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(parts) }));
      res.on("error", reject);
    });
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error(`no answer in ${REQUEST_TIMEOUT_MS} ms`)));
    req.on("error", reject);
    req.end(body);
  });
}

function makeTarget({ key, label, url, model, servedBy, pid, concurrency }) {
  const body = chatBody(model);
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  return {
    key,
    label,
    pid,
    agent,
    send: () => post(agent, url, body),
    /** Why an answer is wrong, or null. */
    check(res) {
      if (res.status !== 200) return `HTTP ${res.status}: ${res.body.toString("utf8").slice(0, 200)}`;
      const by = res.headers["x-served-by"];
      if (servedBy && !(typeof by === "string" && by.startsWith(`${servedBy}/`))) return `x-served-by ${by}, expected ${servedBy}/…`;
      // More than one attempt: in (d), the dead provider was called before the backup.
      if (Number(res.headers["x-attempts"] ?? 1) > 1) this.multiAttempt += 1;
      return null;
    },
    rounds: [],
    latencies: [],
    errors: [],
    requests: 0,
    multiAttempt: 0,
  };
}

/** Runs `n` requests against `target`, `c` at a time; returns the round's figures. */
async function runRound(target, n, c, deadline) {
  const latencies = [];
  const errors = [];
  let started = 0;
  const cpu0 = process.cpuUsage();
  const w0 = procCpuMs(target.pid);
  const t0 = performance.now();
  const worker = async () => {
    while (started < n && Date.now() < deadline) {
      started += 1;
      const s = performance.now();
      try {
        const res = await target.send();
        const why = target.check(res);
        if (why) errors.push(why);
        else latencies.push(performance.now() - s);
      } catch (err) {
        errors.push(String(err?.message ?? err));
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(c, n) }, worker));
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const w1 = procCpuMs(target.pid);
  return {
    requests: started,
    wallMs,
    nodeCpuMs: (cpu.user + cpu.system) / 1000,
    workerdCpuMs: w0 === null || w1 === null ? null : w1 - w0,
    latencies,
    errors,
  };
}

// ---------------------------------------------------------------- figures

function percentile(sorted, q) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? null : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function summarize(t) {
  const sorted = [...t.latencies].sort((a, b) => a - b);
  const requests = t.rounds.reduce((a, r) => a + r.requests, 0);
  const wallMs = t.rounds.reduce((a, r) => a + r.wallMs, 0);
  const nodeCpuMs = t.rounds.reduce((a, r) => a + r.nodeCpuMs, 0);
  const workerd = t.rounds.every((r) => r.workerdCpuMs !== null) && t.pid
    ? t.rounds.reduce((a, r) => a + r.workerdCpuMs, 0) : null;
  return {
    target: t.key,
    label: t.label,
    requests,
    errors: t.errors.length,
    rps: requests / (wallMs / 1000),
    roundRps: t.rounds.map((r) => r.requests / (r.wallMs / 1000)),
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    nodeCpuMsPerReq: nodeCpuMs / requests,
    workerdCpuMsPerReq: workerd === null ? null : workerd / requests,
    workerdPid: t.pid,
  };
}

const fmt = (x, digits = 2) => (x === null || x === undefined || Number.isNaN(x) ? "n/a" : x.toFixed(digits));
const verdict = (ok) => (ok ? "PASS" : "MISS");

function report(opts, result) {
  const { summaries: s, ratios, dead } = result;
  const lines = [];
  lines.push(`Edge benchmark: ${opts.rounds} interleaved rounds x ${opts.requests} requests per target, concurrency ${opts.concurrency}, warm-up ${opts.warmup} per target (${fmt(result.wallSeconds, 1)} s in all)`);
  lines.push("");
  const head = ["target", "req/s", "p50 ms", "p99 ms", "Node CPU ms/req", "workerd CPU ms/req"];
  const rows = Object.values(s).map((x) => [`(${x.target}) ${x.label}`, fmt(x.rps, 0), fmt(x.p50Ms), fmt(x.p99Ms), fmt(x.nodeCpuMsPerReq, 3), fmt(x.workerdCpuMsPerReq, 3)]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  lines.push(line(head));
  for (const r of rows) lines.push(line(r));
  lines.push("");
  lines.push("Node CPU = this process: load generator + mock provider + Miniflare's Node side (process.cpuUsage).");
  lines.push(`workerd CPU = the target's own workerd process: runtime + worker (+ Durable Object) (/proc/<pid>/stat utime+stime, 1/${CLK_TCK} s ticks).`);
  if (s.b.workerdCpuMsPerReq !== null && s.c.workerdCpuMsPerReq !== null) {
    lines.push(`resilient-llm's own workerd CPU over the floor: ${fmt(s.c.workerdCpuMsPerReq - s.b.workerdCpuMsPerReq, 3)} ms/req healthy, ${fmt(s.d.workerdCpuMsPerReq - s.b.workerdCpuMsPerReq, 3)} ms/req primary dead.`);
    if (s.e.workerdCpuMsPerReq !== null && s.f.workerdCpuMsPerReq !== null) {
      lines.push(`The gateway I/O alone: from JS (e) ${fmt(s.e.workerdCpuMsPerReq - s.b.workerdCpuMsPerReq, 3)} ms/req over the floor, ${fmt(s.e.rps / s.b.rps)} of its throughput;`);
      lines.push(`  from Rust/wasm (f) ${fmt(s.f.workerdCpuMsPerReq - s.b.workerdCpuMsPerReq, 3)} ms/req over the floor, ${fmt(s.f.rps / s.b.rps)} of its throughput.`);
      lines.push(`resilient-llm (c) adds ${fmt(s.c.workerdCpuMsPerReq - s.f.workerdCpuMsPerReq, 3)} ms/req to (f), its own work, and reaches ${fmt(s.c.rps / s.f.rps)} of (f)'s throughput.`);
    }
  }
  lines.push("");
  lines.push("Targets (issue 5):");
  const t = ratios.throughput;
  lines.push(`  (c)/(b) throughput      ${fmt(t.value)}  target >= ${THROUGHPUT_FLOOR_RATIO}   ${verdict(t.pass)}   (per round ${fmt(t.roundMin)}..${fmt(t.roundMax)})`);
  const p = ratios.deadP50;
  lines.push(`  (d)/(c) p50             ${fmt(p.value)}  target <= ${DEAD_P50_RATIO}  ${verdict(p.pass)}   (${fmt(s.d.p50Ms)} vs ${fmt(s.c.p50Ms)} ms)`);
  lines.push(`  dead-provider calls     ${fmt(dead.perThousand, 1)} per 1,000 (d) requests; allowance ${fmt(dead.allowancePerThousand, 1)}   ${verdict(dead.pass)}`);
  const after = dead.calls - dead.callsInWarmup;
  lines.push(`      ${dead.calls} calls at the mock in ${dead.requests} requests of (d) over ${fmt(dead.durationMs / 1000, 1)} s (retry maxAttempts ${dead.maxAttempts}):`);
  lines.push(`      ${dead.callsInWarmup} while the breaker opened (${dead.reachedInWarmup} requests reached the dead provider, ${dead.callsInWarmup - dead.reachedInWarmup} retries),`);
  lines.push(`      ${after} after it (${dead.reachedAfter} requests reached it: probes, ${after - dead.reachedAfter} retries);`);
  lines.push(`      allowance = threshold ${dead.threshold} + ceil(${fmt(dead.durationMs / 1000, 1)} s / ${dead.cooldownMs / 1000} s cooldown) = ${dead.allowance} calls.`);
  lines.push(`      The breaker counts requests, each after its retries (DESIGN §3), and cannot take back the calls of the`);
  lines.push(`      ${opts.concurrency} requests in flight when the first failure comes back: the bound it keeps is`);
  lines.push(`      max(threshold x attempts, concurrency) + one probe per cooldown = ${dead.concurrencyAllowance}   ${verdict(dead.calls <= dead.concurrencyAllowance)}`);
  return lines.join("\n");
}

// ---------------------------------------------------------------- main

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`bench-worker: ${err.message}\n`);
    return 2;
  }
  if (opts.help) {
    const header = readFileSync(new URL(import.meta.url), "utf8").split("\nimport ")[0];
    process.stdout.write(`${header.split("\n").slice(1).map((l) => l.replace(/^\/\/ ?/, "")).join("\n")}\n`);
    return 0;
  }
  if (!existsSync(path.join(ROOT, "build/index.js")) || !existsSync(path.join(ROOT, "build/index_bg.wasm"))) {
    process.stderr.write("bench-worker: build/index.js is missing: run scripts/build-worker.sh (or scripts/bench-worker.sh)\n");
    return 2;
  }
  if (!existsSync(path.join(ROOT, "benches/edge-reference/build/index.js"))) {
    process.stderr.write("bench-worker: benches/edge-reference/build/index.js is missing: run scripts/bench-worker.sh, which builds it\n");
    return 2;
  }
  const progress = (msg) => process.stderr.write(`bench-worker: ${msg}\n`);
  const startedAt = Date.now();
  const deadline = startedAt + opts.maxSeconds * 1000;
  // A hard stop in case something hangs past every per-request timeout.
  const watchdog = setTimeout(() => {
    process.stderr.write(`bench-worker: error: still running after ${opts.maxSeconds + 30} s, giving up\n`);
    process.exit(3);
  }, (opts.maxSeconds + 30) * 1000);

  const servers = {};
  let targets = [];
  try {
    await startServers(servers);
    const { mock, floor, reference, referenceRust, gateway } = servers;
    const c = opts.concurrency;
    const v1 = (u) => new URL("/v1/chat/completions", u);
    targets = [
      makeTarget({ key: "a", label: "mock provider direct", url: new URL(`${mock.providerUrl("direct")}/v1/chat/completions`), model: "bench-model", pid: null, concurrency: c }),
      makeTarget({ key: "b", label: "pass-through JS worker (floor)", url: v1(floor.url), model: "bench-model", pid: floor.pid, concurrency: c }),
      makeTarget({ key: "c", label: "resilient-llm healthy", url: v1(gateway.url), model: "healthy", servedBy: "healthy", pid: gateway.pid, concurrency: c }),
      makeTarget({ key: "d", label: "resilient-llm primary dead", url: v1(gateway.url), model: "dead-first", servedBy: "backup", pid: gateway.pid, concurrency: c }),
      makeTarget({ key: "e", label: "reference: JS worker, gateway I/O only", url: v1(reference.url), model: "healthy", servedBy: "healthy", pid: reference.pid, concurrency: c }),
      makeTarget({ key: "f", label: "reference: Rust/wasm worker, the same", url: v1(referenceRust.url), model: "healthy", servedBy: "healthy", pid: referenceRust.pid, concurrency: c }),
    ];
    progress(`workerd processes: floor ${floor.pid ?? "not found"}, references ${reference.pid ?? "not found"} ${referenceRust.pid ?? "not found"}, gateway ${gateway.pid ?? "not found"}; CLK_TCK ${CLK_TCK}`);

    // Warm-up, the same order; (d)'s opens the breaker of `dead`. Its window starts here.
    let deadStart = null;
    let deadEnd = null;
    for (const t of targets) {
      if (opts.warmup === 0) break;
      if (t.key === "d") deadStart = performance.now();
      const r = await runRound(t, opts.warmup, c, deadline);
      if (t.key === "d") deadEnd = performance.now();
      t.requests += r.requests;
      if (r.errors.length) throw new Error(`warm-up of (${t.key}) ${t.label}: ${r.errors.length} errors, first: ${r.errors[0]}`);
      const res = await t.send();
      const why = t.check(res);
      if (why) throw new Error(`(${t.key}) ${t.label}: ${why}`);
      const sample = JSON.parse(res.body.toString("utf8"));
      t.requests += 1;
      if (!Array.isArray(sample.choices) || typeof sample.choices[0]?.message?.content !== "string") {
        throw new Error(`(${t.key}) ${t.label}: not a chat completion: ${JSON.stringify(sample).slice(0, 200)}`);
      }
      if (t.key === "d") deadEnd = performance.now();
    }
    const deadCallsWarmup = mock.stats("dead").total;
    const warmupMultiAttempt = targets.find((t) => t.key === "d").multiAttempt;
    progress(`warm-up done; dead provider called ${deadCallsWarmup} times so far`);

    for (let round = 0; round < opts.rounds; round++) {
      if (Date.now() >= deadline) throw new Error(`--max-seconds ${opts.maxSeconds} reached after ${round} rounds`);
      const order = targets.map((_, i) => targets[(i + round) % targets.length]);
      const cells = [];
      for (const t of order) {
        const t0 = performance.now();
        if (t.key === "d" && deadStart === null) deadStart = t0;
        const r = await runRound(t, opts.requests, c, deadline);
        if (t.key === "d") deadEnd = performance.now();
        t.requests += r.requests;
        t.rounds.push(r);
        t.latencies.push(...r.latencies);
        t.errors.push(...r.errors);
        cells.push(`${t.key} ${fmt(r.requests / (r.wallMs / 1000), 0)}/s`);
        if (r.errors.length) throw new Error(`round ${round + 1}, (${t.key}) ${t.label}: ${r.errors.length} errors, first: ${r.errors[0]}`);
      }
      progress(`round ${round + 1}/${opts.rounds}: ${cells.join(", ")}`);
    }

    const summaries = Object.fromEntries(targets.map((t) => [t.key, summarize(t)]));
    const d = targets.find((t) => t.key === "d");
    const calls = mock.stats("dead").total;
    const durationMs = deadEnd - deadStart;
    const allowance = BREAKER.failureThreshold + Math.ceil(durationMs / BREAKER.cooldownMs);
    const roundRatios = summaries.c.roundRps.map((x, i) => x / summaries.b.roundRps[i]);
    const result = {
      options: opts,
      machine: { cores: (await import("node:os")).availableParallelism(), loadavg: (await import("node:os")).loadavg() },
      config: { breaker: BREAKER, retry: RETRY },
      wallSeconds: (Date.now() - startedAt) / 1000,
      summaries,
      ratios: {
        reference: {
          eOverB: summaries.e.rps / summaries.b.rps,
          fOverB: summaries.f.rps / summaries.b.rps,
          cOverF: summaries.c.rps / summaries.f.rps,
        },
        throughput: {
          value: summaries.c.rps / summaries.b.rps,
          target: THROUGHPUT_FLOOR_RATIO,
          pass: summaries.c.rps / summaries.b.rps >= THROUGHPUT_FLOOR_RATIO,
          roundMin: Math.min(...roundRatios),
          roundMax: Math.max(...roundRatios),
          roundMedian: median(roundRatios),
        },
        deadP50: {
          value: summaries.d.p50Ms / summaries.c.p50Ms,
          target: DEAD_P50_RATIO,
          pass: summaries.d.p50Ms / summaries.c.p50Ms <= DEAD_P50_RATIO,
        },
      },
      dead: {
        calls,
        callsInWarmup: deadCallsWarmup,
        reachedInWarmup: warmupMultiAttempt,
        reachedAfter: d.multiAttempt - warmupMultiAttempt,
        requests: d.requests,
        durationMs,
        threshold: BREAKER.failureThreshold,
        cooldownMs: BREAKER.cooldownMs,
        maxAttempts: RETRY.maxAttempts,
        allowance,
        concurrencyAllowance: Math.max(BREAKER.failureThreshold * RETRY.maxAttempts, opts.concurrency) + Math.ceil(durationMs / BREAKER.cooldownMs),
        perThousand: (calls * 1000) / d.requests,
        allowancePerThousand: (allowance * 1000) / d.requests,
        pass: calls <= allowance,
      },
    };
    if (opts.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    else process.stdout.write(`${report(opts, result)}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`bench-worker: error: ${err?.stack ?? err}\n`);
    for (const s of [servers.gateway, servers.floor, servers.reference, servers.referenceRust]) {
      if (s?.tail.length) process.stderr.write(`bench-worker: last workerd output:\n${s.tail.join("").slice(-2000)}\n`);
    }
    return 1;
  } finally {
    for (const t of targets) t.agent.destroy();
    await servers.gateway?.mf.dispose().catch(() => {});
    await servers.floor?.mf.dispose().catch(() => {});
    await servers.reference?.mf.dispose().catch(() => {});
    await servers.referenceRust?.mf.dispose().catch(() => {});
    await servers.mock?.close().catch(() => {});
    clearTimeout(watchdog);
  }
}

process.exitCode = await main();
