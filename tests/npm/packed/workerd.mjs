// Runs worker.mjs in workerd (Miniflare, from the repository's node_modules) from the fresh
// project, and checks its answer. Node 22 (Miniflare needs it).
//
//   node workerd.mjs APP_DIR MINIFLARE_MODULE
import assert from "node:assert/strict";
import path from "node:path";
import { pathToFileURL } from "node:url";

const app = path.resolve(process.argv[2]);
const { Miniflare } = await import(pathToFileURL(process.argv[3]).href);
const mf = new Miniflare({
  modules: true,
  modulesRoot: app,
  scriptPath: path.join(app, "worker.mjs"),
  modulesRules: [
    { type: "ESModule", include: ["**/*.mjs", "**/*.js"] },
    { type: "CompiledWasm", include: ["**/*.wasm"] },
  ],
  compatibilityDate: "2025-09-01",
});
try {
  const res = await mf.dispatchFetch("http://worker.invalid/");
  const body = await res.text();
  assert.equal(res.status, 200, body);
  assert.deepEqual(JSON.parse(body), { text: "up: worker", servedBy: "up", fetched: "up: fetch" });
  console.log("packed workerd entry (Miniflare): ok");
} finally {
  await mf.dispose();
}
