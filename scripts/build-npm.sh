#!/usr/bin/env bash
# Builds the npm package into pkg/ (git-ignored): one package for every runtime.
#
#   pkg/wasm/         wasm-pack --target web output: resilient_llm_bg.wasm, its ES module glue,
#                     the JS snippets (src/js/*.js) and the generated types
#   pkg/node.mjs      Node, ES module: reads the wasm from disk, instantiates it on import
#   pkg/node.cjs      Node, CommonJS: the same, bundled by esbuild (no require(esm) needed)
#   pkg/browser.mjs   browsers, web workers, bundlers: fetches the wasm beside it (top-level await)
#   pkg/workerd.mjs   Cloudflare Workers: the wasm imported as a WebAssembly.Module
#   pkg/ai-sdk.*      the Vercel AI SDK provider (`resilient-llm/ai-sdk`)
#   pkg/opentelemetry.*  the bridge to the app's OpenTelemetry tracer (`resilient-llm/opentelemetry`)
#   pkg/index.d.ts    the types of every entry; package.json with the `exports` map choosing one
#   README.md, LICENSE-MIT, LICENSE-APACHE
#
# The wasm: release profile (LTO, one codegen unit) at NPM_OPT_LEVEL, feature `js`, then wasm-opt
# from npm binaryen 132 at the same -O level.
#
# Usage: [NPM_OPT_LEVEL=0|1|2|3|s|z] scripts/build-npm.sh [OUT_DIR]   (default: pkg/)
#   NPM_OPT_LEVEL (default "z"): rustc's opt-level and wasm-opt's -O level. "z" keeps what a
#   browser downloads smaller: 1,313,909 B gzip against 1,419,663 B at "s" (2026-12-03); CPU per
#   chat call alike within noise (scripts/bench-npm.mjs, five interleaved rounds, 2026-12-01:
#   1.000, 0.897..1.105).
#
# Expects the tools of scripts/setup.sh; sources its env file when present:
#   ${RESILIENT_LLM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/tools}/env.sh
# npm tools (binaryen, esbuild) come from $RESILIENT_LLM_ROOT/node_modules (the clone's, by default).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case ${1:-} in
  bundler | web | nodejs)
    echo "build-npm: the targets are one package now; building it into ${2:-$ROOT/pkg}" >&2
    shift
    ;;
esac
OUT=${1:-$ROOT/pkg}
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac

log() { printf 'build-npm: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

OPT=${NPM_OPT_LEVEL:-z}
case $OPT in 0 | 1 | 2 | 3 | s | z) ;; *) die "NPM_OPT_LEVEL must be one of 0 1 2 3 s z, not '$OPT'" ;; esac

ENV_FILE=${RESILIENT_LLM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/tools}/env.sh
# shellcheck disable=SC1090
[[ -f $ENV_FILE ]] && . "$ENV_FILE"
NODE_MODULES=${RESILIENT_LLM_ROOT:-$ROOT}/node_modules

command -v wasm-pack >/dev/null || die "wasm-pack not on PATH (run scripts/setup.sh)"
BINARYEN_BIN_DIR=${BINARYEN_BIN_DIR:-$NODE_MODULES/binaryen/bin}
WASM_OPT=$BINARYEN_BIN_DIR/wasm-opt
[[ -x $WASM_OPT ]] || die "no npm binaryen at $BINARYEN_BIN_DIR (run scripts/setup.sh)"
"$WASM_OPT" --version | grep -q 'version 132' || die "$WASM_OPT is not binaryen 132"
ESBUILD=${ESBUILD_BIN:-$NODE_MODULES/.bin/esbuild}
[[ -x $ESBUILD ]] || die "no esbuild at $ESBUILD (run scripts/setup.sh)"

