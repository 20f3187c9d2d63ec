// Running sums and products (cumsum, cumprod) along the middle axis of a contiguous
// [outer, n, inner] block, and cumprod's backward. The checks, the public methods and the CPU
// loops are in scan.cpp, the CUDA kernels in scan.cu.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace loom {

enum class ScanOp { Sum, Prod };

// Backend::scan's and cumprod_backward's arguments, after their checks: inputs contiguous,
// at least one element.
using ScanKernel = void(ScanOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                        bool reverse, Tensor& out);
using CumprodBackwardKernel = void(const Tensor& grad, const Tensor& x, int64_t outer, int64_t n,
                                   int64_t inner, Tensor& out);

namespace cpu {
ScanKernel scan;
CumprodBackwardKernel cumprod_backward;
}  // namespace cpu

namespace cuda {
ScanKernel scan;
CumprodBackwardKernel cumprod_backward;
}  // namespace cuda

}  // namespace loom
