#!/usr/bin/env node
// CPU per chat call of built packages (scripts/build-npm.sh DIR), against the
// mock provider (tests/e2e/mock-provider.mjs, its own process, 127.0.0.1 only). Each round
// runs every package once, in a fresh Node process, in an order that rotates round by round;
// a process warms up, then makes CALLS calls at CONCURRENCY and reports its own CPU time
// (process.cpuUsage: the package's wasm and glue plus Node's fetch and event loop) and wall
// time over those calls. Target "floor" is the same request by plain `fetch`, no package: the
// package's own CPU is its figure over the floor's. Prints each round, the medians, and each
// package's ratio to the first one. A measurement: it exits non-zero only on errors.
//
//   node scripts/bench-npm.mjs [--rounds 5] [--calls 2000] [--warmup 300] [--concurrency 1]
//       [--no-floor] [--json-out FILE] LABEL=PKG_DIR [LABEL=PKG_DIR ...]
import { spawn } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..");
const MAX_ROUNDS = 50;
const MAX_CALLS = 100_000;

function usage(message) {
  if (message) process.stderr.write(`bench-npm: ${message}\n`);
  process.stderr.write(
    "usage: node scripts/bench-npm.mjs [--rounds N] [--calls N] [--warmup N] [--concurrency N]\n" +
      "         [--no-floor] [--json-out FILE] LABEL=PKG_DIR [LABEL=PKG_DIR ...]\n",
  );
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { rounds: 5, calls: 2000, warmup: 300, concurrency: 1, floor: true, jsonOut: null, targets: [] };
  const int = (name, value, max) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1 || n > max) usage(`${name} must be an integer in 1..${max}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${arg} needs a value`));
    if (arg === "--rounds") opts.rounds = int(arg, value(), MAX_ROUNDS);
    else if (arg === "--calls") opts.calls = int(arg, value(), MAX_CALLS);
    else if (arg === "--warmup") opts.warmup = int(arg, value(), MAX_CALLS);
    else if (arg === "--concurrency") opts.concurrency = int(arg, value(), 64);
    else if (arg === "--no-floor") opts.floor = false;
    else if (arg === "--json-out") opts.jsonOut = value();
    else if (arg === "-h" || arg === "--help") usage();
    else if (arg.includes("=")) {
      const [label, dir] = [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)];
      if (!label || !dir || label === "floor") usage(`bad target '${arg}'`);
      opts.targets.push({ label, pkg: path.resolve(dir) });
    } else usage(`unknown argument '${arg}'`);
  }
  if (opts.targets.length === 0) usage("no LABEL=PKG_DIR given");
  if (opts.floor) opts.targets.push({ label: "floor", pkg: null });
  return opts;
}

const PROMPT = { messages: [{ role: "user", content: "How resilient is this?" }] };

// ------------------------------------------------------------------ child: one measurement

async function child([pkg, url, calls, warmup, concurrency]) {
  let call;
  if (pkg === "floor") {
    const body = JSON.stringify({ model: "bench-model", ...PROMPT });
    call = async () => {
      const r = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer sk-bench" },
        body,
      });
      const answer = await r.json();
      if (r.status !== 200 || !Array.isArray(answer.choices)) throw new Error(`floor: status ${r.status}`);
    };
  } else {
    // The package's CommonJS entry (node.cjs); a build from before the one-package layout has
    // its nodejs glue at resilient_llm.js.
    const require = createRequire(import.meta.url);
    const old = path.join(pkg, "resilient_llm.js");
    const { ResilientClient } = require(existsSync(old) ? old : path.join(pkg, "node.cjs"));
    const client = new ResilientClient({
      providers: { p: { kind: "openai-compatible", preset: "custom", baseUrl: url, apiKey: "sk-bench" } },
      routes: { default: [{ provider: "p", model: "bench-model" }] },
      retry: { maxAttempts: 1 },
    });
    call = async () => {
      const res = await client.chat(PROMPT);
      if (typeof res.text !== "string" || res.text.length === 0) throw new Error("no answer text");
    };
  }
  const run = async (n) => {
    let next = 0;
    const worker = async () => {
      while (next < n) {
        next++;
        await call();
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
  };
  await run(Number(warmup));
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await run(Number(calls));
  const wallNs = Number(process.hrtime.bigint() - t0);
  const cpu = process.cpuUsage(cpu0);
  process.stdout.write(`${JSON.stringify({ cpuUs: cpu.user + cpu.system, wallNs })}\n`);
}

// ------------------------------------------------------------------ parent

function startMock() {
  const config = { providers: { p: {} } };
  const proc = spawn(process.execPath, [path.join(root, "tests/e2e/mock-provider.mjs"), "--port", "0",
    "--config-json", JSON.stringify(config)], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let out = "";
    proc.on("error", reject);
    proc.on("exit", (code) => reject(new Error(`mock provider exited (${code})`)));
    proc.stdout.on("data", (d) => {
      out += d;
      const line = out.split("\n").find((l) => l.includes("listening"));
      if (line) resolve({ proc, url: `${JSON.parse(line).listening}/p/p` });
    });
  });
}

