// Sorting along the middle axis of a contiguous [outer, n, inner] block: each row (o, :, i)
// gives its first k elements in order, values and int64 indices [outer, k, inner]. k = n is a
// sort; k < n a partial selection (topk), which the CPU does without sorting the whole row.
// The order is a total one, the same on every device: ascending (or descending) by value with
// NaN above every number and -0 equal to +0, and equal values by index, ascending (a stable
// sort). The checks, the public method and the CPU loops are in sort.cpp, the CUDA kernels in
// sort.cu.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace loom {

struct SortArgs {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t k = 1;            // how many of each row's n come out, 0 <= k <= n
  bool descending = false;  // largest first (topk's largest, sort's descending)
};

// Backend::sort's arguments after its checks: x contiguous float32 or int64 of outer*n*inner
// elements, values (x's dtype) and indices (int64) contiguous of outer*k*inner, k >= 1.
using SortKernel = void(const Tensor& x, const SortArgs& args, Tensor& values, Tensor& indices);

namespace cpu {
SortKernel sort;
}  // namespace cpu

namespace cuda {
SortKernel sort;
}  // namespace cuda

}  // namespace loom
