// The ops that are about dtypes: PyTorch's type promotion, the comparisons and logical ops (Bool
// results), the integer divisions, and the tests any/all/equal/allclose. Defined in
// autograd/ops_dtype.cpp; included by autograd/ops.h, which holds the arithmetic they promote.
//
// Type promotion (torch.result_type)
// ----------------------------------
// Every op on two operands (arithmetic, comparisons, where's two values, maximum/minimum) first
// finds the dtype they are computed in and casts an operand of another dtype to it:
//   * two tensors: promote_types(a.dtype(), b.dtype()) (core/dtype.h): bool < int64 <
//     floating, bfloat16 with float32 -> float32. int64 + float32 is float32, bool + int64 is
//     int64. (PyTorch gives a 0-d tensor of the same category a lower priority, so that
//     bfloat16 [n] * float32 [] is bfloat16 there; loom treats 0-d tensors like any other.)
//   * a tensor and a C++ number (a Scalar, core/scalar.h): the tensor's dtype, unless the number
//     is of a higher category: int64 * 2 -> int64, int64 * 2.0f -> float32, bool + 1 -> int64,
//     bfloat16 * 0.5f -> bfloat16.
// The result has the computed dtype, except: comparisons and logical ops give Bool; true
// division (/, div) of integers gives float32 (as torch.div); sum of bool or int64 gives int64.
// Arithmetic on Bool follows PyTorch too: + is logical or, * logical and, - is an error (use
// logical_xor or ~), / gives float32. Only floating tensors carry gradients; an integer result
// is never differentiable.
#pragma once

#include <optional>
#include <string_view>

#include "core/scalar.h"
#include "core/tensor.h"

namespace loom {

// torch.result_type: the dtype an arithmetic op on these operands computes in (above).
DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, const Scalar& b);
DType result_type(const Scalar& a, const Tensor& b);

// --- comparisons: Bool tensors, never differentiable (broadcasting; operands promoted) --------
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Scalar& b);
Tensor ne(const Tensor& a, const Scalar& b);
Tensor lt(const Tensor& a, const Scalar& b);
Tensor le(const Tensor& a, const Scalar& b);
Tensor gt(const Tensor& a, const Scalar& b);
Tensor ge(const Tensor& a, const Scalar& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Scalar& b);
Tensor operator!=(const Tensor& a, const Scalar& b);
Tensor operator<(const Tensor& a, const Scalar& b);
Tensor operator<=(const Tensor& a, const Scalar& b);
Tensor operator>(const Tensor& a, const Scalar& b);
Tensor operator>=(const Tensor& a, const Scalar& b);
Tensor operator==(const Scalar& a, const Tensor& b);  // 0 == t is t == 0; 1 < t is t > 1
Tensor operator!=(const Scalar& a, const Tensor& b);
Tensor operator<(const Scalar& a, const Tensor& b);
Tensor operator<=(const Scalar& a, const Tensor& b);
Tensor operator>(const Scalar& a, const Tensor& b);
Tensor operator>=(const Scalar& a, const Tensor& b);

// --- logical ops: any dtype, nonzero = true -> Bool (torch.logical_*) -------------------------
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);
// &, |, ^, ~ as PyTorch's: on Bool tensors logical, on int64 bitwise (two's complement; ~x is
// -x - 1); an int64 with a Bool operand promotes to int64. Floating operands are an error.
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_not(const Tensor& x);
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator~(const Tensor& x);

// --- division with a rounding mode (torch.div(a, b, rounding_mode=...)) -----------------------
// No mode (std::nullopt): true division, a / b (integers give float32). "trunc": the quotient
// rounded toward zero; "floor": toward negative infinity (Python's //). With a mode the result
// keeps the promoted dtype: int64 // int64 is int64 (division by zero is a loom::Error, where
// PyTorch's CPU raises too), float32 gives the rounded float32 quotient, not differentiable
// (its gradient is zero almost everywhere, as PyTorch's).
Tensor div(const Tensor& a, const Tensor& b, std::optional<std::string_view> rounding_mode);
Tensor div(const Tensor& a, const Scalar& b, std::optional<std::string_view> rounding_mode);
Tensor floor_divide(const Tensor& a, const Tensor& b);  // div(a, b, "floor")

// --- tests -------------------------------------------------------------------------------------
// any/all: is some / every element nonzero (NaN counts as nonzero), over the whole tensor (a 0-d
// Bool) or along dim (keepdim as sum). An empty tensor: any false, all true.
Tensor any(const Tensor& x);
Tensor all(const Tensor& x);
Tensor any(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor all(const Tensor& x, int64_t dim, bool keepdim = false);
// torch.equal: same shape and the same values (dtypes promoted; NaN is never equal).
bool equal(const Tensor& a, const Tensor& b);
// torch.allclose: |a - b| <= atol + rtol * |b| everywhere (broadcasting), computed in float64
// from float32 copies; NaN is never close; infinities are close only to themselves.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

}  // namespace loom
