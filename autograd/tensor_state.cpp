// The Tensor methods that need the layers above core: reading values out (to_vector, item),
// conversions between devices and dtypes (recorded, so gradients flow back), the autograd entry
// points (requires_grad_, hooks, backward), in-place updates, and printing. The handle itself,
// its geometry and accessors, is core/tensor.cpp.
#include <algorithm>
#include <limits>
#include <ostream>
#include <type_traits>
#include <utility>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "backends/backend.h"
#include "core/error.h"
#include "core/tensor.h"

namespace loom {

// The tensor's state, or a loom::Error naming the accessor `op` when the tensor is undefined.
static TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl, const char* op) {
  LOOM_CHECK(impl != nullptr, "{}: called on an undefined tensor", op);
  return *impl;
}

// ---------------------------------------------------------------------- values and conversions
std::vector<float> Tensor::to_vector() const {
  checked(impl_, "to_vector");
  Tensor c = to(Device::CPU).to(DType::Float32).contiguous();
  const float* p = c.data_ptr<float>();
  return std::vector<float>(p, p + c.numel());
}

std::vector<int64_t> Tensor::to_vector_i64() const {
  checked(impl_, "to_vector_i64");
  Tensor c = to(Device::CPU).to(DType::Int64).contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

std::vector<bool> Tensor::to_vector_bool() const {
  checked(impl_, "to_vector_bool");
  Tensor c = to(Device::CPU).to(DType::Bool).contiguous();
  const bool* p = c.data_ptr<bool>();
  return std::vector<bool>(p, p + c.numel());
}

float Tensor::item() const { return item<float>(); }

// The element is read in the widest C++ type of its kind (double or int64_t, both exact) and
// converted once, refusing what T cannot hold as LibTorch's checked conversion does.
template <class T>
T Tensor::item() const {
  checked(impl_, "item");
  LOOM_CHECK(numel() == 1, "item: tensor of shape {} has {} elements, expected 1",
             shape_str(shape()), numel());
  const bool integral = dtype() == DType::Int64 || dtype() == DType::Bool;
  const Tensor one = detach().to(Device::CPU).contiguous();
  const int64_t i = integral ? one.to(DType::Int64).data_ptr<int64_t>()[0] : 0;
  const double d = integral ? static_cast<double>(i) : one.to(DType::Float32).data_ptr<float>()[0];
  if constexpr (std::is_same_v<T, bool>) {
    return integral ? i != 0 : d != 0.0;  // NaN is true
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(d);
  } else {
    constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
    constexpr double hi = -lo;  // 2^31 or 2^63: the first value above the range
    LOOM_CHECK(integral ? std::in_range<T>(i) : (d >= lo && d < hi),
               "item: value {} of a {} tensor cannot be converted to a {}-bit integer without "
               "overflow",
               integral ? fmt::format("{}", i) : fmt::format("{}", d), dtype_name(dtype()),
               8 * sizeof(T));
    return integral ? static_cast<T>(i) : static_cast<T>(d);  // truncates toward zero
  }
}
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int64_t Tensor::item<int64_t>() const;
template int Tensor::item<int>() const;
template bool Tensor::item<bool>() const;

// Device copies go through contiguous host buffers; the graph records the move so gradients
// flow back to the source device.
Tensor Tensor::to(Device target) const {
  checked(impl_, "to");
  if (device() == target) return *this;
  Tensor src = contiguous();
  Tensor out = Tensor::empty(shape(), dtype(), target);
  const size_t bytes = numel() * element_size(dtype());
  if (src.device() == Device::CPU) {
    backend(target).copy_from_host(out.raw_data(), src.raw_data(), bytes);
  } else if (target == Device::CPU) {
    backend(src.device()).copy_to_host(out.raw_data(), src.raw_data(), bytes);
  } else {
    LOOM_FAIL("to: copies between two non-CPU devices are not supported");
  }
  const Device from = device();
  return autograd::record("to", {*this}, out,
                          [from](const Tensor& g) { return std::vector<Tensor>{g.to(from)}; });
}

// An uninitialised tensor of `shape` and dtype `type` with the memory layout `strides` describe
// when they fill one block of memory in some dim order (a permuted contiguous tensor, e.g. the
// heads view (B, nh, T, hs) of a (B, T, nh, hs) buffer); a contiguous one otherwise.
static Tensor empty_with_layout(const Shape& shape, const Strides& strides, DType type,
                                Device device) {
  const int64_t n = static_cast<int64_t>(shape.size());
  Shape order(n);  // dims from the largest stride to the smallest (size-1 dims first)
  for (int64_t d = 0; d < n; ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if ((shape[a] == 1) != (shape[b] == 1)) return shape[a] == 1;
    return strides[a] > strides[b];
  });
  int64_t expected = 1;  // the stride a dense layout has at each dim, innermost first
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t d = order[i];
    if (shape[d] == 1) continue;
    if (strides[d] != expected) return Tensor::empty(shape, type, device);
    expected *= shape[d];
  }
  Shape buffer_shape(n), back(n);  // back: the permutation from the buffer's dims to shape's
  for (int64_t i = 0; i < n; ++i) buffer_shape[i] = shape[order[i]], back[order[i]] = i;
  return Tensor::empty(buffer_shape, type, device).permute(back);
}

