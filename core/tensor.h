// Tensor: a shared handle to a TensorImpl = Storage + shape/strides/offset + dtype + device,
// plus the autograd fields (requires_grad, grad, grad_fn). Copying a Tensor copies the handle,
// as in PyTorch; views (reshape of contiguous data, transpose, permute, narrow, expand,
// squeeze/unsqueeze) share the Storage.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/scalar.h"
#include "core/shape.h"

namespace loom {

class Tensor;
namespace indexing {
class TensorIndex;
}
struct ValuesIndices;
namespace autograd {
struct Node;
}

// Called with a leaf once backward has finished accumulating its .grad (see
// Tensor::register_post_accumulate_grad_hook).
using GradReadyHook = std::function<void(const Tensor& leaf)>;

// A block of device memory. Freed through the backend of its device when the last view dies.
struct Storage {
  void* data = nullptr;
  size_t bytes = 0;
  Device device = Device::CPU;
  // Bumped by every in-place change of the data (PyTorch's version counter, shared by all
  // views of the storage): autograd compares it with the version a saved tensor had.
  uint64_t version = 0;
  Storage(size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

// The state behind a Tensor handle. Its invariants are kept here, in one place:
//   * shape and strides have one entry per dim, offset >= 0, and every element the geometry
//     can address lies inside the storage (checked when the geometry is set);
//   * a tensor with a grad_fn (the output of a recorded op) requires grad;
//   * a gradient, when present, has the tensor's shape.
// The fields are read through inline accessors (no cost on the hot paths) and changed only
// through the few setters below, which are what autograd and Module::to need.
class TensorImpl {
 public:
  // A tensor whose elements are storage->data[offset + sum_i index_i * strides[i]].
  TensorImpl(std::shared_ptr<Storage> storage, Shape shape, Strides strides, int64_t offset,
             DType dtype);

  // --- geometry ---
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }  // in elements
  int64_t offset() const { return offset_; }           // in elements, from storage()->data
  DType dtype() const { return dtype_; }
  Device device() const { return storage_->device; }
  // Points this tensor at `other`'s storage and layout (the shape and dtype must be the same),
  // so that every handle to it sees the new data: how Module::to moves a parameter in place.
  void set_data(const TensorImpl& other);
  // The version counter of the storage (see Storage::version); in-place writers bump it.
  uint64_t version() const { return storage_->version; }
  void bump_version() { ++storage_->version; }

  // --- autograd ---
  bool requires_grad() const { return requires_grad_; }
  void set_requires_grad(bool on) { requires_grad_ = on; }
  // The accumulated gradient of a leaf (null if none); a new one must have this shape.
  const std::shared_ptr<TensorImpl>& grad() const { return grad_; }
  void set_grad(std::shared_ptr<TensorImpl> grad);
  // The recorded op that produced this tensor (null for a leaf). Setting it marks the tensor
  // as requiring grad, since gradients flow through it.
  const std::shared_ptr<autograd::Node>& grad_fn() const { return grad_fn_; }
  void set_grad_fn(std::shared_ptr<autograd::Node> node) {
    grad_fn_ = std::move(node);
    requires_grad_ = true;
  }
  // Hooks the engine calls once this leaf's gradient is complete for the current backward.
  const std::vector<GradReadyHook>& grad_ready_hooks() const { return grad_ready_hooks_; }
  void add_grad_ready_hook(GradReadyHook hook) { grad_ready_hooks_.push_back(std::move(hook)); }

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Strides strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::Float32;
  bool requires_grad_ = false;
  std::shared_ptr<TensorImpl> grad_;
  std::shared_ptr<autograd::Node> grad_fn_;
  std::vector<GradReadyHook> grad_ready_hooks_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined tensor (e.g. grad() before backward)
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // An uninitialised tensor with contiguous layout.
  static Tensor empty(const Shape& shape, DType dtype = DType::Float32,
                      Device device = Device::CPU);

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // --- inspection ---
  const Shape& shape() const;
  const Strides& strides() const;
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t numel() const { return shape_numel(shape()); }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t offset() const;
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;
  float item() const;                      // one-element tensors only
  // The one element as T (float, double, int64_t, int or bool), whatever the dtype, as
  // LibTorch's item<T>(): a floating element converts to an integer by truncation, any nonzero
  // element is true. A tensor of more or fewer than one element, or a value T cannot hold (a NaN
  // or 1e30 as int64_t), is a loom::Error naming item, like LibTorch's.
  template <class T>
  T item() const;
  std::vector<float> to_vector() const;    // row-major, any layout/device; int64 converted
  std::vector<int64_t> to_vector_i64() const;
  std::vector<bool> to_vector_bool() const;  // nonzero = true
  // Raw element pointer (offset applied). For CUDA tensors this is a device pointer.
  template <typename T>
  T* data_ptr() const {
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const;

  // --- devices and dtypes ---
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;
  Tensor cpu() const { return to(Device::CPU); }
  Tensor cuda() const { return to(Device::CUDA); }

  // --- autograd ---
  Tensor& requires_grad_(bool on = true);
  bool requires_grad() const;
  bool is_leaf() const;
  // Reverse-mode differentiation from this tensor. `gradient` must be given unless this tensor
  // has one element. The graph is freed afterwards unless retain_graph or create_graph is set.
  // create_graph records the backward itself, so the leaves' .grad get a grad_fn and can be
  // differentiated again (LibTorch's backward; autograd::grad in autograd/node.h).
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false,
                bool create_graph = false) const;
  Tensor grad() const;                     // undefined if no gradient has been accumulated
  void set_grad(const Tensor& g) const;    // replaces (or with undefined, clears) the gradient
  Tensor detach() const;                   // same storage, no autograd history
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  // PyTorch's register_post_accumulate_grad_hook: `hook(*this)` runs during every backward
  // that reaches this leaf, right after its .grad holds the whole gradient of that backward
  // (every path to the leaf accumulated), while the rest of the graph is still being
  // differentiated. Leaves only; hooks run in registration order and stay for the tensor's life.
  void register_post_accumulate_grad_hook(GradReadyHook hook) const;
  // How many in-place changes the data has seen (PyTorch's t._version); shared by views.
  uint64_t version() const;

  // --- in place (for weights, buffers and optimizers; not recorded by autograd) ---
  // Each bumps the version counter, so a backward that needs the old values refuses to run.
  Tensor& copy_(const Tensor& src);        // src broadcast to this shape; dtype/device converted
  Tensor& zero_();
  Tensor& fill_(float value);
  Tensor& add_(const Tensor& other, float alpha = 1.0f);   // this += alpha * other
  Tensor& mul_(float value);
  // this[..., index[j], ...] = src[..., j, ...] along dim (torch.Tensor.index_copy_): index is
  // 1-D int64 on this device, src has this dtype, device and shape but index.numel() at dim.
  // With the positions in device memory, a GPU writes rows where no host knows the position
  // (a KV cache filled by a recorded graph). An index out of range is a loom::Error (on CUDA at
  // the next wait for the GPU); with repeated indices one of the rows wins.
  Tensor& index_copy_(int64_t dim, const Tensor& index, const Tensor& src);

  // --- views (share storage) and layout ---
  // A view when possible, else a copy; one dim may be -1.
  Tensor reshape(const Shape& shape) const;
  Tensor view(const Shape& shape) const;      // like reshape but never copies (error if it must)
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;                           // transpose of a 2-D tensor
  Tensor permute(const Shape& dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;   // narrow + squeeze
  Tensor expand(const Shape& shape) const;    // -1 keeps a dim; new leading dims allowed
  Tensor squeeze(int64_t dim) const;
  Tensor squeeze() const;                     // all size-1 dims
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor contiguous() const;
  Tensor clone() const;

  // --- method forms (defined in autograd/tensor_methods.cpp) ---
  // The rule: every op of autograd/ops.h that takes one tensor (plus non-tensor arguments) has
  // a method form, x.f(args) == f(x, args), as PyTorch users expect: the unary elementwise
  // functions, the reductions, softmax and the shape ops. Of the ops on two tensors, matmul
  // (with outer, bmm, addmm and baddbmm), masked_fill, the comparisons, the logical ops,
  // where, equal, allclose and div with a rounding mode have methods too (as in LibTorch), and
  // so do gather, scatter, scatter_add and index_select. Arithmetic is spelled with operators;
  // cat/stack, index_add, embedding, creation and the fused nn functions (layer_norm,
  // cross_entropy, dropout) are free functions only. The views above
  // are methods only: they are the tensor's own geometry. split and chunk, which give several
  // views, are both, as in LibTorch.
  // unary elementwise
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor gelu() const;
  Tensor gelu_tanh() const;
  Tensor abs() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor sign() const;
  Tensor clamp(float min, float max) const;
  Tensor clamp(std::optional<float> min, std::optional<float> max) const;
  Tensor clamp_min(float min) const;
  Tensor clamp_max(float max) const;
  Tensor pow(float exponent) const;
  Tensor neg() const;
  Tensor reciprocal() const;
  Tensor square() const;
  Tensor log1p() const;
  Tensor expm1() const;
  Tensor log2() const;
  Tensor exp2() const;
  Tensor erf() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;
  Tensor trunc() const;
  Tensor silu() const;
  Tensor softplus(float beta = 1.0f, float threshold = 20.0f) const;
  Tensor leaky_relu(float negative_slope = 0.01f) const;
  Tensor elu(float alpha = 1.0f) const;
  Tensor mish() const;
  Tensor hardswish() const;
  Tensor logit(std::optional<float> eps = std::nullopt) const;
  Tensor relu6() const;
  // reductions
  Tensor sum() const;
  Tensor sum(int64_t dim, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(int64_t dim, bool keepdim = false) const;
  Tensor max() const;
  Tensor max(int64_t dim, bool keepdim = false) const;
  Tensor min(int64_t dim, bool keepdim = false) const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  Tensor var(int64_t dim, bool unbiased = true, bool keepdim = false) const;
  Tensor std(int64_t dim, bool unbiased = true, bool keepdim = false) const;
  Tensor sum(const Shape& dims, bool keepdim = false) const;
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  Tensor var(const Shape& dims, int64_t correction = 1, bool keepdim = false) const;
  Tensor std(const Shape& dims, int64_t correction = 1, bool keepdim = false) const;
  Tensor prod() const;
  Tensor prod(int64_t dim, bool keepdim = false) const;
  Tensor logsumexp(int64_t dim, bool keepdim = false) const;
  Tensor logsumexp(const Shape& dims, bool keepdim = false) const;
  Tensor norm(float p = 2.0f) const;
  Tensor norm(float p, int64_t dim, bool keepdim = false) const;
  Tensor norm(float p, const Shape& dims, bool keepdim = false) const;
  Tensor cumsum(int64_t dim) const;
  Tensor cumprod(int64_t dim) const;
  Tensor sum_to(const Shape& shape) const;
  // softmax
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  // shape ops that copy
  Tensor roll(int64_t shift, int64_t dim) const;
  Tensor roll(std::vector<int64_t> shifts, std::vector<int64_t> dims) const;
  Tensor tril(int64_t k = 0) const;
  Tensor triu(int64_t k = 0) const;
  // shape ops that give several views
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(std::vector<int64_t> sizes, int64_t dim) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  // indexing and the shape ops of torch::indexing (autograd/indexing.h, core/tensor_index.h):
  // x.index({Slice(1, None, 2), 0, Ellipsis, None}) as x[1::2, 0, ..., None] in Python
  Tensor index(std::initializer_list<indexing::TensorIndex> indices) const;
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  Tensor index(const std::vector<Tensor>& indices) const;  // undefined entries = whole dims
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Tensor& values);
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, float value);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& values);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, float value);
  Tensor& index_put_(const std::vector<Tensor>& indices, const Tensor& values,
                     bool accumulate = false);
  Tensor index_put(const std::vector<Tensor>& indices, const Tensor& values,
                   bool accumulate = false) const;
  Tensor slice(int64_t dim = 0, std::optional<int64_t> start = std::nullopt,
               std::optional<int64_t> end = std::nullopt, int64_t step = 1) const;
  Tensor masked_select(const Tensor& mask) const;
  Tensor nonzero() const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;
  Tensor unflatten(int64_t dim, const Shape& sizes) const;
  Tensor repeat(const Shape& repeats) const;
  Tensor flip(const Shape& dims) const;
  // two tensors
  Tensor matmul(const Tensor& other) const;
  Tensor outer(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;
  Tensor baddbmm(const Tensor& batch1, const Tensor& batch2, float beta = 1.0f,
                 float alpha = 1.0f) const;
  Tensor addmm(const Tensor& mat1, const Tensor& mat2, float beta = 1.0f,
               float alpha = 1.0f) const;
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;
  // dtypes: comparisons and logical ops (Bool results), where, any/all, equal/allclose, the
  // integer divisions (autograd/ops_dtype.h), as LibTorch's methods
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor eq(const Scalar& other) const;
  Tensor ne(const Scalar& other) const;
  Tensor lt(const Scalar& other) const;
  Tensor le(const Scalar& other) const;
  Tensor gt(const Scalar& other) const;
  Tensor ge(const Scalar& other) const;
  Tensor logical_and(const Tensor& other) const;
  Tensor logical_or(const Tensor& other) const;
  Tensor logical_xor(const Tensor& other) const;
  Tensor logical_not() const;
  Tensor where(const Tensor& condition, const Tensor& other) const;  // where(condition, x, other)
  Tensor any() const;
  Tensor all() const;
  Tensor any(int64_t dim, bool keepdim = false) const;
  Tensor all(int64_t dim, bool keepdim = false) const;
  bool equal(const Tensor& other) const;
  bool allclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8) const;
  Tensor div(const Tensor& other, std::optional<std::string_view> rounding_mode) const;
  Tensor div(const Scalar& other, std::optional<std::string_view> rounding_mode) const;
  bool is_floating_point() const;
  // selection, sorting and random (autograd/selection.h), as LibTorch's methods
  ValuesIndices topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;
  ValuesIndices sort(int64_t dim = -1, bool descending = false) const;
  Tensor argsort(int64_t dim = -1, bool descending = false) const;
  Tensor min() const;
  Tensor amax(const Shape& dims = {}, bool keepdim = false) const;
  Tensor amin(const Shape& dims = {}, bool keepdim = false) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Scalar& value) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor bernoulli() const;
  Tensor bernoulli(float p) const;
  Tensor multinomial(int64_t num_samples, bool replacement = false) const;
  // In place from the global generator (like fill_: a leaf that requires grad only under a
  // NoGradGuard); each bumps the version counter.
  Tensor& normal_(float mean = 0.0f, float std = 1.0f);
  Tensor& uniform_(float from = 0.0f, float to = 1.0f);

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// What topk and sort return (LibTorch returns a std::tuple): auto [values, indices] = topk(x, 3).
struct ValuesIndices {
  Tensor values, indices;
};

// PyTorch-like printout: tensor([[1.0000, 2.0000], ...], shape=[2,2]).
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace loom

// The entries of Tensor::index's lists (Slice, None, Ellipsis, TensorIndex).
#include "core/tensor_index.h"  // IWYU pragma: export
