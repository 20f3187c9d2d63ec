// torch::indexing: Tensor::index (basic entries as views, advanced ones as one index_select),
// index_put (one index_copy or index_add at flat positions), masked_select and nonzero; the
// rules are written in autograd/indexing.h. No kernel of their own but for the positions
// (backends/mask_index): the reads and writes are the index family's, so the gradients are
// those of index_select, narrow and the views, and every device runs them.
#include <numeric>

#include "autograd/internal.h"

namespace loom {

using indexing::TensorIndex;
using Kind = TensorIndex::Kind;

namespace {

// An advanced entry of an index list: `positions` (int64, any shape) index the `count`
// consecutive dims of the view that start at `dim`, as row-major flat positions over them (an
// int64 index tensor: count 1; a Bool mask: its nonzero offsets; a bool: 0 or nothing).
struct Advanced {
  int64_t dim, count;
  Tensor positions;
};

// An index list applied to x: the view of its basic entries and the advanced entries left.
struct Applied {
  Tensor view;
  std::vector<Advanced> advanced;
};

// How many dims of x an entry consumes (a mask: as many as it has); checks the tensor entries.
int64_t dims_taken(const TensorIndex& entry, const char* op) {
  switch (entry.kind()) {
    case Kind::Integer:
    case Kind::Slice:
      return 1;
    case Kind::None:
    case Kind::Ellipsis:
    case Kind::Boolean:
      return 0;
    case Kind::Tensor:
      break;
  }
  const Tensor& t = entry.tensor();
  detail::check_defined(t, op);
  LOOM_CHECK(t.dtype() == DType::Int64 || t.dtype() == DType::Bool,
             "{}: tensors used as indices must be int64 (indices) or bool (masks), got {} of "
             "shape {}",
             op, dtype_name(t.dtype()), shape_str(t.shape()));
  return t.dtype() == DType::Bool ? t.dim() : 1;
}

// The positions one bool entry stands for: [0] for true (the new dim of size 1 kept), [] for
// false (nothing kept), as NumPy's x[True] and x[False].
Tensor bool_positions(bool value, Device device) {
  return value ? zeros({1}, DType::Int64, device) : zeros({0}, DType::Int64, device);
}

// Applies the basic entries of `indices` to x, in order, each at the dim it reaches; collects
// the advanced ones with the dims they index.
Applied apply_indices(const char* op, const Tensor& x, const std::vector<TensorIndex>& indices) {
  detail::check_defined(x, op);
  int64_t taken = 0, ellipses = 0;
  for (const TensorIndex& entry : indices) {
    taken += dims_taken(entry, op);
    ellipses += entry.kind() == Kind::Ellipsis;
  }
  LOOM_CHECK(ellipses <= 1, "{}: an index can only have a single ellipsis (got {})", op,
             ellipses);
  LOOM_CHECK(taken <= x.dim(), "{}: too many indices for a tensor of shape {}: {} dims indexed",
             op, shape_str(x.shape()), taken);
  Applied out{x, {}};
  Tensor& v = out.view;
  int64_t d = 0;  // the dim of v the next entry applies to
  for (const TensorIndex& entry : indices) {
    switch (entry.kind()) {
      case Kind::Integer: {
        const int64_t i = entry.integer(), size = v.size(d);
        LOOM_CHECK(i >= -size && i < size,
                   "{}: index {} is out of range for dim {} of size {} (tensor of shape {})", op,
                   i, d, size, shape_str(x.shape()));
        v = v.select(d, i);
        break;
      }
      case Kind::Slice:
        v = slice(v, d, entry.slice().start(), entry.slice().stop(), entry.slice().step());
        ++d;
        break;
      case Kind::None:
        v = v.unsqueeze(d++);
        break;
      case Kind::Ellipsis:
        d += x.dim() - taken;
        break;
      case Kind::Boolean:
        v = v.unsqueeze(d);
        out.advanced.push_back({d++, 1, bool_positions(entry.boolean(), x.device())});
        break;
      case Kind::Tensor: {
        const Tensor t = entry.tensor().to(x.device());
        if (t.dtype() == DType::Int64) {
          out.advanced.push_back({d++, 1, t});
          break;
        }
        const Tensor flat = backend(t.device()).nonzero(t, /*flat=*/true);
        if (t.dim() == 0) {  // a 0-d mask is a bool
          v = v.unsqueeze(d);
          out.advanced.push_back({d++, 1, bool_positions(flat.numel() > 0, x.device())});
          break;
        }
        const Shape covered(v.shape().begin() + d, v.shape().begin() + d + t.dim());
        LOOM_CHECK(covered == t.shape(),
                   "{}: the mask of shape {} does not match the shape {} of the dims {}..{} it "
                   "indexes (tensor of shape {})",
                   op, shape_str(t.shape()), shape_str(covered), d, d + t.dim() - 1,
                   shape_str(x.shape()));
        out.advanced.push_back({d, t.dim(), flat});
        d += t.dim();
        break;
      }
    }
  }
  return out;
}

// v with the dims of the advanced entries moved to the front (in order), if they are not next
// to each other: NumPy's rule puts the broadcast index dims first then. Returns the dim where
// the indexed dims start after the move.
int64_t gather_advanced_dims(Tensor& v, std::vector<Advanced>& advanced) {
  bool adjacent = true;
  for (size_t i = 1; i < advanced.size(); ++i)
    adjacent = adjacent && advanced[i].dim == advanced[i - 1].dim + advanced[i - 1].count;
  if (adjacent) return advanced.front().dim;
  Shape order, rest;
  std::vector<bool> indexed(static_cast<size_t>(v.dim()), false);
  for (Advanced& a : advanced) {
    const int64_t first = static_cast<int64_t>(order.size());
    for (int64_t k = 0; k < a.count; ++k) {
      order.push_back(a.dim + k);
      indexed[static_cast<size_t>(a.dim + k)] = true;
    }
    a.dim = first;
  }
  for (int64_t k = 0; k < v.dim(); ++k)
    if (!indexed[static_cast<size_t>(k)]) rest.push_back(k);
  order.insert(order.end(), rest.begin(), rest.end());
  v = v.permute(order);
  return 0;
}

// The advanced entries of an index list applied to the view v: the positions broadcast together
// to B, combined into flat positions of the indexed dims (flattened into one at `first`), read
// by one index_select. The result has B's dims in place of the indexed ones.
Tensor index_advanced(const char* op, Tensor v, std::vector<Advanced> advanced) {
  const int64_t first = gather_advanced_dims(v, advanced);
  Shape broadcast = advanced.front().positions.shape();
  for (const Advanced& a : advanced)
    broadcast = broadcast_shapes(broadcast, a.positions.shape(), op);
  const int64_t last = advanced.back().dim + advanced.back().count;  // one past the indexed dims
  // Row-major steps of the entries over the flattened indexed dims: each entry's dims (a mask's
  // flattened into one of their product's size) times the sizes of the entries after it.
  Tensor flat = zeros({shape_numel(broadcast)}, DType::Int64, v.device());
  int64_t step = 1;
  for (auto a = advanced.rbegin(); a != advanced.rend(); ++a) {
    const int64_t n = std::accumulate(v.shape().begin() + a->dim,
                                      v.shape().begin() + a->dim + a->count, int64_t{1},
                                      std::multiplies<>());
    backend(v.device()).add_flat_index(op, detail::broadcast_view(a->positions, broadcast), n,
                                       step, flat);
    step *= n;
  }
  Tensor picked = index_select(v.flatten(first, last - 1), first, flat);
  Shape shape(v.shape().begin(), v.shape().begin() + first);
  shape.insert(shape.end(), broadcast.begin(), broadcast.end());
  shape.insert(shape.end(), v.shape().begin() + last, v.shape().end());
  return picked.reshape(shape);
}

std::vector<TensorIndex> as_entries(const std::vector<Tensor>& indices) {
  std::vector<TensorIndex> entries;
  for (const Tensor& t : indices)
    entries.push_back(t.defined() ? TensorIndex(t) : TensorIndex(indexing::Slice()));
  return entries;
}

// x with vals[j] written (or added) at the flat position pos[j] of x's row-major layout: the
// core of index_put, one index_copy (index_add) on a contiguous copy of x. vals has x's dtype.
Tensor put_flat(const Tensor& x, const Tensor& pos, const Tensor& vals, bool accumulate) {
  Tensor out = x.detach().clone();
  Tensor flat_out = detail::make_view(out, {out.numel()}, {1}, 0);
  Backend& b = backend(x.device());
  if (accumulate)
    b.index_add(vals.detach().contiguous(), 1, out.numel(), 1, pos, flat_out);
  else
    b.index_copy(vals.detach().contiguous(), 1, out.numel(), 1, pos, flat_out);
  const int64_t count = pos.numel();
  return autograd::record("index_put", {x, vals}, out,
                          [pos, accumulate, count](const Tensor& g) {
    Tensor gx = accumulate ? g : put_flat(g, pos, zeros({count}, g.dtype(), g.device()), false);
    return std::vector<Tensor>{gx, index_select(g.reshape({-1}), 0, pos)};
  }, {pos});
}

// The flat positions (row-major, in x's shape) of the elements x.index(indices) reads, and the
// shape of that result.
Tensor positions_of(const Tensor& x, const std::vector<TensorIndex>& indices) {
  NoGradGuard no_grad;
  return arange(x.numel(), x.device()).reshape(x.shape()).index(indices);
}

// values checked and broadcast to the indexed shape, flattened.
Tensor values_for(const char* op, const Tensor& x, const Tensor& values, const Shape& shape) {
  detail::check_defined(values, op);
  detail::check_same_device(x, values, op);
  LOOM_CHECK(values.dtype() == x.dtype(),
             "{}: values of dtype {} cannot be written into a tensor of dtype {} (shape {})", op,
             dtype_name(values.dtype()), dtype_name(x.dtype()), shape_str(x.shape()));
  // Leading dims of size 1 beyond the indexed shape's are dropped, as PyTorch does.
  Tensor v = values;
  while (v.dim() > static_cast<int64_t>(shape.size()) && v.size(0) == 1) v = v.squeeze(0);
  const bool fits = v.dim() <= static_cast<int64_t>(shape.size()) &&
                    broadcast_shapes(v.shape(), shape, op) == shape;
  LOOM_CHECK(fits, "{}: values of shape {} cannot be broadcast to the indexed shape {}", op,
             shape_str(values.shape()), shape_str(shape));
  return v.expand(shape).reshape({-1});
}

// The recorded views: writing into one of them in place would leave the history of the tensor
// it views stale (PyTorch rebases that tensor too: CopySlices), so index_put_ refuses.
bool is_view_of_graph(const Tensor& x) {
  if (!x.grad_fn()) return false;
  static const char* const kViews[] = {"view",    "transpose", "permute", "narrow", "expand",
                                       "squeeze", "unsqueeze", "slice",   "split"};
  for (const char* name : kViews)
    if (x.grad_fn()->name == name) return true;
  return false;
}

}  // namespace

// ---------------------------------------------------------------------------- index
Tensor index(const Tensor& x, const std::vector<TensorIndex>& indices) {
  Applied applied = apply_indices("index", x, indices);
  if (applied.advanced.empty()) return applied.view;
  return index_advanced("index", applied.view, std::move(applied.advanced));
}

Tensor index(const Tensor& x, std::initializer_list<TensorIndex> indices) {
  return index(x, std::vector<TensorIndex>(indices));
}

Tensor index(const Tensor& x, const std::vector<Tensor>& indices) {
  return index(x, as_entries(indices));
}

Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start,
             std::optional<int64_t> end, int64_t step) {
  detail::check_defined(x, "slice");
  LOOM_CHECK(x.dim() > 0, "slice: cannot slice a 0-d tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "slice");
  LOOM_CHECK(step > 0, "slice: step must be positive, got {} (flip reverses a dim)", step);
  // Python's rules: negative bounds count from the end, then both are clamped into range.
  const int64_t size = x.size(d);
  int64_t s = start.value_or(0), e = end.value_or(size);
  if (s < 0) s += size;
  if (e < 0) e += size;
  s = std::clamp<int64_t>(s, 0, size);
  e = std::clamp<int64_t>(e, s, size);
  Shape shape = x.shape();
  Strides strides = x.strides();
  shape[d] = (e - s + step - 1) / step;
  strides[d] *= step;
  const Shape in_shape = x.shape();
  Tensor view = detail::make_view(x, shape, strides, x.offset() + s * x.stride(d));
  return autograd::record("slice", {x}, view, [in_shape, d, s, e, step](const Tensor& g) {
    if (autograd::building_graph({g})) {  // create_graph: the same write as a recorded index_add
      std::vector<int64_t> at;
      for (int64_t i = s; i < e; i += step) at.push_back(i);
      const Tensor index = tensor_i64(at, {static_cast<int64_t>(at.size())}).to(g.device());
      return std::vector<Tensor>{index_add(zeros(in_shape, g.dtype(), g.device()), d, index, g)};
    }
    Tensor gx = zeros(in_shape, g.dtype(), g.device());
    slice(gx, d, s, e, step).copy_(g);  // gx holds no history: a plain write
    return std::vector<Tensor>{gx};
  });
}

// ---------------------------------------------------------------------------- index_put
Tensor index_put(const Tensor& x, const std::vector<TensorIndex>& indices, const Tensor& values,
                 bool accumulate) {
  detail::check_defined(x, "index_put");
  const Tensor pos = positions_of(x, indices);
  const Tensor vals = values_for("index_put", x, values, pos.shape());
  return put_flat(x, pos.reshape({-1}), vals, accumulate);
}

Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate) {
  return index_put(x, as_entries(indices), values, accumulate);
}

