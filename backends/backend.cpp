// The public Backend methods: each checks the contract stated at the top of backend.h, once for
// every device, makes the inputs of row-wise kernels contiguous, returns early when there is no
// work, and then calls the device's kernel (the protected *_impl).
#include "backends/backend.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <utility>
#include <vector>

#include "core/error.h"

namespace loom {

namespace {

// The checks of one call; `op` names the call in every message, `name` the argument at fault.
// bfloat16 tensors reach only copy and fill (`bfloat16` set) and gemm (GemmArgs' types): the
// other kernels would read their 2-byte elements as float32 or int64, so they refuse them.
struct Contract {
  Device device;
  const char* op;
  bool bfloat16;

  Contract(Device d, const char* name, bool takes_bfloat16 = false)
      : device(d), op(name), bfloat16(takes_bfloat16) {}

  void on_device(const Tensor& t, const char* name) const {
    LOOM_CHECK(t.defined(), "{}: {} is an undefined tensor", op, name);
    LOOM_CHECK(t.device() == device, "{}: {} is on {}, expected {}", op, name,
               device_name(t.device()), device_name(device));
    if (t.dtype() != DType::BFloat16) return;
    LOOM_CHECK(bfloat16,
               "{}: {} (shape {}) is bfloat16, which this kernel does not take (float32 or "
               "int64); bfloat16 ops compute in float32 (see autograd/ops.h)",
               op, name, shape_str(t.shape()));
  }
  void dtype(const Tensor& t, DType dtype, const char* name) const {
    on_device(t, name);
    LOOM_CHECK(t.dtype() == dtype, "{}: {} has dtype {}, expected {}", op, name,
               dtype_name(t.dtype()), dtype_name(dtype));
  }
  // A float32 or bfloat16 tensor (the elementwise kernels that compute in float32 on either).
  void floating(const Tensor& t, const char* name) const {
    on_device(t, name);
    LOOM_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::BFloat16,
               "{}: {} has dtype {}, expected float32 or bfloat16", op, name,
               dtype_name(t.dtype()));
  }
  void numel(const Tensor& t, int64_t numel, const char* name) const {
    LOOM_CHECK(t.numel() == numel, "{}: {} has shape {} ({} elements), expected {} elements", op,
               name, shape_str(t.shape()), t.numel(), numel);
  }
  // An input of `dtype` with `count` elements, in any layout (the caller makes it contiguous).
  void input(const Tensor& t, DType type, int64_t count, const char* name) const {
    dtype(t, type, name);
    numel(t, count, name);
  }
  // An output of a row-wise kernel: of `dtype`, contiguous, with `count` elements.
  void output(const Tensor& t, DType type, int64_t count, const char* name) const {
    dtype(t, type, name);
    LOOM_CHECK(t.numel() == 0 || t.is_contiguous(), "{}: {} (shape {}) must be contiguous", op,
               name, shape_str(t.shape()));
    numel(t, count, name);
  }
  void same_shape(const Tensor& t, const Tensor& out, const char* name) const {
    LOOM_CHECK(t.shape() == out.shape(), "{}: {} has shape {}, expected {} (the output's)", op,
               name, shape_str(t.shape()), shape_str(out.shape()));
  }
  void extents(int64_t outer, int64_t n, int64_t inner) const {
    LOOM_CHECK(outer >= 0 && n >= 0 && inner >= 0, "{}: negative extent [{},{},{}]", op, outer, n,
               inner);
  }
  // k of an index that splits into [outer, k, inner] (gather, scatter_add).
  int64_t index_depth(const Tensor& index, int64_t outer, int64_t inner) const {
    dtype(index, DType::Int64, "index");
    const int64_t slices = outer * inner;
    LOOM_CHECK(slices > 0 ? index.numel() % slices == 0 : index.numel() == 0,
               "{}: index with {} elements does not split into [{}, k, {}]", op, index.numel(),
               outer, inner);
    return slices > 0 ? index.numel() / slices : 0;
  }
  // A 1-D index (index_select, index_add); returns its length k.
  int64_t index_length(const Tensor& index) const {
    dtype(index, DType::Int64, "index");
    LOOM_CHECK(index.dim() <= 1, "{}: index must be 1-D, got shape {}", op,
               shape_str(index.shape()));
    return index.numel();
  }
  // x seen as `rows` equal rows (one per mean or target value); returns the row length.
  int64_t row_length(const Tensor& x, int64_t rows, const char* name) const {
    LOOM_CHECK(rows > 0 ? x.numel() % rows == 0 : x.numel() == 0,
               "{}: {} (shape {}) does not split into {} rows", op, name, shape_str(x.shape()),
               rows);
    return rows > 0 ? x.numel() / rows : 0;
  }
  // Float32 or bfloat16 logits of one row per int64 target, at least one class; returns the
  // classes.
  int64_t logits_per_target(const Tensor& logits, const Tensor& target) const {
    floating(logits, "logits");
    dtype(target, DType::Int64, "target");
    const int64_t rows = target.numel(), classes = row_length(logits, rows, "logits");
    LOOM_CHECK(classes > 0 || rows == 0, "{}: logits have 0 classes", op);
    return classes;
  }
};

const char* reduce_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::ArgMax:
      return "argmax";
    case ReduceOp::ArgMin:
      return "argmin";
  }
  return "reduce";
}

}  // namespace

