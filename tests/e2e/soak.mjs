#!/usr/bin/env node
// The chaos soak: the built Worker (build/index.js) in workerd (Miniflare) with its real breaker
// Durable Object, in front of the fault-injecting mock provider, everything on 127.0.0.1.
// `concurrency` clients send whole and streamed requests in both formats over real HTTP while
// the mock's faults change every phase (every fault mode it has, at random), clients go away
// mid-stream, the breaker objects throw, hang or fail for a phase, and the whole runtime
// (every isolate and Durable Object, storage kept) restarts now and then. It asserts, and
// prints:
//   - 0 hung requests: each ends within the deadline (plus a margin);
//   - 0 incomplete answers presented as complete: a whole answer, or a stream that ends with
//     its format's terminal event, holds the whole echo of its prompt;
//   - every request answered while a provider of its route was healthy throughout (its
//     breaker given time to close again after a blackout);
//   - no provider key in any response or log line;
//   - workerd's memory flat after warm-up (RSS growth bounded, after the last restart);
//   - fleet state consistent at the end: once faults stop, every breaker object and the
//     isolate's /health agree that every provider is closed.
// Bounded in requests and minutes.
//
//   node tests/e2e/soak.mjs [--requests N] [--minutes M] [--concurrency C] [--seed S]
//                           [--restarts R] [--phase-ms P] [--json FILE]
import { gatewayConfig, GATEWAY_KEY, MOCK_KEY, startGateway, startMock, tempDir } from "./gateway-harness.mjs";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith("--")) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const REQUESTS = Number(args.requests ?? 3000);
const MINUTES = Number(args.minutes ?? 2);
const CONCURRENCY = Number(args.concurrency ?? 32);
const RESTARTS = Number(args.restarts ?? 2);
const PHASE_MS = Number(args["phase-ms"] ?? 2000);
let seed = Number(args.seed ?? 1);

// A small seeded RNG (mulberry32): a run can be repeated.
function random() {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (xs) => xs[Math.floor(random() * xs.length)];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- the set-up

const FAULTY = { a: "openai", b: "anthropic", c: "openai", d: "anthropic" };
const STEADY = { s1: "openai", s2: "anthropic" };
const ROUTES = {
  r1: ["a", "b", "s1"],
  r2: ["c", "d", "s2"],
  r3: ["b", "c", "s1"],
  r4: ["d", "a", "s2"],
};
const BREAKER = { failureThreshold: 3, cooldownMs: 1000, maxCooldownMs: 2000 };
const DEADLINE_MS = 20000;
// After a steady provider's blackout: its longest cooldown, a probe, and margin.
const RECOVERY_MS = BREAKER.maxCooldownMs + 3000;

/** Every fault mode of the mock, as rules taking a share `p` of requests. */
function randomFault() {
  const p = pick([0.3, 0.6, 1]);
  return pick([
    { mode: "status", status: 503, p },
    { mode: "status", status: 500, p },
    { mode: "status", status: 529, p },
    { mode: "status", status: 429, retryAfterMs: 100, p },
    { mode: "status", status: 429, p },
    { mode: "hang", p },
    { mode: "slow", slowFirstByteMs: 400, p },
    { mode: "reset", afterMs: 20, p },
    { mode: "malformed", p },
    { mode: "stall", p },
    { mode: "stream", cutAfterChunks: 1 + Math.floor(random() * 8), p },
    { mode: "stream", stallAfterChunks: 1 + Math.floor(random() * 8), p },
    { mode: "stream", malformedChunkAt: Math.floor(random() * 8), p },
    { mode: "stream", noDone: true, p },
    { mode: "stream", slowFirstTokenMs: 500, p },
  ]);
}

function rssOf(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** The workerd processes under this one (Miniflare's runtime), by /proc. */
function workerdPids() {
  const pids = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (comm.includes("workerd") && (ppid === process.pid || isDescendant(ppid))) pids.push(Number(name));
    } catch { /* gone */ }
  }
  return pids;
}

function isDescendant(pid) {
  for (let i = 0; i < 8 && pid > 1; i++) {
    if (pid === process.pid) return true;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      pid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    } catch {
      return false;
    }
  }
  return false;
}

const workerdRss = () => workerdPids().reduce((n, pid) => n + (rssOf(pid) ?? 0), 0);

// ---------------------------------------------------------------- one request

function requestBody(format, route, prompt, stream) {
  const messages = [{ role: "user", content: prompt }];
  if (format === "openai") return { path: "/v1/chat/completions", body: { model: route, messages, stream } };
  return { path: "/v1/messages", body: { model: route, max_tokens: 256, messages, stream } };
}

