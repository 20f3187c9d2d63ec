// What the kernel families' CUDA implementations (backends/<family>/*.cu) take from the CUDA
// device (cuda_backend.cpp): the one stream all work is queued on, scratch memory, the error
// flags of the kernels that check their inputs, the cuBLAS handle and the attention decoding
// kernel's counters. Each is the device's own, also during a graph capture.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace loom::cuda {

// The stream every kernel, copy and product is queued on, in order.
cudaStream_t stream();

// t's data as T*, or nullptr for an undefined tensor (an optional operand).
template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// Temporary device memory for multi-pass kernels. Blocks come from the device's memory (the
// caching allocator, or a graph's pool during a capture) and go back when the Scratch dies;
// that is safe while kernels still run, because everything is ordered on the one stream, so a
// later user of the block waits for them.
class Scratch {
 public:
  Scratch() = default;
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get(size_t bytes);

 private:
  std::vector<void*> blocks_;
};

// A flag that kernels raise instead of throwing (device code cannot throw): the first thread
// that finds a bad index stores it and where it was; the host reads the flag at its next wait
// for the GPU (cuda_backend.cpp's "device-side errors").
struct DeviceErrorFlag {
  int raised;
  long long value;
  long long position;
};

// The flag of a launch that checks indices into a dimension of size n (`op`'s message names
// the index at fault), or targets of `classes` classes besides ignore_index.
DeviceErrorFlag* index_error_flag(const char* op, int64_t n);
DeviceErrorFlag* target_error_flag(const char* op, int64_t classes, int64_t ignore_index);
// Called after each checked launch: waits for it under CUDA_LAUNCH_BLOCKING=1, so its error is
// thrown at the call that launched it.
void after_checked_launch();

// The cuBLAS handle, on stream(); cublas_float32() first sets its TF32 math for float32
// products as cuda_set_tf32 last asked.
cublasHandle_t cublas();
cublasHandle_t cublas_float32();

// kDecodeCounters zeros in device memory, which the attention decoding kernel
// (backends/attention/attention.cu) uses, and leaves zero, to find the last block of each
// problem; one array per stream.
#ifdef LOOM_CUDA_EMULATED
constexpr int64_t kDecodeCounters = 8;  // so that the tests' 12 heads take two launches
#else
constexpr int64_t kDecodeCounters = int64_t{1} << 16;
#endif
unsigned* decode_counters();

}  // namespace loom::cuda
