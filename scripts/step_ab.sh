#!/usr/bin/env bash
# Compares two builds of loom on whole steps: a benchmark program of a saved build ("before")
# and the same program of build/bench ("after"), run one after the other in pairs whose order
# alternates (before-after, after-before, ...). A change to a kernel is decided here, in the
# step, rather than by the kernel timed alone (scripts/gemm_ab.sh): in a step its operands
# come from memory where a product timed alone finds them in the caches, and the machine's
# noise (the same binary 192 and 251 ms minutes apart) is shared by the two runs of a pair.
#
#   bash scripts/step_ab.sh --save [DIR]
#   bash scripts/step_ab.sh [--before DIR] [--pairs N] [--key KEY] PROGRAM CASE [ARGS...]
#
# --save copies build/bench's programs to DIR (default /tmp/loom-bench-before); build the
# change after it. The comparison runs build/bench/PROGRAM CASE ARGS... and DIR/PROGRAM with
# the same arguments N times each (default 5), reads KEY (default ms_per_step) from the JSON
# line each prints, and prints each pair's times and ratio (after / before) and the median of
# the ratios: below 1 the change made the step faster.
#   bash scripts/step_ab.sh --save && <edit, cmake --build build> &&
#   bash scripts/step_ab.sh --pairs 5 vision vit-fmnist --steps 6
set -euo pipefail
cd "$(dirname "$0")/.."

before=/tmp/loom-bench-before pairs=5 key=ms_per_step
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
if [ "${1:-}" = --save ]; then
  dir=${2:-$before}
  [ -d build/bench ] || { echo "step_ab: no build/bench to save (build first)" >&2; exit 2; }
  mkdir -p "$dir"
  find build/bench -maxdepth 1 -type f -executable -exec cp {} "$dir/" \;
  changes=$(git diff --quiet || echo ' with uncommitted changes')
  echo "step_ab: saved build/bench's programs (of $(git rev-parse --short HEAD)$changes) to $dir"
  exit 0
fi
while [ $# -gt 0 ]; do
  case "$1" in
    --before) before=${2:?--before needs a folder}; shift 2 ;;
    --pairs) pairs=${2:?--pairs needs a count}; shift 2 ;;
    --key) key=${2:?--key needs a JSON key}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { usage >&2; exit 2; }
program=$1
shift
[[ $pairs =~ ^[1-9][0-9]*$ ]] || { echo "step_ab: --pairs $pairs is not a count" >&2; exit 2; }
for binary in "$before/$program" "build/bench/$program"; do
  [ -x "$binary" ] || { echo "step_ab: no program $binary (--save first?)" >&2; exit 2; }
done

# One run's KEY from the last JSON line it printed (its profile and progress go to stderr).
measure() {
  local line
  line=$("$@" 2> /dev/null | grep '^{' | tail -n 1) || true
  python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$line" "$key" \
    2> /dev/null || { echo "step_ab: $* printed no \"$key\"" >&2; exit 1; }
}

echo "before: $before/$program; after: build/bench/$program; $program $*; $key"
ratios=()
for ((pair = 1; pair <= pairs; ++pair)); do
  if ((pair % 2)); then
    b=$(measure "$before/$program" "$@")
    a=$(measure "build/bench/$program" "$@")
  else
    a=$(measure "build/bench/$program" "$@")
    b=$(measure "$before/$program" "$@")
  fi
  ratio=$(python3 -c "print(f'{$a / $b:.3f}')")
  ratios+=("$ratio")
  echo "pair $pair: before $b, after $a, ratio $ratio"
done
python3 -c 'import statistics, sys; print(f"median ratio (after / before) of {len(sys.argv) - 1}"
                                          f" pairs: {statistics.median(map(float, sys.argv[1:])):.3f}")' \
  "${ratios[@]}"
