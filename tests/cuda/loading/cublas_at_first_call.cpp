// The CUDA backend opens cuBLAS at the first cuBLAS call, not when a program starts
// (backends/cuda/cublas_library.cpp): a program linked with loom's CUDA backend runs CPU work
// without libcublas and libcublasLt in its memory, and its first cuBLAS call loads them and
// reaches the library's own function. Needs no GPU: cublasGetStatusString only names a status.
// A program of its own (not a doctest case of test_cuda), so that no earlier case has loaded
// cuBLAS already.
#include <cublas_v2.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "loom.h"

namespace {

// Whether a library whose file name contains `name` is mapped into this process.
bool mapped(const char* name) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find(name) != std::string::npos) return true;
  return false;
}

int failures = 0;
void check(bool ok, const char* what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) ++failures;
}

}  // namespace

int main() {
  const loom::Tensor a = loom::ones({4, 4});
  const float sum = loom::matmul(a, a).sum().item<float>();  // CPU work through the backend
  check(sum == 64.0f, "a CPU product of ones(4, 4) with itself sums to 64");
  check(!mapped("libcublas"), "libcublas and libcublasLt are not loaded before a cuBLAS call");
  const char* success = cublasGetStatusString(CUBLAS_STATUS_SUCCESS);
  const char* failure = cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED);
  check(success != nullptr && failure != nullptr && std::strlen(success) > 0 &&
            std::strcmp(success, failure) != 0,
        "the first cuBLAS call reaches the library: two statuses get two names");
  std::printf("(cuBLAS names them \"%s\" and \"%s\")\n", success ? success : "",
              failure ? failure : "");
  check(mapped("libcublasLt"), "the first cuBLAS call loaded libcublas and libcublasLt");
  return failures == 0 ? 0 : 1;
}
