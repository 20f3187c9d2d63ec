// Host memory in transparent huge pages, for the big blocks a training step streams through.
//
// A 4 KiB page needs one TLB entry; a matrix product walking a 16 MiB operand column by column
// touches a new page every few rows, and the TLB (a few thousand entries) misses. A 2 MiB page
// covers 512 of those. Linux backs memory with huge pages when it is asked to: on machines
// whose /sys/kernel/mm/transparent_hugepage/enabled reads `madvise` (the common default) only
// ranges marked with madvise(MADV_HUGEPAGE) get them, and glibc's malloc marks none. So a block
// of 2 MiB or more starts on a 2 MiB boundary and is marked; the kernel then backs each whole
// 2 MiB of it with one page (a shorter tail stays in small pages, so little memory is wasted).
// Measured: the weight gradients' products (A read transposed) ran 20-38% faster alone, the
// training steps 1-7% (docs/guide/performance.md, the twenty-seventh point).
//
// Where the kernel has no huge pages (or madvise is refused) the memory is ordinary memory; the
// values computed are the same either way.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>

namespace loom::cpu {

inline constexpr size_t kHugePage = size_t{2} << 20;  // 2 MiB, x86-64's and arm64's huge page
inline constexpr size_t kCacheLine = 64;              // also one AVX-512 register

// `bytes` of host memory, 64-byte aligned, in huge pages where it spans one; nullptr when the
// machine is out of memory. Free it with std::free.
inline void* allocate_in_huge_pages(size_t bytes) {
  if (bytes < kHugePage) {
    return std::aligned_alloc(kCacheLine, (bytes + kCacheLine - 1) / kCacheLine * kCacheLine);
  }
  void* block = nullptr;
  if (posix_memalign(&block, kHugePage, bytes) != 0) return nullptr;
#ifdef MADV_HUGEPAGE
  madvise(block, bytes, MADV_HUGEPAGE);  // advice only: a refusal leaves ordinary pages
#endif
  return block;
}

// A float buffer that grows on demand and keeps its memory from call to call (a thread's
// scratch space); its values are not kept when it grows.
class HugePageBuffer {
 public:
  HugePageBuffer() = default;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;
  ~HugePageBuffer() { std::free(data_); }

  // At least `count` floats; throws std::bad_alloc when the machine is out of memory.
  float* reserve(size_t count) {
    if (count > capacity_) {
      std::free(data_);
      capacity_ = 0;
      data_ = static_cast<float*>(allocate_in_huge_pages(count * sizeof(float)));
      if (data_ == nullptr) throw std::bad_alloc();
      capacity_ = count;
    }
    return data_;
  }

 private:
  float* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace loom::cpu
