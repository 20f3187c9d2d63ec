#!/usr/bin/env bash
# Runs every libFuzzer target of the project: tests/fuzz/fuzz_<name>.cpp, each reading outside
# bytes (safetensors, tokenizer files, fortunes, ...). Targets are found by glob, so one added
# later is fuzzed too. Each runs for SECONDS (default 600) from its committed seed corpus
# tests/fuzz/corpus/<name>/, built with clang, -fsanitize=fuzzer,address,undefined in build-fuzz/.
#
#   scripts/fuzz.sh [SECONDS] [NAME...]      e.g. scripts/fuzz.sh 600 tokenizer fortunes
#   LOOM_FUZZ_PARALLEL=2 scripts/fuzz.sh     two targets at a time (default 1)
#
# A target accepts an input or rejects it with loom::Error; a crash, a sanitizer report, any
# other exception (it escapes and aborts), a hang over 10 s or 2 GB of memory fails the run. The
# failing input is saved as build-fuzz/artifacts/<name>/crash-*: fix the bug, then commit the
# input as tests/fuzz/corpus/<name>/bad_<what> (or valid_<what>) so the ctest replay keeps it
# fixed. New interesting inputs go to build-fuzz/corpus/<name>/, never into the committed seeds.
# Prints one line per target: seconds, executions, coverage (libFuzzer's cov and ft) and result.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
parallel=${LOOM_FUZZ_PARALLEL:-1}

names=()
if [ $# -gt 0 ]; then
  names=("$@")
else
  for src in tests/fuzz/fuzz_*.cpp; do
    name=$(basename "$src" .cpp)
    names+=("${name#fuzz_}")
  done
fi
[ ${#names[@]} -gt 0 ] || { echo "fuzz.sh: no tests/fuzz/fuzz_*.cpp targets"; exit 1; }

bash scripts/install_deps.sh --fuzz >/dev/null
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DLOOM_FUZZ=ON -DLOOM_SANITIZE=ON -DLOOM_CUDA=OFF \
  -DLOOM_BUILD_BENCH=OFF -DLOOM_BUILD_EXAMPLES=OFF -DLOOM_NATIVE=OFF >/dev/null
targets=()
for name in "${names[@]}"; do targets+=("fuzz_$name"); done
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]}"

export ASAN_OPTIONS=detect_leaks=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE

# Fuzzes one target; its libFuzzer log is build-fuzz/logs/<name>.log.
run_one() {
  local name=$1
  local work=build-fuzz/corpus/$name artifacts=build-fuzz/artifacts/$name/
  mkdir -p "$work" "$artifacts" build-fuzz/logs
  local status=0 start=$SECONDS
  "build-fuzz/tests/fuzz_$name" "$work" "tests/fuzz/corpus/$name" -max_total_time="$seconds" \
    -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts" >"build-fuzz/logs/$name.log" 2>&1 || status=$?
  local log=build-fuzz/logs/$name.log
  local execs cov ft
  execs=$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo "?")
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo "?")
  local verdict="ok"
  if [ "$status" -ne 0 ]; then
    verdict="FAILED (exit $status): see $log and $artifacts"
  fi
  printf 'fuzz_%-12s %5ss  %10s execs  cov %6s  ft %6s  %s\n' "$name" "$((SECONDS - start))" "$execs" \
    "$cov" "$ft" "$verdict"
  [ "$status" -eq 0 ]
}

failed=0
running=0
for name in "${names[@]}"; do
  if [ "$running" -ge "$parallel" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  run_one "$name" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
[ "$failed" -eq 0 ] && echo "fuzz.sh: every target ran clean" || echo "fuzz.sh: a target failed"
exit "$failed"
