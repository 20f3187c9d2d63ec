// Helpers shared by the op definitions in autograd/ops_*.cpp (not part of the public API).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "backends/backend.h"
#include "core/error.h"

namespace loom::detail {

// A view of `base` with new geometry, sharing storage, with no autograd history.
inline Tensor make_view(const Tensor& base, Shape shape, Strides strides, int64_t offset) {
  return Tensor(std::make_shared<TensorImpl>(base.impl()->storage(), std::move(shape),
                                             std::move(strides), offset, base.dtype()));
}

// `t` broadcast to `shape` as a stride-0 view (no copy, no history).
inline Tensor broadcast_view(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return make_view(t, t.shape(), t.strides(), t.offset());
  const size_t lead = shape.size() - t.shape().size();
  Strides strides(shape.size(), 0);
  for (size_t i = 0; i < t.shape().size(); ++i)
    strides[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  return make_view(t, shape, std::move(strides), t.offset());
}

// t's shape for an error message, or "undefined".
inline std::string shape_of(const Tensor& t) {
  return t.defined() ? shape_str(t.shape()) : "undefined";
}

inline void check_defined(const Tensor& t, const char* op) {
  LOOM_CHECK(t.defined(), "{}: got an undefined tensor", op);
}

inline void check_float(const Tensor& t, const char* op) {
  check_defined(t, op);
  LOOM_CHECK(t.dtype() == DType::Float32, "{}: expected a float32 tensor, got {} of shape {}", op,
             dtype_name(t.dtype()), shape_str(t.shape()));
}

inline void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  LOOM_CHECK(a.device() == b.device(),
             "{}: expected all tensors on the same device, got {} (shape {}) and {} (shape {})", op,
             device_name(a.device()), shape_str(a.shape()), device_name(b.device()),
             shape_str(b.shape()));
}

// [outer, n, inner] sizes of a tensor split around `dim`.
struct Split3 {
  int64_t outer = 1, n = 1, inner = 1;
};
inline Split3 split_at(const Shape& shape, int64_t dim) {
  Split3 s;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i < dim) s.outer *= shape[i];
    else if (i == dim) s.n = shape[i];
    else s.inner *= shape[i];
  }
  return s;
}

// A tensor a backward reads, saved by the forward (PyTorch's SavedVariable). An input that
// requires grad keeps its place in the graph: a leaf is saved as itself, any other input as a
// view of the same storage with the same grad_fn (taken now: a later in-place op that moves
// the input's grad_fn does not move it). So a backward that builds a graph (create_graph)
// differentiates through it. Anything else, the op's output above all, is saved detached: the
// output's grad_fn will hold this tensor, and a grad_fn here would close a reference cycle
// (autograd::unpack_output gives it its place back inside the backward).
inline Tensor saved(const Tensor& t) {
  if (!t.defined()) return t;
  if (!t.requires_grad()) return t.detach();
  if (t.is_leaf()) return t;
  Tensor alias = t.detach();
  alias.impl()->set_grad_fn(t.grad_fn());
  return alias;
}

// The sums of g [..., cols] over every leading position, in float32, a bfloat16 g read as it is:
// the gradient of a bias added along the last dim (no autograd: used inside backward functions
// that are not differentiated again).
inline Tensor column_sums(const Tensor& g, int64_t cols) {
  Tensor out = Tensor::empty({cols}, DType::Float32, g.device());
  const int64_t rows = cols > 0 ? g.numel() / cols : 0;
  backend(g.device()).reduce(ReduceOp::Sum, g.contiguous(), 1, rows, cols, out);
  return out;
}

// The gradients of views that lie side by side in one tensor's memory: q, k and v split from one
// projection (B, T, 3E) and seen as heads (B, nh, T, hs). Each view's gradient is written into
// one buffer that mirrors that memory, at the view's own place, so that split's backward finds
// the projection's gradient already joined and returns it without its cat (a copy of every
// gradient). The products that compute those gradients ask for their places (GradientInto).
class SharedGradient {
 public:
  // Null unless the views (defined, CPU float32) are at least two that require grad, of one
  // storage, with one shape and one strides, in rows of one pitch side by side and apart: each
  // view's elements in every row of the pitch a run of columns of its own.
  static std::shared_ptr<SharedGradient> of(const std::vector<Tensor>& views);
  // View i's gradient: uninitialised, with view i's shape and strides, in the shared buffer
  // (allocated by the first call of a backward); undefined when i does not require grad or its
  // place was taken already. Once every view that requires grad has taken its place, the next
  // call starts a new buffer (a second backward through the same graph).
  Tensor take(size_t i);

