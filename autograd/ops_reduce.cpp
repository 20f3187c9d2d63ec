// Reductions and softmax. Each kernel sees its input as a contiguous [outer, n, inner] block.
#include <algorithm>
#include <cmath>

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
Tensor reduce_forward(ReduceOp op, const char* name, const Tensor& input, int64_t dim,
                      bool keepdim) {
  detail::check_defined(input, name);
  // A sum of bools counts the true elements, in int64 (as torch.sum).
  const bool count = op == ReduceOp::Sum && input.dtype() == DType::Bool;
  const Tensor x = count ? input.to(DType::Int64) : input;
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
  return autograd::record(name, {x}, out, [ys, s, d, log](const Tensor& g) {
    const Tensor y = autograd::unpack_output(ys);  // attached to this node under create_graph
    if (autograd::building_graph({g, y})) {  // create_graph: the kernel's formula in ops
      // softmax: dx = y (g - sum(g y));  log_softmax: dx = g - softmax(x) sum(g)
      if (log) return std::vector<Tensor>{g - exp(y) * sum(g, d, true)};
      return std::vector<Tensor>{y * (g - sum(g * y, d, true))};
    }
    Tensor dx = Tensor::empty(ys.shape(), DType::Float32, ys.device());
    backend(ys.device()).softmax_backward(g.contiguous(), ys, s.outer, s.n, s.inner, log, dx);
    return std::vector<Tensor>{dx};
  }, {ys});
}

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op(false, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op(true, x, dim); }

Tensor add_softmax(const Tensor& x, const Tensor& bias) {
  detail::check_defined(x, "add_softmax");
  detail::check_defined(bias, "add_softmax");
  LOOM_CHECK(x.dim() >= 1 && broadcast_shapes(x.shape(), bias.shape(), "add_softmax") == x.shape(),
             "add_softmax: bias of shape {} does not broadcast to x of shape {}",
             shape_str(bias.shape()), shape_str(x.shape()));
  if (x.dtype() != DType::Float32 || bias.dtype() != DType::Float32)
    return softmax(x + bias, -1);  // bfloat16: the two ops, each in float32
  Tensor out = Tensor::empty(x.shape(), DType::Float32, x.device());
  // The bias contiguous before it is broadcast (Swin's is a permuted view of a gathered table,
  // h x N x N, small): each row of it is then read in order.
  backend(x.device()).add_softmax(x.detach(), bias.detach().contiguous().expand(x.shape()), out);
  if (!autograd::any_requires_grad({x, bias})) return out;
  // The gradients of softmax(z), z = x + bias: dz from softmax's backward, x's is dz, bias's
  // is dz summed over the dims it was broadcast along (add's backward).
  const int64_t n = x.size(-1), rows = x.numel() / std::max<int64_t>(n, 1);
  const Shape bias_shape = bias.shape();
  const bool need_x = x.requires_grad(), need_bias = bias.requires_grad();
  Tensor ys = saved(out);
  return autograd::record("add_softmax", {x, bias}, out,
                          [ys, n, rows, bias_shape, need_x, need_bias](const Tensor& g) {
    const Tensor y = autograd::unpack_output(ys);
    Tensor dz;
    if (autograd::building_graph({g, y})) {
      dz = y * (g - sum(g * y, -1, true));  // create_graph: softmax's formula in ops
    } else {
      dz = Tensor::empty(ys.shape(), DType::Float32, ys.device());
      backend(ys.device()).softmax_backward(g.contiguous(), ys, rows, n, 1, false, dz);
    }
    return std::vector<Tensor>{need_x ? dz : Tensor(),
                               need_bias ? sum_to(dz, bias_shape) : Tensor()};
  }, {ys});
}

