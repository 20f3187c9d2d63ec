// Indexing: index_select / gather and their adjoints index_add / scatter_add; embedding.
#include "autograd/internal.h"

namespace loom {

// The index's dtype and device are the kernel's checks (backends/index): the ops check the shapes
// they see before the kernel's [outer, n, inner] view. embedding, which runs index_select,
// checks its ids itself, so that the error names it.
namespace {

void check_ids(const Tensor& index, const char* op) {
  detail::check_defined(index, op);
  LOOM_CHECK(index.dtype() == DType::Int64, "{}: index must be int64, got {} of shape {}", op,
             dtype_name(index.dtype()), shape_str(index.shape()));
}

// A Backend index kernel, run on the [outer, n, inner] view of the op's dim.
using IndexMethod = void (Backend::*)(const Tensor&, int64_t, int64_t, int64_t, const Tensor&,
                                      Tensor&);
using Pick = Tensor (*)(const Tensor& x, int64_t dim, const Tensor& index);
using AddAt = Tensor (*)(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

// index_select and gather after their checks: `kernel` reads x along dim d at index into a new
// tensor of `shape`. The backward adds the gradient back at the same positions, into zeros of
// x's shape, with the adjoint (index_add, scatter_add).
Tensor pick(const char* op, IndexMethod kernel, AddAt adjoint, const Tensor& x, int64_t d,
            const Tensor& index, const Shape& shape) {
  const detail::Split3 s = detail::split_at(x.shape(), d);
  Tensor out = Tensor::empty(shape, x.dtype(), x.device());
  (backend(x.device()).*kernel)(x.detach().contiguous(), s.outer, s.n, s.inner,
                                index.contiguous(), out);
  const Shape in_shape = x.shape();
  return autograd::record(op, {x}, out, [in_shape, d, index, adjoint](const Tensor& g) {
    return std::vector<Tensor>{adjoint(zeros(in_shape, g.device()), d, index, g)};
  }, {index});
}

// index_add and scatter_add after their checks: x with src added by `kernel` at index along
// dim d (out of place). The backward passes the gradient to x as it is, and to src the part
// the adjoint (index_select, gather) picks from it.
Tensor add_at(const char* op, IndexMethod kernel, Pick adjoint, const Tensor& x, int64_t d,
              const Tensor& index, const Tensor& src) {
  const detail::Split3 s = detail::split_at(x.shape(), d);
  Tensor out = x.detach().clone();
  (backend(x.device()).*kernel)(src.detach().contiguous(), s.outer, s.n, s.inner,
                                index.contiguous(), out);
  return autograd::record(op, {x, src}, out, [d, index, adjoint](const Tensor& g) {
    return std::vector<Tensor>{g, adjoint(g, d, index)};
  }, {index});
}

}  // namespace

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_defined(x, "index_select");
  detail::check_defined(index, "index_select");
  LOOM_CHECK(index.dim() == 1, "index_select: index must be 1-D, got shape {}",
             shape_str(index.shape()));
  LOOM_CHECK(x.dim() >= 1, "index_select: cannot index a 0-d tensor (shape {})",
             shape_str(x.shape()));
  const int64_t d = wrap_dim(dim, x.dim(), "index_select");
  Shape shape = x.shape();
  shape[d] = index.numel();
  return pick("index_select", &Backend::index_select, &index_add, x, d, index, shape);
}

// x with src's slices added at the positions `index` along dim (out of place).
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_float(x, "index_add");
  detail::check_float(src, "index_add");
  detail::check_defined(index, "index_add");
  LOOM_CHECK(x.dim() >= 1, "index_add: cannot index a 0-d tensor (shape {})", shape_str(x.shape()));
  const int64_t d = wrap_dim(dim, x.dim(), "index_add");
  Shape expected = x.shape();
  expected[d] = index.numel();
  LOOM_CHECK(index.dim() == 1 && src.shape() == expected,
             "index_add: src of shape {} and index of shape {} do not match x of shape {} at "
             "dim {}",
             shape_str(src.shape()), shape_str(index.shape()), shape_str(x.shape()), dim);
  return add_at("index_add", &Backend::index_add, &index_select, x, d, index, src);
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_float(x, "gather");
  detail::check_defined(index, "gather");
  const int64_t d = wrap_dim(dim, x.dim(), "gather");
  bool ok = index.dim() == x.dim();
  for (int64_t i = 0; ok && i < x.dim(); ++i) ok = i == d || index.shape()[i] == x.shape()[i];
  LOOM_CHECK(ok, "gather: index of shape {} must match input shape {} except at dim {}",
             shape_str(index.shape()), shape_str(x.shape()), dim);
  return pick("gather", &Backend::gather, &scatter_add, x, d, index, index.shape());
}

// x with src[..., j, ...] added at x[..., index[..., j, ...], ...] along dim (out of place).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_float(x, "scatter_add");
  detail::check_float(src, "scatter_add");
  detail::check_defined(index, "scatter_add");
  const int64_t d = wrap_dim(dim, x.dim(), "scatter_add");
  bool ok = index.shape() == src.shape() && index.dim() == x.dim();
  for (int64_t i = 0; ok && i < x.dim(); ++i) ok = i == d || index.shape()[i] == x.shape()[i];
  LOOM_CHECK(ok, "scatter_add: index {} and src {} must match x {} except at dim {}",
             shape_str(index.shape()), shape_str(src.shape()), shape_str(x.shape()), dim);
  return add_at("scatter_add", &Backend::scatter_add, &gather, x, d, index, src);
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  if (detail::is_bf16(weight))  // rows are copied exactly: a bfloat16 table gives bfloat16 rows
    return detail::bf16_unary(weight, [&](const Tensor& w) { return embedding(w, ids); });
  detail::check_float(weight, "embedding");
  check_ids(ids, "embedding");
  LOOM_CHECK(weight.dim() == 2, "embedding: weight must be 2-D [num, dim], got shape {}",
             shape_str(weight.shape()));
  Shape shape = ids.shape();
  shape.push_back(weight.size(1));
  return index_select(weight, 0, ids.reshape({ids.numel()})).reshape(shape);
}

}  // namespace loom
