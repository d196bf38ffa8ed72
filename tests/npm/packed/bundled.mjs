// An ES module program that run.sh bundles to CommonJS with esbuild, as a Node app's build may:
// the package's ES module entry then has no import.meta.url. Run where the package is
// installed, it loads its wasm from there; elsewhere it fails naming the way out.
import assert from "node:assert/strict";

import { ResilientClient } from "resilient-llm";

async function main() {
  const up = { name: "up", chat: (req) => Promise.resolve({ text: `up: ${req.messages[0].content}` }) };
  const client = new ResilientClient({}, { providers: [up] });
  assert.equal((await client.chat({ messages: [{ role: "user", content: "hi" }] })).text, "up: hi");
  console.log("packed esm bundled to cjs: ok");
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