Tensor Backend::unit_stride_rows(const Tensor& t) {
  if (t.dim() == 2 && t.size(0) > 1 && t.stride(1) == 1 && t.stride(0) >= t.size(1)) return t;
  return contiguous(t);
}

int64_t logits_row_stride(const Tensor& logits) {
  return logits.dim() == 2 && logits.size(0) > 1 ? logits.stride(0) : logits.size(-1);
}

Tensor Backend::contiguous(const Tensor& t) {
  if (!t.defined() || t.numel() == 0 || t.is_contiguous()) return t;
  Tensor c = Tensor::empty(t.shape(), t.dtype(), device_);
  copy(t, c);
  return c;
}

// ---------------------------------------------------------------------------- layout and fill
void Backend::copy(const Tensor& src, Tensor& dst) {
  const Contract c{device_, "copy", true};
  c.on_device(src, "src");
  c.on_device(dst, "dst");
  c.same_shape(src, dst, "src");
  if (dst.numel() > 0) copy_impl(src, dst);
}

void Backend::fill(Tensor& dst, double value) {
  Contract{device_, "fill", true}.on_device(dst, "dst");
  if (dst.numel() > 0) fill_impl(dst, value);
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
  if (dst.numel() > 0) arange_impl(dst, start, step);
}

// ---------------------------------------------------------------------------- elementwise
void Backend::unary(UnaryOp op, const Tensor& x, Tensor& out, float a, float b) {
  const Contract c{device_, "unary", /*takes_bfloat16=*/true};
  LOOM_CHECK(unary::is_valid(op), "unary: unknown op {}", static_cast<int>(op));
  c.floating(x, "input");
  c.floating(out, "out");
  c.same_shape(x, out, "input");
  if (out.numel() > 0) unary_impl(op, x, out, a, b);
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
  if (out.numel() > 0) unary_backward_impl(op, grad, xs, ys, out, a, b);
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
  if (out.numel() > 0) bias_unary_impl(op, x, bias, out);
}

void Backend::bias_unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x,
                                  const Tensor& bias, Tensor& out) {
  const Contract c{device_, "bias_unary_backward", /*takes_bfloat16=*/true};
  check_bias_unary(c, op, {{&grad, "grad"}, {&x, "input"}, {&bias, "bias"}}, out);
  if (out.numel() > 0) bias_unary_backward_impl(op, grad, x, bias, out);
}

void Backend::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  const Contract c{device_, "binary", /*takes_bfloat16=*/op < BinaryOp::Eq};
  c.on_device(a, "a");
  c.on_device(b, "b");
  if (op >= BinaryOp::Eq) {  // comparisons take float32 or int64, the same on both sides
    LOOM_CHECK(a.dtype() == b.dtype(), "binary: comparison of {} with {}; dtypes must match",
               dtype_name(a.dtype()), dtype_name(b.dtype()));
    c.dtype(out, DType::Float32, "out");
  } else {  // arithmetic: each operand float32 or bfloat16, computed in float32
    c.floating(a, "a");
    c.floating(b, "b");
    c.floating(out, "out");
  }
  c.same_shape(a, out, "a");
  c.same_shape(b, out, "b");
  if (out.numel() > 0) binary_impl(op, a, b, out);
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
  if (out.numel() > 0) where_impl(cond, a, b, out);
}

