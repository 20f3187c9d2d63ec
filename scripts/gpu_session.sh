#!/usr/bin/env bash
# Builds loom on a GPU machine that has the CUDA toolkit but no package registry, runs the CUDA
# test suites and the GPU benchmarks side by side with PyTorch (bench/reference/bench.py).
#
#   bash scripts/gpu_session.sh [build|cuda|test|bench|fast|models|profile|generate|
#                                decodeprofile|train|all]...  (default: all)
#   bash scripts/gpu_session.sh fetch      (first, on a machine with apt: see below)
#
# Dependencies that the GPU machine lacks (OpenBLAS, fmt, doctest, nlohmann-json, CLI11,
# zlib, ICU, stb, fortunes) are taken from Debian .deb files in $LOOM_DEBS (default .devdeps/,
# git-ignored), which `fetch` downloads with apt-get on a machine that has a package registry;
# carry that folder to the GPU machine (the device tool copies no ignored folder by itself: name
# .devdeps in its `carry`, or the configure step fails to find ICU).
# Steps: build (Release, build-gpu/; $LOOM_GPU_TARGETS names targets to build instead of all),
# cuda (the CUDA suite alone), test (the CUDA suites, then every ctest but the two
# consumer builds), bench (bench/gpt vs bench/reference/bench.py on gpt-mini and gpt2, float32
# and TF32, and PyTorch's fast path: bf16 autocast + SDPA + fused AdamW, also compiled),
# fast (loom --tf32, --bf16 with and without fused attention, then torchfast: the comparison
# with PyTorch's fast path),
# models (bench/vision, seq2seq, bert and detr on the GPU), profile (Nsight Compute per-kernel
# times of one step), generate (gpt-mini and GPT-2 decoding: graph, device loop, host loop),
# decodeprofile (Nsight Compute over 4 tokens of GPT-2's decoding step), train (the README
# demo).
# Logs go to $OUT (default build-gpu/logs). The last lines printed are a summary.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DEBS=${LOOM_DEBS:-$ROOT/.devdeps}
PREFIX=/tmp/loom-deps
BUILD=$ROOT/build-gpu
OUT=${OUT:-$BUILD/logs}
mkdir -p "$OUT"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(all)
summary=()
note() { summary+=("$*"); echo "== $*"; }

