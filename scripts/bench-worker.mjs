#!/usr/bin/env node
// The edge benchmark (issue 5): the built Worker (build/index.js + index_bg.wasm, from
// scripts/build-worker.sh) served by Miniflare with its real breaker Durable Object, in front
// of the fault-injecting mock provider (tests/e2e/mock-provider.mjs, in this process). A
// measurement, not a test: it prints figures and PASS/MISS against the issue's targets, and
// exits non-zero only on errors (a healthy target answering anything but 200, a timeout,
// a set-up failure), never because a target was missed.
//
//   node scripts/bench-worker.mjs [--requests N] [--concurrency C] [--rounds R] [--warmup W]
//        [--stream-requests N] [--stream-concurrency 1,8] [--stream-warmup W]
//        [--cold-runs K] [--long-streams L] [--phases whole,stream,cold,long,cache,trace]
//        [--baseline DIR [--baseline-label TEXT]] [--stream-usage]
//        [--max-seconds S] [--json] [--json-out FILE]
//   (scripts/bench-worker.sh sets up the tools, builds the Worker when stale, then runs this;
//   its --baseline-rev REV builds the Worker of another revision and passes it as --baseline)
//
// Targets, all plain HTTP/1.1 POSTs of one OpenAI chat request from Node (keep-alive, one
// connection pool per target), all on 127.0.0.1:
//   (a) the mock provider directly;
//   (b) a trivial pass-through JS worker in Miniflare (fetch to the mock, response returned as
//       is): the runtime's floor;
//   (c) resilient-llm, route `healthy` = [healthy];
//   (c0) with --baseline DIR: the same as (c), served from another build of the Worker (DIR
//       holds its index.js and index_bg.wasm), for an A/B of two revisions or profiles in one run;
//   (d) resilient-llm, route `dead-first` = [dead (always 503), backup]: the breaker of `dead`
//       opens after the threshold and the chain skips it, with one probe per cooldown;
//   (e) a reference, not a product: a hand-written JS worker doing only the I/O any gateway
//       with these semantics must do (parse the request to route it, a new upstream request
//       with its own headers under an attempt timer, the answer read and checked, a new
//       response, one JSON log line), with no retry, breaker or translation;
//   (f) the same as (e) as a Rust/wasm Worker (benches/edge-reference, built by
//       scripts/bench-worker.sh), doing its I/O the way resilient-llm does: what that I/O costs
//       from Rust/wasm, apart from resilient-llm's own work.
// Five phases, each over the targets it names (the first three by default):
//   whole:  (a)-(f) with one whole (non-streamed) answer per request;
//   stream: (b), (c), (c0), (e), (f) with `stream: true`; the mock answers 1,000 tokens in 100
//           OpenAI chat.completion.chunk events with no delay between them; (e) and (f) read
//           the events and forward them, parsing each one's data. Run at each of
//           --stream-concurrency (default 1 and 8); time to first byte = the request sent to
//           its first body byte; CPU per event = CPU per request / the 100 content events;
//   cold:   (b), (c), (c0), (e), (f), each started --cold-runs times in a fresh Miniflare (a
//           fresh workerd process): workerd's CPU to ready (runtime, scripts, wasm compile),
//           then the first request's wall time and CPU (instantiation, config validation,
//           first use), and a second request's for comparison; medians.
//   cache:  (c) beside a route with a response cache asked the same question (hit) and a new
//           one each time (miss), in one workerd: latency, throughput and CPU of a hit
//           against a miss (not run by default: --phases cache);
//   trace:  (c) with `tracing.export` to a local OTLP sink, asked with a traceparent that is not
//           sampled (no spans: export off) and one that is (spans exported), interleaved in one
//           workerd, beside a second workerd whose collector accepts and never answers (a dead
//           one): CPU and latency of export on against off, and what a dead collector costs
//           (not run by default: --phases trace);
//   long:   (b), (c), (c0), each sent --long-streams streams of LONG_EVENTS (10,000) content
//           events, one at a time, target after target (rotating); every answer is checked
//           whole (every content event, every word, the final [DONE]), and workerd's resident
//           memory (VmRSS) is read after each stream: its growth from the second stream to the
//           last shows whether a long stream's memory stays flat.
// --stream-usage: every streamed request (all targets) asks for usage
// (`stream_options.include_usage`).
// Interleaved: each round runs R requests against every target in turn (the order rotates
// each round), so machine noise hits all of them alike; cold starts rotate the same way. Each
// target is first warmed up with W requests (for (d), this is where the breaker opens).
// Throughput = requests / wall time of the target's rounds; p50/p99 over all its measured
// requests; CPU per request:
//   Node    = this process (load generator + mock provider + Miniflare's Node side, which
//             reads the workers' log lines), from process.cpuUsage();
//   workerd = the target's own workerd child process (runtime + Worker + Durable Object; each
//             Miniflare has its own process, shared only by (c) and (d)), utime+stime from
//             /proc/<pid>/stat, in clock ticks (usually 10 ms); cold starts, being short, use
//             the threads' run time in ns from /proc/<pid>/task/*/schedstat.
import http from "node:http";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
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

// The streamed answer: STREAM_TOKENS words in STREAM_EVENTS content events.
const STREAM_TOKENS = 1000;
const STREAM_EVENTS = 100;
const LONG_ANSWER = { answerTokens: STREAM_TOKENS, tokensPerChunk: STREAM_TOKENS / STREAM_EVENTS };
// The long stream: LONG_EVENTS content events of one word each.
const LONG_EVENTS = 10_000;
const VERY_LONG_ANSWER = { answerTokens: LONG_EVENTS, tokensPerChunk: 1 };

// The issue's targets.
const THROUGHPUT_FLOOR_RATIO = 0.8; // (c) req/s >= 0.8 x (b)
const DEAD_P50_RATIO = 1.05; //        (d) p50 <= 1.05 x (c)

const PHASES = ["whole", "stream", "cold", "long", "cache", "trace"];

// ---------------------------------------------------------------- options

class UsageError extends Error {}

