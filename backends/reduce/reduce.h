// Reductions along the middle axis of a contiguous [outer, n, inner] block into [outer, inner]:
// sum, max and min (values) and argmax and argmin (int64 indices). The checks, the public
// method and the CPU loops are in reduce.cpp, the CUDA kernels in reduce.cu.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace loom {

enum class ReduceOp { Sum, Max, Min, ArgMax, ArgMin };  // Arg* write int64

// Backend::reduce's arguments, after its checks: x contiguous, n > 0 (an empty Sum is a fill,
// done before) and outer * inner > 0.
using ReduceKernel = void(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                          Tensor& out);

namespace cpu {
ReduceKernel reduce;
}  // namespace cpu

namespace cuda {
ReduceKernel reduce;
}  // namespace cuda

}  // namespace loom
