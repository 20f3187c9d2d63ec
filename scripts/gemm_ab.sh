#!/usr/bin/env bash
# Compares two builds of loom's CPU product kernel (backends/gemm/tiled_gemm.cpp) in one
# process: a git revision's file ("before") and the working tree's ("after"), each product timed
# under both in alternating order (scripts/gemm_ab.cpp says why: the machine's noise).
#
#   bash scripts/gemm_ab.sh [--rev REV] [--threads N] [--reps R] [--rotate W] [--cold] [SHAPE...]
#   bash scripts/gemm_ab.sh --rev HEAD~1 6400x512x128 512x128x6400:TN 512*50x50x32:NT
#
# REV defaults to HEAD (the working tree's uncommitted change against the last commit). SHAPE
# is [BATCH*]MxNxK[:NN|NT|TN|TT]; without shapes, a set from the models' steps. It prints, for
# each shape, both builds' median (and fastest) GFLOP/s, their ratio, and whether the products
# are the same to the bit. The kernel needs nothing of loom's but headers and the activation's
# row loops (backends/elementwise/cpu_activation_rows.cpp, headers only as well), so each
# build's files are compiled on their own with the build's flags (-O3 -march=native, as
# LOOM_NATIVE builds), into namespaces of their own; both must take the same GemmArgs
# (backends/gemm/gemm.h unchanged).
set -euo pipefail
cd "$(dirname "$0")/.."

rev=HEAD
options=() shapes=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rev) rev=${2:?--rev needs a revision}; shift 2 ;;
    --threads|--reps|--rotate) options+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
    --cold) options+=("$1"); shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) shapes+=("$1"); shift ;;
  esac
done
if [ ${#shapes[@]} -eq 0 ]; then
  # The models' products: Linear layers, weight gradients, attention's, decoding's.
  shapes=(6400x512x128 6400x512x128:NT 6400x128x512 512x128x6400:TN 128x512x6400:TN
          3136x128x512:NT 256x64x12544:TN 4096x1024x256:NT 1024x256x4096:TN 1024x1024x1024
          512*50x50x32:NT 512*50x32x50 512*50x32x50:TN 128x256x256 32x1024x256:NT)
fi

if ! git rev-parse --verify --quiet "$rev^{commit}" > /dev/null; then
  echo "gemm_ab: no revision $rev" >&2
  exit 2
fi
if ! git diff --quiet "$rev" -- backends/gemm/gemm.h; then
  echo "gemm_ab: backends/gemm/gemm.h differs from $rev: the builds would not share GemmArgs" >&2
  exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The revision's sources (its headers with its kernel), and the working tree's.
mkdir -p "$tmp/before"
git archive "$rev" backends core | tar -x -C "$tmp/before"
flags=(-O3 -DNDEBUG -march=native -fno-math-errno -fno-trapping-math -fopenmp -std=c++20)
# Each side's kernel, and the activation it applies to C's rows (GemmArgs::activation_out) where
# that side has it, in the element-wise kernels' vectors (CMakeLists.txt).
objects=()
compile() {  # SIDE ROOT
  g++ "${flags[@]}" -I"$2" -Dloom="loom_$1" -c "$2/backends/gemm/tiled_gemm.cpp" -o "$tmp/$1.o"
  objects+=("$tmp/$1.o")
  if [ -f "$2/backends/elementwise/cpu_activation_rows.cpp" ]; then
    g++ "${flags[@]}" -mprefer-vector-width=512 -I"$2" -Dloom="loom_$1" \
      -c "$2/backends/elementwise/cpu_activation_rows.cpp" -o "$tmp/$1_rows.o"
    objects+=("$tmp/$1_rows.o")
  fi
}
compile before "$tmp/before"
compile after .
g++ "${flags[@]}" -I. scripts/gemm_ab.cpp "${objects[@]}" -lfmt -o "$tmp/gemm_ab"
echo "before: $rev ($(git rev-parse --short "$rev")); after: the working tree"
"$tmp/gemm_ab" "${options[@]}" "${shapes[@]}"
