// A caching allocator for device memory, after PyTorch's CUDACachingAllocator.
// cudaMalloc and cudaFree are slow (cudaFree also synchronises the whole device), and a
// training step frees and reallocates the same tensor sizes every iteration. So freed blocks
// are not returned to the driver: they wait in a free list keyed by size class and the next
// request of that class takes one back. Reuse is safe without events because all work runs
// on one stream: a kernel that will write a recycled block is queued after every kernel that
// read it in its previous life.
#pragma once

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace loom::cuda {

class CachingAllocator {
 public:
  // A block of at least `bytes` (nullptr for 0). On cudaMalloc failure the cache is released
  // and the call retried once; then it throws loom::Error("cuda: out of memory ...").
  void* allocate(size_t bytes);
  // Keeps the block for reuse. Never throws: it runs in Storage's destructor.
  void deallocate(void* ptr) noexcept;
  // Returns every cached block to the driver (torch.cuda.empty_cache()).
  void empty_cache();

  size_t allocated_bytes() const;  // held by live tensors
  size_t cached_bytes() const;     // parked in the free lists

  // The size class of a request: 512 bytes at least, then four classes per power of two
  // (2^k, 1.25 2^k, 1.5 2^k, 1.75 2^k), so a block is never more than 25% larger than asked.
  static size_t round_size(size_t bytes);

 private:
  void release_cached_locked();

  mutable std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_blocks_;  // size class -> blocks
  std::unordered_map<void*, size_t> live_blocks_;               // block -> size class
  size_t allocated_bytes_ = 0;
  size_t cached_bytes_ = 0;
};

}  // namespace loom::cuda