function parseArgs(argv) {
  const opts = {
    requests: 2000, concurrency: 8, rounds: 10, warmup: 500,
    streamRequests: 200, streamConcurrency: [1, 8], streamWarmup: 50,
    coldRuns: 5, longStreams: 12, phases: ["whole", "stream", "cold"], baseline: null, baselineLabel: null,
    maxSeconds: 1200, json: false, jsonOut: null, streamUsage: false,
  };
  const limits = {
    requests: [1, 100_000], concurrency: [1, 256], rounds: [1, 100], warmup: [0, 100_000],
    streamRequests: [1, 100_000], streamWarmup: [0, 100_000], coldRuns: [1, 50], longStreams: [3, 1000], maxSeconds: [10, 3600],
  };
  const flags = {
    "--requests": "requests", "--concurrency": "concurrency", "--rounds": "rounds", "--warmup": "warmup",
    "--stream-requests": "streamRequests", "--stream-warmup": "streamWarmup", "--cold-runs": "coldRuns", "--long-streams": "longStreams",
    "--max-seconds": "maxSeconds",
  };
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    let inline;
    if (arg.includes("=")) [arg, inline] = [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)];
    const value = () => {
      const raw = inline ?? argv[++i];
      if (raw === undefined) throw new UsageError(`${arg} needs a value`);
      return raw;
    };
    if (arg === "--json") opts.json = true;
    else if (arg === "--stream-usage") opts.streamUsage = true;
    else if (arg === "--help" || arg === "-h") opts.help = true;
    else if (arg === "--baseline") opts.baseline = path.resolve(value());
    else if (arg === "--baseline-label") opts.baselineLabel = value();
    else if (arg === "--json-out") opts.jsonOut = path.resolve(value());
    else if (arg === "--phases") {
      const list = value().split(",").filter(Boolean);
      for (const p of list) if (!PHASES.includes(p)) throw new UsageError(`--phases: ${p} is not one of ${PHASES.join(", ")}`);
      if (list.length === 0) throw new UsageError("--phases: at least one phase");
      opts.phases = PHASES.filter((p) => list.includes(p));
    } else if (arg === "--stream-concurrency") {
      const list = value().split(",").map(Number);
      if (list.length === 0 || list.length > 4 || !list.every((n) => Number.isInteger(n) && n >= 1 && n <= 64)) {
        throw new UsageError("--stream-concurrency: one to four whole numbers in 1..64, comma-separated");
      }
      opts.streamConcurrency = [...new Set(list)];
    } else if (Object.hasOwn(flags, arg)) {
      const key = flags[arg];
      const n = Number(value());
      const [lo, hi] = limits[key];
      if (!Number.isInteger(n) || n < lo || n > hi) throw new UsageError(`${arg}: a whole number in ${lo}..${hi}`);
      opts[key] = n;
    } else throw new UsageError(`unknown argument ${argv[i]} (try --help)`);
  }
  if (opts.baselineLabel !== null && opts.baseline === null) throw new UsageError("--baseline-label needs --baseline");
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

