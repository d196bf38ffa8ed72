#!/usr/bin/env bash
# The Worker's checks, from a fresh clone: tools (scripts/setup.sh), wasm32 lints with the
# `worker` feature, the build, its size, `wrangler deploy --dry-run`, and the end-to-end tests
# (Miniflare + real Durable Object + mock provider + the official Node and Python SDKs, all on
# 127.0.0.1; the Python ones in the virtualenv of scripts/setup-python.sh), then the short
# chaos soak (scripts/soak.sh --short, under 2 minutes).
#   scripts/test-worker.sh [--no-setup]
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n==> %s\n' "$*"; }

if [[ ${1:-} != --no-setup ]]; then
  step "tools"
  scripts/setup.sh --no-browser
fi
# shellcheck disable=SC1091
. "${RESILIENT_LLM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/tools}/env.sh"

step "lints: wasm32 with the worker and schema features (as scripts/build-worker.sh builds)"
nice -n 10 cargo clippy --lib --target wasm32-unknown-unknown --features worker,schema -- -D warnings

step "build the Worker"
scripts/build-worker.sh

step "size"
scripts/size-worker.sh

step "wrangler deploy --dry-run"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
rl_wrangler deploy --dry-run --outdir "$out" 2>&1 | tail -n 15

step "Python clients of the end-to-end tests (pinned, in a virtualenv; skipped when present)"
scripts/setup-python.sh

step "end-to-end tests (Miniflare, mock provider, official Node and Python SDKs)"
node --test --test-concurrency=1 tests/e2e/worker.test.mjs tests/e2e/stream.test.mjs \
  tests/e2e/features.test.mjs tests/e2e/python-features.test.mjs tests/e2e/bedrock.test.mjs \
  tests/e2e/vertex.test.mjs tests/e2e/resellers.test.mjs tests/e2e/status-page.test.mjs \
  tests/e2e/resilience.test.mjs tests/e2e/security.test.mjs tests/e2e/cost.test.mjs \
  tests/e2e/responses.test.mjs tests/e2e/python-responses.test.mjs tests/e2e/endpoints.test.mjs \
  tests/e2e/model-breakers.test.mjs tests/e2e/routing.test.mjs tests/e2e/quality.test.mjs \
  tests/e2e/trust-streamcut.test.mjs \
  tests/e2e/trust-spend.test.mjs tests/e2e/trust-vertex-reauth.test.mjs tests/e2e/trust-slowbody.test.mjs \
  tests/e2e/trust-metrics.test.mjs tests/e2e/capacity.test.mjs tests/e2e/fleet-relays.test.mjs \
  tests/e2e/fleet-spend-relays.test.mjs tests/e2e/cache.test.mjs tests/e2e/trace.test.mjs \
  tests/e2e/tenants.test.mjs

step "chaos soak, short (scripts/soak.sh --long is docs/worker.md's run)"
scripts/soak.sh --short --no-build
