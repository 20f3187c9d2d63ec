// Device memory for the caching allocator (backends/caching_allocator.h): cudaMalloc and
// cudaFree. Reuse of a cached block is safe without events because all work runs on one
// stream: a kernel that will write a recycled block is queued after every kernel that read it
// in its previous life.
#pragma once

#include "backends/caching_allocator.h"

namespace loom::cuda {

// obtain = cudaMalloc (nullptr when the device is out of memory, loom::Error for any other
// CUDA error); give_back = cudaFree, whose errors are ignored (it runs in destructors).
CachingAllocator::Source device_memory();

}  // namespace loom::cuda
