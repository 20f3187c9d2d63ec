// The ops about dtypes (autograd/ops_dtype.h): promotion, the logical and bitwise ops, the
// rounding divisions and the tests any/all/equal/allclose. Each is composed of the comparisons,
// casts, reductions and the binary kernel (detail::binary_forward), so it runs on every device
// and needs no backward: none of them is differentiable.
#include <algorithm>
#include <cmath>
#include <string>

#include "autograd/internal.h"

namespace loom {

// ---------------------------------------------------------------------------- promotion
namespace {

// PyTorch's categories, lowest first: a number lifts a tensor only to a higher one.
int category(DType t) { return t == DType::Bool ? 0 : (t == DType::Int64 ? 1 : 2); }

}  // namespace

DType result_type(const Tensor& a, const Tensor& b) {
  detail::check_defined(a, "result_type");
  detail::check_defined(b, "result_type");
  return promote_types(a.dtype(), b.dtype());
}

DType result_type(const Tensor& a, const Scalar& b) {
  detail::check_defined(a, "result_type");
  return category(b.dtype()) > category(a.dtype()) ? b.dtype() : a.dtype();
}

DType result_type(const Scalar& a, const Tensor& b) { return result_type(b, a); }

Tensor detail::scalar_tensor_of(const Scalar& value, DType dtype, Device device) {
  Tensor t = Tensor::empty({}, dtype, device);
  backend(device).fill(t, dtype == DType::Bool ? (value.to_bool() ? 1.0 : 0.0) : value.to_double());
  return t;
}

// ---------------------------------------------------------------------------- operators
// Each comparison operator is its function (a < b is lt(a, b)); a number on the left is the
// same comparison seen from the tensor, the `mirrored` function: 1 < t is t > 1, gt(t, 1).
#define LOOM_COMPARISON_OPERATOR(op, name, mirrored)                          \
  Tensor operator op(const Tensor& a, const Tensor& b) { return name(a, b); } \
  Tensor operator op(const Tensor& a, const Scalar& b) { return name(a, b); } \
  Tensor operator op(const Scalar& a, const Tensor& b) { return mirrored(b, a); }
LOOM_COMPARISON_OPERATOR(==, eq, eq)
LOOM_COMPARISON_OPERATOR(!=, ne, ne)
LOOM_COMPARISON_OPERATOR(<, lt, gt)
LOOM_COMPARISON_OPERATOR(<=, le, ge)
LOOM_COMPARISON_OPERATOR(>, gt, lt)
LOOM_COMPARISON_OPERATOR(>=, ge, le)
#undef LOOM_COMPARISON_OPERATOR

// ---------------------------------------------------------------------------- logical, bitwise
namespace {

// x as a Bool tensor (nonzero, NaN included, is true), as the logical ops read their operands.
Tensor truth(const Tensor& x, const char* name) {
  detail::check_defined(x, name);
  return x.dtype() == DType::Bool ? x.detach() : x.to(DType::Bool);
}

// A logical op is the bitwise op on the operands' truth values.
Tensor logical(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  return detail::binary_forward(op, name, truth(a, name), truth(b, name));
}

// PyTorch's bitwise ops take integers and bools only.
Tensor bitwise(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  const DType type = result_type(a, b);
  LOOM_CHECK(type == DType::Bool || type == DType::Int64,
             "{}: takes bool or int64 tensors, got {} (shape {}) and {} (shape {})", name,
             dtype_name(a.dtype()), shape_str(a.shape()), dtype_name(b.dtype()),
             shape_str(b.shape()));
  return detail::binary_forward(op, name, a, b);
}

}  // namespace

// logical_and and bitwise_and (or, xor): the same bitwise kernel op, on truth values or as is.
#define LOOM_LOGICAL_AND_BITWISE(Op, logical_name, bitwise_name) \
  Tensor logical_name(const Tensor& a, const Tensor& b) {        \
    return logical(BinaryOp::Op, #logical_name, a, b);           \
  }                                                              \
  Tensor bitwise_name(const Tensor& a, const Tensor& b) {        \
    return bitwise(BinaryOp::Op, #bitwise_name, a, b);           \
  }
LOOM_LOGICAL_AND_BITWISE(BitAnd, logical_and, bitwise_and)
LOOM_LOGICAL_AND_BITWISE(BitOr, logical_or, bitwise_or)
LOOM_LOGICAL_AND_BITWISE(BitXor, logical_xor, bitwise_xor)
#undef LOOM_LOGICAL_AND_BITWISE

Tensor logical_not(const Tensor& x) { return eq(truth(x, "logical_not"), false); }
// ~x flips every bit: for two's complement int64 that is x ^ -1 (= -x - 1); for bool, not.
Tensor bitwise_not(const Tensor& x) {
  detail::check_defined(x, "bitwise_not");
  if (x.dtype() == DType::Bool) return logical_not(x);
  return bitwise(BinaryOp::BitXor, "bitwise_not", x,
                 detail::scalar_tensor_of(-1, DType::Int64, x.device()));
}
Tensor operator&(const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return bitwise_or(a, b); }
Tensor operator^(const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); }
Tensor operator~(const Tensor& x) { return bitwise_not(x); }

// ---------------------------------------------------------------------------- division
Tensor div(const Tensor& a, const Tensor& b, std::optional<std::string_view> rounding_mode) {
  if (!rounding_mode) return div(a, b);
  const bool floor = *rounding_mode == "floor";
  LOOM_CHECK(floor || *rounding_mode == "trunc",
             "div: rounding_mode must be \"trunc\", \"floor\" or none, got \"{}\"",
             std::string(*rounding_mode));
  const BinaryOp op = floor ? BinaryOp::FloorDiv : BinaryOp::TruncDiv;
  const DType type = result_type(a, b);
  if (is_floating_point(type)) return detail::binary_forward(op, "div", a, b);
  LOOM_CHECK(type != DType::Bool,
             "div: rounding division of two bool tensors (shapes {} and {}) "
             "is not supported, as in PyTorch",
             shape_str(a.shape()), shape_str(b.shape()));
  // Integers (bool counts as int64): a zero divisor has no quotient; PyTorch raises
  // ZeroDivisionError. Asking the device costs a wait, which only integer division pays.
  LOOM_CHECK(!any(eq(b, 0)).item<bool>(),
             "div: integer division by zero ({} of shape {} by {} of shape {}, rounding_mode "
             "\"{}\")",
             dtype_name(a.dtype()), shape_str(a.shape()), dtype_name(b.dtype()),
             shape_str(b.shape()), floor ? "floor" : "trunc");
  return detail::binary_forward(op, "div", a, b);
}

Tensor div(const Tensor& a, const Scalar& b, std::optional<std::string_view> rounding_mode) {
  detail::check_defined(a, "div");
  return div(a, detail::scalar_tensor_of(b, result_type(a, b), a.device()), rounding_mode);
}

Tensor floor_divide(const Tensor& a, const Tensor& b) { return div(a, b, "floor"); }

// ---------------------------------------------------------------------------- tests
// any: some element is true, i.e. the count of true elements is above 0; all: no element is
// false. The counts are int64 sums of Bool tensors.
Tensor any(const Tensor& x) { return gt(sum(truth(x, "any")), 0); }
Tensor all(const Tensor& x) { return eq(sum(logical_not(x)), 0); }
Tensor any(const Tensor& x, int64_t dim, bool keepdim) {
  const Tensor t = truth(x, "any");
  wrap_dim(dim, std::max<int64_t>(t.dim(), 1), "any");  // the message names any, not sum
  return gt(sum(t, dim, keepdim), 0);
}
Tensor all(const Tensor& x, int64_t dim, bool keepdim) {
  const Tensor f = logical_not(x);
  wrap_dim(dim, std::max<int64_t>(f.dim(), 1), "all");
  return eq(sum(f, dim, keepdim), 0);
}

bool equal(const Tensor& a, const Tensor& b) {
  detail::check_defined(a, "equal");
  detail::check_defined(b, "equal");
  detail::check_same_device(a, b, "equal");
  return a.shape() == b.shape() && all(eq(a, b)).item<bool>();
}

// torch.isclose's rule: exactly equal (infinities of one sign included), or a finite
// difference within atol + |rtol * b|; NaN is close to nothing. Computed in the promoted
// floating dtype, float32 for integers.
bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  detail::check_defined(a, "allclose");
  detail::check_defined(b, "allclose");
  detail::check_same_device(a, b, "allclose");
  broadcast_shapes(a.shape(), b.shape(), "allclose");
  LOOM_CHECK(rtol >= 0 && atol >= 0, "allclose: rtol {} and atol {} must not be negative", rtol,
             atol);
  NoGradGuard no_grad;
  const DType type = result_type(a, b);
  const DType t = is_floating_point(type) ? type : DType::Float32;
  const Tensor x = a.detach().to(t), y = b.detach().to(t);
  const Tensor error = abs(x - y);
  const Tensor allowed = abs(y * rtol) + atol;
  const Tensor close = logical_or(eq(x, y), logical_and(lt(error, INFINITY), le(error, allowed)));
  return all(close).item<bool>();
}

}  // namespace loom
