// Views (reshape, transpose, permute, narrow, expand, squeeze/unsqueeze) share storage with
// their input; their backward maps the gradient back to the input's geometry.
// Also: contiguous/clone copies, cat, stack, roll, tril/triu.
#include <algorithm>
#include <numeric>
#include <optional>

#include "autograd/internal.h"

namespace loom {

using detail::make_view;

namespace {

// Records a view: the gradient of the output is mapped back by `back`.
template <typename Back>
Tensor record_view(const char* name, const Tensor& x, Tensor view, Back back) {
  return autograd::record(name, {x}, std::move(view),
                          [back](const Tensor& g) { return std::vector<Tensor>{back(g)}; });
}

// Resolves a single -1 and checks that the element count is preserved.
Shape infer_shape(const Shape& requested, int64_t numel, const char* op) {
  Shape shape = requested;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      LOOM_CHECK(infer < 0, "{}: only one dimension can be -1 in {}", op, shape_str(requested));
      infer = static_cast<int64_t>(i);
    } else {
      LOOM_CHECK(shape[i] >= 0 && !__builtin_mul_overflow(known, shape[i], &known),
                 "{}: invalid dimension in shape {}", op, shape_str(requested));
    }
  }
  if (infer >= 0) {
    LOOM_CHECK(known != 0 && numel % known == 0,
               "{}: shape {} is invalid for input of size {}", op, shape_str(requested), numel);
    shape[infer] = numel / known;
  }
  LOOM_CHECK(shape_numel(shape) == numel, "{}: shape {} is invalid for input of size {}", op,
             shape_str(requested), numel);
  return shape;
}

// The strides that view a tensor of (shape, strides) as `target` without a copy, if there are
// any (PyTorch's computeStride): each run of input dims that is contiguous with itself (a
// "chunk") must be covered by whole dims of the target. A padded-row [rows, V] view of a
// [rows, ld] buffer reshaped to (B, T, V), for example, is (T*ld, ld, 1).
std::optional<Strides> view_strides(const Shape& shape, const Strides& strides,
                                    const Shape& target) {
  const int64_t n = static_cast<int64_t>(shape.size());
  Strides out(target.size());
  if (n == 0 || shape_numel(shape) == 0) return std::nullopt;
  int64_t view_d = static_cast<int64_t>(target.size()) - 1;
  int64_t chunk_stride = strides.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = n - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    const bool chunk_ends =
        d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || target[view_d] == 1)) {
      out[view_d] = view_numel * chunk_stride;
      view_numel *= target[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) chunk_stride = strides[d - 1], tensor_numel = 1, view_numel = 1;
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

// The strides that view t as `shape` without a copy: the contiguous ones for a contiguous t,
// else view_strides' (as PyTorch's view: merged dims must be contiguous with each other; a dim
// may be split freely), if any.
std::optional<Strides> strides_of_view(const Tensor& t, const Shape& shape) {
  if (t.is_contiguous()) return contiguous_strides(shape);
  return view_strides(t.shape(), t.strides(), shape);
}

// t seen as `shape` through `strides` (a view of its storage), recorded.
Tensor record_reshape_view(const Tensor& t, const Shape& shape, const Strides& strides) {
  const Shape in_shape = t.shape();
  return record_view("view", t, make_view(t, shape, strides, t.offset()),
                     [in_shape](const Tensor& g) { return g.reshape(in_shape); });
}

}  // namespace

Tensor Tensor::view(const Shape& requested) const {
  detail::check_defined(*this, "view");
  const Shape shape = infer_shape(requested, numel(), "view");
  const std::optional<Strides> strides = strides_of_view(*this, shape);
  LOOM_CHECK(strides.has_value(),
             "view: tensor of shape {} with strides {} is not contiguous where {} merges its dims; "
             "use reshape()",
             shape_str(this->shape()), shape_str(this->strides()), shape_str(shape));
  return record_reshape_view(*this, shape, *strides);
}