rm -rf "$OUT"
mkdir -p "$OUT"
# wasm-pack runs no wasm-opt (Cargo.toml's wasm-pack metadata): this script runs it below, at
# the level the code was compiled at.
log "wasm-pack build --target web, opt-level $OPT → $OUT/wasm"
(cd "$ROOT" && CARGO_PROFILE_RELEASE_OPT_LEVEL=$OPT nice -n 10 wasm-pack --quiet build --mode no-install \
  --release --target web --out-dir "$OUT/wasm" --out-name resilient_llm . -- --features js)
"$WASM_OPT" "$OUT/wasm/resilient_llm_bg.wasm" -o "$OUT/wasm/resilient_llm_bg.wasm" "-O$OPT"
# The package.json, README, licenses and .gitignore are this script's to write, at the package's root.
rm -f "$OUT/wasm/package.json" "$OUT/wasm/README.md" "$OUT/wasm/.gitignore" "$OUT"/wasm/LICENSE-*

cp "$ROOT"/npm/{facade.mjs,node.mjs,browser.mjs,workerd.mjs,ai-sdk.mjs,ai-sdk.d.ts,opentelemetry.mjs,opentelemetry.d.ts,README.md} "$OUT/"
cp "$ROOT"/LICENSE-MIT "$ROOT"/LICENSE-APACHE "$OUT/"
# CommonJS entries: bundled, so the ES module glue needs no require(esm) (Node < 20.19). Its
# `import.meta.url` only serves the default init path, which these entries never take.
cp "$ROOT/npm/node-cjs.cjs" "$OUT/node-cjs.cjs"
"$ESBUILD" "$OUT/node-cjs.cjs" --bundle --platform=node --format=cjs --log-level=warning \
  --log-override:empty-import-meta=silent --outfile="$OUT/node.cjs"
rm "$OUT/node-cjs.cjs"
"$ESBUILD" "$OUT/ai-sdk.mjs" --bundle --platform=neutral --format=cjs --log-level=warning \
  --outfile="$OUT/ai-sdk.cjs"
# The app's own @opentelemetry/api stays external: the bridge must use the one its tracer uses.
"$ESBUILD" "$OUT/opentelemetry.mjs" --bundle --platform=neutral --format=cjs --log-level=warning \
  --external:@opentelemetry/api --outfile="$OUT/opentelemetry.cjs"

node - "$ROOT" "$OUT" <<'JS'
const fs = require("node:fs");
const path = require("node:path");
const [root, out] = process.argv.slice(2);

// Types. `[Symbol.dispose]` is kept: a project with TypeScript's default lib (no
// esnext.disposable) reads `Symbol.dispose` from the `SymbolConstructor` that src/js/types.d.ts
// declares, as the lib does.
const dts = path.join(out, "wasm", "resilient_llm.d.ts");
const generated = fs.readFileSync(dts, "utf8");
if (!/^\s*\[Symbol\.dispose\]\(\): void;$/m.test(generated)) {
  throw new Error("no [Symbol.dispose] in the generated .d.ts: the wasm-bindgen output changed");
}
// index.d.ts (and .d.cts, for `require`) declare exactly what the entries export
// (facade.mjs), with every type: the generated declarations without the wasm-bindgen internals
// (the init functions after InitInput, the stream handle). A copy, not a re-export, so that a
// CommonJS project's TypeScript need not import an ES module's declarations.
let own = generated;
const tail = own.indexOf("\nexport type InitInput");
if (tail < 0) throw new Error("no InitInput in the generated .d.ts: the wasm-bindgen output changed");
own = own.slice(0, tail) + "\n";
own = own.replace(/(\/\*\*(?:(?!\*\/)[\s\S])*\*\/\n)?export class StreamHandle \{[\s\S]*?\n\}\n/, "");
if (/StreamHandle|initSync|__wbg_init/.test(own)) throw new Error("wasm-bindgen internals left in index.d.ts");
const names = [...own.matchAll(/^export (?:declare )?(?:class|interface|type|function|const|enum) (\w+)/gm)].map((m) => m[1]);
const facade = fs.readFileSync(path.join(out, "facade.mjs"), "utf8");
const values = facade.match(/^export \{([^}]*)\}/m)[1].split(",").map((s) => s.trim()).filter(Boolean);
for (const v of values) {
  if (!names.includes(v)) throw new Error(`facade.mjs exports ${v}, which has no type in the generated .d.ts`);
}
const header = "// The types of every entry (node, browser, workerd): the same exports everywhere.\n";
fs.writeFileSync(path.join(out, "index.d.ts"), header + own);
fs.writeFileSync(path.join(out, "index.d.cts"), header + own);
fs.copyFileSync(path.join(out, "ai-sdk.d.ts"), path.join(out, "ai-sdk.d.cts"));
fs.writeFileSync(
  path.join(out, "opentelemetry.d.cts"),
  fs.readFileSync(path.join(out, "opentelemetry.d.ts"), "utf8").replace('from "./index.js"', 'from "./index.cjs"'),
);

