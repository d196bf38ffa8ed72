#!/usr/bin/env bash
# The main job: the edge proxy running locally, so a new user sees failover and the circuit
# breaker work without any API key.
#
#   scripts/run.sh            set up the tools, build the Worker, start the mock provider
#                             (tests/e2e/mock-provider.mjs, demo/mock-config.json) on a free
#                             127.0.0.1 port, and run `wrangler dev` (Node 22) against it with
#                             the demo configuration from wrangler.toml. Gateway auth is OFF
#                             for this local demo (the Worker logs a loud warning).
#   scripts/run.sh --native   the failover demo on the fake platform instead (no Node, no ports)
#
# Real providers: put the keys and a configuration in .dev.vars (never committed) and the same
# command talks to them (no mock is started); see docs/worker.md, "Real providers":
#   ANTHROPIC_API_KEY=...  OPENAI_API_KEY=...  GATEWAY_KEY=...  CONFIG={...one line of JSON...}
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ${1:-} == --native ]]; then
  exec cargo run --quiet --example demo --features testing
fi

log() { printf 'run: %s\n' "$*" >&2; }

scripts/setup.sh --no-browser
# shellcheck disable=SC1091
. "${RESILIENT_LLM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/tools}/env.sh"
log "building the Worker"
scripts/build-worker.sh >/dev/null

PORT=${PORT:-8787}
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -f wrangler.demo.toml
}
trap cleanup EXIT INT TERM

if [[ -f .dev.vars ]] && grep -q '^CONFIG=' .dev.vars; then
  log "real providers: CONFIG and keys from .dev.vars"
  config=wrangler.toml
else
  fifo=$(mktemp -u)
  mkfifo "$fifo"
  node tests/e2e/mock-provider.mjs --config demo/mock-config.json --port 0 >"$fifo" &
  pids+=($!)
  read -r line <"$fifo"
  rm -f "$fifo"
  mock_url=$(sed -E 's/.*"listening":"([^"]+)".*/\1/' <<<"$line")
  log "mock provider on $mock_url"
  # The demo configuration with the mock's port; a separate file, so .dev.vars is not read.
  sed "s#http://127.0.0.1:8788#$mock_url#g" wrangler.toml >wrangler.demo.toml
  config=wrangler.demo.toml
fi

printf '\n  The gateway: http://127.0.0.1:%s\n' "$PORT" >&2
printf '    curl -s -D - http://127.0.0.1:%s/v1/chat/completions -H "content-type: application/json" \\\n' "$PORT" >&2
printf '      -d %s\n' "'{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}'" >&2
printf '    curl -s http://127.0.0.1:%s/health\n' "$PORT" >&2
printf '  Route "default" tries dead (always 503), then flaky, then steady-openai: watch x-served-by\n' >&2
printf '  and x-attempts, and /health as the breaker of "dead" opens and the chain skips it.\n\n' >&2

PATH="$NODE22_BIN_DIR:$PATH" "$WRANGLER_BIN" dev -c "$config" --ip 127.0.0.1 --port "$PORT" &
pids+=($!)
wait "${pids[-1]}"
