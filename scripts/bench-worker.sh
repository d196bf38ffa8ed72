#!/usr/bin/env bash
# The edge benchmark (scripts/bench-worker.mjs): sets up the tools, builds the Worker (and the
# Rust/wasm reference, benches/edge-reference) when missing or older than their sources, then
# serves them under Miniflare against the mock provider and prints throughput, p50/p99 and CPU
# per request next to the mock direct, a pass-through worker (the floor) and a JS reference.
# A measurement: it exits non-zero only on errors.
#
#   scripts/bench-worker.sh [--no-setup] [--requests N] [--concurrency C] [--rounds R]
#                           [--warmup W] [--max-seconds S] [--json]
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ${1:-} == --no-setup ]]; then
  shift
else
  scripts/setup.sh --no-browser >&2
fi
# shellcheck disable=SC1091
. "${RESILIENT_LLM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/tools}/env.sh"

stale() {
  [[ ! -f build/index.js || ! -f build/index_bg.wasm ]] && return 0
  [[ -n $(find src Cargo.toml Cargo.lock -newer build/index_bg.wasm -print -quit) ]]
}
if stale; then
  printf 'bench-worker: building the Worker\n' >&2
  scripts/build-worker.sh >&2
fi

# Target (f), the Rust/wasm reference (benches/edge-reference): built like the Worker, with
# the same dependency versions and settings, in its own target directory.
ref=benches/edge-reference
if [[ ! -f $ref/build/index_bg.wasm || -n $(find "$ref/src" "$ref/Cargo.toml" "$ref/Cargo.lock" -newer "$ref/build/index_bg.wasm" -print -quit) ]]; then
  printf 'bench-worker: building the Rust/wasm reference (%s)\n' "$ref" >&2
  (cd "$ref" && CARGO_TARGET_DIR=${EDGE_REFERENCE_TARGET_DIR:-target} nice -n 10 worker-build --release >&2)
  "$WASM_OPT_BIN" "$ref/build/index_bg.wasm" -o "$ref/build/index_bg.wasm" --strip-debug --strip-producers \
    --enable-mutable-globals --enable-sign-ext --enable-nontrapping-float-to-int --enable-bulk-memory \
    --enable-multivalue --enable-reference-types --enable-exception-handling
fi
exec node scripts/bench-worker.mjs "$@"
