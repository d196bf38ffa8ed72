// Node, as CommonJS (bundled into node.cjs by scripts/build-npm.sh, so it needs no require(esm)):
// the wasm is read from this package's folder and instantiated on require.
"use strict";
const { readFileSync } = require("node:fs");
const { join } = require("node:path");
const { initSync } = require("./wasm/resilient_llm.js");

initSync({ module: readFileSync(join(__dirname, "wasm", "resilient_llm_bg.wasm")) });

module.exports = require("./facade.mjs");
