#!/usr/bin/env bash
# The chaos soak (tests/e2e/soak.mjs) through the built Worker in workerd: concurrency 32,
# whole and streamed requests in both formats, the mock's faults changing every phase, clients
# going away mid-stream, the breaker objects failing and the runtime restarting. Bounded in
# requests and minutes; exits non-zero when any of its checks fails.
#   scripts/soak.sh [--short | --long] [soak.mjs options: --requests N --minutes M --seed S …]
# --short (the test script's step): 2500 requests, at most 2 minutes in all.
# --long (docs/worker.md's figures, "Chaos soak"): 100,000 requests, at most 40 minutes, at nice 19.
# Builds the Worker first unless build/index.js is newer than every source (--no-build skips).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=(--requests 2500 --minutes 1.5 --restarts 2)
nice_level=10
build=1
rest=()
for arg in "$@"; do
  case $arg in
    --short) preset=(--requests 2500 --minutes 1.5 --restarts 2) ;;
    --long) preset=(--requests 100000 --minutes 40 --restarts 2); nice_level=19 ;;
    --no-build) build=0 ;;
    *) rest+=("$arg") ;;
  esac
done
# shellcheck disable=SC1091
. "${RESILIENT_LLM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/tools}/env.sh"
if [[ $build == 1 ]]; then
  if [[ ! -f build/index.js ]] || [[ -n $(find src Cargo.toml -newer build/index_bg.wasm -print -quit) ]]; then
    scripts/build-worker.sh
  fi
fi
exec nice -n "$nice_level" node tests/e2e/soak.mjs "${preset[@]}" "${rest[@]}"
