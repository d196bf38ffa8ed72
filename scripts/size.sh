#!/usr/bin/env bash
# Reports the npm package's wasm size, raw and gzip -9, and fails (exit 1) when the gzip size
# is over the limit: 1.5 MiB (1,572,864 B), a limit, not a target.
# Usage: scripts/size.sh [PKG_DIR]   (default: builds the package into pkg/ first)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PKG=${1:-}
if [[ -z $PKG ]]; then
  PKG=$ROOT/pkg
  "$ROOT/scripts/build-npm.sh" "$PKG"
fi
# The wasm-pack output sits in wasm/ (scripts/build-npm.sh); a build from before that layout has
# it at the root.
[[ -d $PKG/wasm ]] && GLUE=$PKG/wasm || GLUE=$PKG
WASM=$GLUE/resilient_llm_bg.wasm
[[ -f $WASM ]] || { echo "size: no $WASM" >&2; exit 1; }
LIMIT=1572864
raw=$(wc -c <"$WASM")
gz=$(gzip -9 -c "$WASM" | wc -c)
js=$(cat "$GLUE"/resilient_llm*.js "$GLUE"/snippets/*/src/js/*.js | gzip -9 -c | wc -c)
printf 'npm wasm  raw  %8d B (%.1f KB)\n' "$raw" "$(echo "$raw/1024" | bc -l)"
printf 'npm wasm  gzip %8d B (%.1f KB)  limit %d B (1.5 MiB)\n' "$gz" "$(echo "$gz/1024" | bc -l)" "$LIMIT"
printf 'npm js    gzip %8d B (%.1f KB)  (glue + snippets: errors, stream, fetch)\n' "$js" "$(echo "$js/1024" | bc -l)"
if ((gz > LIMIT)); then
  echo "size: the npm wasm is over the 1.5 MiB gzip limit by $((gz - LIMIT)) B" >&2
  exit 1
fi