void Backend::axpy(float alpha, const Tensor& src, Tensor& dst) {
  const Contract c{device_, "axpy"};
  c.output(dst, DType::Float32, dst.numel(), "dst");
  c.output(src, DType::Float32, dst.numel(), "src");
  if (dst.numel() > 0) axpy_impl(alpha, src, dst);
}

// ---------------------------------------------------------------------------- reductions
void Backend::reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                     Tensor& out) {
  const Contract c{device_, reduce_name(op), /*takes_bfloat16=*/op == ReduceOp::Sum};
  c.extents(outer, n, inner);
  c.on_device(x, "input");
  c.numel(x, outer * n * inner, "input");
  const bool arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
  const DType out_type = arg                            ? DType::Int64
                         : x.dtype() == DType::BFloat16 ? DType::Float32  // a bfloat16 sum
                                                        : x.dtype();
  c.output(out, out_type, outer * inner, "out");
  if (outer * inner == 0) return;
  if (n == 0) {
    LOOM_CHECK(op == ReduceOp::Sum,
               "{}: cannot reduce an empty dimension (input has {} elements along it)", c.op, n);
    fill(out, 0.0);
    return;
  }
  reduce_impl(op, contiguous(x), outer, n, inner, out);
}

void Backend::softmax(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log,
                      Tensor& out) {
  const Contract c{device_, log ? "log_softmax" : "softmax"};
  c.extents(outer, n, inner);
  const int64_t numel = outer * n * inner;
  c.input(x, DType::Float32, numel, "input");
  c.output(out, DType::Float32, numel, "out");
  if (numel > 0) softmax_impl(contiguous(x), outer, n, inner, log, out);
}

void Backend::softmax_backward(const Tensor& grad, const Tensor& y, int64_t outer, int64_t n,
                               int64_t inner, bool log, Tensor& out) {
  const Contract c{device_, log ? "log_softmax_backward" : "softmax_backward"};
  c.extents(outer, n, inner);
  const int64_t numel = outer * n * inner;
  c.input(grad, DType::Float32, numel, "grad");
  c.input(y, DType::Float32, numel, "output");
  c.output(out, DType::Float32, numel, "out");
  if (numel > 0) softmax_backward_impl(contiguous(grad), contiguous(y), outer, n, inner, log, out);
}

// ---------------------------------------------------------------------------- matrix products
void Backend::gemm(const GemmArgs& g) {
  LOOM_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 0,
             "gemm: negative size m={} n={} k={} batch={}", g.m, g.n, g.k, g.batch);
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  LOOM_CHECK(g.c != nullptr, "gemm: null output pointer for a [{},{}] result", g.m, g.n);
  LOOM_CHECK(g.k == 0 || (g.a != nullptr && g.b != nullptr),
             "gemm: null input pointer (m={} n={} k={})", g.m, g.n, g.k);
  LOOM_CHECK(g.m == 1 || g.ldc >= g.n, "gemm: output row stride {} is smaller than its {} columns",
             g.ldc, g.n);
  LOOM_CHECK(g.batch == 1 || g.stride_c != 0,
             "gemm: the {} batch items would all write the same output matrix (stride_c = 0)",
             g.batch);
  const auto float_type = [](DType t) { return t == DType::Float32 || t == DType::BFloat16; };
  LOOM_CHECK(float_type(g.ab_type) && float_type(g.c_type),
             "gemm: operands of dtype {} and result of dtype {} (float32 or bfloat16 expected)",
             dtype_name(g.ab_type), dtype_name(g.c_type));
  LOOM_CHECK(g.c_type == DType::Float32 || g.ab_type == DType::BFloat16,
             "gemm: a bfloat16 result needs bfloat16 operands (got {})", dtype_name(g.ab_type));
  LOOM_CHECK(!g.activation || *g.activation == UnaryOp::Relu || *g.activation == UnaryOp::Gelu ||
                 *g.activation == UnaryOp::GeluTanh,
             "gemm: activation {} is not Relu, Gelu or GeluTanh", unary_op_name(*g.activation));
  gemm_impl(g);
}

