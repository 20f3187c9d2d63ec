// Tensor handle: its geometry and the accessors that read it. This is all of Tensor that
// needs nothing above core: memory comes from the backends (backends/storage.cpp: Storage and
// Tensor::empty), and the methods that move data or record the graph (to(), item(), copy_,
// backward, printing) are in autograd/tensor_state.cpp; views and ops in autograd/.
#include "core/tensor.h"

#include "core/error.h"

namespace loom {

// ---------------------------------------------------------------------------- TensorImpl
// The geometry invariant: one stride per dim, no negative size, stride or offset, and the
// furthest element the geometry reaches inside the storage. A failure here is a bug in the
// op that built the view, so the message says which geometry was asked for.
static void check_geometry(const Storage* storage, const Shape& shape, const Strides& strides,
                           int64_t offset, DType dtype) {
  LOOM_CHECK(storage != nullptr, "TensorImpl: a tensor of shape {} needs a storage",
             shape_str(shape));
  LOOM_CHECK(shape.size() == strides.size() && offset >= 0,
             "TensorImpl: shape {} with strides {} and offset {} do not describe a tensor",
             shape_str(shape), shape_str(strides), offset);
  shape_numel(shape);  // throws if the shape is negative or over the numel cap
  int64_t last = offset;  // the furthest element addressed
  for (size_t i = 0; i < shape.size(); ++i) {
    LOOM_CHECK(strides[i] >= 0, "TensorImpl: shape {} with strides {} has a negative stride",
               shape_str(shape), shape_str(strides));
    if (shape[i] == 0) return;  // no elements: nothing is addressed
    int64_t reach = 0;
    LOOM_CHECK(!__builtin_mul_overflow(shape[i] - 1, strides[i], &reach) &&
                   !__builtin_add_overflow(last, reach, &last),
               "TensorImpl: shape {} with strides {} at offset {} addresses beyond 2^63 elements",
               shape_str(shape), shape_str(strides), offset);
  }
  const int64_t capacity = static_cast<int64_t>(storage->bytes / element_size(dtype));
  LOOM_CHECK(last < capacity,
             "TensorImpl: shape {} with strides {} at offset {} reaches element {} of a storage "
             "of {} elements",
             shape_str(shape), shape_str(strides), offset, last, capacity);
}

TensorImpl::TensorImpl(std::shared_ptr<Storage> storage, Shape shape, Strides strides,
                       int64_t offset, DType dtype)
    : storage_(std::move(storage)),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset),
      dtype_(dtype) {
  check_geometry(storage_.get(), shape_, strides_, offset_, dtype_);
}

void TensorImpl::set_data(const TensorImpl& other) {
  LOOM_CHECK(other.shape_ == shape_ && other.dtype_ == dtype_,
             "set_data: the new data ({} of shape {}) must have the tensor's dtype and shape ({} "
             "of shape {})",
             dtype_name(other.dtype_), shape_str(other.shape_), dtype_name(dtype_),
             shape_str(shape_));
  storage_ = other.storage_;
  strides_ = other.strides_;
  offset_ = other.offset_;
}

void TensorImpl::set_grad(std::shared_ptr<TensorImpl> grad) {
  if (grad)
    LOOM_CHECK(grad->shape_ == shape_, "set_grad: gradient shape {} does not match tensor shape {}",
               shape_str(grad->shape_), shape_str(shape_));
  grad_ = std::move(grad);
}

// ---------------------------------------------------------------------------- Tensor
// The tensor's state, or a loom::Error naming the accessor `op` when the tensor is undefined.
static TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl, const char* op) {
  LOOM_CHECK(impl != nullptr, "{}: called on an undefined tensor", op);
  return *impl;
}

const Shape& Tensor::shape() const { return checked(impl_, "shape").shape(); }
const Strides& Tensor::strides() const { return checked(impl_, "strides").strides(); }
int64_t Tensor::offset() const { return checked(impl_, "offset").offset(); }
DType Tensor::dtype() const { return checked(impl_, "dtype").dtype(); }
Device Tensor::device() const { return checked(impl_, "device").device(); }

int64_t Tensor::size(int64_t d) const {
  const Shape& s = checked(impl_, "size").shape();
  LOOM_CHECK(!s.empty(), "size: dim {} out of range for a 0-d tensor (shape [])", d);
  return s[wrap_dim(d, static_cast<int64_t>(s.size()), "size")];
}
int64_t Tensor::stride(int64_t d) const {
  const Strides& s = checked(impl_, "stride").strides();
  LOOM_CHECK(!s.empty(), "stride: dim {} out of range for a 0-d tensor (shape [])", d);
  return s[wrap_dim(d, static_cast<int64_t>(s.size()), "stride")];
}

void* Tensor::raw_data() const {
  const TensorImpl& t = checked(impl_, "raw_data");
  return static_cast<char*>(t.storage()->data) + t.offset() * element_size(t.dtype());
}

bool Tensor::is_contiguous() const {
  const TensorImpl& t = checked(impl_, "is_contiguous");
  const Shape& shape = t.shape();
  if (shape_numel(shape) == 0) return true;  // no elements: any layout is contiguous
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;  // the stride of a size-1 dim never matters
    if (t.strides()[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

// ---------------------------------------------------------------------------- autograd
bool Tensor::requires_grad() const { return checked(impl_, "requires_grad").requires_grad(); }
bool Tensor::is_leaf() const { return checked(impl_, "is_leaf").grad_fn() == nullptr; }
const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  return checked(impl_, "grad_fn").grad_fn();
}

uint64_t Tensor::version() const { return checked(impl_, "version").version(); }

Tensor Tensor::grad() const {
  const TensorImpl& t = checked(impl_, "grad");
  return t.grad() ? Tensor(t.grad()) : Tensor();
}

void Tensor::set_grad(const Tensor& g) const { checked(impl_, "set_grad").set_grad(g.impl_ptr()); }

Tensor Tensor::detach() const {
  const TensorImpl& t = checked(impl_, "detach");
  return Tensor(
      std::make_shared<TensorImpl>(t.storage(), t.shape(), t.strides(), t.offset(), t.dtype()));
}

}  // namespace loom
