#!/usr/bin/env bash
# Reports the built Worker's wasm size, raw and gzip -9 (what Cloudflare's limit counts), and
# fails (exit 1) when the gzip size is over the limit: 3 MiB (3,145,728 B), a limit, not a
# target (Cloudflare's own is larger; cold start is what is watched). Build first (scripts/build-worker.sh).
#   scripts/size-worker.sh [WASM]      (default build/index_bg.wasm)
set -euo pipefail
cd "$(dirname "$0")/.."
wasm=${1:-build/index_bg.wasm}
[[ -f $wasm ]] || { echo "size-worker: no $wasm; run scripts/build-worker.sh" >&2; exit 1; }
limit=3145728
raw=$(wc -c <"$wasm")
gz=$(gzip -9 -c "$wasm" | wc -c)
opt=$(cat "$(dirname "$wasm")/opt-level" 2>/dev/null || echo unknown)
printf 'worker wasm raw  %8d B (%.1f KB), opt-level %s\n' "$raw" "$(echo "$raw/1024" | bc -l)" "$opt"
printf 'worker wasm gzip %8d B (%.1f KB)  limit %d B (3 MiB)\n' "$gz" "$(echo "$gz/1024" | bc -l)" "$limit"
if ((gz > limit)); then
  echo "size-worker: the Worker wasm is over the 3 MiB gzip limit by $((gz - limit)) B" >&2
  exit 1
fi
