#!/usr/bin/env bash
# Installs the dependencies, builds loom and runs the whole test suite (the README's test command).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh "$@"
export OMP_WAIT_POLICY=PASSIVE
ctest --test-dir build --output-on-failure -j"$(nproc)"