// ---------------------------------------------------------------------------- over several dims
namespace {

// dims wrapped to [0, ndim) and sorted; an empty list is every dim (PyTorch 1.13's dim=[]). A
// 0-d tensor takes dim 0 or -1, meaning itself: no dim is left to reduce.
Shape reduce_dims(const Tensor& x, const Shape& dims, const char* name) {
  Shape d;
  if (dims.empty())
    for (int64_t i = 0; i < x.dim(); ++i) d.push_back(i);
  for (int64_t dim : dims) d.push_back(wrap_dim(dim, std::max<int64_t>(x.dim(), 1), name));
  std::sort(d.begin(), d.end());
  const auto repeated = std::adjacent_find(d.begin(), d.end());
  LOOM_CHECK(repeated == d.end(), "{}: dim {} appears more than once in the dims {} (shape {})",
             name, repeated == d.end() ? 0 : *repeated, shape_str(dims), shape_str(x.shape()));
  if (x.dim() == 0) d.clear();
  return d;
}

// x's shape with the (sorted) dims removed, or kept as 1s.
Shape reduced_dims_shape(const Shape& shape, const Shape& dims, bool keepdim) {
  Shape out;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    const bool reduced = std::binary_search(dims.begin(), dims.end(), i);
    if (!reduced)
      out.push_back(shape[i]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

// The number of elements one output of a reduction over dims gathers.
int64_t reduced_count(const Shape& shape, const Shape& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[d];
  return n;
}

// f(x, dim, true) over each of dims in turn, then the kept 1s dropped unless keepdim: a
// reduction over several dims from the one-dim form. Neighbouring dims of a contiguous x are
// first merged into one, so sum(x, {1, 2}) is one kernel.
template <class F>
Tensor reduce_over(const Tensor& x, const Shape& dims, bool keepdim, const F& f) {
  const Shape out_shape = reduced_dims_shape(x.shape(), dims, keepdim);
  if (x.dim() == 0) return f(x, 0, true).reshape(out_shape);
  const bool consecutive =
      !dims.empty() && dims.back() - dims.front() + 1 == static_cast<int64_t>(dims.size());
  Tensor r = x;
  if (consecutive && dims.size() > 1) {  // [before, merged, after], one reduction
    Shape merged(x.shape().begin(), x.shape().begin() + dims.front());
    merged.push_back(reduced_count(x.shape(), dims));
    merged.insert(merged.end(), x.shape().begin() + dims.back() + 1, x.shape().end());
    r = f(x.reshape(merged), dims.front(), true);
  } else {
    for (auto it = dims.rbegin(); it != dims.rend(); ++it) r = f(r, *it, true);
  }
  return r.reshape(out_shape);
}

// A value of the tensor t's shape whose elements equal zero nowhere: where(is_zero, 1, t)
// keeps sqrt and division finite at t == 0, so that a gradient masked there stays 0, not NaN
// (inf * 0). PyTorch's std and norm backwards mask the same points.
Tensor where_zero(const Tensor& t, const Tensor& if_zero, const Tensor& otherwise) {
  return where(eq(t, 0.0f), if_zero, otherwise);
}

// sqrt(v) whose gradient is 0 where v == 0 (PyTorch's std_backward and norm_backward for p = 2
// mask those points) instead of inf * 0 = NaN.
Tensor sqrt_zero_grad(const Tensor& v) {
  Tensor zero = zeros({}, v.device()), one = ones({}, v.device());
  return where_zero(v, zero, sqrt(where_zero(v, one, v)));
}

}  // namespace

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
  detail::check_defined(x, "sum");
  const Shape d = reduce_dims(x, dims, "sum");
  return reduce_over(x, d, keepdim,
                     [](const Tensor& t, int64_t dim, bool k) { return sum(t, dim, k); });
}

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
  if (is_bf16(x)) return bf16_unary(x, [&](const Tensor& xf) { return mean(xf, dims, keepdim); });
  detail::check_float(x, "mean");
  const Shape d = reduce_dims(x, dims, "mean");
  const int64_t n = x.dim() == 0 ? 1 : reduced_count(x.shape(), d);
  LOOM_CHECK(n > 0, "mean: dims {} of shape {} are empty", shape_str(dims), shape_str(x.shape()));
  return sum(x, d, keepdim) * (1.0f / static_cast<float>(n));
}

Tensor var(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  if (is_bf16(x))
    return bf16_unary(x, [&](const Tensor& xf) { return var(xf, dims, correction, keepdim); });
  detail::check_float(x, "var");
  const Shape d = reduce_dims(x, dims, "var");
  const int64_t n = x.dim() == 0 ? 1 : reduced_count(x.shape(), d);
  LOOM_CHECK(n > 0, "var: dims {} of shape {} are empty", shape_str(dims), shape_str(x.shape()));
  // N - correction <= 0 divides by 0 (inf or NaN), as torch.var does (with a warning).
  const float denom = static_cast<float>(std::max<int64_t>(n - correction, 0));
  Tensor centered = x - mean(x, d, true);
  return sum(centered * centered, d, keepdim) / denom;
}

Tensor std(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  if (is_bf16(x))
    return bf16_unary(x, [&](const Tensor& xf) { return std(xf, dims, correction, keepdim); });
  return sqrt_zero_grad(var(x, dims, correction, keepdim));
}

