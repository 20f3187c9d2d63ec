// Reductions and softmax. Each kernel sees its input as a contiguous [outer, n, inner] block.
#include "autograd/internal.h"

namespace loom {

using detail::bf16_unary;
using detail::is_bf16;
using detail::saved;

namespace {

Shape reduced_shape(const Shape& shape, int64_t dim, bool keepdim) {
  Shape out = shape;
  if (keepdim) out[dim] = 1;
  else out.erase(out.begin() + dim);
  return out;
}

// Runs a reduction kernel along `dim` and returns the result with the requested shape.
Tensor reduce_forward(ReduceOp op, const char* name, const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_defined(x, name);
  const bool is_arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
  const bool bf16_sum = op == ReduceOp::Sum && is_bf16(x);  // read as it is, summed in float32
  if (!bf16_sum && (op != ReduceOp::Sum || x.dtype() != DType::Int64)) detail::check_float(x, name);
  const int64_t d = wrap_dim(dim, x.dim(), name);
  if (x.dim() > 0 && op != ReduceOp::Sum)
    LOOM_CHECK(x.shape()[d] > 0, "{}: cannot reduce over an empty dim {} of shape {}", name, dim,
               shape_str(x.shape()));
  const Shape shape = x.dim() == 0 ? Shape{} : reduced_shape(x.shape(), d, keepdim);
  const DType type = is_arg ? DType::Int64 : bf16_sum ? DType::Float32 : x.dtype();
  Tensor out = Tensor::empty(shape, type, x.device());
  const detail::Split3 s = x.dim() == 0 ? detail::Split3{} : detail::split_at(x.shape(), d);
  backend(x.device()).reduce(op, x.detach().contiguous(), s.outer, s.n, s.inner, out);
  return out;
}

// g reshaped so it broadcasts against the input of a reduction along `dim`.
Tensor unreduce(const Tensor& g, const Shape& in_shape, int64_t dim, bool keepdim) {
  if (in_shape.empty() || keepdim) return g;
  return g.unsqueeze(wrap_dim(dim, static_cast<int64_t>(in_shape.size()), "unreduce"));
}

}  // namespace

// bfloat16 inputs (see ops.h) are reduced in float32, accumulating as float32 inputs are, and
// the result is rounded to bfloat16 once; argmax/argmin compare the exact upcast values. sum
// reads a bfloat16 x as it is (the backend sums it into float32); the sum stays float32 under
// autocast (PyTorch's float32 list), and its gradient reaches x in x's dtype.
Tensor sum(const Tensor& x) {
  detail::check_defined(x, "sum");
  Tensor out = reduce_forward(ReduceOp::Sum, "sum", x.detach().reshape({1, x.numel()}), 1, false)
                   .reshape({});
  const Shape shape = x.shape();
  const DType type = x.dtype();
  out = autograd::record("sum", {x}, out, [shape, type](const Tensor& g) {
    return std::vector<Tensor>{g.to(type).expand(shape)};
  });
  return detail::float32_op_result(x, out);
}

Tensor sum(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_defined(x, "sum");
  Tensor out = reduce_forward(ReduceOp::Sum, "sum", x, dim, keepdim);
  const Shape shape = x.shape();
  const DType type = x.dtype();
  out = autograd::record("sum", {x}, out, [shape, type, dim, keepdim](const Tensor& g) {
    return std::vector<Tensor>{unreduce(g.to(type), shape, dim, keepdim).expand(shape)};
  });
  return detail::float32_op_result(x, out);
}

Tensor mean(const Tensor& x) {
  if (is_bf16(x)) return bf16_unary(x, [](const Tensor& xf) { return mean(xf); });
  detail::check_float(x, "mean");
  LOOM_CHECK(x.numel() > 0, "mean: empty tensor of shape {}", shape_str(x.shape()));
  return sum(x) * (1.0f / static_cast<float>(x.numel()));
}

Tensor mean(const Tensor& x, int64_t dim, bool keepdim) {
  if (is_bf16(x))
    return bf16_unary(x, [&](const Tensor& xf) { return mean(xf, dim, keepdim); });
  detail::check_float(x, "mean");
  const int64_t d = wrap_dim(dim, x.dim(), "mean");
  const int64_t n = x.dim() == 0 ? 1 : x.shape()[d];
  LOOM_CHECK(n > 0, "mean: dim {} of shape {} is empty", dim, shape_str(x.shape()));
  return sum(x, dim, keepdim) * (1.0f / static_cast<float>(n));
}

// max/min along a dim: the gradient flows to the (first) arg-extremum, as in PyTorch.
static Tensor extremum_dim(bool is_max, const Tensor& x, int64_t dim, bool keepdim) {
  if (is_bf16(x))
    return bf16_unary(x, [&](const Tensor& xf) { return extremum_dim(is_max, xf, dim, keepdim); });
  const char* name = is_max ? "max" : "min";
  Tensor out = reduce_forward(is_max ? ReduceOp::Max : ReduceOp::Min, name, x, dim, keepdim);
  if (!autograd::any_requires_grad({x})) return out;
  Tensor idx = reduce_forward(is_max ? ReduceOp::ArgMax : ReduceOp::ArgMin, name, x, dim, true);
  const Shape shape = x.shape();
  return autograd::record(name, {x}, out, [shape, dim, keepdim, idx](const Tensor& g) {
    Tensor gk = unreduce(g, shape, dim, keepdim);
    if (shape.empty()) return std::vector<Tensor>{gk};
    return std::vector<Tensor>{scatter_add(zeros(shape, g.device()), dim, idx, gk)};
  });
}

Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum_dim(true, x, dim, keepdim);
}
Tensor min(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum_dim(false, x, dim, keepdim);
}

