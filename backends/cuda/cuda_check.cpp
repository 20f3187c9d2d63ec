// The error path of LOOM_CUDA_CHECK.
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

}  // namespace loom::cuda
