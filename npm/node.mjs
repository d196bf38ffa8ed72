// Node, as an ES module: the wasm is read from this package's folder and instantiated on import.
import { readFileSync } from "node:fs";

import { initSync } from "./wasm/resilient_llm.js";

initSync({ module: readFileSync(new URL("./wasm/resilient_llm_bg.wasm", import.meta.url)) });

export * from "./facade.mjs";