// A view when the strides allow one (as PyTorch's reshape), else a contiguous copy, viewed.
Tensor Tensor::reshape(const Shape& requested) const {
  detail::check_defined(*this, "reshape");
  const Shape shape = infer_shape(requested, numel(), "reshape");  // validates before any copy
  if (const std::optional<Strides> strides = strides_of_view(*this, shape))
    return record_reshape_view(*this, shape, *strides);
  return contiguous().view(shape);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const int64_t s = wrap_dim(start_dim, dim(), "flatten"), e = wrap_dim(end_dim, dim(), "flatten");
  LOOM_CHECK(s <= e, "flatten: start_dim {} is after end_dim {}", start_dim, end_dim);
  Shape out(shape().begin(), shape().begin() + s);
  out.push_back(std::accumulate(shape().begin() + s, shape().begin() + e + 1, int64_t{1},
                                std::multiplies<>()));
  out.insert(out.end(), shape().begin() + e + 1, shape().end());
  return reshape(out);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  detail::check_defined(*this, "transpose");
  const int64_t a = wrap_dim(d0, dim(), "transpose"), b = wrap_dim(d1, dim(), "transpose");
  if (dim() == 0) return *this;
  Shape shape = this->shape();
  Strides strides = this->strides();
  std::swap(shape[a], shape[b]);
  std::swap(strides[a], strides[b]);
  return record_view("transpose", *this, make_view(*this, shape, strides, offset()),
                     [a, b](const Tensor& g) { return g.transpose(a, b); });
}

Tensor Tensor::t() const {
  LOOM_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dims, got shape {}", shape_str(shape()));
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::permute(const Shape& dims) const {
  detail::check_defined(*this, "permute");
  LOOM_CHECK(static_cast<int64_t>(dims.size()) == dim(),
             "permute: {} dims given for a tensor of shape {}", dims.size(), shape_str(shape()));
  Shape shape(dims.size()), inverse(dims.size());
  Strides strides(dims.size());
  std::vector<bool> used(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], dim(), "permute");
    LOOM_CHECK(!used[d], "permute: dim {} repeated in {}", d, shape_str(dims));
    used[d] = true;
    shape[i] = this->shape()[d];
    strides[i] = this->strides()[d];
    inverse[d] = static_cast<int64_t>(i);
  }
  return record_view("permute", *this, make_view(*this, shape, strides, offset()),
                     [inverse](const Tensor& g) { return g.permute(inverse); });
}

Tensor Tensor::narrow(int64_t dim_, int64_t start, int64_t length) const {
  detail::check_defined(*this, "narrow");
  LOOM_CHECK(dim() > 0, "narrow: cannot narrow a 0-d tensor (shape {})", shape_str(shape()));
  const int64_t d = wrap_dim(dim_, dim(), "narrow");
  const int64_t size = shape()[d];
  if (start < 0) start += size;
  LOOM_CHECK(start >= 0 && length >= 0 && start + length <= size,
             "narrow: start {} + length {} exceeds size {} of dim {} (shape {})", start, length,
             size, dim_, shape_str(shape()));
  Shape shape = this->shape();
  shape[d] = length;
  const Shape in_shape = this->shape();
  Tensor v = make_view(*this, shape, strides(), offset() + start * strides()[d]);
  return record_view("narrow", *this, v, [in_shape, d, start, length](const Tensor& g) {
    if (autograd::building_graph({g})) {  // create_graph: g between zeros, as a recorded cat
      Shape before = in_shape, after = in_shape;
      before[d] = start, after[d] = in_shape[d] - start - length;
      return cat({zeros(before, g.dtype(), g.device()), g, zeros(after, g.dtype(), g.device())},
                 d);
    }
    Tensor gx = zeros(in_shape, g.dtype(), g.device());
    gx.narrow(d, start, length).copy_(g);
    return gx;
  });
}

