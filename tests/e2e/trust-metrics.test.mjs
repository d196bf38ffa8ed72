// End to end: a run of unique long paths without a key leaves /metrics as it was (no series per
// path: every label value comes from a bounded set), through the built Worker in workerd
// (Miniflare). Build first (scripts/test-worker.sh does): build/index.js. Prints the exposition's
// size, the wasm instance's memory and workerd's RSS before and after the run.
//
// TRUST_METRICS_PATHS (default 2000, at most 20000) sets the length of the run.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { GATEWAY_KEY, gatewayConfig, startGateway, startMock } from "./gateway-harness.mjs";

const PATHS = Math.min(Number(process.env.TRUST_METRICS_PATHS ?? 2000), 20000);
const LONG = "p".repeat(4000);

/** The RSS of the workerd processes under this one, in MiB (null where /proc has none). */
function workerdRss() {
  try {
    const out = execFileSync("ps", ["-eo", "pid,ppid,comm"], { encoding: "utf8" });
    const rows = out.trim().split("\n").slice(1).map((l) => l.trim().split(/\s+/));
    const mine = new Set([String(process.pid)]);
    for (let grew = true; grew; ) {
      grew = false;
      for (const [pid, ppid] of rows) if (mine.has(ppid) && !mine.has(pid)) (mine.add(pid), (grew = true));
    }
    let kib = 0;
    for (const [pid, , comm] of rows) {
      if (!mine.has(pid) || !comm.includes("workerd")) continue;
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
      if (m) kib += Number(m[1]);
    }
    return kib ? Math.round(kib / 1024) : null;
  } catch {
    return null;
  }
}

describe("metrics under a run of unique unauthenticated paths", { timeout: 600000 }, () => {
  let mock, gw;
  before(async () => {
    mock = await startMock({ config: { providers: { p: {} } } });
    gw = await startGateway(gatewayConfig(mock, { providers: { p: "openai" }, routes: { default: [{ provider: "p", model: "m" }] } }));
  });
  after(async () => {
    await gw?.close();
    await mock?.close();
  });

  async function scrape() {
    const res = await gw.fetch(0, "http://gateway/metrics", { headers: { authorization: `Bearer ${GATEWAY_KEY}` } });
    assert.equal(res.status, 200);
    const text = await res.text();
    const samples = text.split("\n").filter((l) => l && !l.startsWith("#"));
    const memory = samples.find((l) => l.startsWith("llm_gateway_wasm_memory_bytes"));
    return { text, series: samples.length, bytes: text.length, wasm: memory ? Number(memory.split(" ").pop()) : null };
  }

  /** `n` requests, each of a unique long path, none with a key: 404, 401 and oversized-header 400. */
  async function run(from, n) {
    for (let i = from; i < from + n; i++) {
      const kind = i % 4;
      const path = kind === 1 ? `/v1/models/${LONG}${i}` : `/${LONG}/${i}`;
      const headers = kind === 2 ? { "anthropic-beta": "b".repeat(9000) } : kind === 3 ? { "x-api-key": `wrong-${i}` } : {};
      const res = await gw.fetch(0, `http://gateway${kind === 2 ? "/health" : path}${kind === 2 ? `?${i}` : ""}`, { headers });
      await res.arrayBuffer();
      assert.ok([400, 401, 404].includes(res.status), `${path.slice(0, 40)}: ${res.status}`);
    }
  }

  test(`${PATHS} unique paths leave the exposition flat`, async () => {
    await run(0, 200); // every kind, and counts past three digits below
    await scrape();
    const first = await scrape();
    const rss0 = workerdRss();
    const t0 = Date.now();
    await run(200, PATHS);
    const last = await scrape();
    const rss1 = workerdRss();
    console.log(
      `trust-metrics: ${PATHS} unique unauthenticated paths (${LONG.length} chars) in ${Date.now() - t0} ms: ` +
        `series ${first.series} -> ${last.series}, exposition ${first.bytes} -> ${last.bytes} B, ` +
        `wasm memory ${first.wasm} -> ${last.wasm} B, workerd RSS ${rss0} -> ${rss1} MiB`,
    );
    assert.equal(last.series, first.series, "no series per path");
    assert.ok(last.bytes <= first.bytes + 32, `${first.bytes} -> ${last.bytes} B`);
    assert.ok(!last.text.includes("pppppppp"), "no path in the exposition");
    if (first.wasm !== null) assert.ok(last.wasm - first.wasm <= 1 << 20, `wasm memory ${first.wasm} -> ${last.wasm}`);
  });
});
