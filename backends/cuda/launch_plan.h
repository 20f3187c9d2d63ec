// From tensors to kernel arguments: the Layout and Operands of an elementwise launch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/tensor.h"

namespace loom::cuda {

// An elementwise launch walks the row-major index space of `shape`; each operand reads or
// writes element i at data + sum_d coord_d(i) * strides[d]. plan_elementwise merges dims before
// launching (a contiguous tensor of any rank becomes one dim), so kMaxDims bounds only
// genuinely strided views.
constexpr int kMaxDims = 8;

struct Layout {
  int ndim = 0;
  int64_t numel = 0;
  int64_t shape[kMaxDims] = {};
  bool contiguous = false;  // every operand has stride 1 over the single merged dim
  bool index32 = false;     // numel and every operand offset fit in 32 bits (cheaper division)
};

struct Operand {
  void* data = nullptr;
  int64_t strides[kMaxDims] = {};  // in elements
  // The elements are bfloat16 (else float32), for the kernels that take either: unary and its
  // backward, binary arithmetic. plan_elementwise sets it from the tensor.
  bool bf16 = false;
};

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
