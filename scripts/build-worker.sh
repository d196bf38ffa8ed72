#!/usr/bin/env bash
# Builds the Worker: build/index.js + build/index_bg.wasm (worker-build: cargo → wasm-bindgen →
# esbuild shim), then wasm-opt (npm binaryen) at the optimisation level the code was compiled
# at, dropping the debug and producers sections. wrangler.toml's [build] runs this; the tools
# come from scripts/setup.sh (env.sh).
#
# WORKER_OPT_LEVEL (default "s", as Cargo.toml's release profile, where the A/B that chose it
# is summed up) is both rustc's opt-level and wasm-opt's -O level. build/opt-level records the
# level of the last build (scripts/bench-worker.sh rebuilds when it differs from the one asked
# for).
#   WORKER_OPT_LEVEL=0|1|2|3|s|z scripts/build-worker.sh [worker-build options]
set -euo pipefail
cd "$(dirname "$0")/.."
opt=${WORKER_OPT_LEVEL:-s}
case $opt in
  0 | 1 | 2 | 3 | s | z) ;;
  *) echo "build-worker: WORKER_OPT_LEVEL must be one of 0 1 2 3 s z, not '$opt'" >&2; exit 2 ;;
esac
# shellcheck disable=SC1091
. "${RESILIENT_LLM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/tools}/env.sh"
# With `jsonSchema` (feature `schema`) where the tree has it: scripts/bench-worker.sh builds older
# revisions with this script too (--baseline-rev), from before the feature.
wasm_features=worker
grep -q '^schema = ' Cargo.toml && wasm_features=worker,schema
CARGO_PROFILE_RELEASE_OPT_LEVEL=$opt nice -n 10 worker-build --release --features "$wasm_features" "$@"
# The wasm features workerd runs; explicit so that wasm-opt emits nothing newer.
features=(--enable-mutable-globals --enable-sign-ext --enable-nontrapping-float-to-int
  --enable-bulk-memory --enable-multivalue --enable-reference-types --enable-exception-handling)
"$WASM_OPT_BIN" build/index_bg.wasm -o build/index_bg.wasm "-O$opt" --strip-debug --strip-producers "${features[@]}"
printf '%s\n' "$opt" >build/opt-level