/** Resident memory of `pid` in MiB (VmRSS), or null. */
function procRssMib(pid) {
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

/** CPU time of `pid` in ms, or null. */
function procCpuMs(pid) {
  const st = pid ? procStat(pid) : null;
  return st ? (st.ticks * 1000) / CLK_TCK : null;
}

/**
 * Run time of `pid`'s live threads in ms with ns resolution (schedstat), or, without
 * schedstat, its CPU time in ticks; null when it is gone. Threads that ended are not in it:
 * for the short spans of a cold start, where ticks are too coarse.
 */
function procCpuFineMs(pid) {
  if (!pid) return null;
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
    }
    return ns / 1e6;
  } catch {
    return procCpuMs(pid);
  }
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
// A stream is passed on event by event, each event's data parsed: the least a gateway must do
// to know whether the answer finished.
const REFERENCE_SCRIPT = `
function forward(upstream, timer, route, started) {
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let buffer = "";
  let events = 0;
  let finished = false;
  const log = () => console.log(JSON.stringify({ level: "info", msg: "request", route, servedBy: "healthy/bench-model",
    attempts: 1, status: 200, events, finished, latencyMs: Date.now() - started }));
  const pass = new TransformStream({
    transform(chunk, controller) {
      buffer += decoder.decode(chunk, { stream: true });
      const end = buffer.lastIndexOf("\\n\\n");
      if (end < 0) return;
      const complete = buffer.slice(0, end + 2);
      buffer = buffer.slice(end + 2);
      for (const line of complete.split("\\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") finished = true;
        else { JSON.parse(data); events += 1; }
      }
      controller.enqueue(encoder.encode(complete));
    },
    flush() {
      clearTimeout(timer);
      log();
    },
  });
  return new Response(upstream.body.pipeThrough(pass), {
    headers: { "content-type": "text/event-stream", "x-served-by": "healthy/bench-model", "x-attempts": "1" },
  });
}

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
    const stream = body.stream === true;
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), 30000);
    let streaming = false;
    try {
      const upstream = await fetch(env.UPSTREAM, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer " + env.KEY },
        body: JSON.stringify({ model: "bench-model", messages: body.messages, max_completion_tokens: body.max_tokens,
          ...(stream ? { stream: true } : {}) }),
        signal: abort.signal,
      });
      if (stream) {
        if (upstream.status !== 200 || !upstream.body) {
          return Response.json({ error: { message: "upstream failed", type: "api_error" } }, { status: 502 });
        }
        streaming = true;
        return forward(upstream, timer, body.model, started);
      }
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
      if (!streaming) clearTimeout(timer);
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

/** The mock provider, with a long-answer twin (`<name>-stream`) of each provider a stream calls. */
async function startProviders() {
  const long = Object.fromEntries(["floor", "reference", "reference-rust", "healthy"].map((n) => [`${n}-stream`, LONG_ANSWER]));
  const veryLong = Object.fromEntries(["floor", "healthy"].map((n) => [`${n}-long`, VERY_LONG_ANSWER]));
  return startMock({
    config: {
      providers: {
        direct: {},
        floor: {},
        reference: {},
        "reference-rust": {},
        healthy: {},
        backup: {},
        dead: { faults: [{ mode: "status", status: 503 }] },
        ...long,
        ...veryLong,
      },
    },
  });
}

/**
 * Miniflare options for every kind of target, by name: `kinds[name](stream)` for the
 * upstream of the whole or the streamed case (`stream` "long": the long stream's). Fresh options each call, so that cold starts
 * start from nothing.
 */
function workerKinds(mock, { baseline }) {
  const twin = (name, stream) => (stream === "long" ? `${name}-long` : stream ? `${name}-stream` : name);
  const upstream = (name, stream) => `${mock.providerUrl(twin(name, stream))}/v1/chat/completions`;
  // A built Rust/wasm worker's modules.
  const wasm = (file) => ({ scriptPath: file, modulesRoot: path.dirname(file), modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"] }] });
  // A worker that calls the mock's provider `name` (UPSTREAM, with KEY as its key).
  const worker = (name, stream, source) => ({
    modules: true,
    compatibilityDate: COMPATIBILITY_DATE,
    bindings: { UPSTREAM: upstream(name, stream), KEY: "mock-key" },
    ...source,
  });
  const config = (stream) => stream === "cache"
    ? {
      ...gatewayConfig(mock, {
        providers: { healthy: "openai" },
        routes: { healthy: [{ provider: "healthy", model: "bench-model" }], cached: [{ provider: "healthy", model: "bench-model" }] },
        breaker: BREAKER,
        retry: RETRY,
      }),
      cache: { cached: { ttlSeconds: 3600 } },
    }
    : gatewayConfig(mock, stream
    ? {
      providers: { [twin("healthy", stream)]: "openai" },
      routes: { stream: [{ provider: twin("healthy", stream), model: "bench-model" }] },
      breaker: BREAKER,
      retry: RETRY,
    }
    : {
      providers: { healthy: "openai", dead: "openai", backup: "openai" },
      routes: {
        healthy: [{ provider: "healthy", model: "bench-model" }],
        "dead-first": [{ provider: "dead", model: "bench-model" }, { provider: "backup", model: "bench-model" }],
      },
      breaker: BREAKER,
      retry: RETRY,
    });
  // The objects as wrangler.toml binds them: with the data centre's relays when the build has
  // the class (a baseline from before relays calls the owners directly, as it was deployed).
  const objects = (dir) => {
    const ns = { BREAKERS: { className: "BreakerStore", useSQLite: true } };
    if (readFileSync(path.join(dir, "index.js"), "utf8").includes("FleetRelay")) {
      ns.RELAYS = { className: "FleetRelay", useSQLite: true };
    }
    return ns;
  };
  // `extra`: top-level configuration added to the phase's (the trace phase's `tracing`).
  const gateway = (dir, vars = {}) => (stream, extra = {}) => ({
    modules: true,
    ...wasm(path.join(dir, "index.js")),
    compatibilityDate: COMPATIBILITY_DATE,
    compatibilityFlags: ["enable_request_signal"],
    bindings: { CONFIG: JSON.stringify({ ...config(stream), ...extra }), MOCK_API_KEY: "mock-key", GATEWAY_KEY, ...vars },
    durableObjects: objects(dir),
    durableObjectsPersist: false,
  });
  const kinds = {
    floor: (stream) => worker("floor", stream, { script: FLOOR_SCRIPT }),
    reference: (stream) => worker("reference", stream, { script: REFERENCE_SCRIPT }),
    referenceRust: (stream) => worker("reference-rust", stream, wasm(path.join(ROOT, "benches/edge-reference/build/index.js"))),
    gateway: gateway(path.join(ROOT, "build")),
  };
  if (baseline) kinds.baseline = gateway(baseline);
  return kinds;
}

// ---------------------------------------------------------------- the client

/** What every streamed request asks besides `stream` (--stream-usage). */
const STREAM_EXTRA = {};

function chatBody(model, stream, content = "benchmark: say something short") {
  return JSON.stringify({ model, messages: [{ role: "user", content }], ...(stream ? { stream: true, ...STREAM_EXTRA } : {}) });
}

/** One POST; resolves with status, headers, the whole body and when its first byte came. */
function post(agent, url, body, extraHeaders = {}) {
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
        ...extraHeaders,
      },
    }, (res) => {
      const parts = [];
      let firstByteAt = null;
      res.on("data", (b) => {
        firstByteAt ??= performance.now();
        parts.push(b);
      });
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(parts), firstByteAt }));
      res.on("error", reject);
    });
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error(`no answer in ${REQUEST_TIMEOUT_MS} ms`)));
    req.on("error", reject);
    req.end(body);
  });
}

const DONE_TAIL = Buffer.from("data: [DONE]\n\n");

/** The text and content events of an OpenAI event stream, or why it is not one. */
function readEvents(body) {
  let text = "";
  let content = 0;
  for (const block of body.toString("utf8").split("\n\n")) {
    const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
    if (!data || data === "[DONE]") continue;
    let chunk;
    try {
      chunk = JSON.parse(data);
    } catch {
      return { error: `an event that is not JSON: ${data.slice(0, 100)}` };
    }
    const piece = chunk.choices?.[0]?.delta?.content;
    if (typeof piece === "string" && piece) {
      text += piece;
      content += 1;
    }
  }
  return { text, content };
}

function makeTarget({ key, label, url, model, servedBy, pid, concurrency, stream = false, unique = false, xCache = null, headers = {} }) {
  const body = chatBody(model, stream);
  // `unique`: every request another question (its body never seen before).
  let asked = 0;
  const bodyOf = () => (unique ? chatBody(model, stream, `question ${key} ${asked++}`) : body);
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  return {
    key,
    label,
    pid,
    agent,
    concurrency,
    stream,
    send: () => post(agent, url, bodyOf(), headers),
    /** Why an answer is wrong, or null. */
    check(res) {
      if (res.status !== 200) return `HTTP ${res.status}: ${res.body.toString("utf8").slice(0, 200)}`;
      const by = res.headers["x-served-by"];
      if (servedBy && !(typeof by === "string" && by.startsWith(`${servedBy}/`))) return `x-served-by ${by}, expected ${servedBy}/…`;
      if (xCache && res.headers["x-cache"] !== xCache) return `x-cache ${res.headers["x-cache"]}, expected ${xCache}`;
      if (stream && !res.body.subarray(-DONE_TAIL.length).equals(DONE_TAIL)) return `a stream that does not end with [DONE]: …${res.body.toString("utf8").slice(-200)}`;
      // More than one attempt: in (d), the dead provider was called before the backup.
      if (Number(res.headers["x-attempts"] ?? 1) > 1) this.multiAttempt += 1;
      return null;
    },
    /** Why a sample answer is not the expected chat completion or stream, or null (checks it whole). */
    checkSample(res) {
      if (!stream) {
        const sample = JSON.parse(res.body.toString("utf8"));
        if (!Array.isArray(sample.choices) || typeof sample.choices[0]?.message?.content !== "string") {
          return `not a chat completion: ${JSON.stringify(sample).slice(0, 200)}`;
        }
        return null;
      }
      const ev = readEvents(res.body);
      if (ev.error) return ev.error;
      const words = ev.text.split(" ").length;
      if (words !== STREAM_TOKENS) return `a streamed answer of ${words} words, expected ${STREAM_TOKENS}`;
      return ev.content === STREAM_EVENTS ? null : `${ev.content} content events, expected ${STREAM_EVENTS}`;
    },
    rounds: [],
    latencies: [],
    ttfbs: [],
    errors: [],
    requests: 0,
    multiAttempt: 0,
  };
}

/** Runs `n` requests against `target`, `c` at a time; returns the round's figures. */
async function runRound(target, n, c, deadline) {
  const latencies = [];
  const ttfbs = [];
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
        else {
          latencies.push(performance.now() - s);
          if (res.firstByteAt !== null) ttfbs.push(res.firstByteAt - s);
        }
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
    ttfbs,
    errors,
  };
}

/** Warms `t` up with `n` requests, then checks one sample answer whole. */
async function warmUp(t, n, deadline) {
  if (n > 0) {
    const r = await runRound(t, n, t.concurrency, deadline);
    t.requests += r.requests;
    if (r.errors.length) throw new Error(`warm-up of (${t.key}) ${t.label}: ${r.errors.length} errors, first: ${r.errors[0]}`);
  }
  const res = await t.send();
  t.requests += 1;
  const why = t.check(res) ?? t.checkSample(res);
  if (why) throw new Error(`(${t.key}) ${t.label}: ${why}`);
}

/** Interleaved rounds of `n` requests over `targets`; `onRound(t, r)` sees each result. */
async function runRounds(name, targets, rounds, n, deadline, progress, onRound = () => {}) {
  for (let round = 0; round < rounds; round++) {
    if (Date.now() >= deadline) throw new Error(`--max-seconds reached in the ${name} phase after ${round} rounds`);
    const order = targets.map((_, i) => targets[(i + round) % targets.length]);
    const cells = [];
    for (const t of order) {
      const r = await runRound(t, n, t.concurrency, deadline);
      onRound(t, r);
      t.requests += r.requests;
      t.rounds.push(r);
      t.latencies.push(...r.latencies);
      t.ttfbs.push(...r.ttfbs);
      t.errors.push(...r.errors);
      cells.push(`${t.key} ${fmt(r.requests / (r.wallMs / 1000), 0)}/s`);
      if (r.errors.length) throw new Error(`${name} round ${round + 1}, (${t.key}) ${t.label}: ${r.errors.length} errors, first: ${r.errors[0]}`);
    }
    progress(`${name} round ${round + 1}/${rounds}: ${cells.join(", ")}`);
  }
}

// ---------------------------------------------------------------- cold starts

/**
 * One cold start of `kind`: a fresh Miniflare (so a fresh workerd process and isolate), its
 * first request and a second one. Wall times in ms; CPU in ms of workerd's threads.
 */
async function coldStart(kinds, kind, spec) {
  const t0 = performance.now();
  const server = await startMiniflare(kinds[kind](false));
  try {
    const readyMs = performance.now() - t0;
    const cpuReady = procCpuFineMs(server.pid);
    const target = makeTarget({ ...spec, url: new URL("/v1/chat/completions", server.url), pid: server.pid, concurrency: 1 });
    const one = async () => {
      const s = performance.now();
      const res = await target.send();
      const why = target.check(res) ?? target.checkSample(res);
      if (why) throw new Error(`cold start of (${spec.key}) ${spec.label}: ${why}`);
      return performance.now() - s;
    };
    try {
      const firstMs = await one();
      const cpuFirst = procCpuFineMs(server.pid);
      const secondMs = await one();
      const cpuSecond = procCpuFineMs(server.pid);
      const cpu = (a, b) => (a === null || b === null ? null : b - a);
      return {
        readyMs,
        startupCpuMs: cpuReady,
        firstMs,
        firstCpuMs: cpu(cpuReady, cpuFirst),
        secondMs,
        secondCpuMs: cpu(cpuFirst, cpuSecond),
        coldCpuMs: cpuFirst,
      };
    } finally {
      target.agent.destroy();
    }
  } catch (err) {
    if (server.tail.length) err.message += `\nlast workerd output:\n${server.tail.join("").slice(-2000)}`;
    throw err;
  } finally {
    await server.mf.dispose().catch(() => {});
  }
}

const COLD_FIELDS = ["readyMs", "startupCpuMs", "firstMs", "firstCpuMs", "secondMs", "secondCpuMs", "coldCpuMs"];

function summarizeCold(runs) {
  const out = { runs: runs.length };
  for (const f of COLD_FIELDS) {
    const xs = runs.map((r) => r[f]).filter((x) => x !== null);
    out[f] = xs.length === runs.length ? median(xs) : null;
  }
  out.all = runs;
  return out;
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
  const ttfb = [...t.ttfbs].sort((a, b) => a - b);
  const requests = t.rounds.reduce((a, r) => a + r.requests, 0);
  const wallMs = t.rounds.reduce((a, r) => a + r.wallMs, 0);
  const nodeCpuMs = t.rounds.reduce((a, r) => a + r.nodeCpuMs, 0);
  const workerd = t.rounds.every((r) => r.workerdCpuMs !== null) && t.pid
    ? t.rounds.reduce((a, r) => a + r.workerdCpuMs, 0) : null;
  return {
    target: t.key,
    label: t.label,
    concurrency: t.concurrency,
    requests,
    errors: t.errors.length,
    rps: requests / (wallMs / 1000),
    roundRps: t.rounds.map((r) => r.requests / (r.wallMs / 1000)),
    roundWorkerdCpuMsPerReq: t.rounds.map((r) => (r.workerdCpuMs === null ? null : r.workerdCpuMs / r.requests)),
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    ttfbP50Ms: t.stream ? percentile(ttfb, 0.5) : null,
    ttfbP99Ms: t.stream ? percentile(ttfb, 0.99) : null,
    nodeCpuMsPerReq: nodeCpuMs / requests,
    workerdCpuMsPerReq: workerd === null ? null : workerd / requests,
    workerdCpuUsPerEvent: workerd === null || !t.stream ? null : (workerd * 1000) / requests / STREAM_EVENTS,
    workerdPid: t.pid,
  };
}

/** new / old over the totals, and the per-round ratios' median, min and max (for c / c0). */
function abRatio(newer, older, field, roundField) {
  const value = newer[field] !== null && older[field] !== null ? newer[field] / older[field] : null;
  if (!roundField) return { value };
  const rounds = newer[roundField].map((x, i) => (x === null || older[roundField][i] === null ? null : x / older[roundField][i])).filter((x) => x !== null);
  return { value, roundMedian: median(rounds), roundMin: rounds.length ? Math.min(...rounds) : null, roundMax: rounds.length ? Math.max(...rounds) : null };
}

const fmt = (x, digits = 2) => (x === null || x === undefined || Number.isNaN(x) ? "n/a" : x.toFixed(digits));
const verdict = (ok) => (ok ? "PASS" : "MISS");

function table(head, rows) {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  return [line(head), ...rows.map(line)];
}

function reportWhole(opts, whole) {
  const { summaries: s, ratios, dead } = whole;
  const lines = [];
  lines.push(`Whole answers: ${opts.rounds} interleaved rounds x ${opts.requests} requests per target, concurrency ${opts.concurrency}, warm-up ${opts.warmup} per target`);
  lines.push("");
  const rows = Object.values(s).map((x) => [`(${x.target}) ${x.label}`, fmt(x.rps, 0), fmt(x.p50Ms), fmt(x.p99Ms), fmt(x.nodeCpuMsPerReq, 3), fmt(x.workerdCpuMsPerReq, 3)]);
  lines.push(...table(["target", "req/s", "p50 ms", "p99 ms", "Node CPU ms/req", "workerd CPU ms/req"], rows));
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
  lines.push("      The breaker counts requests, each after its retries, and cannot take back the calls of the");
  lines.push(`      ${opts.concurrency} requests in flight when the first failure comes back: the bound it keeps is`);
  lines.push(`      max(threshold x attempts, concurrency) + one probe per cooldown = ${dead.concurrencyAllowance}   ${verdict(dead.calls <= dead.concurrencyAllowance)}`);
  return lines;
}

function reportStream(opts, stream) {
  const lines = [];
  lines.push(`Streamed answers (${STREAM_TOKENS} tokens in ${STREAM_EVENTS} content events, no delay between them): ${opts.rounds} interleaved rounds x ${opts.streamRequests} requests per target and concurrency, warm-up ${opts.streamWarmup}`);
  lines.push("");
  const rows = Object.values(stream.summaries).map((x) => [`(${x.target}) ${x.label}`, String(x.concurrency), fmt(x.rps, 0), fmt(x.ttfbP50Ms), fmt(x.p50Ms), fmt(x.p99Ms), fmt(x.nodeCpuMsPerReq, 3), fmt(x.workerdCpuMsPerReq, 3), fmt(x.workerdCpuUsPerEvent, 1)]);
  lines.push(...table(["target", "conc", "req/s", "TTFB p50 ms", "p50 ms", "p99 ms", "Node CPU ms/req", "workerd CPU ms/req", "us/event"], rows));
  lines.push("");
  lines.push(`TTFB = request sent to the first body byte; p50/p99 = to the last byte; us/event = workerd CPU per request / ${STREAM_EVENTS}.`);
  for (const c of opts.streamConcurrency) {
    const get = (k) => stream.summaries[`${k}@${c}`];
    const [b, cc, e, f] = ["b", "c", "e", "f"].map(get);
    if ([b, cc, e, f].every((x) => x?.workerdCpuMsPerReq != null)) {
      lines.push(`At concurrency ${c}, workerd CPU over the floor: (e) JS ${fmt(e.workerdCpuMsPerReq - b.workerdCpuMsPerReq, 3)}, (f) Rust/wasm ${fmt(f.workerdCpuMsPerReq - b.workerdCpuMsPerReq, 3)}, (c) resilient-llm ${fmt(cc.workerdCpuMsPerReq - b.workerdCpuMsPerReq, 3)} ms/req; (c) over (f) ${fmt(cc.workerdCpuMsPerReq - f.workerdCpuMsPerReq, 3)} ms/req.`);
    }
  }
  return lines;
}

function reportCold(opts, cold) {
  const lines = [];
  lines.push(`Cold starts: ${opts.coldRuns} per target, each a fresh Miniflare (workerd process), rotating; medians`);
  lines.push("");
  const rows = Object.values(cold.summaries).map((x) => [`(${x.target}) ${x.label}`, fmt(x.readyMs, 0), fmt(x.startupCpuMs, 1), fmt(x.firstMs, 1), fmt(x.firstCpuMs, 1), fmt(x.coldCpuMs, 1), fmt(x.secondMs, 2), fmt(x.secondCpuMs, 2)]);
  lines.push(...table(["target", "ready ms", "startup CPU ms", "1st req ms", "1st req CPU ms", "cold CPU ms", "2nd req ms", "2nd req CPU ms"], rows));
  lines.push("");
  lines.push("ready = new Miniflare to ready (Node side included); startup CPU = workerd's until ready (runtime, scripts, wasm");
  lines.push("compile); 1st req = the fresh isolate's first request to its whole answer (instantiation, config validation,");
  lines.push("first use); cold CPU = startup + 1st req. CPU: workerd's live threads' run time (/proc/<pid>/task/*/schedstat).");
  const b = cold.summaries.b;
  if (b?.coldCpuMs != null) {
    const over = Object.values(cold.summaries).filter((x) => x.target !== "b" && x.coldCpuMs !== null)
      .map((x) => `(${x.target}) ${fmt(x.coldCpuMs - b.coldCpuMs, 1)} ms CPU, ${fmt(x.firstMs - b.firstMs, 1)} ms 1st req`);
    lines.push(`Over the floor's cold start: ${over.join("; ")}.`);
  }
  return lines;
}