// ---------------------------------------------------------------------------- indexing
void Backend::index_select(const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                           const Tensor& index, Tensor& out) {
  const Contract c{device_, "index_select"};
  c.extents(outer, n, inner);
  const int64_t k = c.index_length(index);
  c.on_device(x, "input");
  c.numel(x, outer * n * inner, "input");
  c.output(out, x.dtype(), outer * k * inner, "out");
  if (k > 0) index_select_impl(contiguous(x), outer, n, inner, contiguous(index), out);
}

void Backend::index_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                        const Tensor& index, Tensor& out) {
  const Contract c{device_, "index_add"};
  c.extents(outer, n, inner);
  const int64_t k = c.index_length(index);
  c.output(out, out.dtype(), outer * n * inner, "out");
  c.input(src, out.dtype(), outer * k * inner, "src");
  if (k > 0) index_add_impl(contiguous(src), outer, n, inner, contiguous(index), out);
}

void Backend::index_copy(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                         const Tensor& index, Tensor& out) {
  const Contract c{device_, "index_copy", /*takes_bfloat16=*/true};
  c.extents(outer, n, inner);
  const int64_t k = c.index_length(index);
  c.output(out, out.dtype(), outer * n * inner, "out");
  c.input(src, out.dtype(), outer * k * inner, "src");
  if (k > 0) index_copy_impl(contiguous(src), outer, n, inner, contiguous(index), out);
}

void Backend::gather(const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                     Tensor& out) {
  const Contract c{device_, "gather"};
  c.extents(outer, n, inner);
  const int64_t k = c.index_depth(index, outer, inner);
  c.on_device(x, "input");
  c.numel(x, outer * n * inner, "input");
  c.output(out, x.dtype(), outer * k * inner, "out");
  if (index.numel() > 0) gather_impl(contiguous(x), outer, n, inner, contiguous(index), out);
}

void Backend::scatter_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                          const Tensor& index, Tensor& out) {
  const Contract c{device_, "scatter_add"};
  c.extents(outer, n, inner);
  const int64_t k = c.index_depth(index, outer, inner);
  c.output(out, out.dtype(), outer * n * inner, "out");
  c.input(src, out.dtype(), outer * k * inner, "src");
  if (index.numel() > 0) scatter_add_impl(contiguous(src), outer, n, inner, contiguous(index), out);
}

// ---------------------------------------------------------------------------- random numbers
void Backend::rand_uniform(Tensor& out, uint64_t seed, uint64_t offset) {
  Contract{device_, "rand"}.output(out, DType::Float32, out.numel(), "out");
  if (out.numel() > 0) rand_uniform_impl(out, seed, offset);
}

void Backend::rand_normal(Tensor& out, uint64_t seed, uint64_t offset) {
  Contract{device_, "randn"}.output(out, DType::Float32, out.numel(), "out");
  if (out.numel() > 0) rand_normal_impl(out, seed, offset);
}

// ---------------------------------------------------------------------------- nn kernels
namespace {

// What layer_norm and add_layer_norm check alike: x float32 in mean.numel() rows, the affine
// weight and bias, and the outputs y, mean and rstd. Returns the row length.
int64_t check_layer_norm(const Contract& c, const Tensor& x, const Tensor& weight,
                         const Tensor& bias, const Tensor& y, const Tensor& mean,
                         const Tensor& rstd) {
  c.on_device(x, "input");
  const int64_t rows = mean.numel(), cols = c.row_length(x, rows, "input");
  LOOM_CHECK(cols > 0 || rows == 0, "{}: cannot normalise rows of 0 elements", c.op);
  c.dtype(x, DType::Float32, "input");
  if (weight.defined()) c.output(weight, DType::Float32, cols, "weight");
  if (bias.defined()) c.output(bias, DType::Float32, cols, "bias");
  c.output(y, DType::Float32, rows * cols, "out");
  c.output(mean, DType::Float32, rows, "mean");
  c.output(rstd, DType::Float32, rows, "rstd");
  return cols;
}

}  // namespace

void Backend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                         Tensor& y, Tensor& mean, Tensor& rstd) {
  check_layer_norm(Contract{device_, "layer_norm"}, x, weight, bias, y, mean, rstd);
  Tensor none;
  if (mean.numel() > 0)
    layer_norm_impl(contiguous(x), none, weight, bias, eps, none, y, mean, rstd);
}

