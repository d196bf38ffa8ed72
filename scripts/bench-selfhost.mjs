#!/usr/bin/env node
// Self-hosted against Miniflare, in one run: throughput and latency of a healthy request (an
// OpenAI chat completion, gateway auth on, one provider answering at once: the mock provider)
// through the same build/ served by scripts/serve.sh (workerd, state on disk) and by Miniflare
// (tests/e2e/gateway-harness.mjs: what the e2e suites and `wrangler dev` run), both on
// 127.0.0.1 against the same mock. Rounds interleave the two, the first of each pair
// alternating, so drift on a shared machine falls on both. Build first (scripts/build-worker.sh).
//
//   node scripts/bench-selfhost.mjs [--rounds N] [--sequential N] [--concurrency C] [--requests N]
//
// Per round and runtime: 30 warm-up requests, then --sequential requests one after another
// (latency: p50 and p90, pooled over rounds), then --requests at --concurrency (throughput, the
// median of the rounds). Defaults 5 rounds, 300 sequential, 1200 at 16; about a minute. Prints
// one line per round and a summary with the ratios (self-hosted / Miniflare).
import { performance } from "node:perf_hooks";
import { GATEWAY_KEY, gatewayConfig, startGateway, startMock, startSelfHosted } from "../tests/e2e/gateway-harness.mjs";

const opts = { rounds: 5, sequential: 300, concurrency: 16, requests: 1200 };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
  const key = argv[i].replace(/^--/, "");
  const value = Number(argv[i + 1]);
  if (!(key in opts) || !Number.isInteger(value) || value < 1 || value > 100000) {
    console.error(`bench-selfhost: bad argument ${argv[i]} ${argv[i + 1] ?? ""} (see the header)`);
    process.exit(2);
  }
  opts[key] = value;
}

const body = JSON.stringify({ model: "default", messages: [{ role: "user", content: "hello" }] });
const headers = { "content-type": "application/json", authorization: `Bearer ${GATEWAY_KEY}` };

async function once(url) {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, { method: "POST", headers, body, signal: AbortSignal.timeout(10000) });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`${url}: status ${res.status}`);
  return performance.now() - t0;
}

async function sequential(url, n) {
  const out = [];
  for (let i = 0; i < n; i++) out.push(await once(url));
  return out;
}

async function throughput(url, total, concurrency) {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < total) {
      next += 1;
      await once(url);
    }
  }));
  return total / ((performance.now() - t0) / 1000);
}

const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const median = (xs) => quantile(xs, 0.5);

const mock = await startMock({ config: { providers: { ok: {} } } });
const config = gatewayConfig(mock, {
  providers: { ok: "openai" },
  routes: { default: [{ provider: "ok", model: "m-ok" }] },
});
const runtimes = [
  { name: "self-hosted", gw: await startSelfHosted(config), latencies: [], rps: [] },
  { name: "miniflare", gw: await startGateway(config), latencies: [], rps: [] },
];
try {
  console.log(`bench-selfhost: ${opts.rounds} rounds; per round and runtime ${opts.sequential} sequential, ${opts.requests} at concurrency ${opts.concurrency}`);
  for (let round = 0; round < opts.rounds; round++) {
    const order = round % 2 === 0 ? runtimes : [...runtimes].reverse();
    const line = [];
    for (const rt of order) {
      await sequential(rt.gw.url, 30);
      const lat = await sequential(rt.gw.url, opts.sequential);
      rt.latencies.push(...lat);
      const rps = await throughput(rt.gw.url, opts.requests, opts.concurrency);
      rt.rps.push(rps);
      line.push(`${rt.name} p50 ${median(lat).toFixed(2)} ms, ${rps.toFixed(0)} req/s`);
    }
    console.log(`round ${round + 1}: ${line.join("; ")}`);
  }
  const [self, mf] = runtimes;
  const ratios = self.rps.map((r, i) => r / mf.rps[i]);
  console.log("");
  for (const rt of runtimes) {
    console.log(`${rt.name.padEnd(12)} throughput ${median(rt.rps).toFixed(0)} req/s (median of rounds), latency p50 ${median(rt.latencies).toFixed(2)} ms, p90 ${quantile(rt.latencies, 0.9).toFixed(2)} ms`);
  }
  console.log(`self-hosted / miniflare: throughput ${median(ratios).toFixed(2)}x (rounds ${Math.min(...ratios).toFixed(2)}..${Math.max(...ratios).toFixed(2)}), p50 ${(median(self.latencies) / median(mf.latencies)).toFixed(2)}x`);
} finally {
  for (const rt of runtimes) await rt.gw.close();
  await mock.close();
}