function reportAb(opts, result) {
  const lines = [];
  const label = opts.baselineLabel ?? opts.baseline;
  lines.push(`A/B: (c) = this tree's build/, (c0) = ${label}; ratio = (c) / (c0), below 1 means (c) uses less (or, for req/s, serves less)`);
  lines.push("");
  const rows = [];
  const row = (what, r, cNow, cOld, digits = 3) => rows.push([what, fmt(cNow, digits), fmt(cOld, digits), fmt(r.value, 3),
    r.roundMedian === undefined ? "" : `${fmt(r.roundMedian, 3)} (${fmt(r.roundMin, 3)}..${fmt(r.roundMax, 3)})`]);
  const w = result.whole?.summaries;
  if (w?.c0) {
    row("whole: workerd CPU ms/req", abRatio(w.c, w.c0, "workerdCpuMsPerReq", "roundWorkerdCpuMsPerReq"), w.c.workerdCpuMsPerReq, w.c0.workerdCpuMsPerReq);
    row("whole: req/s", abRatio(w.c, w.c0, "rps", "roundRps"), w.c.rps, w.c0.rps, 0);
    row("whole: p50 ms", abRatio(w.c, w.c0, "p50Ms"), w.c.p50Ms, w.c0.p50Ms);
  }
  const s = result.stream?.summaries;
  for (const c of s ? opts.streamConcurrency : []) {
    const [n, o] = [s[`c@${c}`], s[`c0@${c}`]];
    if (!n || !o) continue;
    row(`stream c=${c}: workerd CPU ms/req`, abRatio(n, o, "workerdCpuMsPerReq", "roundWorkerdCpuMsPerReq"), n.workerdCpuMsPerReq, o.workerdCpuMsPerReq);
    row(`stream c=${c}: req/s`, abRatio(n, o, "rps", "roundRps"), n.rps, o.rps, 0);
    row(`stream c=${c}: TTFB p50 ms`, abRatio(n, o, "ttfbP50Ms"), n.ttfbP50Ms, o.ttfbP50Ms);
  }
  const k = result.cold?.summaries;
  if (k?.c0) {
    row("cold: CPU ms (startup + 1st req)", abRatio(k.c, k.c0, "coldCpuMs"), k.c.coldCpuMs, k.c0.coldCpuMs, 1);
    row("cold: 1st req ms", abRatio(k.c, k.c0, "firstMs"), k.c.firstMs, k.c0.firstMs, 1);
  }
  const l = result.long?.summaries;
  if (l?.c0) {
    row("long: workerd CPU ms/stream", abRatio(l.c, l.c0, "workerdCpuMsPerStream"), l.c.workerdCpuMsPerStream, l.c0.workerdCpuMsPerStream, 1);
    row("long: RSS after the last MiB", abRatio(l.c, l.c0, "rssLastMib"), l.c.rssLastMib, l.c0.rssLastMib, 1);
  }
  lines.push(...table(["measure", "(c)", "(c0)", "c/c0", "per round: median (min..max)"], rows));
  return lines;
}