setup_deps() {
  [ -d "$DEBS" ] || echo "gpu_session.sh: no $DEBS: the build uses the machine's own packages" \
    "(run 'fetch' where apt works, then carry .devdeps)" >&2
  if [ -d "$DEBS" ] && ! [ -f "$PREFIX/.done" ]; then
    mkdir -p "$PREFIX"
    for f in "$DEBS"/*.deb; do
      case "$f" in
        *fortunes*) dpkg -x "$f" / ;;  # data only: /usr/share/games/fortunes
        *) dpkg -x "$f" "$PREFIX" ;;
      esac
    done
    # zlib1g-dev's libz.so points to /lib absolutely: repoint it to the unpacked zlib.
    ln -sf "$PREFIX/lib/x86_64-linux-gnu/libz.so.1" "$PREFIX/usr/lib/x86_64-linux-gnu/libz.so"
    touch "$PREFIX/.done"
  fi
  local arch=$PREFIX/usr/lib/x86_64-linux-gnu
  export LD_LIBRARY_PATH=$arch/openblas-openmp:$arch:${LD_LIBRARY_PATH:-}
  CMAKE_DEPS=()
  if [ -d "$PREFIX/usr" ]; then
    CMAKE_DEPS=(-DCMAKE_PREFIX_PATH="$PREFIX/usr"
                -DLOOM_BLAS_INCLUDE="$PREFIX/usr/include/x86_64-linux-gnu/openblas-openmp"
                -DLOOM_BLAS_LIB="$arch/openblas-openmp/libopenblas.so.0")
  fi
}

do_build() {
  local nvcc=nvcc
  command -v nvcc >/dev/null || nvcc=/usr/local/cuda/bin/nvcc
  { nvidia-smi; g++ --version | head -1; cmake --version | head -1; $nvcc --version | tail -2; } \
    >"$OUT/machine.txt" 2>&1
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
    "${CMAKE_DEPS[@]}" >"$OUT/configure.log" 2>&1 || { note "configure FAILED"; tail -30 "$OUT/configure.log"; return 1; }
  local targets=()
  for t in ${LOOM_GPU_TARGETS:-}; do targets+=(--target "$t"); done
  if cmake --build "$BUILD" -j"$(nproc)" "${targets[@]}" >"$OUT/build.log" 2>&1; then
    note "build ok ($(grep -c -i 'warning' "$OUT/build.log") warning lines)"
  else
    note "build FAILED"; grep -B2 -A8 -m5 'error' "$OUT/build.log" | head -60; return 1
  fi
}

run_suite() {  # name, command...
  local name=$1; shift
  local log=$OUT/$name.log
  "$@" >"$log" 2>&1
  local rc=$?
  note "$name: rc=$rc $(grep -E '^\[doctest\] (test cases|assertions)' "$log" | tr -s ' ' | tr '\n' ' ')"
  [ $rc -ne 0 ] && grep -B3 -A12 -m8 -E 'ERROR|FATAL|error:' "$log" | head -80
  return 0
}

do_test() {
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
  run_suite test_cuda "$BUILD/tests/test_cuda"
  run_suite test_optim "$BUILD/tests/test_optim"
  # Everything else too (the consumer tests rebuild loom from scratch: left to CI).
  run_suite ctest_all ctest --test-dir "$BUILD" -j8 --output-on-failure -E consumer
  note "ctest: $(grep -E 'tests passed|tests failed' "$OUT/ctest_all.log")"
}

do_cuda() {
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
  run_suite test_cuda "$BUILD/tests/test_cuda"
}

# PyTorch's fast path on GPT-2: bf16 autocast + SDPA + fused AdamW.
do_torch_fast() {
  local j=${OUT_JSONL:-$OUT/bench.jsonl} line
  for c in ${BENCH_CASES:-gpt-mini gpt2}; do
    local variants
    IFS=';' read -ra variants <<<"${TORCH_FAST_VARIANTS:---fast;--fast --compile}"
    for extra in "${variants[@]}"; do
      line=$(python3 bench/reference/bench.py $c --device cuda --steps 20 $extra 2>&1 | tail -1)
      echo "$line" >>"$j"
      note "$c torch $extra: $(grep -o '"tokens_per_s": [0-9.]*' <<<"$line") $(grep -o '"mfu": [0-9.]*' <<<"$line") $(grep -o '"loss_last": [0-9.]*' <<<"$line")"
    done
  done
}

# loom's fast path (bf16 autocast + fused attention) side by side with PyTorch's, same machine.
do_fast() {
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
  local j=$OUT/fast.jsonl line
  for c in ${BENCH_CASES:-gpt-mini gpt2}; do
    local variants
    IFS=';' read -ra variants <<<"${LOOM_FAST_VARIANTS:---tf32;--bf16;--bf16 --no-fused-attention}"
    for extra in "${variants[@]}"; do
      line=$("$BUILD/bench/gpt" $c --device cuda --steps 20 $extra 2>&1 | tail -1); echo "$line" >>"$j"
      note "$c loom $extra: $(grep -o '"tokens_per_s": [0-9.]*' <<<"$line") $(grep -o '"mfu": [0-9.]*' <<<"$line") $(grep -o '"loss_last": [0-9.]*' <<<"$line")"
    done
  done
  OUT_JSONL=$j do_torch_fast
}

# The other models' benchmarks on the GPU, beside the same models of bench/reference/models.py run
# on the GPU by bench/reference/bench.py (eager float32; DETR's matcher solves on the host).
do_models() {
  local j=$OUT/models.jsonl line
  for spec in "vision vit-fmnist" "vision swin-fmnist" "seq2seq seq2seq-mini" "bert bert-mini" "detr detr-fmnist"; do
    set -- $spec
    [ -x "$BUILD/bench/$1" ] || continue
    line=$("$BUILD/bench/$1" $2 --device cuda --steps 20 2>&1 | tail -1); echo "$line" >>"$j"
    local loom_ms=$(grep -o '"ms_per_step": [0-9.]*' <<<"$line" | cut -d' ' -f2)
    line=$(python3 bench/reference/bench.py $2 --device cuda --steps 20 2>&1 | tail -1)
    echo "$line" >>"$j"
    local torch_ms=$(grep -o '"ms_per_step": [0-9.]*' <<<"$line" | cut -d' ' -f2)
    note "$2 cuda: loom ${loom_ms:-?} ms, torch ${torch_ms:-?} ms, ratio $(python3 -c "print(round(${torch_ms:-0}/${loom_ms:-1}, 3))")"
  done
}

do_bench() {  # every JSON line goes to $OUT/bench.jsonl
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
  local j=$OUT/bench.jsonl line
  for c in ${BENCH_CASES:-gpt-mini gpt2}; do
    for tf in "" "--tf32"; do
      line=$("$BUILD/bench/gpt" $c --device cuda --steps 20 $tf 2>&1 | tail -1); echo "$line" >>"$j"
      local loom_tps=$(grep -o '"tokens_per_s": [0-9.]*' <<<"$line" | cut -d' ' -f2)
      note "$c${tf:+ tf32}: loom loss_last $(grep -o '"loss_last": [0-9.]*' <<<"$line" | cut -d' ' -f2)"
      line=$(python3 bench/reference/bench.py $c --device cuda --steps 20 $tf 2>&1 | tail -1)
      echo "$line" >>"$j"
      local torch_tps=$(grep -o '"tokens_per_s": [0-9.]*' <<<"$line" | cut -d' ' -f2)
      note "$c${tf:+ tf32}: loom ${loom_tps:-?} tok/s, torch ${torch_tps:-?} tok/s, ratio $(python3 -c "print(round(${loom_tps:-0}/${torch_tps:-1}, 3))"), torch loss_last $(grep -o '"loss_last": [0-9.]*' <<<"$line" | cut -d' ' -f2)"
    done
  done
  # The same model with loom's GPT-2 init, to compare the losses reached (loss_last).
  for c in ${BENCH_CASES:-gpt-mini gpt2}; do
    line=$(python3 bench/reference/bench.py $c --device cuda --steps 20 --gpt2-init 2>&1 | tail -1)
    echo "$line" >>"$j"
    note "$c torch --gpt2-init: $(grep -o '"loss_last": [0-9.]*' <<<"$line")"
  done
  OUT_JSONL=$j do_generate
}

# Generation against the host-synchronised loop (--host-sampling): the
# default (the step replayed as a CUDA graph), the device loop launching every kernel
# (--no-cuda-graphs), and the host loop.
do_generate() {
  local j=${OUT_JSONL:-$OUT/generate.jsonl} line
  for c in gpt-mini-generate gpt2-generate; do
    for mode in "" "--no-cuda-graphs" "--host-sampling"; do
      line=$("$BUILD/bench/gpt" $c --device cuda $mode 2>&1 | tail -1); echo "$line" >>"$j"
      note "$c${mode:+ $mode}: loom $(grep -o '"new_tokens_per_s": [0-9.]*' <<<"$line")"
    done
  done
}

# The kernels of GPT-2's decoding step, from Nsight Compute: the device loop launching them one
# by one (the graph replays the same ones), $DECODE_COUNT kernels after the first $DECODE_SKIP
# (the warm-ups' and prefills' kernels), summed per kernel name over 4 tokens.
do_decode_profile() {
  local ncu case=${DECODE_CASE:-gpt2-generate}
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [ -n "$ncu" ] || { note "decode profile: ncu not found"; return 0; }
  "$ncu" --csv --metrics gpu__time_duration.sum --cache-control none --clock-control none \
    -s "${DECODE_SKIP:-20000}" -c "${DECODE_COUNT:-520}" \
    "$BUILD/bench/gpt" "$case" --device cuda --no-cuda-graphs --steps 1 \
    >"$OUT/ncu_$case.csv" 2>"$OUT/ncu_$case.err"
  python3 scripts/ncu_summary.py "$OUT/ncu_$case.csv" 4 >"$OUT/profile_$case.txt"
  note "decode profile $case: $(head -1 "$OUT/profile_$case.txt")"
  head -30 "$OUT/profile_$case.txt"
}

# Per-kernel GPU time of one GPT-2 training step (after the warm-ups), from Nsight Compute.
do_profile() {
  local ncu
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [ -n "$ncu" ] || { note "profile: ncu not found"; return 0; }
  local case=${PROFILE_CASE:-gpt2}
  "$ncu" --csv --metrics gpu__time_duration.sum --cache-control none --clock-control none \
    "$BUILD/bench/gpt" "$case" --device cuda --steps 1 ${PROFILE_ARGS:-} >"$OUT/ncu_$case.csv" \
    2>"$OUT/ncu_$case.err"
  python3 scripts/ncu_summary.py "$OUT/ncu_$case.csv" 4 >"$OUT/profile_$case.txt"
  note "profile $case: $(head -1 "$OUT/profile_$case.txt")"
  head -40 "$OUT/profile_$case.txt"
  # PyTorch's fast path, kernel by kernel (PROFILE_TORCH=0 skips it)
  if [ "${PROFILE_TORCH:-1}" = 1 ] && { [ "$case" = gpt2 ] || [ "$case" = gpt-mini ]; }; then
    python3 bench/reference/bench.py "$case" --device cuda --steps 3 --fast --profile >/dev/null \
      2>"$OUT/torch_profile_$case.txt"
    note "torch --fast profile $case: $(grep -E 'Self CUDA time total' "$OUT/torch_profile_$case.txt")"
  fi
}

# The README demo on the GPU: train_gpt's default run (gpt-mini, BPE 512, 1600 steps).
do_train() {
  "$BUILD/examples/train_gpt" --device cuda --out "$BUILD/out-gpt" >"$OUT/train_gpt.log" 2>&1
  note "train_gpt --device cuda: rc=$? $(grep -i -E 'bits/byte|final' "$OUT/train_gpt.log" | tail -2 | tr '\n' ' ')"
  tail -25 "$OUT/train_gpt.log"
}

if [ "${1:-}" = fetch ]; then
  mkdir -p "$DEBS" && cd "$DEBS"
  apt-get download libopenblas0-openmp libopenblas-openmp-dev libopenblas-dev libfmt9 libfmt-dev \
    doctest-dev nlohmann-json3-dev libcli11-dev libgfortran5 fortunes zlib1g zlib1g-dev \
    libicu-dev libicu72 libstb-dev libstb0
  mv fortunes_*.deb fortunes_all.deb  # the version's epoch puts a '%3a' in the name
  exit 0
fi
setup_deps
for s in "${steps[@]}"; do
  case $s in
    build) do_build || break ;;
    cuda) do_cuda ;;
    torchfast) do_torch_fast ;;
    fast) do_fast ;;
    models) do_models ;;
    test) do_test ;;
    bench) do_bench ;;
    profile) do_profile ;;
    generate) do_generate ;;
    decodeprofile) do_decode_profile ;;
    train) do_train ;;
    all) do_build && { do_test; do_bench; do_torch_fast; do_models; } ;;
    *) echo "unknown step $s"; exit 2 ;;
  esac
done
echo; echo "===== summary"; printf '%s\n' "${summary[@]}"