const cargo = fs.readFileSync(path.join(root, "Cargo.toml"), "utf8");
const field = (k) => (cargo.match(new RegExp(`^${k} = "([^"]*)"`, "m")) || [])[1];
const pkg = {
  name: "resilient-llm",
  version: field("version"),
  description: field("description"),
  license: field("license"),
  type: "module",
  exports: {
    ".": {
      workerd: { types: "./index.d.ts", default: "./workerd.mjs" },
      node: {
        import: { types: "./index.d.ts", default: "./node.mjs" },
        require: { types: "./index.d.cts", default: "./node.cjs" },
      },
      browser: { types: "./index.d.ts", default: "./browser.mjs" },
      worker: { types: "./index.d.ts", default: "./browser.mjs" },
      import: { types: "./index.d.ts", default: "./browser.mjs" },
      require: { types: "./index.d.cts", default: "./node.cjs" },
      default: { types: "./index.d.ts", default: "./browser.mjs" },
    },
    "./ai-sdk": {
      import: { types: "./ai-sdk.d.ts", default: "./ai-sdk.mjs" },
      require: { types: "./ai-sdk.d.cts", default: "./ai-sdk.cjs" },
    },
    "./opentelemetry": {
      import: { types: "./opentelemetry.d.ts", default: "./opentelemetry.mjs" },
      require: { types: "./opentelemetry.d.cts", default: "./opentelemetry.cjs" },
    },
    "./wasm": "./wasm/resilient_llm_bg.wasm",
    "./package.json": "./package.json",
  },
  main: "./node.cjs",
  module: "./browser.mjs",
  browser: "./browser.mjs",
  types: "./index.d.ts",
  typesVersions: { "*": { "ai-sdk": ["./ai-sdk.d.ts"], opentelemetry: ["./opentelemetry.d.ts"] } },
  files: [
    "wasm/",
    "*.mjs",
    "*.cjs",
    "*.d.ts",
    "*.d.cts",
    "README.md",
    "LICENSE-MIT",
    "LICENSE-APACHE",
  ],
  sideEffects: ["./node.mjs", "./node.cjs", "./browser.mjs", "./workerd.mjs", "./facade.mjs", "./wasm/snippets/*"],
  // The package runs on Node 18 and later; `resilient-llm/ai-sdk` needs the `ai` package 7 (which
  // itself needs Node 22): optional, but an `ai` 6 is refused at install instead of failing
  // at the first call (UnsupportedModelVersionError).
  engines: { node: ">=18" },
  // `resilient-llm/opentelemetry` imports the app's @opentelemetry/api: optional too.
  peerDependencies: { ai: "^7.0.0", "@opentelemetry/api": "^1.1.0" },
  peerDependenciesMeta: { ai: { optional: true }, "@opentelemetry/api": { optional: true } },
  keywords: ["llm", "circuit-breaker", "retry", "failover", "openai", "anthropic", "ai-sdk", "opentelemetry", "wasm"],
};
const repo = field("repository");
if (repo) pkg.repository = repo;
fs.writeFileSync(path.join(out, "package.json"), JSON.stringify(pkg, null, 2) + "\n");
JS
log "done: $(cd "$OUT" && ls | tr '\n' ' ')"
