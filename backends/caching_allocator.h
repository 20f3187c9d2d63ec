// A caching allocator, after PyTorch's CUDACachingAllocator, shared by the CPU and CUDA backends.
// A training step frees and reallocates the same tensor sizes every iteration. Getting fresh
// memory is slow on both devices: cudaMalloc/cudaFree synchronise the GPU, and on the CPU a
// large malloc is a fresh mmap whose every page faults (and is zeroed by the kernel) on first
// touch. So freed blocks are not given back: they wait in a free list keyed by size class, and
// the next request of that class takes one back.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace loom {

class CachingAllocator {
 public:
  // Where blocks come from and go back to. `obtain` returns nullptr when the device is out of
  // memory (it may throw for other failures); `give_back` must not throw.
  struct Source {
    std::string device;  // "cpu", "cuda": names the device in errors
    std::function<void*(size_t)> obtain;
    std::function<void(void*)> give_back;
  };

  // Freed blocks are cached while the cache holds at most `cache_limit` bytes; beyond that
  // they go straight back to the source.
  explicit CachingAllocator(Source source,
                            size_t cache_limit = std::numeric_limits<size_t>::max());
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` (nullptr for 0). When the source is out of memory the cache
  // is released and the request retried once; then it throws loom::Error("<device>: out of
  // memory ...").
  void* allocate(size_t bytes);
  // Keeps the block for reuse; false (and nothing done) when the block is not one of this
  // allocator's. Never throws: it runs in Storage's destructor.
  bool deallocate(void* ptr) noexcept;
  // Gives every cached block back to the source (torch.cuda.empty_cache()).
  void empty_cache() noexcept;

  size_t allocated_bytes() const;  // held by live tensors
  size_t cached_bytes() const;     // parked in the free lists

  // The size class of a request: 512 bytes at least, then four classes per power of two
  // (2^k, 1.25 2^k, 1.5 2^k, 1.75 2^k), so a block is never more than 25% larger than asked.
  static size_t round_size(size_t bytes);

 private:
  void release_cached_locked() noexcept;

  const Source source_;
  const size_t cache_limit_;
  mutable std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_blocks_;  // size class -> blocks
  std::unordered_map<void*, size_t> live_blocks_;               // block -> size class
  size_t allocated_bytes_ = 0;
  size_t cached_bytes_ = 0;
};

}  // namespace loom
