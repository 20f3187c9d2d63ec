#!/usr/bin/env bash
# The README demo: installs the dependencies, builds loom and trains a small GPT on the
# fortunes database (about 10 minutes on 2 CPU cores), then prints samples.
# Extra arguments go to train_gpt (see `build/examples/train_gpt --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
LOOM_TARGETS="train_gpt generate_gpt" bash scripts/build.sh
./build/examples/train_gpt "$@"
