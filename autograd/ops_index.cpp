// Indexing: index_select / gather and their adjoints index_add / scatter_add; embedding.
#include "autograd/internal.h"

namespace loom {

namespace {

void check_index(const Tensor& index, const char* op) {
  detail::check_defined(index, op);
  LOOM_CHECK(index.dtype() == DType::Int64, "{}: index must be int64, got {} of shape {}", op,
             dtype_name(index.dtype()), shape_str(index.shape()));
}

}  // namespace

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_defined(x, "index_select");
  check_index(index, "index_select");
  detail::check_same_device(x, index, "index_select");
  LOOM_CHECK(index.dim() == 1, "index_select: index must be 1-D, got shape {}",
             shape_str(index.shape()));
  LOOM_CHECK(x.dim() >= 1, "index_select: cannot index a 0-d tensor (shape {})",
             shape_str(x.shape()));
  const int64_t d = wrap_dim(dim, x.dim(), "index_select");
  const detail::Split3 s = detail::split_at(x.shape(), d);
  Shape shape = x.shape();
  shape[d] = index.numel();
  Tensor out = Tensor::empty(shape, x.dtype(), x.device());
  backend(x.device()).index_select(x.detach().contiguous(), s.outer, s.n, s.inner,
                                   index.contiguous(), out);
  const Shape in_shape = x.shape();
  return autograd::record("index_select", {x}, out, [in_shape, d, index](const Tensor& g) {
    return std::vector<Tensor>{index_add(zeros(in_shape, g.device()), d, index, g)};
  }, {index});
}

// x with src's slices added at the positions `index` along dim (out of place).
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_float(x, "index_add");
  detail::check_float(src, "index_add");
  check_index(index, "index_add");
  LOOM_CHECK(x.dim() >= 1, "index_add: cannot index a 0-d tensor (shape {})", shape_str(x.shape()));
  const int64_t d = wrap_dim(dim, x.dim(), "index_add");
  Shape expected = x.shape();
  expected[d] = index.numel();
  LOOM_CHECK(index.dim() == 1 && src.shape() == expected,
             "index_add: src of shape {} and index of shape {} do not match x of shape {} at dim {}",
             shape_str(src.shape()), shape_str(index.shape()), shape_str(x.shape()), dim);
  const detail::Split3 s = detail::split_at(x.shape(), d);
  Tensor out = x.detach().clone();
  backend(x.device()).index_add(src.detach().contiguous(), s.outer, s.n, s.inner,
                                index.contiguous(), out);
  return autograd::record("index_add", {x, src}, out, [d, index](const Tensor& g) {
    return std::vector<Tensor>{g, index_select(g, d, index)};
  }, {index});
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_float(x, "gather");
  check_index(index, "gather");
  detail::check_same_device(x, index, "gather");
  const int64_t d = wrap_dim(dim, x.dim(), "gather");
  bool ok = index.dim() == x.dim();
  for (int64_t i = 0; ok && i < x.dim(); ++i) ok = i == d || index.shape()[i] == x.shape()[i];
  LOOM_CHECK(ok, "gather: index of shape {} must match input shape {} except at dim {}",
             shape_str(index.shape()), shape_str(x.shape()), dim);
  const detail::Split3 s = detail::split_at(x.shape(), d);
  Tensor out = Tensor::empty(index.shape(), DType::Float32, x.device());
  backend(x.device()).gather(x.detach().contiguous(), s.outer, s.n, s.inner, index.contiguous(),
                             out);
  const Shape in_shape = x.shape();
  return autograd::record("gather", {x}, out, [in_shape, d, index](const Tensor& g) {
    return std::vector<Tensor>{scatter_add(zeros(in_shape, g.device()), d, index, g)};
  }, {index});
}

// x with src[..., j, ...] added at x[..., index[..., j, ...], ...] along dim (out of place).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_float(x, "scatter_add");
  detail::check_float(src, "scatter_add");
  check_index(index, "scatter_add");
  const int64_t d = wrap_dim(dim, x.dim(), "scatter_add");
  bool ok = index.shape() == src.shape() && index.dim() == x.dim();
  for (int64_t i = 0; ok && i < x.dim(); ++i) ok = i == d || index.shape()[i] == x.shape()[i];
  LOOM_CHECK(ok, "scatter_add: index {} and src {} must match x {} except at dim {}",
             shape_str(index.shape()), shape_str(src.shape()), shape_str(x.shape()), dim);
  const detail::Split3 s = detail::split_at(x.shape(), d);
  Tensor out = x.detach().clone();
  backend(x.device()).scatter_add(src.detach().contiguous(), s.outer, s.n, s.inner,
                                  index.contiguous(), out);
  return autograd::record("scatter_add", {x, src}, out, [d, index](const Tensor& g) {
    return std::vector<Tensor>{g, gather(g, d, index)};
  }, {index});
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  if (detail::is_bf16(weight))  // rows are copied exactly: a bfloat16 table gives bfloat16 rows
    return detail::bf16_unary(weight, [&](const Tensor& w) { return embedding(w, ids); });
  detail::check_float(weight, "embedding");
  check_index(ids, "embedding");
  LOOM_CHECK(weight.dim() == 2, "embedding: weight must be 2-D [num, dim], got shape {}",
             shape_str(weight.shape()));
  Shape shape = ids.shape();
  shape.push_back(weight.size(1));
  return index_select(weight, 0, ids.reshape({ids.numel()})).reshape(shape);
}

}  // namespace loom
