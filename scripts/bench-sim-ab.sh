#!/usr/bin/env bash
# A/B of the outage simulator's speed (simulated requests per second of CPU, as the
# `simulate` binary prints it) between git revision REV and this tree, in one run: each
# side's binary is built once the way that side's `cargo simulate` alias builds it (REV's in
# a temporary git worktree, in the same CARGO_TARGET_DIR), then the two run alternately RUNS
# times each on every scenario given (default: the bundled ones), so machine noise hits both
# alike. Prints each run, the medians, the ratio this tree / REV (above 1: this tree is
# faster), and whether both wrote the same report and charts. A measurement: it exits
# non-zero only on errors.
#   scripts/bench-sim-ab.sh REV [RUNS] [SCENARIO.json ...]     (RUNS default 6, at most 50)
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: scripts/bench-sim-ab.sh REV [RUNS] [SCENARIO.json ...]}
runs=${2:-6}
shift $(($# >= 2 ? 2 : 1))
[[ $runs =~ ^[0-9]+$ ]] && ((runs >= 1 && runs <= 50)) || { echo "bench-sim-ab: RUNS must be 1..50" >&2; exit 2; }
sha=$(git rev-parse --verify --quiet "$rev^{commit}") || { echo "bench-sim-ab: no commit '$rev'" >&2; exit 2; }
scenarios=("$@")
if ((${#scenarios[@]} == 0)); then
  for f in docs/scenarios/*.json; do [[ $f == *.report.json ]] || scenarios+=("$f"); done
fi
target_dir=${CARGO_TARGET_DIR:-$PWD/target}
bins=$target_dir/bench-sim-ab
mkdir -p "$bins"

# Builds the simulate binary in directory $1 as its `cargo simulate` alias does (that alias
# with `build` for `run`) and copies it to $2.
build() {
  local alias profile exe
  alias=$(sed -n 's/^simulate *= *"run \(.*\) --"$/\1/p' "$1/.cargo/config.toml")
  [[ -n $alias ]] || { echo "bench-sim-ab: no simulate alias in $1/.cargo/config.toml" >&2; return 1; }
  profile=$(grep -o -e '--release' -e '--profile [A-Za-z0-9_-]*' <<<"$alias" || true)
  # Cargo judges a crate fresh by file times and paths relative to its workspace, so in a
  # target directory shared by several clones it may take another clone's build of this crate
  # for this one's: this crate's artifacts of that profile go first (its dependencies stay).
  # shellcheck disable=SC2086 # the profile's flags, word by word
  (cd "$1" && CARGO_TARGET_DIR=$target_dir cargo clean --quiet -p resilient-llm $profile)
  # shellcheck disable=SC2086 # the alias's flags, word by word
  exe=$(cd "$1" && CARGO_TARGET_DIR=$target_dir nice -n 10 cargo build $alias --message-format=json | node -e '
      let last = null;
      for (const line of require("fs").readFileSync(0, "utf8").split("\n")) {
        if (!line.startsWith("{")) continue;
        const m = JSON.parse(line);
        if (m.reason === "compiler-artifact" && m.target?.name === "simulate" && m.executable) last = m.executable;
      }
      if (!last) process.exit(1);
      console.log(last);')
  cp "$exe" "$2"
}

old=$bins/simulate-${sha:0:12}
if [[ ! -x $old ]]; then
  tree=$(mktemp -d "${TMPDIR:-/tmp}/rl-bench-sim.XXXXXX")
  cleanup() { git worktree remove --force "$tree" >/dev/null 2>&1 || true; rm -rf "$tree"; }
  trap cleanup EXIT
  printf 'bench-sim-ab: building %s (%s) in %s\n' "$rev" "${sha:0:12}" "$tree" >&2
  git worktree add --detach --quiet "$tree" "$sha" >&2
  build "$tree" "$old.tmp"
  mv "$old.tmp" "$old"
  cleanup
  trap - EXIT
fi
new=$bins/simulate-this-tree
printf 'bench-sim-ab: building this tree\n' >&2
build "$PWD" "$new"

out=$(mktemp -d "${TMPDIR:-/tmp}/rl-bench-sim-out.XXXXXX")
trap 'rm -rf "$out"' EXIT
# One run of binary $1 on scenario $2, writing into $3: its simulated requests/s of CPU.
measure() {
  mkdir -p "$3"
  "$1" "$2" --out "$3" | sed -n 's/.*(\([0-9]*\) requests\/s on one core).*/\1/p'
}
med() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
for sc in "${scenarios[@]}"; do
  name=$(basename "$sc" .json)
  olds=() news=()
  for ((i = 1; i <= runs; i++)); do
    # Alternate which side goes first.
    for side in $( ((i % 2)) && echo "old new" || echo "new old"); do
      bin=$old
      [[ $side == new ]] && bin=$new
      r=$(measure "$bin" "$sc" "$out/$side")
      [[ -n $r ]] || { echo "bench-sim-ab: no figure from $bin on $sc" >&2; exit 1; }
      printf '%s run %d %-4s %8s simulated requests/s\n' "$name" "$i" "$side" "$r"
      if [[ $side == old ]]; then olds+=("$r"); else news+=("$r"); fi
    done
  done
  same=same
  diff -rq "$out/old" "$out/new" >/dev/null || same=DIFFERENT
  o=$(med "${olds[@]}") n=$(med "${news[@]}")
  printf '%s: medians of %d runs each: %s (%s) %s, this tree %s simulated requests/s; this tree / %s: %.3f; reports and charts %s\n\n' \
    "$name" "$runs" "$rev" "${sha:0:12}" "$o" "$n" "$rev" "$(echo "$n / $o" | bc -l)" "$same"
  rm -rf "${out:?}/old" "${out:?}/new"
done
