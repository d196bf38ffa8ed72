#!/usr/bin/env bash
# A/B of the native gateway benchmark (benches/gateway.rs: ns and heap allocations per
# request) between git revision REV and this tree, in one run: each side's bench binary is
# built once (REV's in a temporary git worktree, with its own benches/gateway.rs, in the same
# CARGO_TARGET_DIR), then the two run alternately RUNS times each, so machine noise hits both
# alike. Prints each run, the medians and the ratio this tree / REV (below 1: this tree is
# faster or allocates less). A measurement: it exits non-zero only on errors.
#   scripts/bench-native-ab.sh REV [RUNS]     (RUNS default 5, at most 50)
# BENCH_CASE picks the bench's case by a part of its name (default "mock answer": the whole
# answer); BENCH_THIS_FILE=1 builds REV with this tree's benches/gateway.rs (for a case REV's
# file lacks: the bench uses only the public API).
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: scripts/bench-native-ab.sh REV [RUNS]}
runs=${2:-5}
[[ $runs =~ ^[0-9]+$ ]] && ((runs >= 1 && runs <= 50)) || { echo "bench-native-ab: RUNS must be 1..50" >&2; exit 2; }
sha=$(git rev-parse --verify --quiet "$rev^{commit}") || { echo "bench-native-ab: no commit '$rev'" >&2; exit 2; }
target_dir=${CARGO_TARGET_DIR:-$PWD/target}
bins=$target_dir/bench-native-ab
mkdir -p "$bins"

# Builds the gateway bench in directory $1 and copies its binary to $2.
build() {
  local exe
  # Cargo judges a crate fresh by file times and paths relative to its workspace, so in a
  # target directory shared by several clones it may take another clone's build of this crate
  # for this one's: this crate's release artifacts go first (its dependencies stay).
  (cd "$1" && CARGO_TARGET_DIR=$target_dir cargo clean --quiet -p resilient-llm --release)
  exe=$(cd "$1" && CARGO_TARGET_DIR=$target_dir nice -n 10 cargo bench --bench gateway --features testing --no-run \
    --message-format=json | node -e '
      let last = null;
      for (const line of require("fs").readFileSync(0, "utf8").split("\n")) {
        if (!line.startsWith("{")) continue;
        const m = JSON.parse(line);
        if (m.reason === "compiler-artifact" && m.target?.name === "gateway" && m.executable) last = m.executable;
      }
      if (!last) process.exit(1);
      console.log(last);')
  cp "$exe" "$2"
}

case=${BENCH_CASE:-mock answer}
this_file=${BENCH_THIS_FILE:-0}
old=$bins/gateway-${sha:0:12}
[[ $this_file == 1 ]] && old=$old-this-file
if [[ ! -x $old ]]; then
  tree=$(mktemp -d "${TMPDIR:-/tmp}/rl-bench-native.XXXXXX")
  cleanup() { git worktree remove --force "$tree" >/dev/null 2>&1 || true; rm -rf "$tree"; }
  trap cleanup EXIT
  printf 'bench-native-ab: building %s (%s) in %s\n' "$rev" "${sha:0:12}" "$tree" >&2
  git worktree add --detach --quiet "$tree" "$sha" >&2
  [[ $this_file == 1 ]] && cp benches/gateway.rs "$tree/benches/gateway.rs"
  build "$tree" "$old.tmp"
  mv "$old.tmp" "$old"
  cleanup
  trap - EXIT
fi
new=$bins/gateway-this-tree
printf 'bench-native-ab: building this tree\n' >&2
build "$PWD" "$new"

# One run of binary $1: "ns allocations" (the median ns/request and allocations/request).
measure() {
  "$1" | grep -F -- "$case" | sed -n 's/.*median *\([0-9.]*\) ns\/request.*~\([0-9.]*\) heap allocations.*/\1 \2/p'
}
old_ns=() old_alloc=() new_ns=() new_alloc=()
for ((i = 1; i <= runs; i++)); do
  # Alternate which side goes first.
  for side in $( ((i % 2)) && echo "old new" || echo "new old"); do
    bin=$old
    [[ $side == new ]] && bin=$new
    ns= alloc=
    read -r ns alloc < <(measure "$bin") || true
    [[ -n ${ns:-} && -n ${alloc:-} ]] || { echo "bench-native-ab: no figures from $bin" >&2; exit 1; }
    printf 'run %d %-4s %8s ns/request %6s allocations/request\n' "$i" "$side" "$ns" "$alloc"
    if [[ $side == old ]]; then old_ns+=("$ns") old_alloc+=("$alloc"); else new_ns+=("$ns") new_alloc+=("$alloc"); fi
  done
done
med() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
on=$(med "${old_ns[@]}") oa=$(med "${old_alloc[@]}") nn=$(med "${new_ns[@]}") na=$(med "${new_alloc[@]}")
printf '\nmedians of %d runs each: %s (%s) %s ns/request, %s allocations/request; this tree %s ns/request, %s allocations/request\n' \
  "$runs" "$rev" "${sha:0:12}" "$on" "$oa" "$nn" "$na"
printf 'this tree / %s: ns %.3f, allocations %.3f\n' "$rev" "$(echo "$nn / $on" | bc -l)" "$(echo "$na / $oa" | bc -l)"
