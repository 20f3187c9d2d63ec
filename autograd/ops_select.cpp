// Selection and sorting (autograd/selection.h): topk, sort and argsort on the sort kernel
// (backends/sort), amax and amin over several dims, scatter and one_hot on the index kernels.
// Every backward is composed of recorded ops (scatter_add, gather, scatter, eq, ...), so it
// runs on any device and can be differentiated again.
#include <algorithm>

#include "autograd/internal.h"

namespace loom {

using detail::is_bf16;
using detail::saved;

namespace {

// ---------------------------------------------------------------------------- sorting
// The first k of every row of x along dim, in ascending (descending) order: values, recorded
// with gather's adjoint as their backward (each value's gradient goes back to where it came
// from), and int64 indices. A 0-d x is one row of one element.
ValuesIndices sorted_rows(const char* op, const Tensor& x, int64_t k, int64_t dim,
                          bool descending) {
  detail::check_defined(x, op);
  if (is_bf16(x)) {  // sorted as float32 (the upcast is exact), values rounded back exactly
    ValuesIndices r = sorted_rows(op, x.to(DType::Float32), k, dim, descending);
    return {r.values.to(DType::BFloat16), r.indices};
  }
  LOOM_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Int64,
             "{}: expected a float32, bfloat16 or int64 tensor, got {} of shape {}", op,
             dtype_name(x.dtype()), shape_str(x.shape()));
  if (x.dim() == 0) {
    wrap_dim(dim, 1, op);  // a 0-d tensor takes dim 0 or -1, as PyTorch's
    ValuesIndices r = sorted_rows(op, x.reshape({1}), k, 0, descending);
    return {r.values.reshape({}), r.indices.reshape({})};
  }
  const int64_t d = wrap_dim(dim, x.dim(), op);
  LOOM_CHECK(k >= 0 && k <= x.size(d),
             "{}: k = {} is out of range for dim {} of size {} (shape {})", op, k, dim, x.size(d),
             shape_str(x.shape()));
  const detail::Split3 s = detail::split_at(x.shape(), d);
  Shape shape = x.shape();
  shape[static_cast<size_t>(d)] = k;
  Tensor values = Tensor::empty(shape, x.dtype(), x.device());
  Tensor indices = Tensor::empty(shape, DType::Int64, x.device());
  backend(x.device()).sort(x.detach().contiguous(), SortArgs{s.outer, s.n, s.inner, k, descending},
                           values, indices);
  const Shape in_shape = x.shape();
  values = autograd::record(op, {x}, values, [in_shape, d, indices](const Tensor& g) {
    return std::vector<Tensor>{scatter_add(zeros(in_shape, g.device()), d, indices, g)};
  }, {indices});
  return {values, indices};
}

// ---------------------------------------------------------------------------- amax, amin
// dims wrapped to [0, x.dim()), each once; empty = every dim.
std::vector<int64_t> reduced_dims(const Tensor& x, const Shape& dims, const char* op) {
  std::vector<int64_t> out;
  for (int64_t dim : dims) {
    const int64_t d = wrap_dim(dim, x.dim(), op);
    LOOM_CHECK(std::find(out.begin(), out.end(), d) == out.end(),
               "{}: dim {} appears more than once in the list of dims (shape {})", op, d,
               shape_str(x.shape()));
    out.push_back(d);
  }
  if (out.empty())
    for (int64_t d = 0; d < x.dim(); ++d) out.push_back(d);
  return out;
}

// The maximum (minimum) of x over dims. The gradient is split evenly among the elements equal
// to the result (PyTorch's amax/amin backward: grad * mask / mask.sum(dims)).
Tensor extremum_dims(bool is_max, const Tensor& x, const Shape& dims, bool keepdim) {
  const char* op = is_max ? "amax" : "amin";
  if (is_bf16(x))
    return detail::bf16_unary(x, [&](const Tensor& xf) {
      return extremum_dims(is_max, xf, dims, keepdim);
    });
  detail::check_float(x, op);
  if (x.dim() == 0) {
    reduced_dims(x.reshape({1}), dims, op);  // dims 0 and -1 only
    return extremum_dims(is_max, x.reshape({1}), {}, false).reshape({});
  }
  const std::vector<int64_t> reduced = reduced_dims(x, dims, op);
  Tensor kept;  // the result with size 1 at each reduced dim
  {
    NoGradGuard no_grad;
    kept = x.detach();
    for (int64_t d : reduced) {
      LOOM_CHECK(x.size(d) > 0, "{}: cannot reduce over the empty dim {} of shape {}", op, d,
                 shape_str(x.shape()));
      kept = is_max ? max(kept, d, true) : min(kept, d, true);
    }
  }
  Shape shape;
  for (int64_t d = 0; d < x.dim(); ++d) {
    const bool is_reduced = std::find(reduced.begin(), reduced.end(), d) != reduced.end();
    if (!is_reduced) shape.push_back(x.size(d));
    else if (keepdim) shape.push_back(1);
  }
  Tensor out = kept.reshape(shape);
  Tensor xs = saved(x), ks = saved(kept);
  return autograd::record(op, {x}, out, [xs, ks, reduced](const Tensor& g) {
    Tensor winners = eq(xs, ks).to(DType::Float32);
    Tensor count = winners;
    for (int64_t d : reduced) count = sum(count, d, true);
    return std::vector<Tensor>{winners * (g.reshape(ks.shape()) / count)};
  }, {xs, ks});
}

// ---------------------------------------------------------------------------- scatter
// t cut down to `shape` from the front of each dim (narrow views: differentiable).
Tensor narrowed_to(const Tensor& t, const Shape& shape) {
  Tensor r = t;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (shape[d] < t.size(d)) r = r.narrow(d, 0, shape[d]);
  return r;
}

// g grown to `shape` with zeros after it in each dim (the adjoint of narrowed_to).
Tensor padded_to(const Tensor& g, const Shape& shape) {
  Tensor r = g;
  for (int64_t d = 0; d < g.dim(); ++d) {
    if (r.size(d) == shape[d]) continue;
    Shape rest = r.shape();
    rest[d] = shape[d] - r.size(d);
    r = cat({r, zeros(rest, g.dtype(), g.device())}, d);
  }
  return r;
}

// torch.scatter's checks: index int64 of x's rank, no larger than src in any dim (when src is
// given) nor than x in any dim but d.
void check_scatter(const Tensor& x, int64_t d, const Tensor& index, const Tensor* src) {
  detail::check_defined(index, "scatter");
  LOOM_CHECK(index.dtype() == DType::Int64, "scatter: index must be int64, got {} of shape {}",
             dtype_name(index.dtype()), shape_str(index.shape()));
  bool ok = index.dim() == x.dim() && (src == nullptr || src->dim() == x.dim());
  for (int64_t i = 0; ok && i < x.dim(); ++i)
    ok = (i == d || index.size(i) <= x.size(i)) &&
         (src == nullptr || index.size(i) <= src->size(i));
  LOOM_CHECK(ok,
             "scatter: index of shape {} must have the rank of self {} and src {}, and be no "
             "larger than src, nor than self outside dim {}",
             shape_str(index.shape()), shape_str(x.shape()),
             src != nullptr ? shape_str(src->shape()) : "(a scalar)", d);
  detail::check_same_device(x, index, "scatter");
}

// x with src's first index.shape() elements written at index along d (out of place, no
// autograd): the kernel runs on the block of x that index covers.
Tensor scatter_values(const Tensor& x, int64_t d, const Tensor& index, const Tensor& src) {
  if (x.dim() == 0)
    return scatter_values(x.reshape({1}), 0, index.reshape({1}), src.reshape({1})).reshape({});
  Tensor out = x.detach().clone();
  if (index.numel() == 0) return out;
  Shape block_shape = index.shape();
  block_shape[static_cast<size_t>(d)] = x.size(d);
  Tensor block = narrowed_to(out, block_shape);
  Tensor target = block.is_contiguous() ? block : block.contiguous();
  const detail::Split3 s = detail::split_at(block_shape, d);
  backend(x.device()).scatter(narrowed_to(src.detach(), index.shape()).contiguous(), s.outer, s.n,
                              s.inner, index.contiguous(), target);
  if (!block.is_contiguous()) block.copy_(target);
  return out;
}

}  // namespace

ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool /*sorted*/) {
  return sorted_rows("topk", x, k, dim, largest);
}

