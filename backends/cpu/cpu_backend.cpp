// The CPU device: 64-byte aligned memory (one cache line, one AVX-512 register) through the
// caching allocator, host copies, the process-wide table and the OpenMP threads.
#include "backends/cpu/cpu_backend.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/cpu/huge_pages.h"
#include "core/error.h"

extern "C" void openblas_set_num_threads(int);

namespace loom {

namespace {

// 64-byte aligned host memory, a block of 2 MiB or more in huge pages (huge_pages.h); nullptr
// when the machine is out of memory.
CachingAllocator::Source host_memory() {
  auto obtain = [](size_t bytes) { return cpu::allocate_in_huge_pages(bytes); };
  return {"cpu", obtain, [](void* block) { std::free(block); }};
}

// The cache may keep up to a quarter of the machine's memory in freed blocks. Under
// AddressSanitizer it keeps none, so that a use after free still hits freed memory.
size_t host_cache_limit() {
#if defined(__SANITIZE_ADDRESS__)
  return 0;
#endif
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return size_t{1} << 30;
  return static_cast<size_t>(pages) * static_cast<size_t>(page) / 4;
}

}  // namespace

CpuBackend::CpuBackend() : Backend(Device::CPU), allocator_(host_memory(), host_cache_limit()) {}

// 0 bytes still gets a real block, so that every Storage has a valid, unique pointer.
void* CpuBackend::allocate(size_t bytes) { return allocator_.allocate(std::max<size_t>(bytes, 1)); }

void CpuBackend::deallocate(void* ptr, size_t /*bytes*/) { allocator_.deallocate(ptr); }

void CpuBackend::copy_from_host(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

void CpuBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

Backend& cpu_backend() {
  // Never destroyed: tensors freed during static destruction still find their allocator.
  static CpuBackend* const instance = new CpuBackend();
  return *instance;
}

// One OpenMP pool serves both our loops and OpenBLAS (Debian's OpenMP build of OpenBLAS), so
// setting the two together never oversubscribes the cores.
void set_num_threads(int n) {
  LOOM_CHECK(n >= 1, "set_num_threads: need at least 1 thread, got {}", n);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

}  // namespace loom