Tensor std(const Tensor& x, int64_t dim, bool unbiased, bool keepdim) {
  if (is_bf16(x))
    return bf16_unary(x, [&](const Tensor& xf) { return std(xf, dim, unbiased, keepdim); });
  return sqrt_zero_grad(var(x, dim, unbiased, keepdim));
}

// ---------------------------------------------------------------------------- logsumexp
// m + log(sum(exp(x - m))) with m the (constant) max over dims: exp never overflows, and its
// gradient is softmax(x). An infinite m is replaced by 0, as torch.logsumexp does: a row of
// -inf then gives log(0) = -inf, one holding +inf gives +inf, instead of inf - inf = NaN.
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim) {
  if (is_bf16(x))
    return bf16_unary(x, [&](const Tensor& xf) { return logsumexp(xf, dims, keepdim); });
  detail::check_float(x, "logsumexp");
  const Shape d = reduce_dims(x, dims, "logsumexp");
  if (x.numel() == 0)  // log(0) over empty dims, as PyTorch
    return log(sum(x, d, keepdim));
  Tensor m;
  {
    NoGradGuard no_grad;
    m = reduce_over(x.detach(), d, true,
                    [](const Tensor& t, int64_t dim, bool k) { return max(t, dim, k); });
    m = where(eq(abs(m), INFINITY), zeros({}, m.device()), m);
  }
  Tensor out = log(sum(exp(x - m), d, true)) + m;
  return keepdim ? out : out.reshape(reduced_dims_shape(x.shape(), d, false));
}

Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim) {
  return logsumexp(x, Shape{dim}, keepdim);
}

// ---------------------------------------------------------------------------- norm
namespace {

// The p-norm of x over dims (sorted, wrapped), with PyTorch's norm_backward: for p = inf (max
// |x|) or -inf (min |x|) the gradient sign(x) g goes to the elements that attain the norm,
// split evenly between ties; for other p it is sign(x) |x|^(p-1) g / norm^(p-1), 0 where the
// norm is 0 (and, for p < 1, where x is 0).
Tensor p_norm(const Tensor& x, float p, const Shape& d, bool keepdim) {
  const Shape kept = reduced_dims_shape(x.shape(), d, true);
  const Shape out_shape = reduced_dims_shape(x.shape(), d, keepdim);
  Tensor ax = abs(x.detach()), out;
  {
    NoGradGuard no_grad;
    auto extremum = [p](const Tensor& t, int64_t dim, bool k) {
      return p > 0 ? max(t, dim, k) : min(t, dim, k);
    };
    if (std::isinf(p))
      out = reduce_over(ax, d, true, extremum);
    else if (p == 0.0f)
      out = sum(where(eq(ax, 0.0f), zeros({}, x.device()), ones({}, x.device())), d, true);
    else if (p == 1.0f)
      out = sum(ax, d, true);
    else if (p == 2.0f)
      out = sqrt(sum(ax * ax, d, true));
    else
      out = pow(sum(pow(ax, p), d, true), 1.0f / p);
  }
  if (!autograd::any_requires_grad({x})) return out.reshape(out_shape);
  const Tensor xs = saved(x), ns = saved(out);
  const Shape shape = x.shape();
  Tensor result = autograd::record(
      "norm", {x}, out,
      [xs, saved_norm = ns, p, d, shape](const Tensor& gk) {
        // The output, attached to this node under create_graph (differentiated again there).
        const Tensor ns = autograd::unpack_output(saved_norm);
        const Tensor zero = zeros({}, xs.device());
        if (p == 0.0f) return std::vector<Tensor>{zeros_like(xs)};
        if (p == 1.0f) return std::vector<Tensor>{sign(xs) * gk};
        if (std::isinf(p)) {
          const Tensor ties = where(eq(abs(xs), ns), ones({}, xs.device()), zero);
          return std::vector<Tensor>{sign(xs) * ties * (gk / sum(ties, d, true))};
        }
        // g / norm^(p-1), 0 where the norm is 0
        const Tensor scale =
            where_zero(ns, zero, gk / pow(where_zero(ns, ones_like(ns), ns), p - 1.0f));
        Tensor dx = p == 2.0f ? xs * scale : sign(xs) * pow(abs(xs), p - 1.0f) * scale;
        if (p < 1.0f) dx = where_zero(xs, zero, dx);
        return std::vector<Tensor>{dx};
      },
      {xs, ns});
  return result.reshape(out_shape);
}

}  // namespace