ValuesIndices sort(const Tensor& x, int64_t dim, bool descending) {
  detail::check_defined(x, "sort");
  return sorted_rows("sort", x, x.dim() == 0 ? 1 : x.size(wrap_dim(dim, x.dim(), "sort")), dim,
                     descending);
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  NoGradGuard no_grad;  // the indices alone carry no gradient
  return sort(x, dim, descending).indices;
}

Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) {
  detail::check_defined(x, "amax");
  return extremum_dims(true, x, dims, keepdim);
}

Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) {
  detail::check_defined(x, "amin");
  return extremum_dims(false, x, dims, keepdim);
}

Tensor min(const Tensor& x) {
  detail::check_defined(x, "min");
  LOOM_CHECK(x.numel() > 0, "min: empty tensor of shape {}", shape_str(x.shape()));
  return amin(x, {}, false);
}

// PyTorch's scatter backward: self's gradient is g with zeros written where src went; src's is
// g gathered from there.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_defined(x, "scatter");
  detail::check_defined(src, "scatter");
  if (is_bf16(x) || is_bf16(src))
    return detail::bf16_binary(x, src, [&](const Tensor& xf, const Tensor& sf) {
      return scatter(xf, dim, index, sf);
    });
  LOOM_CHECK(x.dtype() == src.dtype() && (x.dtype() == DType::Float32 || x.dtype() == DType::Int64),
             "scatter: self and src must have the same dtype, float32 or int64; got {} and {}",
             dtype_name(x.dtype()), dtype_name(src.dtype()));
  detail::check_same_device(x, src, "scatter");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "scatter");
  check_scatter(x, d, index, &src);
  const Shape src_shape = src.shape();
  return autograd::record("scatter", {x, src}, scatter_values(x, d, index, src),
                          [d, index, src_shape](const Tensor& g) {
    if (g.dim() == 0) return std::vector<Tensor>{g * 0.0f, g.reshape(src_shape)};  // one element
    Shape block = index.shape();  // the part of g that index covers outside dim d
    block[static_cast<size_t>(d)] = g.size(d);
    Tensor picked = gather(narrowed_to(g, block), d, index);
    return std::vector<Tensor>{scatter(g, d, index, 0.0f), padded_to(picked, src_shape)};
  }, {index});
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  detail::check_defined(x, "scatter");
  if (is_bf16(x))
    return detail::bf16_unary(x, [&](const Tensor& xf) { return scatter(xf, dim, index, value); });
  LOOM_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Int64,
             "scatter: expected a float32, bfloat16 or int64 self, got {} of shape {}",
             dtype_name(x.dtype()), shape_str(x.shape()));
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "scatter");
  check_scatter(x, d, index, nullptr);
  Tensor src = full(index.shape(), value.to_float(), x.dtype(), x.device());
  return autograd::record("scatter", {x}, scatter_values(x, d, index, src),
                          [d, index](const Tensor& g) {
    return std::vector<Tensor>{scatter(g, d, index, 0.0f)};
  }, {index});
}

