#!/usr/bin/env bash
# Installs everything loom needs to build, test and train on a fresh Debian 12 machine.
#   compilers and build:   g++, cmake
#   libraries:             OpenBLAS (the OpenMP build, so BLAS shares our OpenMP thread pool),
#                          fmt, doctest, nlohmann-json (safetensors headers; header-only, private
#                          to the library), CLI11 (command lines of the examples and benchmarks)
#                          zlib (gzipped Fashion-MNIST files), stb (image files),
#                          OpenMPI (data-parallel jobs of several processes: mpirun, loom::distributed),
#                          ICU (Unicode tables for BERT's WordPiece tokenizer),
#                          jemalloc (the malloc of the programs that link loom)
#   fuzzing (with --fuzz): clang and its libFuzzer runtime (-DLOOM_FUZZ=ON, scripts/fuzz.sh)
#   PyTorch (with --bench): Debian's python3-torch, numpy and scipy, for the PyTorch twins in
#                          bench/reference (scripts/bench.sh, scripts/reproduce.sh); never for tests
#   real data sets:        fortunes (GPT, BERT, BPE), fashion-mnist (ViT, Swin, DETR),
#                          freedict eng-deu (encoder-decoder translation)
# The CUDA toolkit is optional and not installed here; /usr/local/cuda is used when present.
set -euo pipefail
# Installs those of the named Debian packages that are missing.
install_missing() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "loom: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

install_missing build-essential cmake pkg-config libopenblas-openmp-dev libfmt-dev doctest-dev \
                libopenmpi-dev openmpi-bin \
                nlohmann-json3-dev libcli11-dev \
                zlib1g-dev libstb-dev \
                libicu-dev libjemalloc-dev \
                fortunes dataset-fashion-mnist dict-freedict-eng-deu
echo "loom: dependencies present"
for option in "$@"; do
  case $option in
    --fuzz)  # clang, its libFuzzer/sanitizer runtimes and LLVM's OpenMP (scripts/fuzz.sh)
      install_missing clang libclang-rt-dev libomp-dev
      echo "loom: fuzzing dependencies present" ;;
    --bench)  # the PyTorch twins of the benchmarks and trainers (bench/reference)
      install_missing python3-torch python3-numpy python3-scipy
      echo "loom: PyTorch present" ;;
    *) echo "install_deps.sh: unknown option '$option' (--fuzz, --bench)" >&2; exit 2 ;;
  esac
done
