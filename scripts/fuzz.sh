#!/usr/bin/env bash
# Builds every fuzz target (fuzz/, cargo-fuzz + libFuzzer) and runs each in turn, starting
# from its committed seed corpus (fuzz/corpus/<target>/). Installs what it needs: the nightly
# toolchain through rustup when missing, cargo-fuzz (pinned) into the tools directory.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
#
#   SECONDS   how long each target runs (default 20)
#   TARGET    only these targets (default: every [[bin]] in fuzz/Cargo.toml)
#
# Environment:
#   FUZZ_RUNS=N      stop each target after N executions instead (libFuzzer -runs=N); the
#                    time limit still applies when SECONDS is given
#   FUZZ_NICE=N      run the fuzzers at this nice level (default 10)
#
# New inputs that find coverage go to $CACHE/fuzz-corpus/<target>/ (outside the clone, kept
# between runs); a crash leaves its input in fuzz/artifacts/<target>/ and fails the script.
# Replay one input after a run (the binary takes files as arguments):
#   "$CARGO_TARGET_DIR"/x86_64-unknown-linux-gnu/release/<target> fuzz/artifacts/<target>/crash-…
# then add it to tests/fixtures/fuzz/<target>/ with a test in tests/fuzz_regressions.rs.
# Each target's execution count (libFuzzer's "Done N runs") is printed at the end.
set -euo pipefail

CARGO_FUZZ_VERSION=0.13.2

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/resilient-llm
TOOLS=${RESILIENT_LLM_TOOLS:-$CACHE/tools}
SECONDS_EACH=${1:-20}
shift $(($# > 0 ? 1 : 0))
NICE=${FUZZ_NICE:-10}

log() { printf 'fuzz: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $SECONDS_EACH =~ ^[0-9]+$ ]] || die "SECONDS is not a number: $SECONDS_EACH"
[[ -z ${FUZZ_RUNS:-} || $FUZZ_RUNS =~ ^[0-9]+$ ]] || die "FUZZ_RUNS is not a number: $FUZZ_RUNS"

if ! rustup toolchain list | grep -q '^nightly'; then
  log "nightly toolchain: installing through rustup"
  rustup toolchain install nightly --profile minimal
fi

mkdir -p "$TOOLS/bin"
if [[ $("$TOOLS/bin/cargo-fuzz" --version 2>/dev/null) != "cargo-fuzz $CARGO_FUZZ_VERSION" ]]; then
  log "cargo-fuzz $CARGO_FUZZ_VERSION: installing (cargo install, this takes minutes)"
  cargo install cargo-fuzz --version "=$CARGO_FUZZ_VERSION" --locked --root "$TOOLS" --force
fi
export PATH="$TOOLS/bin:$PATH"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$CACHE/target}

cd "$ROOT/fuzz"
mapfile -t ALL < <(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^resilient-llm-fuzz$')
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=("${ALL[@]}")

# Release code with debug assertions and overflow checks. No sanitizer: the crate forbids
# unsafe code, and without one each target runs several times as many inputs.
log "building ${#TARGETS[@]} target(s) (nightly, release, debug assertions)"
for t in "${TARGETS[@]}"; do
  printf '%s\n' "${ALL[@]}" | grep -qx "$t" || die "no such target: $t (have: ${ALL[*]})"
  nice -n "$NICE" cargo +nightly fuzz build --release --debug-assertions --sanitizer none "$t"
done

BIN=$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release
declare -A DONE
failed=()
for t in "${TARGETS[@]}"; do
  work=$CACHE/fuzz-corpus/$t
  artifacts=$ROOT/fuzz/artifacts/$t/
  mkdir -p "$work" "$artifacts"
  args=(-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts")
  ((SECONDS_EACH > 0)) && args+=(-max_total_time="$SECONDS_EACH")
  [[ -n ${FUZZ_RUNS:-} ]] && args+=(-runs="$FUZZ_RUNS")
  out=$CACHE/fuzz-$t.log
  log "$t: ${SECONDS_EACH}s${FUZZ_RUNS:+ or $FUZZ_RUNS runs} (log: $out)"
  if nice -n "$NICE" "$BIN/$t" "${args[@]}" "$work" "$ROOT/fuzz/corpus/$t" >"$out" 2>&1; then
    DONE[$t]=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 runs in \2 s/p' "$out" | tail -1)
  else
    DONE[$t]="FAILED"
    failed+=("$t")
    tail -n 40 "$out" >&2
  fi
done

printf '\n%-18s %s\n' target result
for t in "${TARGETS[@]}"; do printf '%-18s %s\n' "$t" "${DONE[$t]}"; done
((${#failed[@]} == 0)) || die "crashed: ${failed[*]} (inputs in fuzz/artifacts/)"
