#!/usr/bin/env bash
# Builds the npm package with wasm-pack: release profile (LTO, one codegen unit) at NPM_OPT_LEVEL,
# feature `js`, then wasm-opt from npm binaryen 132 at the same -O level; then finishes
# package.json and the nodejs target's snippet.
#
# Usage: [NPM_OPT_LEVEL=0|1|2|3|s|z] scripts/build-npm.sh [bundler|web|nodejs] [OUT_DIR]
#   default: bundler into pkg/ (the published package). OUT_DIR may be absolute.
#   NPM_OPT_LEVEL (default "s", as Cargo.toml's release profile): rustc's opt-level and
#   wasm-opt's -O level. Chosen by an A/B of CPU per chat call (scripts/bench-npm.mjs, 2026-12-01,
#   two runs): "s" 2.1–3.4 % and 3 0.3–2.6 % less than "z", "s" and 3 alike within noise;
#   gzip 315 KB ("s"), 345 KB (3), 296 KB ("z").
#
# Expects the tools of scripts/setup.sh; sources its env file when present:
#   ${RESILIENT_LLM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/tools}/env.sh
# npm tools (binaryen) come from $RESILIENT_LLM_ROOT/node_modules (the clone's, by default).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET=${1:-bundler}
OUT=${2:-$ROOT/pkg}
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac

log() { printf 'build-npm: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

case $TARGET in bundler | web | nodejs) ;; *) die "unknown target: $TARGET (bundler|web|nodejs)" ;; esac
OPT=${NPM_OPT_LEVEL:-s}
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

# wasm-pack runs no wasm-opt (Cargo.toml's wasm-pack metadata): this script runs it below, at
# the level the code was compiled at.
log "wasm-pack build --target $TARGET, opt-level $OPT → $OUT"
(cd "$ROOT" && CARGO_PROFILE_RELEASE_OPT_LEVEL=$OPT nice -n 10 wasm-pack --quiet build --mode no-install \
  --release --target "$TARGET" --out-dir "$OUT" --out-name resilient_llm . -- --features js)
"$WASM_OPT" "$OUT/resilient_llm_bg.wasm" -o "$OUT/resilient_llm_bg.wasm" "-O$OPT"

# The error classes live in an ES module snippet. The nodejs target `require`s it, which only
# Node >= 20.19 / 22.12 can do for ES modules: ship a CommonJS copy instead.
if [[ $TARGET == nodejs ]]; then
  for f in "$OUT"/snippets/*/src/js/errors.js; do
    node - "$f" <<'JS'
const fs = require("node:fs");
const file = process.argv[2];
const src = fs.readFileSync(file, "utf8");
const names = [...src.matchAll(/^export (?:class|function) (\w+)/gm)].map((m) => m[1]);
if (names.length === 0) throw new Error(`${file}: no exports found`);
const cjs = src.replace(/^export (class|function) /gm, "$1 ");
fs.writeFileSync(file, `"use strict";\n${cjs}\nmodule.exports = { ${names.join(", ")} };\n`);
JS
  done
fi

# package.json: what wasm-pack derives from Cargo.toml, plus engines, files and exports.
node - "$OUT/package.json" "$TARGET" <<'JS'
const fs = require("node:fs");
const [file, target] = process.argv.slice(2);
const pkg = JSON.parse(fs.readFileSync(file, "utf8"));
pkg.name = "resilient-llm";
pkg.types = "resilient_llm.d.ts";
const files = new Set(pkg.files || []);
for (const f of ["resilient_llm_bg.wasm", "resilient_llm.js", "resilient_llm.d.ts"]) files.add(f);
if (!files.has("snippets") && !files.has("snippets/")) files.add("snippets");
if (target === "bundler") files.add("resilient_llm_bg.js");
pkg.files = [...files];
pkg.engines = { node: ">=18" };
pkg.keywords = pkg.keywords || ["llm", "circuit-breaker", "retry", "failover", "wasm"];
fs.writeFileSync(file, JSON.stringify(pkg, null, 2) + "\n");
JS
log "done: $(cd "$OUT" && ls | tr '\n' ' ')"
