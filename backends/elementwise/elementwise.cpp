// The elementwise kernels' public methods: the checks of each, then the device's kernel.
#include <cmath>
#include <initializer_list>
#include <utility>

#include "backends/backend.h"
#include "backends/contract.h"
#include "backends/elementwise/elementwise.h"
#include "core/error.h"

namespace loom {

// ---------------------------------------------------------------------------- layout and fill
void Backend::copy(const Tensor& src, Tensor& dst) {
  const Contract c{device_, "copy", true};
  c.on_device(src, "src");
  c.on_device(dst, "dst");
  c.same_shape(src, dst, "src");
  if (dst.numel() > 0) run(cpu::copy, LOOM_CUDA_IMPL(cuda::copy), src, dst);
}

void Backend::fill(Tensor& dst, double value) {
  Contract{device_, "fill", true}.on_device(dst, "dst");
  if (dst.numel() > 0) run(cpu::fill, LOOM_CUDA_IMPL(cuda::fill), dst, value);
}

void Backend::arange(Tensor& dst, double start, double step) {
  const Contract c{device_, "arange"};
  c.on_device(dst, "dst");
  LOOM_CHECK(dst.dtype() == DType::Float32 || dst.dtype() == DType::Int64,
             "arange: dst has dtype {}, expected float32 or int64", dtype_name(dst.dtype()));
  c.output(dst, dst.dtype(), dst.numel(), "dst");
  LOOM_CHECK(
      dst.dtype() == DType::Float32 || (start == std::floor(start) && step == std::floor(step)),
      "arange: int64 values need an integral start and step, got {} and {}", start, step);
  if (dst.numel() > 0) run(cpu::arange, LOOM_CUDA_IMPL(cuda::arange), dst, start, step);
}

// ---------------------------------------------------------------------------- unary
void Backend::unary(UnaryOp op, const Tensor& x, Tensor& out, float a, float b) {
  const Contract c{device_, "unary", /*takes_bfloat16=*/true};
  LOOM_CHECK(unary::is_valid(op), "unary: unknown op {}", static_cast<int>(op));
  c.floating(x, "input");
  c.floating(out, "out");
  c.same_shape(x, out, "input");
  if (out.numel() > 0) run(cpu::unary, LOOM_CUDA_IMPL(cuda::unary), op, x, out, a, b);
}

void Backend::unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y,
                             Tensor& out, float a, float b) {
  const Contract c{device_, "unary_backward", /*takes_bfloat16=*/true};
  LOOM_CHECK(unary::is_valid(op), "unary_backward: unknown op {}", static_cast<int>(op));
  c.floating(grad, "grad");
  c.floating(out, "out");
  c.same_shape(grad, out, "grad");
  // Pass the kernel exactly the tensor its derivative reads.
  const unary::Reads reads = unary::backward_reads(op);
  Tensor xs, ys;
  if (reads == unary::Reads::Input) {
    c.floating(x, "x");
    c.same_shape(x, out, "x");
    xs = x;
  } else if (reads == unary::Reads::Output && y.defined()) {
    c.floating(y, "y");
    c.same_shape(y, out, "y");
    ys = y;
  } else if (reads == unary::Reads::Output) {  // y was not saved: recompute it from x
    c.floating(x, "x (needed to recompute y)");
    c.same_shape(x, out, "x");
    ys = Tensor::empty(x.shape(), DType::Float32, device_);
    unary(op, x, ys, a, b);
  }
  if (out.numel() > 0)
    run(cpu::unary_backward, LOOM_CUDA_IMPL(cuda::unary_backward), op, grad, xs, ys, out, a, b);
}

namespace {
// The checks bias_unary and its backward share: a known op whose derivative reads its input,
// and floating operands of out's shape.
void check_bias_unary(const Contract& c, UnaryOp op,
                      std::initializer_list<std::pair<const Tensor*, const char*>> operands,
                      const Tensor& out) {
  LOOM_CHECK(unary::is_valid(op), "{}: unknown op {}", c.op, static_cast<int>(op));
  LOOM_CHECK(unary::backward_reads(op) != unary::Reads::Output,
             "{}: op {} has a derivative that reads its output; only ops whose derivative reads "
             "the input (relu, gelu, gelu_tanh, ...) are fused with a bias",
             c.op, static_cast<int>(op));
  c.floating(out, "out");
  for (const auto& [t, name] : operands) {
    c.floating(*t, name);
    c.same_shape(*t, out, name);
  }
}
}  // namespace

void Backend::bias_unary(UnaryOp op, const Tensor& x, const Tensor& bias, Tensor& out) {
  const Contract c{device_, "bias_unary", /*takes_bfloat16=*/true};
  check_bias_unary(c, op, {{&x, "input"}, {&bias, "bias"}}, out);
  if (out.numel() > 0) run(cpu::bias_unary, LOOM_CUDA_IMPL(cuda::bias_unary), op, x, bias, out);
}