// The maximum of all elements; ties share the gradient evenly (PyTorch's rule for max()).
Tensor max(const Tensor& x) {
  if (is_bf16(x)) return bf16_unary(x, [](const Tensor& xf) { return max(xf); });
  detail::check_float(x, "max");
  LOOM_CHECK(x.numel() > 0, "max: empty tensor of shape {}", shape_str(x.shape()));
  Tensor out = reduce_forward(ReduceOp::Max, "max", x.detach().reshape({1, x.numel()}), 1, false)
                   .reshape({});
  Tensor xs = saved(x), ys = saved(out);
  return autograd::record("max", {x}, out, [xs, ys](const Tensor& g) {
    Tensor winners = eq(xs, ys);
    return std::vector<Tensor>{winners * (g / sum(winners))};
  }, {xs, ys});
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return reduce_forward(ReduceOp::ArgMax, "argmax", detail::upcast(x), dim, keepdim);
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  return reduce_forward(ReduceOp::ArgMin, "argmin", detail::upcast(x), dim, keepdim);
}

Tensor var(const Tensor& x, int64_t dim, bool unbiased, bool keepdim) {
  if (is_bf16(x))
    return bf16_unary(x, [&](const Tensor& xf) { return var(xf, dim, unbiased, keepdim); });
  detail::check_float(x, "var");
  const int64_t d = wrap_dim(dim, x.dim(), "var");
  const int64_t n = x.dim() == 0 ? 1 : x.shape()[d];
  const int64_t denom = unbiased ? n - 1 : n;
  LOOM_CHECK(denom > 0, "var: dim {} of shape {} has too few elements", dim,
             shape_str(x.shape()));
  Tensor centered = x - mean(x, dim, true);
  return sum(centered * centered, dim, keepdim) * (1.0f / static_cast<float>(denom));
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  detail::check_defined(x, "sum_to");
  if (x.shape() == shape) return x;
  LOOM_CHECK(broadcast_shapes(shape, x.shape(), "sum_to") == x.shape(),
             "sum_to: shape {} cannot be reduced to {}", shape_str(x.shape()), shape_str(shape));
  Tensor r = x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  if (lead > 0) {  // collapse the extra leading dims into one and sum it away
    Shape collapsed{-1};
    collapsed.insert(collapsed.end(), x.shape().begin() + lead, x.shape().end());
    r = sum(r.reshape(collapsed), 0);
  }
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 1 && r.shape()[i] != 1) r = sum(r, static_cast<int64_t>(i), true);
  return r;
}

// ---------------------------------------------------------------------------- softmax
static Tensor softmax_op(bool log, const Tensor& x, int64_t dim) {
  if (is_bf16(x))
    return detail::bf16_float32_op(x, [&](const Tensor& xf) { return softmax_op(log, xf, dim); });
  const char* name = log ? "log_softmax" : "softmax";
  detail::check_defined(x, name);  // its dtype and device: the kernel checks
  const int64_t d = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), name);
  const detail::Split3 s = x.dim() == 0 ? detail::Split3{} : detail::split_at(x.shape(), d);
  Tensor out = Tensor::empty(x.shape(), DType::Float32, x.device());
  backend(x.device()).softmax(x.detach().contiguous(), s.outer, s.n, s.inner, log, out);
  if (!autograd::any_requires_grad({x})) return out;
  Tensor ys = saved(out);
  return autograd::record(name, {x}, out, [ys, s, log](const Tensor& g) {
    Tensor dx = Tensor::empty(ys.shape(), DType::Float32, ys.device());
    backend(ys.device()).softmax_backward(g.contiguous(), ys, s.outer, s.n, s.inner, log, dx);
    return std::vector<Tensor>{dx};
  }, {ys});
}

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op(false, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op(true, x, dim); }

}  // namespace loom
