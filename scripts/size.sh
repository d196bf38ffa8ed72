#!/usr/bin/env bash
# Reports the npm package's wasm size, raw and gzip -9 (target: <= 120 KB gzip).
# Usage: scripts/size.sh [PKG_DIR]   (default: builds the bundler target into pkg/ first)
# Over the target it warns; with RESILIENT_LLM_SIZE_ENFORCE=1 it fails.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PKG=${1:-}
if [[ -z $PKG ]]; then
  PKG=$ROOT/pkg
  "$ROOT/scripts/build-npm.sh" bundler "$PKG"
fi
WASM=$PKG/resilient_llm_bg.wasm
[[ -f $WASM ]] || { echo "size: no $WASM" >&2; exit 1; }
LIMIT=$((120 * 1024))
raw=$(wc -c <"$WASM")
gz=$(gzip -9 -c "$WASM" | wc -c)
js=$(cat "$PKG"/resilient_llm*.js "$PKG"/snippets/*/src/js/*.js | gzip -9 -c | wc -c)
printf 'wasm  raw %7d B (%.1f KB)\n' "$raw" "$(echo "$raw/1024" | bc -l)"
printf 'wasm  gzip %6d B (%.1f KB)  limit %d KB\n' "$gz" "$(echo "$gz/1024" | bc -l)" $((LIMIT / 1024))
printf 'js    gzip %6d B (%.1f KB)  (glue + error classes)\n' "$js" "$(echo "$js/1024" | bc -l)"
if ((gz > LIMIT)); then
  echo "size: warning: over the ${LIMIT} B target by $((gz - LIMIT)) B" >&2
  [[ ${RESILIENT_LLM_SIZE_ENFORCE:-0} == 1 ]] && exit 1
fi
exit 0