 private:
  Shape shape_;
  Strides strides_;
  std::vector<int64_t> offsets_;  // in the buffer: each view's offset minus the lowest one
  std::vector<bool> needed_, taken_;
  int64_t size_ = 0;  // the buffer's elements
  Tensor buffer_;
};

// Where matmul_nd's operand gradients go: a function that gives a tensor of the operand's shape
// and layout to write the gradient into (SharedGradient::take), or none (the default: a new
// tensor). Called inside the backward, once per gradient.
struct GradientInto {
  std::function<Tensor()> a, b;
};

// alpha * matmul(a, b, out_dtype) as one differentiable product: alpha is the GEMM's own
// (GemmArgs::alpha), applied to the sums as they are written, so neither an operand nor the
// result is scaled in a pass of its own, and the gradients are alpha dC B^T and alpha A^T dC.
// Attention's scores q k^T / sqrt(d), addmm and baddbmm (ops_matmul.cpp). `into`: where the
// gradients of a and b go (taken only on the float32 path, not under autocast).
Tensor scaled_matmul(const Tensor& a, const Tensor& b, float alpha,
                     std::optional<DType> out_dtype = std::nullopt, const GradientInto& into = {});

// ---- bfloat16 (see "bfloat16" in autograd/ops.h): an op on bfloat16 tensors runs in float32 on
// the upcast inputs and rounds its result to bfloat16 once. The casts are recorded ops, so the
// gradient flows back through them with no backward of its own.
inline bool is_bf16(const Tensor& t) { return t.defined() && t.dtype() == DType::BFloat16; }
inline Tensor upcast(const Tensor& t) { return is_bf16(t) ? t.to(DType::Float32) : t; }

// f(x) for a bfloat16 x: f(float32 x), rounded to bfloat16.
template <class F>
Tensor bf16_unary(const Tensor& x, const F& f) {
  return f(upcast(x)).to(DType::BFloat16);
}

// The ops PyTorch's autocast keeps in float32 (autograd/autocast.h): their float32 result `out`
// on `input` is kept as it is inside an AutocastGuard, and rounded to bfloat16 outside one when
// the input is bfloat16 (sum and cross_entropy, which read bfloat16 in their kernels, finish
// with this too) ...
inline Tensor float32_op_result(const Tensor& input, const Tensor& out) {
  return is_bf16(input) && !autocast::is_enabled() ? out.to(DType::BFloat16) : out;
}
// ... and the others compute f(float32 x) for a bfloat16 x.
template <class F>
Tensor bf16_float32_op(const Tensor& x, const F& f) {
  return float32_op_result(x, f(upcast(x)));
}

// f(a, b) with at least one bfloat16 operand, by PyTorch's type promotion: bfloat16 with
// bfloat16 gives bfloat16, bfloat16 with float32 gives float32; computed in float32.
template <class F>
Tensor bf16_binary(const Tensor& a, const Tensor& b, const F& f) {
  Tensor out = f(upcast(a), upcast(b));
  return is_bf16(a) && is_bf16(b) ? out.to(DType::BFloat16) : out;
}

// ---- dtypes (autograd/ops_dtype.h)
// The forward of a broadcasting binary op on a and b promoted to their common dtype (a
// comparison gives Bool; bool arithmetic runs as PyTorch's, true division of integers in
// float32): the kernel's result, recorded by nothing (ops_elementwise.cpp).
Tensor binary_forward(BinaryOp op, const char* name, const Tensor& a, const Tensor& b);
// `value` as a 0-d tensor of `dtype` on `device`, filled there (no copy from the host, so it
// may be made while a CUDA graph is being recorded); int64 values beyond 2^53 lose precision.
Tensor scalar_tensor_of(const Scalar& value, DType dtype, Device device);

// op(x + bias) for op Relu, Gelu or GeluTanh: bias_relu / bias_gelu / bias_gelu_tanh, or
// relu / gelu / gelu_tanh without a bias (ops_elementwise.cpp); linear_activation's ops.
Tensor activation(UnaryOp op, const Tensor& x, const Tensor& bias);
// activation(op, x, bias) whose value `out` the product x came from has already written
// (GemmArgs::activation_out): the same node, the same backward, no kernel of its own.
Tensor activation_of_product(UnaryOp op, const Tensor& x, const Tensor& bias, const Tensor& out);

}  // namespace loom::detail
