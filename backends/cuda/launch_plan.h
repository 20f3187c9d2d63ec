// From tensors to kernel arguments: the Layout and Operands of an elementwise launch.
#pragma once

#include <initializer_list>
#include <vector>

#include "backends/cuda/kernels.h"
#include "core/tensor.h"

namespace loom::cuda {

struct Elementwise {
  Layout layout;
  std::vector<Operand> operands;  // one per tensor, in the order given
};

// The launch layout of an elementwise kernel over `shape` (the output's), with one Operand
// per tensor; an undefined tensor gets a null Operand. Throws loom::Error naming `op` when a
// strided view keeps more than kMaxDims dims after merging.
Elementwise plan_elementwise(const char* op, const Shape& shape,
                             std::initializer_list<const Tensor*> tensors);

// A [batch, rows, cols] matrix stack with row stride `ld` and batch stride `batch_stride`
// (gemm operands that must be densified or scaled).
Layout matrix_layout(int64_t batch, int64_t rows, int64_t cols);
Operand matrix_operand(const void* data, int64_t batch_stride, int64_t ld);

}  // namespace loom::cuda
