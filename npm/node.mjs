// Node, as an ES module: the wasm is read from this package's folder and instantiated on import.
import { existsSync, readFileSync } from "node:fs";

import { initSync } from "./wasm/resilient_llm.js";

initSync({ module: readFileSync(wasmPath()) });

export * from "./facade.mjs";

/**
 * The wasm file beside this module. Bundled into CommonJS (esbuild, webpack…), a module has no
 * `import.meta.url`: the wasm is then looked for as the installed package's, and missing, named.
 */
function wasmPath() {
  const url = import.meta.url;
  if (url) return new URL("./wasm/resilient_llm_bg.wasm", url);
  /* global require, __dirname */
  const candidates = [];
  try {
    if (typeof require === "function") candidates.push(require.resolve("resilient-llm/wasm"));
  } catch {
    // not installed where the bundle runs
  }
  if (typeof __dirname === "string") candidates.push(`${__dirname}/resilient_llm_bg.wasm`);
  const found = candidates.find((p) => existsSync(p));
  if (found) return found;
  throw new Error(
    "resilient-llm: this copy of its ES module entry (node.mjs) was bundled without import.meta.url " +
      "(CommonJS output), so it cannot find resilient_llm_bg.wasm. Keep resilient-llm external to " +
      "the bundle (esbuild --external:resilient-llm; require() then loads its CommonJS entry, " +
      "node.cjs), install it where the bundle runs, or copy " +
      "node_modules/resilient-llm/wasm/resilient_llm_bg.wasm beside the bundle.",
  );
}