Tensor index_put(const Tensor& x, std::initializer_list<TensorIndex> indices,
                 const Tensor& values, bool accumulate) {
  return index_put(x, std::vector<TensorIndex>(indices), values, accumulate);
}

namespace {

// x.index_put_(indices, values): see autograd/indexing.h.
Tensor& index_put_inplace(Tensor& x, const std::vector<TensorIndex>& indices,
                          const Tensor& values, bool accumulate) {
  detail::check_defined(x, "index_put_");
  const bool grad_mode = autograd::grad_mode_enabled();
  LOOM_CHECK(!(grad_mode && x.requires_grad() && x.is_leaf()),
             "index_put_: a leaf Variable that requires grad is being used in an in-place "
             "operation (tensor of shape {}); write under a NoGradGuard, or use index_put",
             shape_str(x.shape()));
  if (grad_mode && (x.requires_grad() || values.requires_grad())) {
    // Out of place, then x takes the result's values and history (PyTorch rebases it too).
    LOOM_CHECK(!is_view_of_graph(x),
               "index_put_: x (shape {}) is a view ('{}') of a tensor that requires grad; "
               "writing into it in place would leave that tensor's gradient wrong: use "
               "index_put",
               shape_str(x.shape()), x.grad_fn()->name);
    Tensor out = index_put(x, indices, values, accumulate);
    {
      NoGradGuard no_grad;
      x.copy_(out);
    }
    x.impl()->set_grad_fn(out.grad_fn());
    return x;
  }
  NoGradGuard no_grad;
  Applied applied = apply_indices("index_put_", x, indices);
  if (applied.advanced.empty()) {  // basic entries only: write through the view
    const Tensor vals = values_for("index_put_", x, values, applied.view.shape());
    Tensor view = applied.view;
    const Tensor shaped = vals.reshape(view.shape());
    if (accumulate)
      view.copy_(view + shaped);
    else
      view.copy_(shaped);
    return x;
  }
  const Tensor positions = positions_of(x, indices);
  const Tensor pos = positions.reshape({-1});
  const Tensor vals = values_for("index_put_", x, values, positions.shape());
  if (!x.is_contiguous()) return x.copy_(put_flat(x, pos, vals, accumulate));
  Tensor flat_x = detail::make_view(x, {x.numel()}, {1}, x.offset());
  if (accumulate)
    backend(x.device()).index_add(vals.contiguous(), 1, x.numel(), 1, pos, flat_x);
  else
    backend(x.device()).index_copy(vals.contiguous(), 1, x.numel(), 1, pos, flat_x);
  x.impl()->bump_version();
  return x;
}

}  // namespace

