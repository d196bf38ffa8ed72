#!/usr/bin/env bash
# Builds the Worker: build/index.js + build/index_bg.wasm (worker-build: cargo → wasm-bindgen →
# wasm-opt -Oz → esbuild shim), then drops the wasm's name section, which worker-build keeps
# on purpose (`--debuginfo`) and which is a third of the file. wrangler.toml's [build] runs
# this; the tools come from scripts/setup.sh (env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. "${RESILIENT_LLM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/tools}/env.sh"
nice -n 10 worker-build --release --features worker "$@"
features=(--enable-mutable-globals --enable-sign-ext --enable-nontrapping-float-to-int
  --enable-bulk-memory --enable-multivalue --enable-reference-types --enable-exception-handling)
"$WASM_OPT_BIN" build/index_bg.wasm -o build/index_bg.wasm --strip-debug --strip-producers "${features[@]}"
