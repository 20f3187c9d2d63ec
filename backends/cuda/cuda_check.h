// LOOM_CUDA_CHECK: turns a failed CUDA runtime call into a loom::Error that names the call,
// the source location and the runtime's own description of the error.
#pragma once

#include <cuda_runtime_api.h>

namespace loom::cuda {

// Throws loom::Error("CUDA error in <call> at <file>:<line>: <cudaGetErrorString>").
[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                   int line);

}  // namespace loom::cuda

#define LOOM_CUDA_CHECK(call)                                                       \
  do {                                                                              \
    const cudaError_t loom_cuda_status_ = (call);                                   \
    if (loom_cuda_status_ != cudaSuccess)                                           \
      ::loom::cuda::throw_cuda_error(loom_cuda_status_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: reports a bad launch configuration at once. Errors that happen while
// the kernel runs surface at the next synchronising call (a copy to the host, synchronize()).
#define LOOM_CUDA_CHECK_LAUNCH() LOOM_CUDA_CHECK(cudaGetLastError())
