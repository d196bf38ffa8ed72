// Browsers, web workers and bundlers: the wasm is fetched beside this file and instantiated on
// import (a top-level await), so no `init()` is needed.
import init from "./wasm/resilient_llm.js";

await init({ module_or_path: new URL("./wasm/resilient_llm_bg.wasm", import.meta.url) });

export * from "./facade.mjs";