/** The answer's text, and whether the answer says it is complete. */
function readWhole(format, body) {
  if (format === "openai") {
    const c = body?.choices?.[0];
    return { text: c?.message?.content ?? "", complete: typeof c?.finish_reason === "string" };
  }
  const text = (body?.content ?? []).filter((b) => b.type === "text").map((b) => b.text).join("");
  return { text, complete: typeof body?.stop_reason === "string" };
}

/** A streamed answer's text, whether it ended with its terminal event, and whether an error event came. */
function readStream(format, raw) {
  let text = "";
  let terminal = false;
  let errored = false;
  for (const block of raw.split(/\r?\n\r?\n/)) {
    const data = block.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
    const event = block.split(/\r?\n/).find((l) => l.startsWith("event:"))?.slice(6).trim();
    if (!data) continue;
    if (format === "openai") {
      if (data === "[DONE]") { terminal = true; continue; }
      let j;
      try { j = JSON.parse(data); } catch { continue; }
      if (j.error) errored = true;
      text += j.choices?.[0]?.delta?.content ?? "";
    } else {
      let j;
      try { j = JSON.parse(data); } catch { continue; }
      const type = j.type ?? event;
      if (type === "error") errored = true;
      if (type === "message_stop") terminal = true;
      if (type === "content_block_delta" && j.delta?.type === "text_delta") text += j.delta.text;
    }
  }
  return { text, complete: terminal, errored };
}

// ---------------------------------------------------------------- the run

