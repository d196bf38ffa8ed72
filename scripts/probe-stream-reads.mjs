// How workerd hands a fetched SSE body to a reader: the number of reads a 100-event answer
// (1,000 tokens, the edge benchmark's stream, from the mock provider, no delay between
// events) takes in one Miniflare, read four ways, each several times:
//   direct:   the body's default reader (what the gateway did before `src/web/gather.rs`);
//   atleast:  a BYOB reader's readAtLeast(32, 64 KiB view) (what it does now);
//   tee:      a tee'd branch read with BYOB while the other branch is drained natively into
//             a crypto.DigestStream (so the tee pulls ahead), each read after 1 ms of work:
//             whether a busy reader gets what piled up in one read (it does not).
// A measurement: prints one line per way and run; exits non-zero only on errors.
//
//   node scripts/probe-stream-reads.mjs [--runs N]
import { Miniflare } from "miniflare";
import { startMock } from "../tests/e2e/mock-provider.mjs";

const runs = Number(process.argv[process.argv.indexOf("--runs") + 1]) || 3;
const WORKER = `
export default {
  async fetch(request, env) {
    const way = new URL(request.url).searchParams.get("way");
    const up = await fetch(env.UPSTREAM, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer mock-key" },
      body: JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "hi" }] }),
    });
    const sizes = [];
    if (way === "direct") {
      const reader = up.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        sizes.push(value.length);
      }
    } else {
      let body = up.body;
      if (way === "tee") {
        const [drained, mine] = body.tee();
        const sink = new crypto.DigestStream("MD5");
        drained.pipeTo(sink).catch(() => {});
        sink.digest.catch(() => {});
        body = mine;
      }
      const reader = body.getReader({ mode: "byob" });
      let buffer = new ArrayBuffer(65536);
      for (;;) {
        const view = new Uint8Array(buffer);
        const { done, value } = way === "atleast" ? await reader.readAtLeast(32, view) : await reader.read(view);
        if (done) break;
        sizes.push(value.length);
        buffer = value.buffer;
        if (way === "tee") for (const t = Date.now(); Date.now() - t < 1;);
      }
    }
    const bytes = sizes.reduce((a, b) => a + b, 0);
    return Response.json({ reads: sizes.length, bytes, first: sizes.slice(0, 6) });
  },
};`;

const mock = await startMock({ config: { providers: { p: { answerTokens: 1000, tokensPerChunk: 10 } } } });
const mf = new Miniflare({
  modules: true, script: WORKER, compatibilityDate: "2026-08-01", host: "127.0.0.1", port: 0,
  bindings: { UPSTREAM: `${mock.providerUrl("p")}/v1/chat/completions` },
});
try {
  const url = await mf.ready;
  for (let run = 1; run <= runs; run++) {
    for (const way of ["direct", "atleast", "tee"]) {
      const res = await fetch(new URL(`/?way=${way}`, url));
      if (!res.ok) throw new Error(`${way}: ${res.status} ${await res.text()}`);
      const r = await res.json();
      console.log(`run ${run} ${way.padEnd(8)} ${String(r.reads).padStart(4)} reads, ${r.bytes} bytes; first reads ${r.first.join(", ")}`);
    }
  }
} finally {
  await mf.dispose();
  await mock.close();
}
