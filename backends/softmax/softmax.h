// softmax and log_softmax along the middle axis of a contiguous [outer, n, inner] block, and
// their backward; and softmax(x + bias) along the last dim in one pass (CPU; on CUDA the add and
// the softmax). The checks, the public methods and the CPU loops are in softmax.cpp, the CUDA
// kernels in softmax.cu.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace loom {

// Backend::softmax's and softmax_backward's arguments, after their checks: inputs contiguous,
// at least one element.
using SoftmaxKernel = void(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log,
                           Tensor& out);
using SoftmaxBackwardKernel = void(const Tensor& grad, const Tensor& y, int64_t outer, int64_t n,
                                   int64_t inner, bool log, Tensor& out);

// Backend::add_softmax's, after its checks: x contiguous [rows, n], bias a float32 view of x's
// shape (broadcast dims have stride 0) whose last stride is 1, out contiguous.
using AddSoftmaxKernel = void(const Tensor& x, const Tensor& bias, int64_t rows, int64_t n,
                              Tensor& out);

namespace cpu {
SoftmaxKernel softmax;
SoftmaxBackwardKernel softmax_backward;
AddSoftmaxKernel add_softmax;
}  // namespace cpu

namespace cuda {
SoftmaxKernel softmax;
SoftmaxBackwardKernel softmax_backward;
}  // namespace cuda

}  // namespace loom