async function main() {
  const started = Date.now();
  const endBy = started + MINUTES * 60000;
  const mockProviders = {};
  for (const name of [...Object.keys(FAULTY), ...Object.keys(STEADY)]) mockProviders[name] = { chunkDelayMs: 2 };
  const mock = await startMock({ config: { providers: mockProviders }, seed });
  const config = {
    ...gatewayConfig(mock, {
      providers: { ...FAULTY, ...STEADY },
      routes: Object.fromEntries(Object.entries(ROUTES).map(([r, ps]) => [r, ps.map((p) => ({ provider: p, model: `${p}-model` }))])),
      breaker: BREAKER,
      retry: { maxAttempts: 2, baseDelayMs: 50, maxDelayMs: 500 },
      timeoutMs: 1500,
      deadlineMs: DEADLINE_MS,
    }),
    firstTokenTimeoutMs: 1500,
    idleTimeoutMs: 1500,
  };
  const store = tempDir();
  const stats = {
    requests: 0, ok: 0, streamed: 0, whole: 0, openai: 0, anthropic: 0, disconnected: 0,
    failedAnswered: 0, interrupted: 0, statusCounts: {}, hung: 0, incompleteAsComplete: 0, silentCuts: 0,
    unansweredWhileHealthy: 0, keyInResponse: 0, keyInLog: 0, logLines: 0, restarts: 0,
    phases: 0, fleetFaultPhases: 0, blackouts: 0, duringRestart: 0, failures: [],
  };
  const fail = (what, detail) => {
    if (stats.failures.length < 20) stats.failures.push({ what, ...detail });
  };
  const gw = await startGateway(config, {
    persist: store.dir,
    vars: { FLEET_FAULTS: "on" },
    onLog(line) {
      stats.logLines++;
      if (line.includes(MOCK_KEY)) { stats.keyInLog++; fail("key in a log line", { line: line.slice(0, 200) }); }
    },
  });

  // Fault state over time: per provider, the spans it was faulted in.
  const faultedSpans = Object.fromEntries(Object.keys({ ...FAULTY, ...STEADY }).map((p) => [p, []]));
  const openSpans = {};
  const restartSpans = [];
  const markFault = (p, on, now) => {
    if (on && openSpans[p] === undefined) openSpans[p] = now;
    if (!on && openSpans[p] !== undefined) { faultedSpans[p].push([openSpans[p], now]); delete openSpans[p]; }
  };
  /** Whether `p` was healthy, its breaker given time to recover, over [from, to]. */
  const healthyOver = (p, from, to) => {
    const spans = [...faultedSpans[p]];
    if (openSpans[p] !== undefined) spans.push([openSpans[p], Infinity]);
    return spans.every(([s, e]) => e + RECOVERY_MS < from || s > to);
  };
  const restartOverlaps = (from, to) => restartSpans.some(([s, e]) => e + RECOVERY_MS >= from && s <= to);

  let stopPhases = false;
  async function phases() {
    while (!stopPhases) {
      stats.phases++;
      const now = Date.now();
      for (const p of Object.keys(FAULTY)) {
        const faults = random() < 0.5 ? [] : [randomFault(), ...(random() < 0.3 ? [randomFault()] : [])];
        mock.setFault(p, { faults });
        markFault(p, faults.length > 0, now);
      }
      // Now and then a steady provider has a blackout too: its routes may then fail.
      const blackout = random() < 0.1 ? pick(Object.keys(STEADY)) : null;
      if (blackout) stats.blackouts++;
      for (const p of Object.keys(STEADY)) {
        const faults = p === blackout ? [randomFault()] : [];
        mock.setFault(p, { faults });
        markFault(p, faults.length > 0, now);
      }
      // Now and then the breaker objects throw, hang or fail for a phase.
      const fleetFault = random() < 0.2 ? pick(["throw", "hang", "fail"]) : "none";
      if (fleetFault !== "none") stats.fleetFaultPhases++;
      for (const p of Object.keys({ ...FAULTY, ...STEADY })) {
        const mode = fleetFault !== "none" && random() < 0.6 ? fleetFault : "none";
        await gw.fleet(p, "fault", { mode }).catch(() => {});
      }
      await sleep(PHASE_MS);
    }
  }

  const samples = [];
  const inflight = new Set();
  let restartAt = Array.from({ length: RESTARTS }, (_, i) => Math.floor((REQUESTS * (i + 1)) / (2 * (RESTARTS + 1))));
  let lastRestartDone = 0;
  let warmSample = null;
  let next = 0;
  let restarting = null;

  async function one(i, fixed = {}) {
    const format = fixed.format ?? (random() < 0.5 ? "openai" : "anthropic");
    const stream = fixed.stream ?? random() < 0.5;
    const route = fixed.route ?? pick(Object.keys(ROUTES));
    const disconnect = !fixed.route && stream && random() < 0.1;
    const prompt = `soak ${i} ${Math.floor(random() * 1e9)} alpha beta gamma delta epsilon zeta`;
    const { path, body } = requestBody(format, route, prompt, stream);
    stats.requests++;
    stats[format]++;
    stats[stream ? "streamed" : "whole"]++;
    const from = Date.now();
    const ctl = new AbortController();
    const track = { i, route, format, stream, disconnect, stage: "fetch", from };
    inflight.add(track);
    // Past the deadline and a margin, a request is hung: given up on, and counted.
    let hungTimer;
    const hungAt = new Promise((_, reject) => {
      hungTimer = setTimeout(() => {
        ctl.abort(new Error("hung"));
        reject(new Error("hung"));
      }, DEADLINE_MS + 10000);
    });
    hungAt.catch(() => {});
    const beforeHung = (promise) => Promise.race([promise, hungAt]);
    let status = 0;
    let outcome = { text: "", complete: false, errored: false };
    let headersText = "";
    let bodyText = "";
    let hung = false;
    let transportError = null;
    try {
      const res = await beforeHung(fetch(`${gw.url}${path}`, {
        method: "POST",
        signal: ctl.signal,
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${GATEWAY_KEY}`,
          ...(format === "anthropic" ? { "anthropic-version": "2023-06-01" } : {}),
        },
        body: JSON.stringify(body),
      }));
      status = res.status;
      track.stage = "body";
      headersText = JSON.stringify([...res.headers]);
      if (disconnect) {
        const reader = res.body.getReader();
        await beforeHung(reader.read());
        await sleep(Math.floor(random() * 40));
        await beforeHung(reader.cancel().catch(() => {}));
        ctl.abort(new Error("client went away"));
        stats.disconnected++;
      } else {
        bodyText = await beforeHung(res.text());
        if (stream && status === 200) outcome = readStream(format, bodyText);
        else {
          let json;
          try { json = JSON.parse(bodyText); } catch { json = null; }
          outcome = status === 200 ? { ...readWhole(format, json), errored: false } : { text: "", complete: false, errored: true };
        }
      }
    } catch (e) {
      if (String(e?.message) === "hung" || String(ctl.signal.reason?.message) === "hung") hung = true;
      else if (!disconnect) transportError = String(e?.cause?.code ?? e?.message ?? e);
    } finally {
      clearTimeout(hungTimer);
      inflight.delete(track);
    }
    const to = Date.now();
    stats.statusCounts[status] = (stats.statusCounts[status] ?? 0) + 1;
    if (headersText.includes(MOCK_KEY) || bodyText.includes(MOCK_KEY)) {
      stats.keyInResponse++;
      fail("key in a response", { i });
    }
    if (hung) { stats.hung++; fail("hung", { i, route, format, stream, ms: to - from }); return; }
    if (disconnect) return;
    const duringRestart = restarting !== null || restartOverlaps(from, to);
    if (duringRestart) stats.duringRestart++;
    const echo = `echo: ${prompt}`;
    const whole = outcome.text.endsWith(echo);
    if (status === 200 && outcome.complete && !whole) {
      stats.incompleteAsComplete++;
      fail("incomplete answer presented as complete", { i, route, format, stream, text: outcome.text.slice(-120) });
    }
    if (status === 200 && stream && !outcome.complete && !outcome.errored && !duringRestart) {
      stats.silentCuts++;
      fail("stream cut without an error event", { i, route, format, text: outcome.text.slice(-80) });
    }
    const answered = status === 200 && outcome.complete && whole;
    if (answered) stats.ok++;
    else stats.failedAnswered++;
    // A stream cut after it began is continued where a provider can continue it (the same
    // one, or one that takes a prefill); else it ends with an error event: flagged, not hidden.
    const interrupted = status === 200 && stream && outcome.errored;
    if (interrupted) stats.interrupted++;
    const chain = ROUTES[route] ?? [route.split("/")[0]];
    const healthy = chain.some((p) => healthyOver(p, from, to));
    if (!answered && !interrupted && healthy && !duringRestart) {
      stats.unansweredWhileHealthy++;
      const steady = chain.at(-1);
      let trail = null;
      try { trail = (JSON.parse(bodyText).error?.attempts ?? []).map((a) => `${a.provider}:${a.outcome?.error?.kind ?? "ok"}`).join(" "); } catch { /* not JSON */ }
      fail("unanswered while a provider of its route was healthy", { i, route, format, stream, status, transportError, steady, trail, body: trail ? undefined : bodyText.slice(0, 300) });
    }
  }

  async function worker() {
    while (next < REQUESTS && Date.now() < endBy) {
      if (restarting) { await restarting; continue; }
      const i = next++;
      if (restartAt.length && i >= restartAt[0]) {
        restartAt.shift();
        restarting = (async () => {
          await sleep(300);
          const s = Date.now();
          await gw.restart();
          restartSpans.push([s, Date.now()]);
          stats.restarts++;
          lastRestartDone = i;
          warmSample = null;
        })();
        await restarting;
        restarting = null;
        continue;
      }
      await one(i);
    }
  }

  // The wasm instance's linear memory, from /metrics: what of workerd's RSS is the gateway's own heap.
  async function wasmMemory() {
    try {
      const text = await (await fetch(`${gw.url}/metrics`, { headers: { "x-api-key": GATEWAY_KEY } })).text();
      const m = /^llm_gateway_wasm_memory_bytes (\d+)/m.exec(text);
      return m ? Number(m[1]) : null;
    } catch {
      return null;
    }
  }
  let warmWasm = null;

  let stopSampling = false;
  async function sampling() {
    while (!stopSampling) {
      const rss = workerdRss();
      samples.push({ at: Date.now() - started, done: next, rss });
      if (samples.length % 5 === 0) {
        process.stderr.write(`soak: ${Math.round((Date.now() - started) / 1000)} s, ${next} started, ${stats.ok} answered, ` +
          `${stats.restarts} restarts, workerd ${Math.round(rss / 1048576)} MiB, in flight ${inflight.size}\n`);
        if (process.env.SOAK_DEBUG) for (const t of [...inflight].slice(0, 5)) process.stderr.write(`  ${JSON.stringify({ ...t, ms: Date.now() - t.from })}\n`);
      }
      // Warm-up: a fifth of what is left after the last restart, at least 1000 requests.
      const warmAt = lastRestartDone + Math.max(1000, Math.floor((REQUESTS - lastRestartDone) / 5));
      if (warmSample === null && next >= warmAt && restartAt.length === 0 && restarting === null) {
        warmSample = { done: next, rss };
        warmWasm = await wasmMemory();
      }
      await sleep(1000);
    }
  }

  const phaseLoop = phases();
  const sampler = sampling();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  stopPhases = true;
  await phaseLoop;
  const endRss = workerdRss();
  const endWasm = await wasmMemory();
  stopSampling = true;
  await sampler;

  // The end: faults stop; the breakers close again; the fleet and the isolate agree.
  for (const p of Object.keys({ ...FAULTY, ...STEADY })) {
    mock.setFault(p, { faults: [] });
    markFault(p, false, Date.now());
    await gw.fleet(p, "fault", { mode: "none" });
  }
  await sleep(BREAKER.maxCooldownMs + 1200);
  let consistent = false;
  let fleetStates = {};
  for (let round = 0; round < 20 && !consistent; round++) {
    // Every provider called by name (provider/model), so each breaker sees traffic again.
    for (const p of Object.keys({ ...FAULTY, ...STEADY })) {
      for (const format of ["openai", "anthropic"]) {
        for (const stream of [false, true]) await one(`end-${round}`, { route: `${p}/${p}-model`, format, stream });
      }
    }
    await sleep(1300); // past the view's TTL and the report delay
    const health = await (await fetch(`${gw.url}/health`, { headers: { "x-api-key": GATEWAY_KEY } })).json();
    const isolate = Object.fromEntries(health.providers.map((p) => [p.provider, p.state]));
    fleetStates = {};
    for (const p of Object.keys({ ...FAULTY, ...STEADY })) {
      const v = await gw.fleet(p, "view");
      fleetStates[p] = v.status === 200 ? JSON.parse(v.text).state.state : `status ${v.status}`;
    }
    consistent = Object.keys(fleetStates).every((p) => fleetStates[p] === "closed" && isolate[p] === "closed");
    if (!consistent && round === 19) fail("fleet state inconsistent at the end", { fleet: fleetStates, isolate });
  }
  await gw.close();
  await mock.close();
  store.remove();

  const growth = warmSample && endRss ? endRss - warmSample.rss : null;
  // Bounded: after warm-up, at most half again, or 64 MiB.
  const bound = warmSample ? Math.max(64 << 20, warmSample.rss * 0.5) : null;
  const memoryFlat = growth !== null && growth <= bound;
  if (!memoryFlat) fail("memory not flat after warm-up", { warm: warmSample, endRss, bound });
  const MiB = (n) => (n === null || n === undefined ? null : Math.round((n / 1048576) * 10) / 10);
  const summary = {
    requests: stats.requests,
    seconds: Math.round((Date.now() - started) / 100) / 10,
    concurrency: CONCURRENCY,
    answered: stats.ok,
    notAnswered: stats.failedAnswered,
    streamsInterruptedWithErrorEvent: stats.interrupted,
    statuses: stats.statusCounts,
    whole: stats.whole,
    streamed: stats.streamed,
    openai: stats.openai,
    anthropic: stats.anthropic,
    disconnectedMidStream: stats.disconnected,
    phases: stats.phases,
    blackouts: stats.blackouts,
    fleetFaultPhases: stats.fleetFaultPhases,
    runtimeRestarts: stats.restarts,
    requestsDuringRestarts: stats.duringRestart,
    hung: stats.hung,
    incompleteAsComplete: stats.incompleteAsComplete,
    silentStreamCuts: stats.silentCuts,
    unansweredWhileHealthy: stats.unansweredWhileHealthy,
    keyInResponse: stats.keyInResponse,
    keyInLog: stats.keyInLog,
    logLines: stats.logLines,
    workerdRssMiB: { warm: MiB(warmSample?.rss), warmAtRequest: warmSample?.done ?? null, end: MiB(endRss), growth: MiB(growth), bound: MiB(bound),
      peak: MiB(Math.max(0, ...samples.map((s) => s.rss))) },
    wasmMemoryMiB: { warm: MiB(warmWasm), end: MiB(endWasm) },
    memoryFlat,
    fleetConsistent: consistent,
    fleetAtEnd: fleetStates,
    failures: stats.failures,
  };
  const ok = stats.hung === 0 && stats.incompleteAsComplete === 0 && stats.silentCuts === 0 && stats.unansweredWhileHealthy === 0
    && stats.keyInResponse === 0 && stats.keyInLog === 0 && memoryFlat && consistent;
  summary.passed = ok;
  if (args.json) writeFileSync(args.json, `${JSON.stringify({ ...summary, samples }, null, 1)}\n`);
  process.stdout.write(`${JSON.stringify(summary, null, 1)}\n`);
  process.stdout.write(
    `soak: ${summary.requests} requests in ${summary.seconds} s at concurrency ${CONCURRENCY}: ` +
    `${stats.hung} hung, ${stats.incompleteAsComplete} incomplete presented as complete, ` +
    `${stats.unansweredWhileHealthy} unanswered while a provider of the route was healthy, ` +
    `${stats.keyInResponse + stats.keyInLog} keys seen, workerd RSS ${summary.workerdRssMiB.warm} -> ${summary.workerdRssMiB.end} MiB (wasm memory ${summary.wasmMemoryMiB.warm} -> ${summary.wasmMemoryMiB.end} MiB) ` +
    `after warm-up, fleet ${consistent ? "consistent" : "INCONSISTENT"}: ${ok ? "PASS" : "FAIL"}\n`);
  process.exit(ok ? 0 : 1);
}

main().catch((e) => {
  process.stderr.write(`soak: ${e?.stack ?? e}\n`);
  process.exit(2);
});