function report(opts, result) {
  const lines = [`Edge benchmark: phases ${opts.phases.join(", ")} (${fmt(result.wallSeconds, 1)} s in all)`, ""];
  if (result.whole) lines.push(...reportWhole(opts, result.whole), "");
  if (result.stream) lines.push(...reportStream(opts, result.stream), "");
  if (result.cold) lines.push(...reportCold(opts, result.cold), "");
  if (result.long) lines.push(...reportLong(opts, result.long), "");
  if (result.cache) lines.push(...reportCache(opts, result.cache), "");
  if (result.trace) lines.push(...reportTrace(opts, result.trace), "");
  if (opts.baseline) lines.push(...reportAb(opts, result), "");
  return lines.join("\n");
}

// ---------------------------------------------------------------- phases

const v1 = (u) => new URL("/v1/chat/completions", u);

async function wholePhase(opts, kinds, mock, servers, deadline, progress) {
  const c = opts.concurrency;
  for (const kind of Object.keys(kinds)) servers[`${kind}-whole`] = await startMiniflare(kinds[kind](false));
  const sv = (kind) => servers[`${kind}-whole`];
  const targets = [
    makeTarget({ key: "a", label: "mock provider direct", url: new URL(`${mock.providerUrl("direct")}/v1/chat/completions`), model: "bench-model", pid: null, concurrency: c }),
    makeTarget({ key: "b", label: "pass-through JS worker (floor)", url: v1(sv("floor").url), model: "bench-model", pid: sv("floor").pid, concurrency: c }),
    makeTarget({ key: "c", label: "resilient-llm healthy", url: v1(sv("gateway").url), model: "healthy", servedBy: "healthy", pid: sv("gateway").pid, concurrency: c }),
    ...(kinds.baseline ? [makeTarget({ key: "c0", label: "resilient-llm healthy, baseline build", url: v1(sv("baseline").url), model: "healthy", servedBy: "healthy", pid: sv("baseline").pid, concurrency: c })] : []),
    makeTarget({ key: "d", label: "resilient-llm primary dead", url: v1(sv("gateway").url), model: "dead-first", servedBy: "backup", pid: sv("gateway").pid, concurrency: c }),
    makeTarget({ key: "e", label: "reference: JS worker, gateway I/O only", url: v1(sv("reference").url), model: "healthy", servedBy: "healthy", pid: sv("reference").pid, concurrency: c }),
    makeTarget({ key: "f", label: "reference: Rust/wasm worker, the same", url: v1(sv("referenceRust").url), model: "healthy", servedBy: "healthy", pid: sv("referenceRust").pid, concurrency: c }),
  ];
  progress(`whole: workerd processes ${targets.filter((t) => t.key !== "a").map((t) => `${t.key} ${t.pid ?? "not found"}`).join(", ")}; CLK_TCK ${CLK_TCK}`);
  try {
    // Warm-up, the same order; (d)'s opens the breaker of `dead`. Its window starts here.
    let deadStart = null;
    let deadEnd = null;
    for (const t of targets) {
      if (t.key === "d") deadStart = performance.now();
      await warmUp(t, opts.warmup, deadline);
      if (t.key === "d") deadEnd = performance.now();
    }
    const deadCallsWarmup = mock.stats("dead").total;
    const d = targets.find((t) => t.key === "d");
    const warmupMultiAttempt = d.multiAttempt;
    progress(`whole: warm-up done; dead provider called ${deadCallsWarmup} times so far`);
    await runRounds("whole", targets, opts.rounds, opts.requests, deadline, progress, (t) => {
      if (t.key === "d") deadEnd = performance.now();
    });
    const summaries = Object.fromEntries(targets.map((t) => [t.key, summarize(t)]));
    const calls = mock.stats("dead").total;
    const durationMs = deadEnd - deadStart;
    const allowance = BREAKER.failureThreshold + Math.ceil(durationMs / BREAKER.cooldownMs);
    const roundRatios = summaries.c.roundRps.map((x, i) => x / summaries.b.roundRps[i]);
    return {
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
        concurrencyAllowance: Math.max(BREAKER.failureThreshold * RETRY.maxAttempts, c) + Math.ceil(durationMs / BREAKER.cooldownMs),
        perThousand: (calls * 1000) / d.requests,
        allowancePerThousand: (allowance * 1000) / d.requests,
        pass: calls <= allowance,
      },
    };
  } finally {
    for (const t of targets) t.agent.destroy();
  }
}

