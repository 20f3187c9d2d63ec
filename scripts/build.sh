#!/usr/bin/env bash
# Configures and builds loom in ./build (Release). The CUDA backend is built when nvcc is found
# (on PATH or in /usr/local/cuda); pass -DLOOM_CUDA=OFF to skip it. Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
cuda_args=()
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  cuda_args=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${cuda_args[@]}" "$@" >/dev/null
# LOOM_TARGETS="a b" builds only those targets (the demo needs just its trainer).
targets=()
for t in ${LOOM_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build build -j"$(nproc)" "${targets[@]}"
