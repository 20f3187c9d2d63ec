// cudaMalloc/cudaFree as the source of the caching allocator's blocks.
#include "backends/cuda/allocator.h"

#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_check.h"

namespace loom::cuda {

CachingAllocator::Source device_memory() {
  auto obtain = [](size_t bytes) -> void* {
    void* block = nullptr;
    // During a graph capture (Backend::begin_capture) the graph's pool takes fresh blocks.
    // cudaMalloc is not recorded: the block simply exists for the graph's life, so the capture
    // may allow it for this call (as PyTorch's allocator does: "relaxed" around cudaMalloc).
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    LOOM_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    const cudaError_t status = cudaMalloc(&block, bytes);
    (void)cudaThreadExchangeStreamCaptureMode(&mode);  // the caller's mode again
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear the error: the allocator frees its cache and retries
      return nullptr;
    }
    LOOM_CUDA_CHECK(status);
    return block;
  };
  auto give_back = [](void* block) { (void)cudaFree(block); };
  return {"cuda", obtain, give_back};
}

}  // namespace loom::cuda