/**
 * The response cache: one gateway, route `healthy` (no cache) beside route `cached` (a TTL of
 * an hour) asked the same question every time (hits, after the first) and another question
 * every time (misses: the lookup, the provider, the write), interleaved round by round.
 */
async function cachePhase(opts, kinds, mock, servers, deadline, progress) {
  const c = opts.concurrency;
  servers["gateway-cache"] = await startMiniflare(kinds.gateway("cache"));
  const server = servers["gateway-cache"];
  const at = { url: v1(server.url), pid: server.pid, concurrency: c, servedBy: "healthy" };
  const targets = [
    makeTarget({ ...at, key: "c", label: "resilient-llm, a route without a cache", model: "healthy" }),
    makeTarget({ ...at, key: "hit", label: "resilient-llm, cached route, the same question (hits)", model: "cached", xCache: "hit" }),
    makeTarget({ ...at, key: "miss", label: "resilient-llm, cached route, a new question each time (misses)", model: "cached", unique: true, xCache: "miss" }),
  ];
  progress(`cache: workerd process ${server.pid ?? "not found"}`);
  try {
    const hit = targets[1];
    // The hit target's question, asked once and stored, before its checks expect hits.
    const first = await post(hit.agent, at.url, chatBody("cached", false));
    if (first.status !== 200 || first.headers["x-cache"] !== "miss") throw new Error(`cache: the first question: HTTP ${first.status}, x-cache ${first.headers["x-cache"]}`);
    await new Promise((r) => setTimeout(r, 200)); // the write goes out after the answer
    const calls0 = mock.stats("healthy").total;
    for (const t of targets) await warmUp(t, opts.warmup, deadline);
    progress("cache: warm-up done");
    await runRounds("cache", targets, opts.rounds, opts.requests, deadline, progress);
    const summaries = Object.fromEntries(targets.map((t) => [t.key, summarize(t)]));
    return {
      summaries,
      providerCalls: mock.stats("healthy").total - calls0,
      nonHitRequests: summaries.c.requests + summaries.miss.requests + opts.warmup * 2 + 2,
    };
  } finally {
    for (const t of targets) t.agent.destroy();
  }
}

function reportCache(opts, cache) {
  const s = cache.summaries;
  const lines = [`Response cache: ${opts.rounds} interleaved rounds of ${opts.requests} whole requests per target, concurrency ${opts.concurrency}, one workerd`];
  lines.push("");
  const rows = Object.values(s).map((x) => [`(${x.target}) ${x.label}`, fmt(x.rps, 0), fmt(x.p50Ms), fmt(x.p99Ms), fmt(x.workerdCpuMsPerReq, 3)]);
  lines.push(...table(["target", "req/s", "p50 ms", "p99 ms", "workerd CPU ms/req"], rows));
  lines.push("");
  const r = (a, b, f) => fmt(a[f] / b[f], 3);
  lines.push(`hit / miss: p50 ${r(s.hit, s.miss, "p50Ms")}, workerd CPU ${r(s.hit, s.miss, "workerdCpuMsPerReq")}, req/s ${r(s.hit, s.miss, "rps")}`);
  lines.push(`miss / no cache: p50 ${r(s.miss, s.c, "p50Ms")}, workerd CPU ${r(s.miss, s.c, "workerdCpuMsPerReq")} (the lookup and the write a miss adds)`);
  lines.push(`provider calls during the measured requests: ${cache.providerCalls} for ${cache.nonHitRequests} requests that were not hits (hits call nothing)`);
  return lines;
}

