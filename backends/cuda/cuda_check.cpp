// The error paths of LOOM_CUDA_CHECK, LOOM_CUBLAS_CHECK and the cuBLAS size checks.
#include "backends/cuda/cuda_check.h"

#include "core/error.h"

namespace loom::cuda {

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  // Reset the runtime's "last error" so the next check does not report this one again.
  // (Errors raised inside a kernel, such as an illegal address, are sticky: the context stays
  // unusable and every later call fails too, as in PyTorch.)
  (void)cudaGetLastError();
  LOOM_FAIL("CUDA error in {} at {}:{}: {}", call, file, line, cudaGetErrorString(status));
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  LOOM_FAIL("cuBLAS error in {} at {}:{}: {}", call, file, line, cublasGetStatusString(status));
}

void throw_cublas_size_error(const char* op, const char* what, long long value) {
  LOOM_FAIL("{}: {} = {} does not fit the 32-bit ints cuBLAS takes", op, what, value);
}

}  // namespace loom::cuda
