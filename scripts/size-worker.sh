#!/usr/bin/env bash
# Reports the built Worker's wasm size, raw and gzip -9 (what Cloudflare's limit counts);
# fails when the gzip size is over the target. Build first (scripts/build-worker.sh).
#   scripts/size-worker.sh [TARGET_KB]      (default 200)
set -euo pipefail
cd "$(dirname "$0")/.."
target_kb=${1:-200}
wasm=build/index_bg.wasm
[[ -f $wasm ]] || { echo "size-worker: no $wasm; run scripts/build-worker.sh" >&2; exit 1; }
raw=$(wc -c <"$wasm")
gz=$(gzip -9 -c "$wasm" | wc -c)
printf 'worker wasm: %d bytes raw, %d bytes gzip (%d KB; target <= %d KB)\n' "$raw" "$gz" $((gz / 1024)) "$target_kb"
if ((gz > target_kb * 1024)); then
  echo "size-worker: over the target" >&2
  [[ ${RESILIENT_LLM_SIZE_WARN_ONLY:-0} == 1 ]] || exit 1
fi
