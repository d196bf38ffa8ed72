// Cloudflare Workers (workerd): the wasm comes in as a compiled WebAssembly.Module, the way
// wrangler bundles a `.wasm` import, and is instantiated on import.
import { initSync } from "./wasm/resilient_llm.js";
import wasm from "./wasm/resilient_llm_bg.wasm";

initSync({ module: wasm });

export * from "./facade.mjs";
