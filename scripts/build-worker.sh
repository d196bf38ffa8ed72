#!/usr/bin/env bash
# Builds the Worker: build/index.js + build/index_bg.wasm (worker-build: cargo → wasm-bindgen →
# wasm-opt -Oz → esbuild shim), then drops the wasm's name section, which worker-build keeps
# on purpose (`--debuginfo`) and which is a third of the file. wrangler.toml's [build] runs
# this; the tools come from scripts/setup.sh (env.sh).
#
# The Worker's code is built with `opt-level = "s"`, not the release profile's "z" (which
# stays for the npm package, whose size limit is tighter): under the edge benchmark it costs
# ~12 us less workerd CPU per request (of ~0.45 ms), for ~16 KB more gzip (~198 KB of the
# 200 KB limit). Cargo keeps both builds apart in its target directory.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. "${RESILIENT_LLM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/tools}/env.sh"
CARGO_PROFILE_RELEASE_OPT_LEVEL=s nice -n 10 worker-build --release --features worker "$@"
features=(--enable-mutable-globals --enable-sign-ext --enable-nontrapping-float-to-int
  --enable-bulk-memory --enable-multivalue --enable-reference-types --enable-exception-handling)
"$WASM_OPT_BIN" build/index_bg.wasm -o build/index_bg.wasm --strip-debug --strip-producers "${features[@]}"