void Backend::add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                             const Tensor& bias, float eps, Tensor& sum, Tensor& y, Tensor& mean,
                             Tensor& rstd) {
  const Contract c{device_, "add_layer_norm", /*takes_bfloat16=*/true};
  const int64_t count = mean.numel() * check_layer_norm(c, x, weight, bias, y, mean, rstd);
  c.floating(residual, "residual");  // a bfloat16 branch is added in float32
  c.numel(residual, count, "residual");
  c.output(sum, DType::Float32, count, "sum");
  if (mean.numel() > 0)
    layer_norm_impl(contiguous(x), contiguous(residual), weight, bias, eps, sum, y, mean, rstd);
}

void Backend::layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                  const Tensor& mean, const Tensor& rstd, Tensor& dx,
                                  Tensor& dweight, Tensor& dbias) {
  const Contract c{device_, "layer_norm_backward"};
  c.on_device(x, "input");
  const int64_t rows = mean.numel(), cols = c.row_length(x, rows, "input");
  c.dtype(x, DType::Float32, "input");
  c.input(dy, DType::Float32, rows * cols, "grad");
  if (weight.defined()) c.output(weight, DType::Float32, cols, "weight");
  c.output(mean, DType::Float32, rows, "mean");
  c.output(rstd, DType::Float32, rows, "rstd");
  c.output(dx, DType::Float32, rows * cols, "dx");
  if (dweight.defined()) c.output(dweight, DType::Float32, cols, "dweight");
  if (dbias.defined()) c.output(dbias, DType::Float32, cols, "dbias");
  if (rows * cols == 0) {  // no rows: the parameter gradients are empty sums
    for (Tensor* t : {&dweight, &dbias})
      if (t->defined()) fill(*t, 0.0);
    return;
  }
  layer_norm_backward_impl(contiguous(dy), contiguous(x), weight, mean, rstd, dx, dweight, dbias);
}

void Backend::cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                            float label_smoothing, Tensor& losses, Tensor& lse) {
  const Contract c{device_, "cross_entropy", /*takes_bfloat16=*/true};
  c.logits_per_target(logits, target);
  const int64_t rows = target.numel();
  c.output(losses, DType::Float32, rows, "losses");
  c.output(lse, DType::Float32, rows, "lse");
  if (rows > 0)
    cross_entropy_impl(unit_stride_rows(logits), contiguous(target), ignore_index,
                       label_smoothing, losses, lse);
}

void Backend::cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& lse,
                                     int64_t ignore_index, float label_smoothing, float scale,
                                     Tensor& dlogits, const Tensor& scale_by) {
  const Contract c{device_, "cross_entropy_backward", /*takes_bfloat16=*/true};
  const int64_t rows = target.numel(), classes = c.logits_per_target(logits, target);
  c.input(lse, DType::Float32, rows, "lse");
  c.output(dlogits, logits.dtype(), rows * classes, "dlogits");
  if (scale_by.defined()) c.input(scale_by, DType::Float32, 1, "scale_by");
  if (rows > 0)
    cross_entropy_backward_impl(unit_stride_rows(logits), contiguous(target), contiguous(lse),
                                ignore_index, label_smoothing, scale, scale_by, dlogits);
}

void Backend::adam_step(const AdamArgs& args, Tensor& param, const Tensor& grad, Tensor& m,
                        Tensor& v) {
  const Contract c{device_, "adam_step"};
  const int64_t n = param.numel();
  c.output(param, DType::Float32, n, "param");
  c.input(grad, DType::Float32, n, "grad");
  c.output(m, DType::Float32, n, "exp_avg");
  c.output(v, DType::Float32, n, "exp_avg_sq");
  LOOM_CHECK(args.bias1 > 0.0f && args.bias2 > 0.0f,
             "adam_step: bias corrections must be positive (1 - beta^step), got {} and {}",
             args.bias1, args.bias2);
  if (n > 0) adam_step_impl(args, param, contiguous(grad), m, v);
}

