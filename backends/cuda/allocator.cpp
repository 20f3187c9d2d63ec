// The caching allocator: size classes, free lists, and the release-and-retry on out of memory.
#include "backends/cuda/allocator.h"

#include <cuda_runtime_api.h>

#include <bit>

#include "backends/cuda/cuda_check.h"
#include "core/error.h"

namespace loom::cuda {

size_t CachingAllocator::round_size(size_t bytes) {
  constexpr size_t kMinBlock = 512;
  if (bytes <= kMinBlock) return kMinBlock;
  const size_t step = std::bit_floor(bytes) / 4;  // a quarter of the power of two below
  return (bytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  // Far beyond any GPU; the check also keeps round_size() from overflowing.
  LOOM_CHECK(bytes <= (size_t{1} << 60), "cuda: out of memory allocating {} bytes", bytes);
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* block = nullptr;
  auto cached = free_blocks_.find(size);
  if (cached != free_blocks_.end() && !cached->second.empty()) {
    block = cached->second.back();
    cached->second.pop_back();
    cached_bytes_ -= size;
  } else {
    cudaError_t status = cudaMalloc(&block, size);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear the error, free the cache and try once more
      release_cached_locked();
      status = cudaMalloc(&block, size);
    }
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      LOOM_FAIL(
          "cuda: out of memory allocating {} bytes ({} bytes held by tensors, cache "
          "released)",
          size, allocated_bytes_);
    }
    LOOM_CUDA_CHECK(status);
  }
  live_blocks_.emplace(block, size);
  allocated_bytes_ += size;
  return block;
}

void CachingAllocator::deallocate(void* ptr) noexcept {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto live = live_blocks_.find(ptr);
  if (live == live_blocks_.end()) return;  // not ours: nothing sensible to do in a destructor
  const size_t size = live->second;
  live_blocks_.erase(live);
  allocated_bytes_ -= size;
  try {
    free_blocks_[size].push_back(ptr);
    cached_bytes_ += size;
  } catch (...) {
    (void)cudaFree(ptr);  // the free list could not grow: give the block back instead
  }
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() {
  for (auto& [size, blocks] : free_blocks_) {
    for (void* block : blocks) LOOM_CUDA_CHECK(cudaFree(block));
    cached_bytes_ -= size * blocks.size();
    blocks.clear();
  }
}

size_t CachingAllocator::allocated_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocated_bytes_;
}

size_t CachingAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_bytes_;
}

}  // namespace loom::cuda
