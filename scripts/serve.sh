#!/usr/bin/env bash
# The gateway self-hosted: the same Worker as on Cloudflare, run by the open-source workerd
# runtime (the pinned npm package `workerd`) in one process, its breaker and spend Durable
# Objects stored as SQLite files in a state directory. docs/selfhost.md has the details.
#
#   scripts/serve.sh [--listen ADDR:PORT] [--state DIR] [--config FILE] [--wrangler FILE]
#                    [--secret NAME]... [--no-build] [-- WORKERD-ARGS...]
#
#   --listen ADDR:PORT  where to serve HTTP (default 127.0.0.1:8787; 0.0.0.0:8787 in the image)
#   --state DIR         the state directory (default ${XDG_STATE_HOME:-~/.local/state}/resilient-llm):
#                       durable-objects/ (SQLite, kept across restarts) and workerd.capnp (the
#                       generated configuration, rewritten at every start, no secret in it)
#   --config FILE       the gateway configuration (JSON). Default: the CONFIG environment
#                       variable, else wrangler.toml's [vars] CONFIG (the mock-provider demo)
#   --wrangler FILE     the wrangler.toml to carry over (default: the clone's)
#   --secret NAME       one more environment variable to pass to the Worker (repeatable). Every
#                       name the CONFIG gives in an ...Env field (apiKeyEnv, clientKeysEnv, ...)
#                       and every provider's default key variable are passed already
#   --no-build          never build; fail if build/ is missing (the container image)
#   -- WORKERD-ARGS     passed to `workerd serve` (e.g. --verbose, --control-fd=3)
#
# Builds the Worker (scripts/setup.sh's tools, scripts/build-worker.sh) only when build/ is
# missing or older than the sources. Secrets stay in the environment: workerd reads each one
# by name when it starts (capnp `fromEnvironment`); none is written to disk. Logs (JSON lines)
# go to stdout, workerd's own messages too. workerd replaces this shell (exec): SIGTERM or
# SIGINT to this process stops the server.
#
# First request from a fresh clone, over the bundled mock providers (wrangler.toml's demo
# CONFIG expects them on 127.0.0.1:8788):
#   node tests/e2e/mock-provider.mjs --config demo/mock-config.json --port 8788 &
#   scripts/serve.sh
#   curl -s http://127.0.0.1:8787/v1/chat/completions -H 'content-type: application/json' \
#     -d '{"model":"default","messages":[{"role":"user","content":"hello"}]}'
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'serve: %s\n' "$*" >&2; exit 2; }
log() { printf 'serve: %s\n' "$*" >&2; }

listen=127.0.0.1:8787
state=${XDG_STATE_HOME:-$HOME/.local/state}/resilient-llm
wrangler=wrangler.toml
build=1
gen_args=()
while (($#)); do
  case $1 in
    --listen) [[ $# -ge 2 ]] || die "--listen needs ADDR:PORT"; listen=$2; shift 2 ;;
    --state) [[ $# -ge 2 ]] || die "--state needs a directory"; state=$2; shift 2 ;;
    --config)
      [[ $# -ge 2 ]] || die "--config needs a file"
      [[ -f $2 ]] || die "--config $2: no such file"
      gen_args+=(--config "$2"); shift 2 ;;
    --wrangler) [[ $# -ge 2 ]] || die "--wrangler needs a file"; wrangler=$2; shift 2 ;;
    --secret) [[ $# -ge 2 ]] || die "--secret needs a name"; gen_args+=(--secret "$2"); shift 2 ;;
    --no-build) build=0; shift ;;
    --) shift; break ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ $listen == *:* ]] || die "--listen wants ADDR:PORT, not '$listen'"

# Is build/ older than anything it is built from? (The image has no sources: never stale.)
stale() {
  [[ -f build/index.js && -f build/index_bg.wasm && -f build/opt-level ]] || return 0
  local inputs=()
  for p in src Cargo.toml Cargo.lock scripts/build-worker.sh; do [[ -e $p ]] && inputs+=("$p"); done
  ((${#inputs[@]})) || return 1
  [[ -n $(find "${inputs[@]}" -newer build/opt-level -print -quit) ]]
}
if stale; then
  ((build)) || die "build/ is missing or older than the sources, and --no-build was given"
  log "building the Worker (build/ is missing or older than the sources)"
  scripts/setup.sh --no-browser --no-python >&2
  scripts/build-worker.sh >&2
fi
[[ -f node_modules/workerd/package.json && -f node_modules/smol-toml/package.json ]] ||
  die "node_modules lacks workerd or smol-toml: run 'npm ci' (or scripts/setup.sh) in $(pwd)"

mkdir -p "$state"
info=$(node scripts/selfhost-config.mjs --wrangler "$wrangler" --state "$state" --listen "$listen" "${gen_args[@]}")
field() { node -e 'const o = JSON.parse(process.argv[1]); const v = o[process.argv[2]]; console.log(Array.isArray(v) ? v.join("\n") : v)' "$info" "$1"; }
capnp=$(field capnp)
workerd=$(field workerd)
while IFS= read -r note; do [[ -n $note ]] && log "$note"; done < <(field notes)
set_secrets=()
while IFS= read -r name; do [[ -n $name && -n ${!name:-} ]] && set_secrets+=("$name"); done < <(field secrets)
log "secrets set in the environment: ${set_secrets[*]:-(none)}"
log "state in $state; serving http://$listen (workerd $("$workerd" --version | cut -d' ' -f2))"
exec "$workerd" serve "$capnp" "$@" 2>&1