void Backend::adam_step_multi(const AdamArgs& args, std::span<Tensor> params,
                              std::span<const Tensor> grads, std::span<Tensor> ms,
                              std::span<Tensor> vs) {
  const Contract c{device_, "adam_step_multi"};
  const size_t count = params.size();
  LOOM_CHECK(grads.size() == count && ms.size() == count && vs.size() == count,
             "adam_step_multi: the lists differ in length: {} params, {} grads, {} exp_avg, {} "
             "exp_avg_sq",
             count, grads.size(), ms.size(), vs.size());
  LOOM_CHECK(args.bias1 > 0.0f && args.bias2 > 0.0f,
             "adam_step_multi: bias corrections must be positive (1 - beta^step), got {} and {}",
             args.bias1, args.bias2);
  // adam_step's checks on each tensor, every one before any update; the kernel sees the
  // non-empty tensors only, with contiguous gradients.
  std::vector<Tensor> p, g, m, v;
  p.reserve(count), g.reserve(count), m.reserve(count), v.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    try {
      c.on_device(params[i], "param");
      const int64_t n = params[i].numel();
      c.output(params[i], DType::Float32, n, "param");
      c.dtype(grads[i], DType::Float32, "grad");
      c.same_shape(grads[i], params[i], "grad");
      c.output(ms[i], DType::Float32, n, "exp_avg");
      c.output(vs[i], DType::Float32, n, "exp_avg_sq");
    } catch (const Error& e) {
      LOOM_FAIL("{} (tensor {} of {})", e.what(), i, count);
    }
    if (params[i].numel() == 0) continue;
    p.push_back(params[i]);
    g.push_back(contiguous(grads[i]));
    m.push_back(ms[i]);
    v.push_back(vs[i]);
  }
  if (!p.empty()) adam_step_multi_impl(args, p, g, m, v);
}

void Backend::sum_of_squares_multi(std::span<const Tensor> xs, Tensor& out) {
  const Contract c{device_, "sum_of_squares_multi"};
  c.output(out, DType::Float32, 1, "out");
  std::vector<Tensor> inputs;
  inputs.reserve(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    try {
      c.dtype(xs[i], DType::Float32, "x");
    } catch (const Error& e) {
      LOOM_FAIL("{} (tensor {} of {})", e.what(), i, xs.size());
    }
    if (xs[i].numel() > 0) inputs.push_back(contiguous(xs[i]));
  }
  if (inputs.empty()) {
    fill_impl(out, 0.0);
  } else {
    sum_of_squares_multi_impl(inputs, out);
  }
}

void Backend::scale_multi(std::span<Tensor> xs, float alpha) {
  const Contract c{device_, "scale_multi"};
  std::vector<Tensor> outputs;
  outputs.reserve(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    try {
      c.on_device(xs[i], "x");
      c.output(xs[i], DType::Float32, xs[i].numel(), "x");
    } catch (const Error& e) {
      LOOM_FAIL("{} (tensor {} of {})", e.what(), i, xs.size());
    }
    if (xs[i].numel() > 0) outputs.push_back(xs[i]);
  }
  if (!outputs.empty()) scale_multi_impl(outputs, alpha);
}