Tensor Tensor::select(int64_t dim_, int64_t index) const {
  detail::check_defined(*this, "select");
  LOOM_CHECK(dim() > 0, "select: cannot select from a 0-d tensor (shape {})", shape_str(shape()));
  const int64_t d = wrap_dim(dim_, dim(), "select");
  LOOM_CHECK(index >= -shape()[d] && index < shape()[d],
             "select: index {} out of range for dim {} of size {}", index, dim_, shape()[d]);
  return narrow(d, index < 0 ? index + shape()[d] : index, 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& requested) const {
  detail::check_defined(*this, "expand");
  LOOM_CHECK(requested.size() >= shape().size(),
             "expand: target shape {} has fewer dims than the tensor's shape {}",
             shape_str(requested), shape_str(shape()));
  const size_t lead = requested.size() - shape().size();
  Shape shape = requested;
  Strides strides(requested.size(), 0);
  for (size_t i = 0; i < requested.size(); ++i) {
    if (i < lead) {
      LOOM_CHECK(requested[i] >= 0, "expand: -1 not allowed for new leading dim in {}",
                 shape_str(requested));
      continue;
    }
    const int64_t own = this->shape()[i - lead];
    if (requested[i] == -1 || requested[i] == own) {
      shape[i] = own;
      strides[i] = this->strides()[i - lead];
    } else {
      LOOM_CHECK(own == 1,
                 "expand: the size {} at dim {} cannot be expanded to {} (shape {} to {})", own,
                 i - lead, requested[i], shape_str(this->shape()), shape_str(requested));
    }
  }
  if (shape == this->shape()) return *this;
  const Shape in_shape = this->shape();
  return record_view("expand", *this, make_view(*this, shape, strides, offset()),
                     [in_shape](const Tensor& g) { return loom::sum_to(g, in_shape); });
}

Tensor Tensor::squeeze(int64_t dim_) const {
  detail::check_defined(*this, "squeeze");
  const int64_t d = wrap_dim(dim_, dim(), "squeeze");  // a 0-d tensor accepts dim 0 or -1
  if (dim() == 0) return *this;
  if (shape()[d] != 1) return *this;  // like PyTorch: squeezing a non-1 dim is a no-op
  Shape shape = this->shape();
  Strides strides = this->strides();
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  const Shape in_shape = this->shape();
  return record_view("squeeze", *this, make_view(*this, shape, strides, offset()),
                     [in_shape](const Tensor& g) { return g.reshape(in_shape); });
}

Tensor Tensor::squeeze() const {
  Shape shape;
  for (int64_t s : this->shape())
    if (s != 1) shape.push_back(s);
  return reshape(shape);
}

Tensor Tensor::unsqueeze(int64_t dim_) const {
  detail::check_defined(*this, "unsqueeze");
  LOOM_CHECK(dim_ >= -(dim() + 1) && dim_ <= dim(),
             "unsqueeze: dim {} out of range [{}, {}] for a tensor of shape {}", dim_, -(dim() + 1),
             dim(), shape_str(shape()));
  const int64_t d = wrap_dim(dim_, dim() + 1, "unsqueeze");
  Shape shape = this->shape();
  Strides strides = this->strides();
  const int64_t stride = d < dim() ? strides[d] * shape[d] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  const Shape in_shape = this->shape();
  return record_view("unsqueeze", *this, make_view(*this, shape, strides, offset()),
                     [in_shape](const Tensor& g) { return g.reshape(in_shape); });
}

// ---------------------------------------------------------------------------- copies
Tensor Tensor::clone() const {
  detail::check_defined(*this, "clone");
  Tensor out = Tensor::empty(shape(), dtype(), device());
  backend(device()).copy(*this, out);
  return autograd::record("clone", {*this}, out,
                          [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor Tensor::contiguous() const {
  detail::check_defined(*this, "contiguous");
  return is_contiguous() ? *this : clone();
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  LOOM_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  const Tensor& first = tensors[0];
  detail::check_defined(first, "cat");
  LOOM_CHECK(first.dim() > 0, "cat: zero-dimensional tensor cannot be concatenated");
  const int64_t d = wrap_dim(dim, first.dim(), "cat");
  Shape shape = first.shape();
  shape[d] = 0;
  for (const Tensor& t : tensors) {
    detail::check_defined(t, "cat");
    detail::check_same_device(first, t, "cat");
    bool ok = t.dim() == first.dim() && t.dtype() == first.dtype();
    for (int64_t i = 0; ok && i < first.dim(); ++i) ok = i == d || t.shape()[i] == first.shape()[i];
    LOOM_CHECK(ok, "cat: tensors of shape {} ({}) and {} ({}) cannot be joined along dim {}",
               shape_str(first.shape()), dtype_name(first.dtype()), shape_str(t.shape()),
               dtype_name(t.dtype()), dim);
    shape[d] += t.shape()[d];
  }
  Tensor out = Tensor::empty(shape, first.dtype(), first.device());
  std::vector<int64_t> starts;
  int64_t start = 0;
  for (const Tensor& t : tensors) {
    Tensor slot = make_view(out, out.shape(), out.strides(), 0).narrow(d, start, t.shape()[d]);
    backend(out.device()).copy(t, slot);
    starts.push_back(start);
    start += t.shape()[d];
  }
  std::vector<int64_t> lengths;
  for (const Tensor& t : tensors) lengths.push_back(t.shape()[d]);
  return autograd::record("cat", tensors, out, [d, starts, lengths](const Tensor& g) {
    std::vector<Tensor> grads;
    for (size_t i = 0; i < starts.size(); ++i) grads.push_back(g.narrow(d, starts[i], lengths[i]));
    return grads;
  });
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  LOOM_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  detail::check_defined(tensors[0], "stack");
  const int64_t n = tensors[0].dim();
  LOOM_CHECK(dim >= -(n + 1) && dim <= n,
             "stack: dim {} out of range [{}, {}] for tensors of shape {}", dim, -(n + 1), n,
             shape_str(tensors[0].shape()));
  const int64_t d = wrap_dim(dim, n + 1, "stack");
  std::vector<Tensor> expanded;
  for (const Tensor& t : tensors) {
    LOOM_CHECK(t.shape() == tensors[0].shape(), "stack: shapes {} and {} differ",
               shape_str(tensors[0].shape()), shape_str(t.shape()));
    expanded.push_back(t.unsqueeze(d));
  }
  return cat(expanded, d);
}

// ---------------------------------------------------------------------------- split, chunk
namespace {

// dim of x wrapped into [0, x.dim()), checked for `op` (split, chunk).
int64_t split_dim(const Tensor& x, int64_t dim, const char* op) {
  detail::check_defined(x, op);
  LOOM_CHECK(x.dim() > 0 && dim >= -x.dim() && dim < x.dim(),
             "{}: dim {} out of range for a tensor of shape {}", op, dim, shape_str(x.shape()));
  return dim < 0 ? dim + x.dim() : dim;
}

// The gradient of x (shape, dims cut at `starts` along d) when the pieces' gradients are already
// side by side in one contiguous tensor of x's shape (detail::SharedGradient put them there):
// that tensor, a view of their memory. Undefined otherwise, and when a gradient is part of a
// graph (create_graph: the join must be recorded).
Tensor joined_in_place(const std::vector<Tensor>& grads, const Shape& shape, int64_t d,
                       const std::vector<int64_t>& starts) {
  const Strides whole = contiguous_strides(shape);
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined() || g.requires_grad() || g.dtype() != grads[0].dtype() ||
        g.impl()->storage() != grads[0].impl()->storage() || g.strides() != whole ||
        g.offset() != grads[0].offset() + starts[i] * whole[static_cast<size_t>(d)])
      return Tensor();
  }
  return detail::make_view(grads[0], shape, whole, grads[0].offset());
}

}  // namespace

std::shared_ptr<detail::SharedGradient> detail::SharedGradient::of(
    const std::vector<Tensor>& views) {
  if (views.size() < 2) return nullptr;
  const Tensor& first = views[0];
  int64_t needed = 0;
  for (const Tensor& v : views) {
    if (!v.defined() || v.device() != Device::CPU || v.dtype() != DType::Float32 ||
        v.impl()->storage() != first.impl()->storage() || v.shape() != first.shape() ||
        v.strides() != first.strides() || v.numel() == 0)
      return nullptr;
    needed += v.requires_grad() ? 1 : 0;
  }
  if (needed < 2) return nullptr;
  // The dims in order of stride, innermost first: those contiguous with each other from stride 1
  // up make each row's run of `run` elements; every other stride is a multiple of the row pitch
  // (the smallest of them), so a view's elements in a row are its run alone.
  std::vector<int64_t> order(static_cast<size_t>(first.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t x, int64_t y) { return first.stride(x) < first.stride(y); });
  int64_t run = 1;
  size_t i = 0;
  for (; i < order.size() && first.stride(order[i]) == run; ++i) run *= first.size(order[i]);
  if (i == 0) return nullptr;  // no dim of stride 1
  const int64_t pitch = i < order.size() ? first.stride(order[i]) : run;
  if (pitch < run) return nullptr;
  // The outer dims must not meet themselves either: each stride past all the rows below it.
  int64_t below = pitch;  // the elements from a row's first to past the last row so far
  for (size_t j = i; j < order.size(); ++j) {
    const int64_t stride = first.stride(order[j]), size = first.size(order[j]);
    if (stride % pitch != 0 || (size > 1 && stride < below)) return nullptr;
    below += (size - 1) * stride;
  }
  // Each view's run of columns in the pitch, [offset % pitch, + run): within the row, and apart.
  std::vector<std::pair<int64_t, int64_t>> columns;
  int64_t lowest = first.offset(), highest = first.offset();
  for (const Tensor& v : views) {
    const int64_t column = v.offset() % pitch;
    if (column + run > pitch) return nullptr;
    columns.emplace_back(column, column + run);
    lowest = std::min(lowest, v.offset());
    highest = std::max(highest, v.offset());
  }
  std::sort(columns.begin(), columns.end());
  for (size_t j = 1; j < columns.size(); ++j)
    if (columns[j].first < columns[j - 1].second) return nullptr;
  auto shared = std::make_shared<SharedGradient>();
  shared->shape_ = first.shape();
  shared->strides_ = first.strides();
  int64_t extent = 1;  // the elements from a view's first to its last, both included
  for (int64_t d = 0; d < first.dim(); ++d) extent += (first.size(d) - 1) * first.stride(d);
  shared->size_ = highest - lowest + extent;
  for (const Tensor& v : views) {
    shared->offsets_.push_back(v.offset() - lowest);
    shared->needed_.push_back(v.requires_grad());
  }
  shared->taken_.assign(views.size(), false);
  return shared;
}

Tensor detail::SharedGradient::take(size_t i) {
  if (i >= taken_.size() || !needed_[i] || taken_[i]) return Tensor();
  if (!buffer_.defined()) buffer_ = Tensor::empty({size_}, DType::Float32, Device::CPU);
  taken_[i] = true;
  Tensor place = make_view(buffer_, shape_, strides_, offsets_[i]);
  if (taken_ == needed_) {  // every place taken: a second backward starts a new buffer
    buffer_ = Tensor();
    taken_.assign(taken_.size(), false);
  }
  return place;
}

// The pieces are views of x, recorded as ONE op with several outputs (record_outputs): its
// backward joins their gradients with one cat (a piece that received none gives zeros of its
// own shape), where a narrow per piece would scatter each into a zero-filled gradient of x's
// full size and add them up. Gradients already side by side in one tensor of x's shape (q, k and
// v's, from detail::SharedGradient) are joined where they lie.
std::vector<Tensor> split(const Tensor& x, std::vector<int64_t> sizes, int64_t dim) {
  const int64_t d = split_dim(x, dim, "split");
  int64_t total = 0;
  bool valid = true;
  for (const int64_t size : sizes)
    valid = valid && size >= 0 && !__builtin_add_overflow(total, size, &total);
  LOOM_CHECK(valid && total == x.size(d),
             "split: sizes {} must be non-negative and sum to {}, the size of dim {} of the "
             "tensor of shape {}",
             shape_str(sizes), x.size(d), dim, shape_str(x.shape()));
  std::vector<Tensor> pieces;
  std::vector<Shape> shapes;
  std::vector<int64_t> starts;
  int64_t start = 0;
  for (const int64_t size : sizes) {
    Shape shape = x.shape();
    shape[d] = size;
    pieces.push_back(make_view(x, shape, x.strides(), x.offset() + start * x.stride(d)));
    shapes.push_back(std::move(shape));
    starts.push_back(start);
    start += size;
  }
  return autograd::record_outputs("split", {x}, std::move(pieces),
                                  [d, shapes, starts, x_shape = x.shape()](
                                      const std::vector<Tensor>& grads) {
    if (Tensor joined = joined_in_place(grads, x_shape, d, starts); joined.defined())
      return std::vector<Tensor>{joined};
    Tensor arrived;  // a gradient that arrived: the missing ones take its dtype and device
    for (const Tensor& g : grads)
      if (!arrived.defined()) arrived = g;
    std::vector<Tensor> parts;
    for (size_t i = 0; i < grads.size(); ++i)
      parts.push_back(grads[i].defined() ? grads[i]
                                         : zeros(shapes[i], arrived.dtype(), arrived.device()));
    return std::vector<Tensor>{cat(parts, d)};
  });
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  const int64_t size = x.size(split_dim(x, dim, "split"));
  LOOM_CHECK(split_size > 0 || (split_size == 0 && size == 0),
             "split: split_size {} must be positive (0 only for an empty dim), tensor of shape {} "
             "along dim {}",
             split_size, shape_str(x.shape()), dim);
  // ceil(size / split_size) pieces (one when the dim is empty); the last holds what is left.
  const int64_t count =
      split_size == 0 ? 1 : std::max<int64_t>(1, (size + split_size - 1) / split_size);
  std::vector<int64_t> sizes(static_cast<size_t>(count), split_size);
  sizes.back() = size - split_size * (count - 1);
  return split(x, std::move(sizes), dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  const int64_t size = x.size(split_dim(x, dim, "chunk"));
  LOOM_CHECK(chunks > 0, "chunk: chunks {} must be positive (tensor of shape {})", chunks,
             shape_str(x.shape()));
  // As torch.chunk: pieces of ceil(size / chunks); an empty dim gives `chunks` empty pieces.
  if (size == 0) return split(x, std::vector<int64_t>(static_cast<size_t>(chunks), 0), dim);
  return split(x, (size + chunks - 1) / chunks, dim);
}

// ---------------------------------------------------------------------------- roll
// torch.roll: out[..., i, ...] = x[..., (i - shift) mod n, ...] along dim, so elements pushed
// off one end come back at the other. Worked example of the recipe in autograd/ops.h: roll is
// two narrow views of x joined by cat (the last s slices, then the first n - s), so it needs no
// kernel of its own, runs on every device, and needs no backward of its own either: cat's
// backward narrows the gradient apart and narrow's puts each piece back in place, which is a
// roll of the gradient by -shift.
Tensor roll(const Tensor& x, int64_t shift, int64_t dim) {
  detail::check_defined(x, "roll");
  const int64_t ndim = x.dim();
  LOOM_CHECK(dim >= -ndim && dim < ndim && ndim > 0,
             "roll: dim {} out of range for a tensor of shape {}", dim, shape_str(x.shape()));
  const int64_t d = dim < 0 ? dim + ndim : dim;
  const int64_t n = x.size(d);
  const int64_t s = n == 0 ? 0 : ((shift % n) + n) % n;  // in [0, n), for shifts of any sign
  if (s == 0) return x.clone();  // a new tensor, like PyTorch's, never x itself
  return cat({x.narrow(d, n - s, s), x.narrow(d, 0, n - s)}, d);
}

// Along several dims at once: the same values as one roll after another, but each element
// copied once, and a backward of its own (the exercise's second way, docs/learn/02-autograd.md).
// Rolled one dim at a time, a roll along two dims (Swin's cyclic shift) passed over the tensor
// twice forward and about ten times backward (each narrow's gradient is a tensor of zeros with
// the piece copied in, and the pieces are then added). Here the output is cut, along each
// rolled dim, into the part that comes from the end of x and the part that comes from its
// start: 2^D blocks for D rolled dims, each one copy of a block of x; the gradient is the roll
// of the output's gradient by the opposite shifts, made the same way.
Tensor roll(const Tensor& x, std::vector<int64_t> shifts, std::vector<int64_t> dims) {
  detail::check_defined(x, "roll");
  LOOM_CHECK(!dims.empty() && shifts.size() == dims.size(),
             "roll: shifts {} and dims {} must have the same length, at least 1 (tensor of "
             "shape {})",
             shape_str(shifts), shape_str(dims), shape_str(x.shape()));
  const int64_t ndim = x.dim();
  std::vector<int64_t> shift(static_cast<size_t>(ndim), 0);
  for (size_t i = 0; i < dims.size(); ++i) {
    LOOM_CHECK(dims[i] >= -ndim && dims[i] < ndim && ndim > 0,
               "roll: dim {} out of range for a tensor of shape {}", dims[i], shape_str(x.shape()));
    const auto d = static_cast<size_t>(dims[i] < 0 ? dims[i] + ndim : dims[i]);
    shift[d] += shifts[i];  // a dim named twice is rolled by the sum
  }
  std::vector<int64_t> rolled;  // the dims that move, each shift in [1, n)
  for (int64_t d = 0; d < ndim; ++d) {
    const int64_t n = x.size(d);
    shift[static_cast<size_t>(d)] = n == 0 ? 0 : ((shift[static_cast<size_t>(d)] % n) + n) % n;
    if (shift[static_cast<size_t>(d)] != 0) rolled.push_back(d);
  }
  if (rolled.empty()) return x.clone();  // a new tensor, like PyTorch's, never x itself
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  {
    NoGradGuard views_only;  // the blocks below are plain views; the op is recorded once
    // Block b takes, along rolled dim i, the last s slices of x (bit i of b clear), which land
    // at the start of out, or the first n - s (bit i set), which land after them.
    for (int64_t b = 0; b < (int64_t{1} << rolled.size()); ++b) {
      Tensor from = x, to = out;
      for (size_t i = 0; i < rolled.size(); ++i) {
        const int64_t d = rolled[i], n = x.size(d), s = shift[static_cast<size_t>(d)];
        const bool head = (b >> i & 1) != 0;  // x's first n - s slices
        from = from.narrow(d, head ? 0 : n - s, head ? n - s : s);
        to = to.narrow(d, head ? s : 0, head ? n - s : s);
      }
      backend(x.device()).copy(from, to);
    }
  }
  std::vector<int64_t> back_shifts;
  for (const int64_t d : rolled) back_shifts.push_back(-shift[static_cast<size_t>(d)]);
  return autograd::record("roll", {x}, out, [back_shifts, rolled](const Tensor& g) {
    return std::vector<Tensor>{roll(g, back_shifts, rolled)};
  });
}

// ---------------------------------------------------------------------------- tril, triu
// Keeps x where (col - row) <= k (tril) or >= k (triu), zero elsewhere; x is [..., R, C].
static Tensor triangle(const Tensor& x, int64_t k, bool lower) {
  if (detail::is_bf16(x))
    return detail::bf16_unary(x, [&](const Tensor& xf) { return triangle(xf, k, lower); });
  const char* name = lower ? "tril" : "triu";
  detail::check_float(x, name);
  LOOM_CHECK(x.dim() >= 2, "{}: expects at least 2 dims, got shape {}", name, shape_str(x.shape()));
  const int64_t rows = x.size(-2), cols = x.size(-1);
  Tensor r = arange_f(0, static_cast<float>(rows), 1, x.device()).reshape({rows, 1});
  Tensor c = arange_f(0, static_cast<float>(cols), 1, x.device()).reshape({1, cols});
  Tensor offset = c - r;  // [R, C]: col - row
  Tensor keep = lower ? le(offset, scalar_tensor(static_cast<float>(k), x.device()))
                      : ge(offset, scalar_tensor(static_cast<float>(k), x.device()));
  return where(keep, x, zeros({}, x.device()));
}

Tensor tril(const Tensor& x, int64_t k) { return triangle(x, k, true); }
Tensor triu(const Tensor& x, int64_t k) { return triangle(x, k, false); }

// ---------------------------------------------------------------------------- unbind, unflatten
// The pieces of one split into size-1 slices, each squeezed: views recorded as one op, whose
// backward is one cat (a select per piece would zero-fill a gradient of x's size per piece).
std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  const int64_t d = split_dim(x, dim, "unbind");
  if (x.size(d) == 0) return {};
  std::vector<Tensor> pieces = split(x, 1, d);
  for (Tensor& piece : pieces) piece = piece.squeeze(d);
  return pieces;
}

Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes) {
  const int64_t d = split_dim(x, dim, "unflatten");
  LOOM_CHECK(!sizes.empty(), "unflatten: sizes must not be empty (tensor of shape {})",
             shape_str(x.shape()));
  const Shape resolved = infer_shape(sizes, x.size(d), "unflatten");
  Shape shape(x.shape().begin(), x.shape().begin() + d);
  shape.insert(shape.end(), resolved.begin(), resolved.end());
  shape.insert(shape.end(), x.shape().begin() + d + 1, x.shape().end());
  return x.reshape(shape);
}

// ---------------------------------------------------------------------------- repeat, flip
// torch.Tensor.repeat: x seen as [1, s0, 1, s1, ...], expanded to [r0, s0, r1, s1, ...] (a view)
// and copied into [r0 * s0, r1 * s1, ...]; expand's backward sums the copies' gradients.
Tensor repeat(const Tensor& x, const Shape& repeats) {
  detail::check_defined(x, "repeat");
  LOOM_CHECK(static_cast<int64_t>(repeats.size()) >= x.dim(),
             "repeat: {} repeats given for a tensor of shape {}; at least one per dim",
             repeats.size(), shape_str(x.shape()));
  const size_t lead = repeats.size() - static_cast<size_t>(x.dim());
  Shape spread, expanded, out;
  for (size_t i = 0; i < repeats.size(); ++i) {
    LOOM_CHECK(repeats[i] >= 0, "repeat: repeats {} must not be negative", shape_str(repeats));
    const int64_t size = i < lead ? 1 : x.shape()[i - lead];
    spread.insert(spread.end(), {1, size});
    expanded.insert(expanded.end(), {repeats[i], size});
    out.push_back(repeats[i] * size);
  }
  return x.reshape(spread).expand(expanded).reshape(out);
}

// torch.flip: one index_select per dim with the reversed positions n-1, ..., 0 (made on the
// device by arange), whose backward flips the gradient back.
Tensor flip(const Tensor& x, const Shape& dims) {
  detail::check_defined(x, "flip");
  std::vector<bool> seen(static_cast<size_t>(x.dim()), false);
  Tensor out = x;
  for (const int64_t dim : dims) {
    const int64_t d = wrap_dim(dim, x.dim(), "flip");
    LOOM_CHECK(!seen[static_cast<size_t>(d)], "flip: dim {} appears more than once in {}", d,
               shape_str(dims));
    seen[static_cast<size_t>(d)] = true;
    const int64_t n = x.size(d);
    Tensor reversed = Tensor::empty({n}, DType::Int64, x.device());
    if (n > 0) backend(x.device()).arange(reversed, static_cast<double>(n - 1), -1.0);
    out = index_select(out, d, reversed);
  }
  return dims.empty() ? x.clone() : out;
}

// ---------------------------------------------------------------------------- free forms
Tensor squeeze(const Tensor& x) { return x.squeeze(); }
Tensor squeeze(const Tensor& x, int64_t dim) { return x.squeeze(dim); }
Tensor unsqueeze(const Tensor& x, int64_t dim) { return x.unsqueeze(dim); }
Tensor expand(const Tensor& x, const Shape& shape) { return x.expand(shape); }
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  return x.flatten(start_dim, end_dim);
}

std::vector<Tensor> Tensor::unbind(int64_t dim) const { return loom::unbind(*this, dim); }
Tensor Tensor::unflatten(int64_t dim, const Shape& sizes) const {
  return loom::unflatten(*this, dim, sizes);
}
Tensor Tensor::repeat(const Shape& repeats) const { return loom::repeat(*this, repeats); }
Tensor Tensor::flip(const Shape& dims) const { return loom::flip(*this, dims); }

}  // namespace loom
