#!/usr/bin/env bash
# Builds loom with AddressSanitizer + UndefinedBehaviorSanitizer (Debug, CPU only, in
# build-asan/) and runs the test suite under them; any report fails its test. About 15 minutes
# on 2 cores. Extra arguments go to ctest (e.g. -R nn).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DLOOM_SANITIZE=ON -DLOOM_CUDA=OFF \
  -DLOOM_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j"$(nproc)"
# Leak checking needs ptrace, which containers often refuse; the consumer tests rebuild loom
# without the sanitizers, so they are left out.
export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export OMP_WAIT_POLICY=PASSIVE
ctest --test-dir build-asan --output-on-failure -j"$(nproc)" -E consumer "$@"