Tensor norm(const Tensor& x, float p, const Shape& dims, bool keepdim) {
  if (is_bf16(x))
    return bf16_unary(x, [&](const Tensor& xf) { return norm(xf, p, dims, keepdim); });
  detail::check_float(x, "norm");
  LOOM_CHECK(!std::isnan(p), "norm: p is NaN");
  const Shape d = reduce_dims(x, dims, "norm");
  if (std::isinf(p) && x.dim() > 0)
    for (int64_t dim : d)
      LOOM_CHECK(x.shape()[dim] > 0, "norm: p = {} over the empty dim {} of shape {}", p, dim,
                 shape_str(x.shape()));
  return p_norm(x, p, d, keepdim);
}

Tensor norm(const Tensor& x, float p, int64_t dim, bool keepdim) {
  return norm(x, p, Shape{dim}, keepdim);
}

Tensor norm(const Tensor& x, float p) { return norm(x, p, Shape{}, false); }

// ---------------------------------------------------------------------------- scans and prod
namespace {

// The scan kernel along dim (backends/scan), reverse or not; x float32.
Tensor scan_forward(ScanOp op, const Tensor& x, int64_t dim, bool reverse) {
  const int64_t d =
      x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), op == ScanOp::Sum ? "cumsum" : "cumprod");
  const detail::Split3 s = x.dim() == 0 ? detail::Split3{} : detail::split_at(x.shape(), d);
  Tensor out = Tensor::empty(x.shape(), DType::Float32, x.device());
  backend(x.device()).scan(op, x.detach().contiguous(), s.outer, s.n, s.inner, reverse, out);
  return out;
}

// The running sum from the front (or from the back when reverse); its gradient is the running
// sum of g the other way round.
Tensor running_sum(const Tensor& x, int64_t dim, bool reverse) {
  Tensor out = scan_forward(ScanOp::Sum, x, dim, reverse);
  return autograd::record("cumsum", {x}, out, [dim, reverse](const Tensor& g) {
    return std::vector<Tensor>{running_sum(g, dim, !reverse)};
  });
}

}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim) {
  if (is_bf16(x)) return bf16_unary(x, [&](const Tensor& xf) { return cumsum(xf, dim); });
  detail::check_float(x, "cumsum");
  return running_sum(x, dim, false);
}

Tensor cumprod(const Tensor& x, int64_t dim) {
  if (is_bf16(x)) return bf16_unary(x, [&](const Tensor& xf) { return cumprod(xf, dim); });
  detail::check_float(x, "cumprod");
  Tensor out = scan_forward(ScanOp::Prod, x, dim, false);
  if (!autograd::any_requires_grad({x})) return out;
  const Tensor xs = saved(x);
  const int64_t d = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), "cumprod");
  const detail::Split3 s = x.dim() == 0 ? detail::Split3{} : detail::split_at(x.shape(), d);
  return autograd::record(
      "cumprod", {x}, out,
      [xs, s](const Tensor& g) {
        Tensor dx = Tensor::empty(xs.shape(), DType::Float32, xs.device());
        backend(xs.device()).cumprod_backward(g.contiguous(), xs, s.outer, s.n, s.inner, dx);
        // A kernel with no derivative of its own: under create_graph, differentiating dx
        // again raises (autograd::not_differentiable_twice).
        return std::vector<Tensor>{autograd::not_differentiable_twice("cumprod", dx, {g, xs})};
      },
      {xs});
}

// The last running product: its gradient, cumprod's, is the product of the other elements,
// right where x holds zeros (one or several).
Tensor prod(const Tensor& x, int64_t dim, bool keepdim) {
  if (is_bf16(x)) return bf16_unary(x, [&](const Tensor& xf) { return prod(xf, dim, keepdim); });
  detail::check_float(x, "prod");
  if (x.dim() == 0) {
    wrap_dim(dim, 1, "prod");
    return x * 1.0f;
  }
  const int64_t d = wrap_dim(dim, x.dim(), "prod");
  const int64_t n = x.shape()[d];
  const Shape out_shape = reduced_shape(x.shape(), d, keepdim);
  if (n == 0) return ones(out_shape, x.device());  // the empty product
  return cumprod(x, d).narrow(d, n - 1, 1).reshape(out_shape);
}

Tensor prod(const Tensor& x) {
  detail::check_defined(x, "prod");
  return prod(x.reshape({x.numel()}), 0);
}

}  // namespace loom