// ---------------------------------------------------------------------------- attention
namespace {

// An attention operand: defined, on `device`, of `type` (float32 or bfloat16, on either device),
// contiguous, of exactly `shape`.
void attention_operand(const char* op, Device device, const Tensor& t, DType type,
                       const Shape& shape, const char* name) {
  LOOM_CHECK(t.defined(), "{}: {} is an undefined tensor", op, name);
  LOOM_CHECK(t.device() == device, "{}: {} is on {}, expected {}", op, name,
             device_name(t.device()), device_name(device));
  LOOM_CHECK(t.dtype() == type, "{}: {} (shape {}) has dtype {}, expected {}", op, name,
             shape_str(t.shape()), dtype_name(t.dtype()), dtype_name(type));
  LOOM_CHECK(t.shape() == shape, "{}: {} has shape {}, expected {}", op, name,
             shape_str(t.shape()), shape_str(shape));
  LOOM_CHECK(t.is_contiguous(), "{}: {} (shape {}) must be contiguous", op, name,
             shape_str(t.shape()));
}

// K or V of the forward: [n, kv_len, head_dim] of `type` with contiguous rows and matrices
// a.kv_stride apart (a.kv_stride filled in: at least kv_len * head_dim).
void attention_kv_operand(const char* op, Device device, const Tensor& t, DType type,
                          const AttentionArgs& a, const char* name) {
  const Shape shape{a.n, a.kv_len, a.head_dim};
  LOOM_CHECK(t.defined(), "{}: {} is an undefined tensor", op, name);
  LOOM_CHECK(t.device() == device && t.dtype() == type && t.shape() == shape,
             "{}: {} is {} {} on {}, expected {} {} on {}", op, name, dtype_name(t.dtype()),
             shape_str(t.shape()), device_name(t.device()), dtype_name(type), shape_str(shape),
             device_name(device));
  LOOM_CHECK(a.kv_stride >= a.kv_len * a.head_dim,
             "{}: kv_stride {} is below kv_len * head_dim = {}", op, a.kv_stride,
             a.kv_len * a.head_dim);
  const bool rows =
      (a.head_dim == 1 || t.stride(2) == 1) && (a.kv_len == 1 || t.stride(1) == a.head_dim);
  LOOM_CHECK(rows && (a.n == 1 || t.stride(0) == a.kv_stride),
             "{}: {} has strides {}, expected {} (kv_stride, head_dim, 1)", op, name,
             shape_str(t.strides()), shape_str({a.kv_stride, a.head_dim, 1}));
}

void check_attention(const char* op, Device device, const Tensor& q, const Tensor& k,
                     const Tensor& v, const Tensor& mask, const AttentionArgs& a) {
  LOOM_CHECK(a.n > 0 && a.q_len > 0 && a.kv_len > 0 && a.head_dim > 0,
             "{}: n {}, q_len {}, kv_len {} and head_dim {} must be positive", op, a.n, a.q_len,
             a.kv_len, a.head_dim);
  LOOM_CHECK(a.query_offset >= 0 && (a.causal || a.query_offset == 0),
             "{}: query_offset {} needs causal and must not be negative", op, a.query_offset);
  LOOM_CHECK(a.dropout_p >= 0.0f && a.dropout_p < 1.0f, "{}: dropout_p {} outside [0, 1)", op,
             a.dropout_p);
  LOOM_CHECK(std::isfinite(a.scale), "{}: scale {} is not finite", op, a.scale);
  LOOM_CHECK(q.defined(), "{}: query is an undefined tensor", op);
  const DType type = q.dtype();
  LOOM_CHECK(type == DType::Float32 || type == DType::BFloat16,
             "{}: query (shape {}) has dtype {}, expected float32 or bfloat16", op,
             shape_str(q.shape()), dtype_name(type));
  attention_operand(op, device, q, type, {a.n, a.q_len, a.head_dim}, "query");
  attention_kv_operand(op, device, k, type, a, "key");
  attention_kv_operand(op, device, v, type, a, "value");
  if (!mask.defined()) return;
  LOOM_CHECK(mask.device() == device, "{}: mask is on {}, expected {}", op,
             device_name(mask.device()), device_name(device));
  LOOM_CHECK(mask.dtype() == DType::Float32, "{}: mask has dtype {}, expected float32 (additive)",
             op, dtype_name(mask.dtype()));
  int64_t lead = 1;
  for (int64_t d = 0; d + 2 < mask.dim(); ++d) lead *= mask.size(d);
  LOOM_CHECK(mask.dim() >= 2 && mask.size(-2) == a.q_len && mask.size(-1) == a.kv_len &&
                 lead == a.n,
             "{}: mask of shape {} is not [..., {}, {}] with leading dims of {} elements", op,
             shape_str(mask.shape()), a.q_len, a.kv_len, a.n);
  int64_t lead_dims = 0;
  for (int64_t d = 0; d + 2 < mask.dim(); ++d) lead_dims += mask.size(d) != 1;
  LOOM_CHECK(lead_dims <= AttentionMaskLayout::kMaxLead,
             "{}: mask of shape {} has more than {} leading dims", op, shape_str(mask.shape()),
             AttentionMaskLayout::kMaxLead);
}

}  // namespace

