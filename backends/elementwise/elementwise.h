// The elementwise kernels: copy (with casts between float32, int64, bfloat16 and bool), fill,
// arange, the unary functions of backends/unary_math.h and their derivatives (alone, or after a
// bias add), binary arithmetic, comparisons and bitwise ops, where and axpy. Every operand may
// be strided (inputs broadcast with stride 0); the kernels walk out's shape. The checks and the
// public methods are in elementwise.cpp; the CPU loops in cpu_copy.cpp, cpu_unary.cpp and
// cpu_binary.cpp; the CUDA kernels in elementwise.cu.
#pragma once

#include <cstdint>

#include "backends/unary_math.h"
#include "core/tensor.h"

namespace loom {

// The operand dtypes each kind takes (Backend::binary checks them):
//   arithmetic   each operand float32 or bfloat16 (computed in float32), or all three int64
//                (not Div and Pow, whose integer forms autograd computes in float32);
//   comparisons  a and b of one dtype (float32, int64 or bool), out bool or float32 (1/0);
//   bitwise      all three int64, or all three bool (logical and, or, xor).
enum class BinaryOp {
  Add, Sub, Mul, Div, Pow, Maximum, Minimum,
  FloorDiv, TruncDiv,  // a / b rounded toward -infinity / toward zero (binary_math.h)
  Eq, Ne, Lt, Le, Gt, Ge,
  BitAnd, BitOr, BitXor,
};
inline bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq && op <= BinaryOp::Ge; }
inline bool is_bitwise(BinaryOp op) { return op >= BinaryOp::BitAnd; }
inline bool is_arithmetic(BinaryOp op) { return op < BinaryOp::Eq; }

// The kernels, each implemented by every device (cpu::name, cuda::name), with the arguments of
// the Backend method of the same name, called after its checks with at least one element.
using CopyKernel = void(const Tensor& src, Tensor& dst);
using FillKernel = void(Tensor& dst, double value);
using ArangeKernel = void(Tensor& dst, double start, double step);  // dst contiguous
using UnaryKernel = void(UnaryOp op, const Tensor& x, Tensor& out, float a, float b);
// x and y are defined exactly when the derivative reads them (see unary::backward_reads).
using UnaryBackwardKernel = void(UnaryOp op, const Tensor& grad, const Tensor& x,
                                 const Tensor& y, Tensor& out, float a, float b);
using BiasUnaryKernel = void(UnaryOp op, const Tensor& x, const Tensor& bias, Tensor& out);
using BiasUnaryBackwardKernel = void(UnaryOp op, const Tensor& grad, const Tensor& x,
                                     const Tensor& bias, Tensor& out);
using BinaryKernel = void(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out);
using WhereKernel = void(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out);
using AxpyKernel = void(float alpha, const Tensor& src, Tensor& dst);

// The declarations of the ten, said once for namespace cpu and once for namespace cuda.
#define LOOM_ELEMENTWISE_KERNELS                                                      \
  CopyKernel copy;                                                                    \
  FillKernel fill;                                                                    \
  ArangeKernel arange;                                                                \
  UnaryKernel unary;                                                                  \
  UnaryBackwardKernel unary_backward;                                                 \
  BiasUnaryKernel bias_unary;                                                         \
  BiasUnaryBackwardKernel bias_unary_backward;                                        \
  BinaryKernel binary;                                                                \
  WhereKernel where;                                                                  \
  AxpyKernel axpy;

namespace cpu {
LOOM_ELEMENTWISE_KERNELS
// bias_unary_backward and the bias's gradient in one pass (Backend::bias_unary_backward): grad,
// x and out contiguous float32 [rows, cols], bias [cols]; dbias [cols] the column sums of out,
// summed as cpu::reduce sums a [rows, cols] float32 over its rows (column_sums_by_chunks).
void bias_unary_backward_sums(UnaryOp op, const float* grad, const float* x, const float* bias,
                              int64_t rows, int64_t cols, float* out, float* dbias);
// x = op(x) in place over `batch` float32 matrices [rows, cols] with row stride ld, `stride`
// elements apart: GemmArgs::activation (Relu, Gelu or GeluTanh) over a product's C, by
// cpu::bias_unary_rows (activation_rows.h) without a bias.
void unary_rows(UnaryOp op, float* x, int64_t batch, int64_t rows, int64_t cols, int64_t ld,
                int64_t stride);
}  // namespace cpu

namespace cuda {
LOOM_ELEMENTWISE_KERNELS
}  // namespace cuda

}  // namespace loom