namespace {
// A [rows, cols] broadcast view of one bias row: stride 1 along the last dim, 0 along the others.
bool is_bias_row(const Tensor& bias) {
  if (bias.dim() == 0) return false;
  const int64_t last = bias.dim() - 1;
  for (int64_t d = 0; d < last; ++d)
    if (bias.strides()[d] != 0 && bias.size(d) > 1) return false;
  return bias.size(last) == 1 || bias.strides()[last] == 1;
}
}  // namespace

void Backend::bias_unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x,
                                  const Tensor& bias, Tensor& out, Tensor& dbias) {
  const Contract c{device_, "bias_unary_backward", /*takes_bfloat16=*/true};
  check_bias_unary(c, op, {{&grad, "grad"}, {&x, "input"}, {&bias, "bias"}}, out);
  const int64_t cols = out.dim() == 0 ? 1 : out.size(-1);
  const int64_t rows = cols > 0 ? out.numel() / cols : 0;
  if (dbias.defined()) c.output(dbias, DType::Float32, cols, "dbias");
  if (out.numel() == 0) {
    if (dbias.defined()) fill(dbias, 0.0);  // sums of no rows
    return;
  }
  const bool float32 = grad.dtype() == DType::Float32 && x.dtype() == DType::Float32 &&
                       bias.dtype() == DType::Float32 && out.dtype() == DType::Float32;
  if (dbias.defined() && device_ == Device::CPU && float32 && grad.is_contiguous() &&
      x.is_contiguous() && out.is_contiguous() && is_bias_row(bias))
    return run(cpu::bias_unary_backward_sums, nullptr, op, grad.data_ptr<float>(),
               x.data_ptr<float>(), bias.data_ptr<float>(), rows, cols, out.data_ptr<float>(),
               dbias.data_ptr<float>());
  run(cpu::bias_unary_backward, LOOM_CUDA_IMPL(cuda::bias_unary_backward), op, grad, x, bias,
      out);
  if (dbias.defined()) reduce(ReduceOp::Sum, contiguous(out), 1, rows, cols, dbias);
}

// ---------------------------------------------------------------------------- binary
void Backend::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  const Contract c{device_, "binary", /*takes_bfloat16=*/is_arithmetic(op)};
  c.on_device(a, "a");
  c.on_device(b, "b");
  c.on_device(out, "out");
  const bool integers = a.dtype() == DType::Int64 && b.dtype() == DType::Int64;
  if (is_comparison(op)) {  // float32, int64 or bool, the same on both sides
    LOOM_CHECK(a.dtype() == b.dtype(), "binary: comparison of {} with {}; dtypes must match",
               dtype_name(a.dtype()), dtype_name(b.dtype()));
    LOOM_CHECK(out.dtype() == DType::Bool || out.dtype() == DType::Float32,
               "binary: a comparison writes a bool or float32 out, got {}",
               dtype_name(out.dtype()));
  } else if (is_bitwise(op)) {  // int64 or bool, all three the same
    LOOM_CHECK((a.dtype() == DType::Int64 || a.dtype() == DType::Bool) &&
                   b.dtype() == a.dtype() && out.dtype() == a.dtype(),
               "binary: bitwise ops take int64 or bool a, b and out of one dtype, got {}, {} "
               "and {}",
               dtype_name(a.dtype()), dtype_name(b.dtype()), dtype_name(out.dtype()));
  } else if (integers && op != BinaryOp::Div && op != BinaryOp::Pow) {  // int64 arithmetic
    c.dtype(out, DType::Int64, "out (of int64 a and b)");
  } else {  // floating arithmetic: each operand float32 or bfloat16, computed in float32
    c.floating(a, "a");
    c.floating(b, "b");
    c.floating(out, "out");
  }
  c.same_shape(a, out, "a");
  c.same_shape(b, out, "b");
  if (out.numel() > 0) run(cpu::binary, LOOM_CUDA_IMPL(cuda::binary), op, a, b, out);
}

void Backend::where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  const Contract c{device_, "where"};
  c.on_device(cond, "cond");
  c.on_device(out, "out");
  c.dtype(a, out.dtype(), "a");
  c.dtype(b, out.dtype(), "b");
  c.same_shape(cond, out, "cond");
  c.same_shape(a, out, "a");
  c.same_shape(b, out, "b");
  if (out.numel() > 0) run(cpu::where, LOOM_CUDA_IMPL(cuda::where), cond, a, b, out);
}

void Backend::axpy(float alpha, const Tensor& src, Tensor& dst) {
  const Contract c{device_, "axpy"};
  c.output(dst, DType::Float32, dst.numel(), "dst");
  c.output(src, DType::Float32, dst.numel(), "src");
  if (dst.numel() > 0) run(cpu::axpy, LOOM_CUDA_IMPL(cuda::axpy), alpha, src, dst);
}

}  // namespace loom