AttentionMaskLayout attention_mask_layout(const Tensor& mask) {
  AttentionMaskLayout layout;
  if (!mask.defined()) return layout;
  for (int64_t d = 0; d + 2 < mask.dim(); ++d) {
    if (mask.size(d) == 1) continue;
    layout.lead_size[layout.nlead] = mask.size(d);
    layout.lead_stride[layout.nlead] = mask.stride(d);
    ++layout.nlead;
  }
  layout.row_stride = mask.size(-2) == 1 ? 0 : mask.stride(-2);
  layout.col_stride = mask.size(-1) == 1 ? 0 : mask.stride(-1);
  return layout;
}

void Backend::attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& mask, const AttentionArgs& args, Tensor& out,
                                Tensor& lse) {
  const char* op = "attention_forward";
  AttentionArgs a = args;
  if (a.kv_stride == 0) a.kv_stride = a.kv_len * a.head_dim;
  check_attention(op, device_, q, k, v, mask, a);
  attention_operand(op, device_, out, q.dtype(), {a.n, a.q_len, a.head_dim}, "out");
  attention_operand(op, device_, lse, DType::Float32, {a.n, a.q_len}, "lse");
  attention_forward_impl(q, k, v, mask, a, out, lse);
}

void Backend::attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                 const Tensor& v, const Tensor& mask, const Tensor& out,
                                 const Tensor& lse, const AttentionArgs& args, Tensor& dq,
                                 Tensor& dk, Tensor& dv) {
  const char* op = "attention_backward";
  LOOM_CHECK(args.kv_stride == 0 || args.kv_stride == args.kv_len * args.head_dim,
             "{}: kv_stride {} is not kv_len * head_dim = {} (the backward takes contiguous K "
             "and V)",
             op, args.kv_stride, args.kv_len * args.head_dim);
  AttentionArgs a = args;
  a.kv_stride = a.kv_len * a.head_dim;  // so K and V are checked to be contiguous
  check_attention(op, device_, q, k, v, mask, a);
  const Shape q_shape{args.n, args.q_len, args.head_dim}, kv_shape{args.n, args.kv_len, args.head_dim};
  attention_operand(op, device_, dout, q.dtype(), q_shape, "grad");
  attention_operand(op, device_, out, q.dtype(), q_shape, "out");
  attention_operand(op, device_, lse, DType::Float32, {args.n, args.q_len}, "lse");
  attention_operand(op, device_, dq, q.dtype(), q_shape, "dq");
  attention_operand(op, device_, dk, q.dtype(), kv_shape, "dk");
  attention_operand(op, device_, dv, q.dtype(), kv_shape, "dv");
  attention_backward_impl(dout, q, k, v, mask, out, lse, a, dq, dk, dv);
}

// ---------------------------------------------------------------------------- sampling
void Backend::sample(const Tensor& logits, float temperature, int64_t top_k, float top_p,
                     uint64_t seed, uint64_t offset, Tensor& out, const Tensor& offset_by) {
  const Contract c{device_, "sample"};
  c.dtype(logits, DType::Float32, "logits");
  LOOM_CHECK(logits.dim() == 2 && logits.size(1) > 0 && logits.size(1) < (int64_t{1} << 31),
             "sample: logits must be [rows, n] with 0 < n < 2^31, got shape {}",
             shape_str(logits.shape()));
  LOOM_CHECK(temperature >= 0.0f && std::isfinite(temperature),
             "sample: temperature {} is negative or not finite", temperature);
  LOOM_CHECK(top_k >= 0, "sample: top_k {} is negative", top_k);
  LOOM_CHECK(top_p > 0.0f && top_p <= 1.0f, "sample: top_p {} outside (0, 1]", top_p);
  c.output(out, DType::Int64, logits.size(0), "out");
  if (offset_by.defined()) {
    c.dtype(offset_by, DType::Int64, "offset_by");
    c.numel(offset_by, 1, "offset_by");
  }
  if (out.numel() > 0)
    sample_impl(contiguous(logits), temperature, top_k, top_p, seed, offset,
                offset_by.defined() ? contiguous(offset_by) : offset_by, out);
}

void Backend::begin_capture() {
  LOOM_FAIL("graph capture: {} cannot record work for replay (CUDA graphs need a CUDA device)",
            device_name(device_));
}

std::unique_ptr<DeviceGraph> Backend::end_capture() {
  LOOM_FAIL("graph capture: {} has no capture in progress", device_name(device_));
}

}  // namespace loom
