// The CPU device: memory (64-byte aligned blocks through the caching allocator, the big ones in
// huge pages: huge_pages.h) and host copies. Its kernels are the cpu:: implementations of the
// kernel families (backends/<family>/, listed in backends/backend.h), on OpenBLAS for matrix
// products and OpenMP loops for the rest; the loop machinery they share is in loops.h, the
// vectorisable math functions in vec_math.h.
#pragma once

#include "backends/backend.h"
#include "backends/caching_allocator.h"

namespace loom {

class CpuBackend final : public Backend {
 public:
  CpuBackend();

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  void copy_from_host(void* dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;

 private:
  CachingAllocator allocator_;  // freed blocks are kept for reuse (backends/caching_allocator.h)
};

}  // namespace loom