Tensor one_hot(const Tensor& x, int64_t num_classes) {
  detail::check_defined(x, "one_hot");
  LOOM_CHECK(x.dtype() == DType::Int64,
             "one_hot: expected an int64 tensor of class indices, got {} of shape {}",
             dtype_name(x.dtype()), shape_str(x.shape()));
  LOOM_CHECK(num_classes >= -1, "one_hot: num_classes must be -1 or non-negative, got {}",
             num_classes);
  int64_t classes = num_classes;
  if (x.numel() > 0) {
    // The smallest and largest class: two reductions on the device, two numbers read back.
    const Tensor flat = x.detach().contiguous().reshape({1, x.numel()});
    Tensor lo = Tensor::empty({1}, DType::Int64, x.device());
    Tensor hi = Tensor::empty({1}, DType::Int64, x.device());
    backend(x.device()).reduce(ReduceOp::Min, flat, 1, x.numel(), 1, lo);
    backend(x.device()).reduce(ReduceOp::Max, flat, 1, x.numel(), 1, hi);
    const int64_t smallest = lo.to_vector_i64()[0], largest = hi.to_vector_i64()[0];
    LOOM_CHECK(smallest >= 0, "one_hot: class values must be non-negative, got {}", smallest);
    if (classes == -1) classes = largest + 1;
    LOOM_CHECK(largest < classes,
               "one_hot: class values must be smaller than num_classes = {}, got {}", classes,
               largest);
  } else {
    LOOM_CHECK(classes >= 0,
               "one_hot: cannot infer the number of classes from an empty tensor (shape {})",
               shape_str(x.shape()));
  }
  Shape shape = x.shape();
  shape.push_back(classes);
  return scatter(zeros(shape, DType::Int64, x.device()), -1, x.detach().unsqueeze(-1), 1);
}

}  // namespace loom
