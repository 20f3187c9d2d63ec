#!/usr/bin/env bash
# Installs everything loom needs to build, test and train on a fresh Debian 12 machine.
#   compilers and build:   g++, cmake
#   libraries:             OpenBLAS (the OpenMP build, so BLAS shares our OpenMP thread pool),
#                          fmt, doctest, nlohmann-json (safetensors headers; header-only, private
#                          to the library), CLI11 (command lines of the examples and benchmarks)
#                          zlib (gzipped Fashion-MNIST files), stb (image files),
#                          OpenMPI (data-parallel jobs of several processes: mpirun, loom::distributed),
#                          ICU (Unicode tables for BERT's WordPiece tokenizer)
#   fuzzing (with --fuzz): clang and its libFuzzer runtime (-DLOOM_FUZZ=ON, scripts/fuzz.sh)
#   real data sets:        fortunes (GPT, BERT, BPE), fashion-mnist (ViT, Swin, DETR),
#                          freedict eng-deu (encoder-decoder translation)
# The CUDA toolkit is optional and not installed here; /usr/local/cuda is used when present.
set -euo pipefail
packages=(build-essential cmake pkg-config libopenblas-openmp-dev libfmt-dev doctest-dev
          libopenmpi-dev openmpi-bin
          nlohmann-json3-dev libcli11-dev
          zlib1g-dev libstb-dev
          libicu-dev
          fortunes dataset-fashion-mnist dict-freedict-eng-deu)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "loom: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "loom: dependencies present"
# With --fuzz: also clang, its libFuzzer/sanitizer runtimes and LLVM's OpenMP (scripts/fuzz.sh).
if [ "${1:-}" = "--fuzz" ]; then
  fuzz_missing=()
  for p in clang libclang-rt-dev libomp-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      fuzz_missing+=("$p")
  done
  if [ ${#fuzz_missing[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    echo "loom: installing ${fuzz_missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${fuzz_missing[@]}" >/dev/null
  fi
  echo "loom: fuzzing dependencies present"
fi
