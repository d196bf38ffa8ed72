#!/usr/bin/env bash
# The edge benchmark (scripts/bench-worker.mjs): sets up the tools, builds the Worker (and the
# Rust/wasm reference, benches/edge-reference) when missing or older than their sources, then
# serves them under Miniflare against the mock provider and prints throughput, p50/p99, time
# to first byte and CPU per request, whole and streamed, and cold starts, next to the mock
# direct, a pass-through worker (the floor) and the JS and Rust/wasm references.
# A measurement: it exits non-zero only on errors.
#
#   [WORKER_OPT_LEVEL=s] [BASELINE_OPT_LEVEL=s] scripts/bench-worker.sh [--no-setup]
#       [--baseline-rev REV] [options of scripts/bench-worker.mjs, see --help]
#
# WORKER_OPT_LEVEL: the opt-level of this tree's Worker (scripts/build-worker.sh; default "s").
# --baseline-rev REV: an A/B in one run. The Worker of git revision REV is built in a
# temporary git worktree (with this tree's scripts/build-worker.sh, at BASELINE_OPT_LEVEL,
# default "s", in the same CARGO_TARGET_DIR), kept in $CARGO_TARGET_DIR/bench-baseline/, and
# served as target (c0) interleaved round by round with (c); the report ends with (c)/(c0).
# REV may be this tree's own HEAD, for a profile A/B: WORKER_OPT_LEVEL=3 ... --baseline-rev HEAD.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD

setup=1
baseline_rev=
args=()
while (($#)); do
  case $1 in
    --no-setup) setup=0 ;;
    --baseline-rev) [[ $# -ge 2 ]] || { echo "bench-worker: --baseline-rev needs a revision" >&2; exit 2; }
      baseline_rev=$2; shift ;;
    --baseline-rev=*) baseline_rev=${1#*=} ;;
    *) args+=("$1") ;;
  esac
  shift
done
if ((setup)); then
  scripts/setup.sh --no-browser >&2
fi
# shellcheck disable=SC1091
. "${RESILIENT_LLM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm/tools}/env.sh"

opt=${WORKER_OPT_LEVEL:-s}
# Cargo judges a crate fresh by file times and paths relative to its workspace, so in a target
# directory shared by several clones it may take another clone's build of this crate for this
# one's: before each build, this crate's wasm32 release artifacts go (its dependencies stay).
clean_crate() {
  (cd "$1" && cargo clean --quiet -p resilient-llm --release --target wasm32-unknown-unknown)
}
stale() {
  [[ ! -f build/index.js || ! -f build/index_bg.wasm ]] && return 0
  [[ $(cat build/opt-level 2>/dev/null) != "$opt" ]] && return 0
  [[ -n $(find src Cargo.toml Cargo.lock -newer build/index_bg.wasm -print -quit) ]]
}
if stale; then
  printf 'bench-worker: building the Worker (opt-level %s)\n' "$opt" >&2
  clean_crate .
  WORKER_OPT_LEVEL=$opt scripts/build-worker.sh >&2
fi

# Target (f), the Rust/wasm reference (benches/edge-reference): built like the Worker, with
# the same dependency versions and settings (this tree's opt-level, for rustc and wasm-opt), in
# its own target directory.
ref=benches/edge-reference
if [[ ! -f $ref/build/index_bg.wasm || $(cat "$ref/build/opt-level" 2>/dev/null) != "$opt" ||
  -n $(find "$ref/src" "$ref/Cargo.toml" "$ref/Cargo.lock" -newer "$ref/build/index_bg.wasm" -print -quit) ]]; then
  printf 'bench-worker: building the Rust/wasm reference (%s, opt-level %s)\n' "$ref" "$opt" >&2
  (cd "$ref" && CARGO_PROFILE_RELEASE_OPT_LEVEL=$opt CARGO_TARGET_DIR=${EDGE_REFERENCE_TARGET_DIR:-target} \
    nice -n 10 worker-build --release >&2)
  "$WASM_OPT_BIN" "$ref/build/index_bg.wasm" -o "$ref/build/index_bg.wasm" "-O$opt" --strip-debug --strip-producers \
    --enable-mutable-globals --enable-sign-ext --enable-nontrapping-float-to-int --enable-bulk-memory \
    --enable-multivalue --enable-reference-types --enable-exception-handling
  printf '%s\n' "$opt" >"$ref/build/opt-level"
fi

# Target (c0): the Worker of another revision, built once per commit, opt-level and recipe
# (this tree's scripts/build-worker.sh).
if [[ -n $baseline_rev ]]; then
  sha=$(git rev-parse --verify --quiet "$baseline_rev^{commit}") ||
    { echo "bench-worker: --baseline-rev: no commit '$baseline_rev'" >&2; exit 2; }
  base_opt=${BASELINE_OPT_LEVEL:-s}
  target_dir=${CARGO_TARGET_DIR:-$PWD/target}
  recipe=$(git hash-object scripts/build-worker.sh)
  out=$target_dir/bench-baseline/${sha:0:12}-opt-$base_opt-${recipe:0:8}
  if [[ ! -f $out/index.js || ! -f $out/index_bg.wasm ]]; then
    tree=$(mktemp -d "${TMPDIR:-/tmp}/rl-bench-baseline.XXXXXX")
    cleanup() { git worktree remove --force "$tree" >/dev/null 2>&1 || true; rm -rf "$tree"; }
    trap cleanup EXIT
    printf 'bench-worker: building the baseline Worker of %s (%s, opt-level %s) in %s\n' "$baseline_rev" "${sha:0:12}" "$base_opt" "$tree" >&2
    git worktree add --detach --quiet "$tree" "$sha" >&2
    # This tree's recipe, so that both builds differ only in their code and opt-levels.
    cp scripts/build-worker.sh "$tree/scripts/build-worker.sh"
    # The tools and node_modules of this tree (env.sh looks for them in RESILIENT_LLM_ROOT).
    CARGO_TARGET_DIR=$target_dir clean_crate "$tree"
    (cd "$tree" && RESILIENT_LLM_ROOT=$here CARGO_TARGET_DIR=$target_dir WORKER_OPT_LEVEL=$base_opt scripts/build-worker.sh >&2)
    rm -rf "$out.tmp"
    mkdir -p "$out.tmp"
    cp -r "$tree/build/." "$out.tmp/"
    rm -rf "$out"
    mv "$out.tmp" "$out"
    cleanup
    trap - EXIT
  fi
  args+=(--baseline "$out" --baseline-label "$baseline_rev (${sha:0:12}, opt-level $base_opt)")
fi
exec node scripts/bench-worker.mjs "${args[@]}"