function measure(target, url, opts) {
  const args = [fileURLToPath(import.meta.url), "--child", target.pkg ?? "floor", url, opts.calls, opts.warmup,
    opts.concurrency].map(String);
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    proc.stdout.on("data", (d) => (out += d));
    proc.on("error", reject);
    proc.on("exit", (code) => {
      if (code !== 0) return reject(new Error(`${target.label}: measuring process exited (${code})`));
      try {
        resolve(JSON.parse(out.trim().split("\n").at(-1)));
      } catch (e) {
        reject(new Error(`${target.label}: no figures (${e.message})`));
      }
    });
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const mock = await startMock();
  const results = Object.fromEntries(opts.targets.map((t) => [t.label, []]));
  const started = Date.now();
  try {
    process.stdout.write(`npm package CPU per chat call: ${opts.rounds} rounds x ${opts.calls} calls per target, ` +
      `concurrency ${opts.concurrency}, warm-up ${opts.warmup}, mock provider in its own process\n\n`);
    for (let r = 0; r < opts.rounds; r++) {
      const n = opts.targets.length;
      const order = opts.targets.map((_, i) => opts.targets[(i + r) % n]);
      for (const target of order) {
        const m = await measure(target, mock.url, opts);
        const row = { round: r + 1, cpuUsPerCall: m.cpuUs / opts.calls, callsPerS: opts.calls / (m.wallNs / 1e9) };
        results[target.label].push(row);
        process.stdout.write(`round ${row.round}  ${target.label.padEnd(12)} ${row.cpuUsPerCall.toFixed(1).padStart(8)} ` +
          `us CPU/call ${row.callsPerS.toFixed(0).padStart(7)} calls/s\n`);
      }
    }
  } finally {
    mock.proc.removeAllListeners("exit");
    mock.proc.kill();
  }
  const first = opts.targets[0].label;
  const summary = opts.targets.map((t) => {
    const rows = results[t.label];
    const ratios = rows.map((row, i) => row.cpuUsPerCall / results[first][i].cpuUsPerCall);
    return {
      label: t.label,
      pkg: t.pkg,
      cpuUsPerCall: median(rows.map((row) => row.cpuUsPerCall)),
      callsPerS: median(rows.map((row) => row.callsPerS)),
      ratioToFirst: median(ratios),
      ratioMin: Math.min(...ratios),
      ratioMax: Math.max(...ratios),
    };
  });
  const floor = summary.find((s) => s.label === "floor");
  process.stdout.write(`\nmedians (${((Date.now() - started) / 1000).toFixed(0)} s); ratio = CPU/call over ${first}'s, ` +
    "the median of the per-round ratios (min..max)\n");
  process.stdout.write(`${"target".padEnd(12)} ${"us CPU/call".padStart(11)} ${"over floor".padStart(10)} ` +
    `${"calls/s".padStart(8)}  ratio\n`);
  for (const s of summary) {
    const over = floor && s !== floor ? (s.cpuUsPerCall - floor.cpuUsPerCall).toFixed(1) : "";
    process.stdout.write(`${s.label.padEnd(12)} ${s.cpuUsPerCall.toFixed(1).padStart(11)} ${over.padStart(10)} ` +
      `${s.callsPerS.toFixed(0).padStart(8)}  ${s.ratioToFirst.toFixed(3)} (${s.ratioMin.toFixed(3)}..${s.ratioMax.toFixed(3)})\n`);
  }
  if (opts.jsonOut) {
    writeFileSync(opts.jsonOut, `${JSON.stringify({ date: new Date().toISOString(), opts, results, summary }, null, 2)}\n`);
  }
}

if (process.argv[2] === "--child") {
  child(process.argv.slice(3)).catch((e) => {
    process.stderr.write(`bench-npm child: ${e.stack ?? e}\n`);
    process.exit(1);
  });
} else {
  main().catch((e) => {
    process.stderr.write(`bench-npm: ${e.stack ?? e}\n`);
    process.exit(1);
  });
}
