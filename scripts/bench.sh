#!/usr/bin/env bash
# One sitting of every CPU benchmark beside its PyTorch twin: installs what it needs (loom's
# dependencies and Debian's PyTorch), builds the benchmarks, then runs scripts/bench_sitting.py,
# which measures the machine's sgemm peak and every case on both sides, one after the other, and
# writes bench/results/<date>-<host>.{json,md} (the Markdown table is the README's).
#
#   bash scripts/bench.sh [--quick] [--threads T] [--cases CASE...] [--readme]
#
# --quick: 3 timed steps a case instead of 10 (about 10 minutes on 2 cores, the full one about
# 15). Run it on an otherwise idle machine: the numbers are only as quiet as the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh --bench
LOOM_TARGETS="ops gpt vision seq2seq bert detr" bash scripts/build.sh
exec /usr/bin/python3 scripts/bench_sitting.py "$@"