// ---------------------------------------------------------------------------- masked_select
Tensor masked_select(const Tensor& x, const Tensor& mask) {
  detail::check_defined(x, "masked_select");
  detail::check_defined(mask, "masked_select");
  LOOM_CHECK(mask.dtype() == DType::Bool,
             "masked_select: mask must be a bool tensor, got {} of shape {}",
             dtype_name(mask.dtype()), shape_str(mask.shape()));
  detail::check_same_device(x, mask, "masked_select");
  const Shape shape = broadcast_shapes(x.shape(), mask.shape(), "masked_select");
  const Tensor positions =
      backend(x.device()).nonzero(detail::broadcast_view(mask, shape), /*flat=*/true);
  return index_select(x.expand(shape).reshape({-1}), 0, positions);
}

Tensor nonzero(const Tensor& x) {
  detail::check_defined(x, "nonzero");
  return backend(x.device()).nonzero(x, /*flat=*/false);
}

// ---------------------------------------------------------------------------- methods
Tensor Tensor::index(std::initializer_list<TensorIndex> indices) const {
  return loom::index(*this, indices);
}
Tensor Tensor::index(const std::vector<TensorIndex>& indices) const {
  return loom::index(*this, indices);
}
Tensor Tensor::index(const std::vector<Tensor>& indices) const {
  return loom::index(*this, indices);
}
Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, const Tensor& values) {
  return index_put_inplace(*this, indices, values, false);
}
Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, float value) {
  return index_put_(std::vector<TensorIndex>(indices), value);
}
Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, const Tensor& values) {
  return index_put_inplace(*this, indices, values, false);
}
Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, float value) {
  detail::check_defined(*this, "index_put_");
  return index_put_inplace(*this, indices, full({}, value, dtype(), device()), false);
}
Tensor& Tensor::index_put_(const std::vector<Tensor>& indices, const Tensor& values,
                           bool accumulate) {
  return index_put_inplace(*this, as_entries(indices), values, accumulate);
}
Tensor Tensor::index_put(const std::vector<Tensor>& indices, const Tensor& values,
                         bool accumulate) const {
  return loom::index_put(*this, indices, values, accumulate);
}
Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step) const {
  return loom::slice(*this, dim, start, end, step);
}
Tensor Tensor::masked_select(const Tensor& mask) const { return loom::masked_select(*this, mask); }
Tensor Tensor::nonzero() const { return loom::nonzero(*this); }

}  // namespace loom
