#!/usr/bin/env bash
# Builds and runs tests/consumer against loom: `run.sh install BUILD_DIR` (find_package after
# cmake --install of BUILD_DIR) or `run.sh subdirectory SOURCE_DIR` (add_subdirectory).
set -euo pipefail
mode=$1 arg=$2 here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "$mode" = install ]; then
  cmake --install "$arg" --prefix "$work/prefix" >/dev/null
  cmake -S "$here" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
else
  cmake -S "$here" -B "$work/build" -DLOOM_SOURCE_DIR="$arg" -DLOOM_CUDA=OFF >/dev/null
fi
cmake --build "$work/build" -j2 >/dev/null
"$work/build/app"