// Between float32 and bfloat16 the cast is differentiable, as in PyTorch: its gradient is the
// incoming gradient cast back to the source dtype. Conversions to or from int64 and bool are not
// (they have no gradient). To bool, nonzero (NaN included) is true; from bool, 1 and 0. The
// gradient is written in the source's memory layout when that is a permuted contiguous one, so
// the view ops it flows back through next (a transpose of attention heads, then a reshape) stay
// views instead of each making a contiguous copy.
Tensor Tensor::to(DType target) const {
  checked(impl_, "to");
  if (dtype() == target) return *this;
  Tensor out = Tensor::empty(shape(), target, device());
  backend(device()).copy(*this, out);
  if (!loom::is_floating_point(dtype()) || !loom::is_floating_point(target)) return out;
  const DType from = dtype();
  if (is_contiguous())
    return autograd::record("to", {*this}, out,
                            [from](const Tensor& g) { return std::vector<Tensor>{g.to(from)}; });
  // Only the geometry is kept: the source's values are not needed.
  return autograd::record("to", {*this}, out,
                          [from, shape = shape(), strides = strides()](const Tensor& g) {
    if (autograd::building_graph({g})) return std::vector<Tensor>{g.to(from)};  // recorded
    Tensor grad = empty_with_layout(shape, strides, from, g.device());
    backend(g.device()).copy(g, grad);  // the cast and the re-layout in one pass
    return std::vector<Tensor>{grad};
  });
}

// ---------------------------------------------------------------------------- autograd
Tensor& Tensor::requires_grad_(bool on) {
  TensorImpl& t = checked(impl_, "requires_grad_");
  LOOM_CHECK(!on || loom::is_floating_point(t.dtype()),
             "requires_grad_: only float32 and bfloat16 tensors can require gradients (got {})",
             dtype_name(t.dtype()));
  LOOM_CHECK(t.grad_fn() == nullptr,
             "requires_grad_: can only be set on leaf tensors (this one was produced by '{}'); "
             "use detach() first",
             t.grad_fn() ? t.grad_fn()->name : "");
  t.set_requires_grad(on);
  return *this;
}

void Tensor::register_post_accumulate_grad_hook(GradReadyHook hook) const {
  TensorImpl& t = checked(impl_, "register_post_accumulate_grad_hook");
  LOOM_CHECK(t.grad_fn() == nullptr && t.requires_grad(),
             "register_post_accumulate_grad_hook: only leaf tensors that require grad get a "
             "gradient to accumulate (this one {})",
             t.grad_fn() ? fmt::format("was produced by '{}'", t.grad_fn()->name)
                         : std::string("does not require grad"));
  LOOM_CHECK(hook != nullptr, "register_post_accumulate_grad_hook: the hook is empty");
  t.add_grad_ready_hook(std::move(hook));
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  const TensorImpl& t = checked(impl_, "backward");
  LOOM_CHECK(t.requires_grad(),
             "backward: tensor of shape {} does not require grad and has no grad_fn",
             shape_str(t.shape()));
  Tensor g = gradient;
  if (!g.defined()) {
    LOOM_CHECK(numel() == 1,
               "backward: grad can be implicitly created only for one-element outputs; this "
               "tensor has shape {} (pass a gradient tensor)",
               shape_str(t.shape()));
    g = ones(t.shape(), t.dtype(), device());
  }
  LOOM_CHECK(g.shape() == t.shape(), "backward: gradient shape {} does not match tensor shape {}",
             shape_str(g.shape()), shape_str(t.shape()));
  autograd::run_backward(*this, g, retain_graph, create_graph);
}

// ---------------------------------------------------------------------------- in place
// Every in-place op starts here: it checks the target and bumps its version counter.
static void check_inplace(const Tensor& t, const char* op) {
  LOOM_CHECK(t.defined(), "{}: called on an undefined tensor", op);
  LOOM_CHECK(!(autograd::grad_mode_enabled() && t.requires_grad() && t.is_leaf()),
             "{}: a leaf tensor that requires grad is being modified in place; wrap the update "
             "in a NoGradGuard",
             op);
  t.impl()->bump_version();
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace(*this, "copy_");
  LOOM_CHECK(src.defined(), "copy_: the source is an undefined tensor");
  Tensor s = src.to(device());
  LOOM_CHECK(broadcast_shapes(s.shape(), shape(), "copy_") == shape(),
             "copy_: source shape {} cannot be broadcast to {}", shape_str(src.shape()),
             shape_str(shape()));
  s = s.detach().expand(shape());
  backend(device()).copy(s, *this);
  return *this;
}

Tensor& Tensor::fill_(float value) {
  check_inplace(*this, "fill_");
  backend(device()).fill(*this, value);
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0.0f); }

