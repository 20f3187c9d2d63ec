// LOOM_CUDA_CHECK (and LOOM_CUBLAS_CHECK): turns a failed CUDA runtime (or cuBLAS) call into a
// loom::Error that names the call, the source location and the library's own description of the
// error.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace loom::cuda {

// Throws loom::Error("CUDA error in <call> at <file>:<line>: <cudaGetErrorString>").
[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                   int line);
// Throws loom::Error("cuBLAS error in <call> at <file>:<line>: <cublasGetStatusString>").
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);
// Throws loom::Error("<op>: <what> = <value> does not fit the 32-bit ints cuBLAS takes").
[[noreturn]] void throw_cublas_size_error(const char* op, const char* what, long long value);

}  // namespace loom::cuda

// Checks the status a call returns against `ok`, throwing through `thrower` (above) otherwise;
// `text` is the call as written.
#define LOOM_CUDA_STATUS_CHECK(call, text, ok, thrower)                     \
  do {                                                                      \
    const auto loom_cuda_status_ = (call);                                  \
    if (loom_cuda_status_ != (ok))                                          \
      ::loom::cuda::thrower(loom_cuda_status_, text, __FILE__, __LINE__);   \
  } while (0)

#define LOOM_CUDA_CHECK(call) LOOM_CUDA_STATUS_CHECK(call, #call, cudaSuccess, throw_cuda_error)
// LOOM_CUDA_CHECK for a cuBLAS call. (The messages are formatted in cuda_check.cpp: nvcc
// cannot compile fmt's checked format strings, so the .cu files throw through these.)
#define LOOM_CUBLAS_CHECK(call) \
  LOOM_CUDA_STATUS_CHECK(call, #call, CUBLAS_STATUS_SUCCESS, throw_cublas_error)

// After a kernel launch: reports a bad launch configuration at once. Errors that happen while
// the kernel runs surface at the next synchronising call (a copy to the host, synchronize()).
#define LOOM_CUDA_CHECK_LAUNCH() LOOM_CUDA_CHECK(cudaGetLastError())
