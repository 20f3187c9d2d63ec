#!/usr/bin/env bash
# Builds and runs programs outside loom's tree against loom:
#   run.sh install BUILD_DIR SOURCE_DIR  `cmake --install BUILD_DIR` into one prefix, then MOVES
#       the prefix (the package must be relocatable: no path of the building machine or of the
#       first prefix in its CMake files), and with -DCMAKE_PREFIX_PATH=<moved prefix> builds
#       app.cpp (find_package(loom)) and SOURCE_DIR/examples/train_spirals.cpp, copied alone
#       into an empty folder with example/CMakeLists.txt, and trains it (300 steps: it exits 0
#       once it separates the spirals, above 95% accuracy).
#   run.sh subdirectory SOURCE_DIR       app.cpp through add_subdirectory(SOURCE_DIR), in an -O0
#       unity build.
set -euo pipefail
mode=$1 arg=$2 here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "$mode" = install ]; then
  src=$3
  cmake --install "$arg" --prefix "$work/first" >/dev/null
  mkdir "$work/moved"
  mv "$work/first" "$work/moved/prefix"
  prefix=$work/moved/prefix
  # The exported targets name imported targets (loom_deps::OpenBLAS, ZLIB::ZLIB, CUDA::cudart...)
  # or paths under ${_IMPORT_PREFIX}: an absolute path would tie the package to this machine.
  pkg=$(find "$prefix" -path '*/cmake/loom' -type d)
  if grep -HnE '(^|[^}A-Za-z0-9_.-])/[A-Za-z]' "$pkg"/loom*Targets*.cmake |
       grep -vE '^[^:]*:[0-9]+:\s*#'; then
    echo "FAIL: absolute paths in the installed targets files (above)"; exit 1
  fi
  if grep -rnF -e "$work/first" -e "$(cd "$arg" && pwd)" "$pkg"; then
    echo "FAIL: the package names the first prefix or the build tree (above)"; exit 1
  fi
  cmake -S "$here" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$work/build" -j2 >/dev/null
  "$work/build/app"
  # An example copied out of the tree, as a user would: the file alone and five lines of CMake.
  mkdir "$work/spirals"
  cp "$src/examples/train_spirals.cpp" "$here/example/CMakeLists.txt" "$work/spirals/"
  cmake -S "$work/spirals" -B "$work/spirals/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$work/spirals/build" -j2 >/dev/null
  "$work/spirals/build/train_spirals" --steps 300 --out "$work/spirals/s.safetensors" | tail -3
  test -s "$work/spirals/s.safetensors"
  echo "train_spirals ok: built against the moved prefix, checkpoint written"
else
  # What is tested is that the library builds inside another project and links. A build with
  # neither optimisation nor debug information (build type None, -O0; without -march=native,
  # whose narrower vectors it compiles) and a unity build (CMake compiles each layer's files
  # eight to a translation unit, parsing the headers once per eight): 45 s alone on 2 Intel
  # cores (2026-12-02), where a Debug build (-g) took 51 s; on the AMD machine before, the Debug
  # unity build took 90 s, a Debug build without unity 180 s and a Release build 370. A unity
  # build needs the internal names of each file to differ from those of the files beside it,
  # which this test checks too.
  cmake -S "$here" -B "$work/build" -DLOOM_SOURCE_DIR="$arg" -DLOOM_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS=-O0 -DCMAKE_UNITY_BUILD=ON >/dev/null
  cmake --build "$work/build" -j2 >/dev/null
  "$work/build/app"
fi