/** An OTLP sink on 127.0.0.1 that counts what it is sent; `dead`: accepts and never answers. */
async function startSink(dead) {
  const stats = { exports: 0, bytes: 0 };
  const held = [];
  const server = http.createServer((req, res) => {
    if (dead) {
      held.push(res);
      req.resume();
      return;
    }
    req.on("data", (b) => { stats.bytes += b.length; });
    req.on("end", () => {
      stats.exports += 1;
      res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${server.address().port}/v1/traces`,
    stats,
    close: () => {
      for (const res of held) res.destroy();
      server.closeAllConnections?.();
      return new Promise((r) => server.close(r));
    },
  };
}

/**
 * Spans exported, against not: one gateway with `tracing.export` to a sink, asked with an
 * unsampled traceparent (export off) and a sampled one (export on), interleaved; and a second
 * gateway whose collector never answers, asked with the sampled one.
 */
async function tracePhase(opts, kinds, servers, deadline, progress) {
  const c = opts.concurrency;
  const sink = await startSink(false);
  const dead = await startSink(true);
  const tracing = (endpoint) => ({ tracing: { export: { endpoint, timeoutMs: 2000 } } });
  servers["gateway-trace"] = await startMiniflare(kinds.gateway(false, tracing(sink.url)));
  servers["gateway-trace-dead"] = await startMiniflare(kinds.gateway(false, tracing(dead.url)));
  const live = servers["gateway-trace"];
  const gone = servers["gateway-trace-dead"];
  const parent = (flags) => ({ traceparent: `00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-${flags}` });
  const at = (s) => ({ url: v1(s.url), pid: s.pid, concurrency: c, servedBy: "healthy", model: "healthy" });
  const targets = [
    makeTarget({ ...at(live), key: "off", label: "resilient-llm, export on, trace not sampled (no spans)", headers: parent("00") }),
    makeTarget({ ...at(live), key: "on", label: "resilient-llm, export on, trace sampled (spans exported)", headers: parent("01") }),
    makeTarget({ ...at(gone), key: "dead", label: "resilient-llm, trace sampled, the collector never answers", headers: parent("01") }),
  ];
  progress(`trace: workerd processes ${live.pid ?? "?"} and ${gone.pid ?? "?"}`);
  try {
    for (const t of targets) await warmUp(t, opts.warmup, deadline);
    progress("trace: warm-up done");
    const before = { ...sink.stats };
    await runRounds("trace", targets, opts.rounds, opts.requests, deadline, progress);
    await new Promise((r) => setTimeout(r, 500)); // the last exports go out after their answers
    const summaries = Object.fromEntries(targets.map((t) => [t.key, summarize(t)]));
    return { summaries, exports: sink.stats.exports - before.exports, exportBytes: sink.stats.bytes - before.bytes };
  } finally {
    for (const t of targets) t.agent.destroy();
    await sink.close();
    await dead.close();
  }
}

function reportTrace(opts, trace) {
  const s = trace.summaries;
  const lines = [`Trace export: ${opts.rounds} interleaved rounds of ${opts.requests} whole requests per target, concurrency ${opts.concurrency}`];
  lines.push("");
  const rows = Object.values(s).map((x) => [`(${x.target}) ${x.label}`, fmt(x.rps, 0), fmt(x.p50Ms), fmt(x.p99Ms), fmt(x.workerdCpuMsPerReq, 3)]);
  lines.push(...table(["target", "req/s", "p50 ms", "p99 ms", "workerd CPU ms/req"], rows));
  lines.push("");
  const r = (a, b, f) => fmt(a[f] / b[f], 3);
  lines.push(`export on / off: workerd CPU ${r(s.on, s.off, "workerdCpuMsPerReq")}, p50 ${r(s.on, s.off, "p50Ms")}, req/s ${r(s.on, s.off, "rps")}`);
  lines.push(`dead collector / off: p50 ${r(s.dead, s.off, "p50Ms")}, p99 ${r(s.dead, s.off, "p99Ms")}, req/s ${r(s.dead, s.off, "rps")}`);
  lines.push(`the sink received ${trace.exports} exports (${trace.exportBytes} bytes) for ${s.on.requests} sampled requests`);
  return lines;
}

const STREAM_TARGETS = [
  { key: "b", kind: "floor", label: "floor, streamed", model: "bench-model" },
  { key: "c", kind: "gateway", label: "resilient-llm, streamed", model: "stream", servedBy: "healthy-stream" },
  { key: "c0", kind: "baseline", label: "resilient-llm baseline build, streamed", model: "stream", servedBy: "healthy-stream" },
  { key: "e", kind: "reference", label: "reference JS, streamed", model: "healthy", servedBy: "healthy" },
  { key: "f", kind: "referenceRust", label: "reference Rust/wasm, streamed", model: "healthy", servedBy: "healthy" },
];

async function streamPhase(opts, kinds, servers, deadline, progress) {
  const specs = STREAM_TARGETS.filter((s) => kinds[s.kind]);
  for (const s of specs) servers[`${s.kind}-stream`] = await startMiniflare(kinds[s.kind](true));
  const targets = [];
  for (const c of opts.streamConcurrency) {
    for (const s of specs) {
      const server = servers[`${s.kind}-stream`];
      targets.push(makeTarget({ ...s, key: `${s.key}@${c}`, url: v1(server.url), pid: server.pid, concurrency: c, stream: true }));
    }
  }
  progress(`stream: workerd processes ${specs.map((s) => `${s.key} ${servers[`${s.kind}-stream`].pid ?? "not found"}`).join(", ")}`);
  try {
    for (const t of targets) await warmUp(t, opts.streamWarmup, deadline);
    progress("stream: warm-up done");
    await runRounds("stream", targets, opts.rounds, opts.streamRequests, deadline, progress);
    return { summaries: Object.fromEntries(targets.map((t) => [t.key, summarize(t)])) };
  } finally {
    for (const t of targets) t.agent.destroy();
  }
}

const COLD_TARGETS = [
  { key: "b", kind: "floor", label: "floor", model: "bench-model" },
  { key: "c", kind: "gateway", label: "resilient-llm", model: "healthy", servedBy: "healthy" },
  { key: "c0", kind: "baseline", label: "resilient-llm baseline build", model: "healthy", servedBy: "healthy" },
  { key: "e", kind: "reference", label: "reference JS", model: "healthy", servedBy: "healthy" },
  { key: "f", kind: "referenceRust", label: "reference Rust/wasm", model: "healthy", servedBy: "healthy" },
];

async function coldPhase(opts, kinds, deadline, progress) {
  const specs = COLD_TARGETS.filter((s) => kinds[s.kind]);
  const runs = Object.fromEntries(specs.map((s) => [s.key, []]));
  for (let i = 0; i < opts.coldRuns; i++) {
    if (Date.now() >= deadline) throw new Error(`--max-seconds reached in the cold phase after ${i} runs`);
    const order = specs.map((_, j) => specs[(j + i) % specs.length]);
    const cells = [];
    for (const s of order) {
      const r = await coldStart(kinds, s.kind, s);
      runs[s.key].push(r);
      cells.push(`${s.key} ${fmt(r.coldCpuMs, 1)} ms CPU`);
    }
    progress(`cold run ${i + 1}/${opts.coldRuns}: ${cells.join(", ")}`);
  }
  return {
    summaries: Object.fromEntries(specs.map((s) => [s.key, { target: s.key, label: s.label, ...summarizeCold(runs[s.key]) }])),
  };
}

const LONG_TARGETS = [
  { key: "b", kind: "floor", label: "floor, 10,000-event stream", model: "bench-model" },
  { key: "c", kind: "gateway", label: "resilient-llm, 10,000-event stream", model: "stream", servedBy: "healthy-long" },
  { key: "c0", kind: "baseline", label: "resilient-llm baseline build, 10,000-event stream", model: "stream", servedBy: "healthy-long" },
];

/** Why a long stream's answer is not every event and word of it, or null. */
function checkLong(res) {
  if (res.status !== 200) return `HTTP ${res.status}: ${res.body.toString("utf8").slice(0, 200)}`;
  if (!res.body.subarray(-DONE_TAIL.length).equals(DONE_TAIL)) return `no final [DONE]: …${res.body.toString("utf8").slice(-200)}`;
  const ev = readEvents(res.body);
  if (ev.error) return ev.error;
  if (ev.content !== LONG_EVENTS) return `${ev.content} content events, expected ${LONG_EVENTS}`;
  const words = ev.text.split(" ").length;
  return words === LONG_EVENTS ? null : `${words} words, expected ${LONG_EVENTS}`;
}

async function longPhase(opts, kinds, servers, deadline, progress) {
  const specs = LONG_TARGETS.filter((s) => kinds[s.kind]);
  for (const s of specs) servers[`${s.kind}-long`] = await startMiniflare(kinds[s.kind]("long"));
  const targets = specs.map((s) => {
    const server = servers[`${s.kind}-long`];
    // A connection per stream: an idle keep-alive connection may be closed by workerd while
    // the other targets stream for seconds, and a request sent on it then fails.
    return { ...s, pid: server.pid, agent: new http.Agent({ keepAlive: false, maxSockets: 1 }), url: v1(server.url), runs: [] };
  });
  progress(`long: workerd processes ${targets.map((t) => `${t.key} ${t.pid ?? "not found"}`).join(", ")}`);
  try {
    const body = (t) => chatBody(t.model, true);
    for (let i = 0; i < opts.longStreams; i++) {
      if (Date.now() >= deadline) throw new Error(`--max-seconds reached in the long phase after ${i} streams`);
      const cells = [];
      for (const t of targets.map((_, j) => targets[(j + i) % targets.length])) {
        const w0 = procCpuMs(t.pid);
        const s0 = performance.now();
        const res = await post(t.agent, t.url, body(t));
        const ms = performance.now() - s0;
        const why = checkLong(res);
        if (why) throw new Error(`long stream ${i + 1} of (${t.key}) ${t.label}: ${why}`);
        const w1 = procCpuMs(t.pid);
        const rss = procRssMib(t.pid);
        t.runs.push({ ms, bytes: res.body.length, workerdCpuMs: w0 === null || w1 === null ? null : w1 - w0, rssMib: rss });
        cells.push(`${t.key} ${fmt(ms, 0)} ms, RSS ${fmt(rss, 1)} MiB`);
      }
      progress(`long stream ${i + 1}/${opts.longStreams}: ${cells.join(", ")}`);
    }
    return {
      summaries: Object.fromEntries(targets.map((t) => {
        const rss = t.runs.map((r) => r.rssMib);
        const cpu = t.runs.map((r) => r.workerdCpuMs).filter((x) => x !== null);
        // From the second stream on: the first also pays for the isolate's first use.
        const grow = rss[0] === null ? null : rss[rss.length - 1] - rss[1];
        return [t.key, {
          target: t.key, label: t.label, streams: t.runs.length, bytes: t.runs[0].bytes,
          msP50: median(t.runs.map((r) => r.ms)),
          workerdCpuMsPerStream: cpu.length ? cpu.reduce((a, b) => a + b, 0) / cpu.length : null,
          rssFirstMib: rss[0], rssSecondMib: rss[1], rssLastMib: rss[rss.length - 1], rssMaxMib: Math.max(...rss),
          rssGrowthMib: grow, rssGrowthPerStreamKib: grow === null ? null : (grow * 1024) / (t.runs.length - 2),
        }];
      })),
    };
  } finally {
    for (const t of targets) t.agent.destroy();
  }
}

function reportLong(opts, long) {
  const lines = [];
  lines.push(`Long streams: ${opts.longStreams} per target of ${LONG_EVENTS} one-word content events, one at a time, each checked whole; workerd VmRSS after each`);
  lines.push("");
  const rows = Object.values(long.summaries).map((x) => [`(${x.target}) ${x.label}`, String(x.bytes), fmt(x.msP50, 0), fmt(x.workerdCpuMsPerStream, 1),
    fmt(x.workerdCpuMsPerStream === null ? null : (x.workerdCpuMsPerStream * 1000) / LONG_EVENTS, 1),
    fmt(x.rssFirstMib, 1), fmt(x.rssSecondMib, 1), fmt(x.rssLastMib, 1), fmt(x.rssMaxMib, 1), fmt(x.rssGrowthPerStreamKib, 1)]);
  lines.push(...table(["target", "bytes", "p50 ms", "workerd CPU ms/stream", "us/event", "RSS 1st MiB", "RSS 2nd MiB", "RSS last MiB", "RSS max MiB", "growth KiB/stream (2nd..last)"], rows));
  return lines;
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
  const need = [
    ["build/index.js", "run scripts/build-worker.sh (or scripts/bench-worker.sh)"],
    ["build/index_bg.wasm", "run scripts/build-worker.sh (or scripts/bench-worker.sh)"],
    ["benches/edge-reference/build/index.js", "run scripts/bench-worker.sh, which builds it"],
  ].map(([f, how]) => [path.join(ROOT, f), how]);
  if (opts.baseline) need.push([path.join(opts.baseline, "index.js"), "build it (scripts/bench-worker.sh --baseline-rev REV)"]);
  for (const [file, how] of need) {
    if (!existsSync(file)) {
      process.stderr.write(`bench-worker: ${file} is missing: ${how}\n`);
      return 2;
    }
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
  let mock;
  try {
    mock = await startProviders();
    if (opts.streamUsage) STREAM_EXTRA.stream_options = { include_usage: true };
    const kinds = workerKinds(mock, { baseline: opts.baseline });
    const result = {
      options: opts,
      machine: { cores: os.availableParallelism(), loadavg: os.loadavg() },
      config: { breaker: BREAKER, retry: RETRY, stream: { tokens: STREAM_TOKENS, events: STREAM_EVENTS } },
    };
    // Each phase's workers stop before the next starts, so idle processes do not share the cores.
    const stop = async () => {
      for (const [name, s] of Object.entries(servers)) {
        await s.mf.dispose().catch(() => {});
        delete servers[name];
      }
    };
    if (opts.phases.includes("whole")) {
      result.whole = await wholePhase(opts, kinds, mock, servers, deadline, progress);
      await stop();
    }
    if (opts.phases.includes("stream")) {
      result.stream = await streamPhase(opts, kinds, servers, deadline, progress);
      await stop();
    }
    if (opts.phases.includes("long")) {
      result.long = await longPhase(opts, kinds, servers, deadline, progress);
      await stop();
    }
    if (opts.phases.includes("cache")) {
      result.cache = await cachePhase(opts, kinds, mock, servers, deadline, progress);
      await stop();
    }
    if (opts.phases.includes("trace")) {
      result.trace = await tracePhase(opts, kinds, servers, deadline, progress);
      await stop();
    }
    if (opts.phases.includes("cold")) result.cold = await coldPhase(opts, kinds, deadline, progress);
    result.wallSeconds = (Date.now() - startedAt) / 1000;
    if (opts.jsonOut) writeFileSync(opts.jsonOut, `${JSON.stringify(result, null, 2)}\n`);
    if (opts.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    else process.stdout.write(`${report(opts, result)}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`bench-worker: error: ${err?.stack ?? err}\n`);
    for (const [name, s] of Object.entries(servers)) {
      if (s?.tail.length) process.stderr.write(`bench-worker: last workerd output of ${name}:\n${s.tail.join("").slice(-2000)}\n`);
    }
    return 1;
  } finally {
    for (const s of Object.values(servers)) await s.mf.dispose().catch(() => {});
    await mock?.close().catch(() => {});
    clearTimeout(watchdog);
  }
}

process.exitCode = await main();