Tensor& Tensor::add_(const Tensor& other, float alpha) {
  check_inplace(*this, "add_");
  LOOM_CHECK(other.defined(), "add_: the other tensor is undefined");
  LOOM_CHECK(dtype() == DType::Float32 && other.dtype() == DType::Float32,
             "add_: needs float32 tensors, got {} and {}", dtype_name(dtype()),
             dtype_name(other.dtype()));
  LOOM_CHECK(other.device() == device(), "add_: tensors on {} and {}", device_name(device()),
             device_name(other.device()));
  if (is_contiguous() && other.is_contiguous() && other.shape() == shape()) {
    backend(device()).axpy(alpha, other, *this);
  } else {
    LOOM_CHECK(broadcast_shapes(other.shape(), shape(), "add_") == shape(),
               "add_: other of shape {} cannot be broadcast to {}", shape_str(other.shape()),
               shape_str(shape()));
    NoGradGuard guard;
    copy_(*this + other.detach() * alpha);
  }
  return *this;
}

Tensor& Tensor::index_copy_(int64_t dim, const Tensor& index, const Tensor& src) {
  check_inplace(*this, "index_copy_");
  LOOM_CHECK(src.defined() && index.defined(), "index_copy_: {} is an undefined tensor",
             src.defined() ? "index" : "src");
  LOOM_CHECK(this->dim() >= 1, "index_copy_: cannot index a 0-d tensor");
  const int64_t d = wrap_dim(dim, this->dim(), "index_copy_");
  LOOM_CHECK(index.dtype() == DType::Int64 && index.dim() == 1,
             "index_copy_: index must be 1-D int64, got {} of shape {}", dtype_name(index.dtype()),
             shape_str(index.shape()));
  Shape expected = shape();
  expected[static_cast<size_t>(d)] = index.numel();
  LOOM_CHECK(src.shape() == expected && src.dtype() == dtype(),
             "index_copy_: src {} of shape {} does not match {} of shape {} with {} indices at "
             "dim {} (expected {} of shape {})",
             dtype_name(src.dtype()), shape_str(src.shape()), dtype_name(dtype()),
             shape_str(shape()), index.numel(), d, dtype_name(dtype()), shape_str(expected));
  LOOM_CHECK(src.device() == device() && index.device() == device(),
             "index_copy_: self is on {}, src on {} and index on {}; they must share a device",
             device_name(device()), device_name(src.device()), device_name(index.device()));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= size(i);
  for (int64_t i = d + 1; i < this->dim(); ++i) inner *= size(i);
  // The kernel writes a contiguous block; a strided self is written through a contiguous copy.
  const bool direct = is_contiguous();
  Tensor block = direct ? *this : contiguous();
  backend(device()).index_copy(src.detach(), outer, size(d), inner, index, block);
  if (!direct) backend(device()).copy(block, *this);
  return *this;
}

Tensor& Tensor::mul_(float value) {
  check_inplace(*this, "mul_");
  LOOM_CHECK(loom::is_floating_point(dtype()), "mul_: needs a float32 or bfloat16 tensor, got {}",
             dtype_name(dtype()));
  // bfloat16 is scaled in float32 and rounded back once, as PyTorch does.
  Tensor x = dtype() == DType::Float32 ? *this : detach().to(DType::Float32);
  Tensor out = Tensor::empty(shape(), DType::Float32, device());
  backend(device()).unary(UnaryOp::Affine, x, out, value, 0.0f);
  backend(device()).copy(out, *this);
  return *this;
}

// ---------------------------------------------------------------------------- printing
std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  const Shape& shape = t.shape();
  const bool is_float = loom::is_floating_point(t.dtype()), is_bool = t.dtype() == DType::Bool;
  const std::vector<float> f = is_float ? t.to_vector() : std::vector<float>{};
  const std::vector<int64_t> i = is_float ? std::vector<int64_t>{} : t.to_vector_i64();
  const int64_t n = t.numel(), limit = 6;  // elements shown per dim before "..."
  std::string out = "tensor(";
  // Recursive printer over dims; `pos` is the flat row-major index of the current block.
  auto print = [&](auto&& self, size_t d, int64_t pos) -> void {
    if (d == shape.size()) {
      out += is_float  ? fmt::format("{:.4f}", f[pos])
             : is_bool ? (i[pos] != 0 ? "True" : "False")
                       : std::to_string(i[pos]);
      return;
    }
    const int64_t block = shape_numel(Shape(shape.begin() + d + 1, shape.end()));
    out += "[";
    for (int64_t k = 0; k < shape[d]; ++k) {
      if (shape[d] > limit && k == limit / 2) {
        out += "..., ";
        k = shape[d] - limit / 2;
      }
      self(self, d + 1, pos + k * block);
      if (k + 1 < shape[d]) out += d + 1 == shape.size() ? ", " : ",\n" + std::string(d + 8, ' ');
    }
    out += "]";
  };
  if (n > 0 || shape.empty()) print(print, 0, 0);
  else out += "[]";
  out += fmt::format(", shape={}", shape_str(shape));
  if (t.dtype() != DType::Float32) out += fmt::format(", dtype={}", dtype_name(t.dtype()));
  if (t.device() != Device::CPU) out += ", device=cuda";
  if (t.requires_grad()) out += ", requires_grad=True";
  return os << out << ")";
}

}  // namespace loom
