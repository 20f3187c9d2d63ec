// Softmax cross-entropy over rows of logits [rows, classes] with int64 targets [rows], and its
// gradient. With lse = log sum_c exp(x_c) and label smoothing ls (PyTorch's definition: the
// target distribution is (1 - ls) one_hot(t) + ls / C everywhere):
//   loss = lse - (1 - ls) x_t - ls mean_c(x_c)
//   dloss/dx_c = softmax(x)_c - (1 - ls) [c == t] - ls / C
// Rows whose target equals ignore_index get loss 0 and gradient 0. The checks, the public
// methods and the CPU loops are in cross_entropy.cpp, the CUDA kernels in cross_entropy.cu.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace loom {

// Backend::cross_entropy's arguments, after its checks: rows, classes > 0, target contiguous;
// logits contiguous or a [rows, classes] view with padded rows: row r starts
// logits_row_stride(logits) elements after row r - 1. Each kernel checks the target values
// itself.
using CrossEntropyKernel = void(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                float label_smoothing, Tensor& losses, Tensor& lse);
// Backend::cross_entropy_backward's, the same way (lse contiguous).
using CrossEntropyBackwardKernel = void(const Tensor& logits, const Tensor& target,
                                        const Tensor& lse, int64_t ignore_index,
                                        float label_smoothing, float scale,
                                        const Tensor& scale_by, Tensor& dlogits);

// The distance in elements between consecutive rows of a cross-entropy's logits: the row stride
// of a 2-D view, else the row length.
int64_t logits_row_stride(const Tensor& logits);

namespace cpu {
CrossEntropyKernel cross_entropy;
CrossEntropyBackwardKernel cross_entropy_backward;
}  // namespace cpu

namespace cuda {
CrossEntropyKernel cross_entropy;
CrossEntropyBackwardKernel cross_entropy_backward;
}  // namespace cuda

}  // namespace loom
