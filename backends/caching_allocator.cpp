// The caching allocator: size classes, free lists, and the release-and-retry on out of memory.
#include "backends/caching_allocator.h"

#include <bit>

#include "core/error.h"

namespace loom {

CachingAllocator::CachingAllocator(Source source, size_t cache_limit)
    : source_(std::move(source)), cache_limit_(cache_limit) {}

size_t CachingAllocator::round_size(size_t bytes) {
  constexpr size_t kMinBlock = 512;
  if (bytes <= kMinBlock) return kMinBlock;
  const size_t step = std::bit_floor(bytes) / 4;  // a quarter of the power of two below
  return (bytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  // Far beyond any machine; the check also keeps round_size() from overflowing.
  LOOM_CHECK(bytes <= (size_t{1} << 60), "{}: out of memory allocating {} bytes", source_.device,
             bytes);
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* block = nullptr;
  auto cached = free_blocks_.find(size);
  if (cached != free_blocks_.end() && !cached->second.empty()) {
    block = cached->second.back();
    cached->second.pop_back();
    cached_bytes_ -= size;
  } else {
    block = source_.obtain(size);
    if (block == nullptr) {  // free the cache and try once more
      release_cached_locked();
      block = source_.obtain(size);
    }
    LOOM_CHECK(block != nullptr,
               "{}: out of memory allocating {} bytes ({} bytes held by tensors, cache released)",
               source_.device, size, allocated_bytes_);
  }
  try {
    live_blocks_.emplace(block, size);
  } catch (...) {
    source_.give_back(block);
    throw;
  }
  allocated_bytes_ += size;
  return block;
}

bool CachingAllocator::deallocate(void* ptr) noexcept {
  if (ptr == nullptr) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  auto live = live_blocks_.find(ptr);
  if (live == live_blocks_.end()) return false;  // not ours
  const size_t size = live->second;
  live_blocks_.erase(live);
  allocated_bytes_ -= size;
  if (cached_bytes_ + size > cache_limit_) {
    source_.give_back(ptr);
    return true;
  }
  try {
    free_blocks_[size].push_back(ptr);
    cached_bytes_ += size;
  } catch (...) {
    source_.give_back(ptr);  // the free list could not grow: give the block back instead
  }
  return true;
}

void CachingAllocator::empty_cache() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() noexcept {
  for (auto& [size, blocks] : free_blocks_) {
    for (void* block : blocks) source_.give_back(block);
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

}  // namespace loom
