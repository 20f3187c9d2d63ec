// Elementwise ops: each forward calls one backend kernel; each backward sits right beside it.
#include "autograd/internal.h"

namespace loom {

using detail::bf16_binary;
using detail::bf16_unary;
using detail::broadcast_view;
using detail::is_bf16;
using detail::saved;

// ---------------------------------------------------------------------------- unary
namespace {

Tensor unary_op(UnaryOp op, const char* name, const Tensor& x, float a = 0.0f, float b = 0.0f) {
  // exp, log, rsqrt and pow are on autocast's float32 list (autograd/autocast.h).
  const bool float32_op =
      op == UnaryOp::Exp || op == UnaryOp::Log || op == UnaryOp::Rsqrt || op == UnaryOp::Pow;
  if (is_bf16(x) && float32_op) {
    auto f = [&](const Tensor& xf) { return unary_op(op, name, xf, a, b); };
    return detail::bf16_float32_op(x, f);
  }
  if (!is_bf16(x)) detail::check_float(x, name);
  // bfloat16 x: the kernel computes in float32 and rounds the result once, the values of
  // bf16_unary without its two casts; the backward likewise (a bfloat16 dx from float32 math).
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).unary(op, x, out, a, b);
  if (!autograd::any_requires_grad({x})) return out;
  // A derivative that reads the output gets it unrounded: for a bfloat16 output the kernel
  // recomputes it in float32 from x (an undefined y), as the float32 op would give it.
  const bool rounded = is_bf16(out) && unary::backward_reads(op) == unary::Reads::Output;
  Tensor xs = saved(x), ys = rounded ? Tensor() : saved(out);
  return autograd::record(
      name, {x}, out,
      [op, xs, ys, a, b](const Tensor& g) {
        Tensor dx = Tensor::empty(xs.shape(), xs.dtype(), xs.device());
        backend(xs.device()).unary_backward(op, g, xs, ys, dx, a, b);
        return std::vector<Tensor>{dx};
      },
      {xs, ys});
}

// op(x + bias) for a bias [C] along x's last dim, one kernel each way (Backend::bias_unary).
// The result has x's dtype (bias is the bias of the product x came from); the gradients are
// those of op(x + bias): dx = g * op'(x + bias) in x's dtype and db its column sums, summed in
// float32 and returned in bias's dtype.
Tensor bias_unary_op(UnaryOp op, const char* name, const Tensor& x, const Tensor& bias) {
  detail::check_defined(x, name);
  detail::check_defined(bias, name);
  LOOM_CHECK(is_floating_point(x.dtype()) && is_floating_point(bias.dtype()),
             "{}: expected float32 or bfloat16 tensors, got {} of shape {} and a {} bias", name,
             dtype_name(x.dtype()), shape_str(x.shape()), dtype_name(bias.dtype()));
  detail::check_same_device(x, bias, name);
  LOOM_CHECK(x.dim() >= 1 && bias.dim() == 1 && bias.size(0) == x.size(-1),
             "{}: bias of shape {} does not match input of shape {} (expected bias [{}])", name,
             shape_str(bias.shape()), shape_str(x.shape()), x.dim() >= 1 ? x.size(-1) : 0);
  const Shape shape = x.shape();
  Tensor out = Tensor::empty(shape, x.dtype(), x.device());
  backend(x.device()).bias_unary(op, x.detach(), broadcast_view(bias.detach(), shape), out);
  if (!autograd::any_requires_grad({x, bias})) return out;
  const Tensor xs = saved(x), bs = saved(bias);
  const bool need_b = bias.requires_grad();
  return autograd::record(
      name, {x, bias}, out,
      [op, xs, bs, need_b](const Tensor& g) {
        Tensor dx = Tensor::empty(xs.shape(), xs.dtype(), xs.device());
        backend(xs.device()).bias_unary_backward(op, g, xs, broadcast_view(bs, xs.shape()), dx);
        const Tensor db = need_b ? detail::column_sums(dx, bs.size(0)).to(bs.dtype()) : Tensor();
        return std::vector<Tensor>{dx, db};
      },
      {xs, bs});
}

}  // namespace

Tensor bias_relu(const Tensor& x, const Tensor& bias) {
  return bias_unary_op(UnaryOp::Relu, "bias_relu", x, bias);
}
Tensor bias_gelu(const Tensor& x, const Tensor& bias) {
  return bias_unary_op(UnaryOp::Gelu, "bias_gelu", x, bias);
}
Tensor bias_gelu_tanh(const Tensor& x, const Tensor& bias) {
  return bias_unary_op(UnaryOp::GeluTanh, "bias_gelu_tanh", x, bias);
}

Tensor detail::activation(UnaryOp op, const Tensor& x, const Tensor& bias) {
  switch (op) {
    case UnaryOp::Relu:
      return bias.defined() ? bias_relu(x, bias) : relu(x);
    case UnaryOp::Gelu:
      return bias.defined() ? bias_gelu(x, bias) : gelu(x);
    case UnaryOp::GeluTanh:
      return bias.defined() ? bias_gelu_tanh(x, bias) : gelu_tanh(x);
    default:
      LOOM_FAIL("activation: {} is not Relu, Gelu or GeluTanh", unary_op_name(op));
  }
}

// exp, log, sqrt, ..., cos: one line each, generated from the table's list (LOOM_UNARY_FUNCTIONS
// in backends/unary_math.h). `Tensor exp(const Tensor& x)` is unary_op(UnaryOp::Exp, "exp", x).
#define LOOM_UNARY_FUNCTION(Op, name) \
  Tensor name(const Tensor& x) { return unary_op(UnaryOp::Op, #name, x); }
LOOM_UNARY_FUNCTIONS(LOOM_UNARY_FUNCTION)
#undef LOOM_UNARY_FUNCTION
Tensor sign(const Tensor& x) {
  NoGradGuard guard;  // piecewise constant: zero gradient everywhere, like PyTorch
  return unary_op(UnaryOp::Sign, "sign", x);
}
Tensor pow(const Tensor& x, float exponent) { return unary_op(UnaryOp::Pow, "pow", x, exponent); }
Tensor clamp(const Tensor& x, float min, float max) {
  LOOM_CHECK(min <= max, "clamp: min {} is greater than max {}", min, max);
  return unary_op(UnaryOp::Clamp, "clamp", x, min, max);
}
Tensor operator-(const Tensor& x) { return unary_op(UnaryOp::Neg, "neg", x); }
Tensor operator+(const Tensor& x, float s) { return unary_op(UnaryOp::Affine, "add", x, 1.0f, s); }
Tensor operator-(const Tensor& x, float s) { return unary_op(UnaryOp::Affine, "sub", x, 1.0f, -s); }
Tensor operator*(const Tensor& x, float s) { return unary_op(UnaryOp::Affine, "mul", x, s, 0.0f); }
Tensor operator/(const Tensor& x, float s) {
  return unary_op(UnaryOp::Affine, "div", x, 1.0f / s, 0.0f);
}
Tensor operator+(float s, const Tensor& x) { return x + s; }
Tensor operator-(float s, const Tensor& x) {
  return unary_op(UnaryOp::Affine, "rsub", x, -1.0f, s);
}
Tensor operator*(float s, const Tensor& x) { return x * s; }
Tensor operator/(float s, const Tensor& x) { return unary_op(UnaryOp::RDiv, "rdiv", x, s); }

// ---------------------------------------------------------------------------- binary
namespace {

// Runs a broadcasting binary kernel; inputs are expanded to the output shape as stride-0 views.
Tensor binary_forward(BinaryOp op, const char* name, const Tensor& a, const Tensor& b,
                      bool comparison) {
  detail::check_defined(a, name);
  detail::check_defined(b, name);
  detail::check_same_device(a, b, name);
  // bfloat16 (see ops.h): an arithmetic kernel reads each operand as it is (float32 or
  // bfloat16), computes in float32 and rounds the result to bfloat16 once when both operands
  // are bfloat16 (PyTorch's promotion); comparisons compare the exact upcast values. The caller
  // records the op on the bfloat16 operands, so its backward computes in bfloat16 too.
  if (comparison && (is_bf16(a) || is_bf16(b)))
    return binary_forward(op, name, detail::upcast(a.detach()), detail::upcast(b.detach()), true);
  if (comparison) {
    LOOM_CHECK(a.dtype() == b.dtype(), "{}: dtypes {} and {} differ", name, dtype_name(a.dtype()),
               dtype_name(b.dtype()));
  } else {
    if (!is_bf16(a)) detail::check_float(a, name);
    if (!is_bf16(b)) detail::check_float(b, name);
  }
  const bool low = !comparison && is_bf16(a) && is_bf16(b);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = Tensor::empty(shape, low ? DType::BFloat16 : DType::Float32, a.device());
  backend(a.device()).binary(op, broadcast_view(a, shape), broadcast_view(b, shape), out);
  return out;
}

// Records a binary op whose backward gives the gradients at the broadcast shape; they are
// summed back to each input's own shape (the reverse of broadcasting). `saved`: the tensors the
// rule reads (see autograd::record).
template <typename Rule>
Tensor record_binary(const char* name, const Tensor& a, const Tensor& b, Tensor out, Rule rule,
                     const std::vector<Tensor>& saved = {}) {
  if (!autograd::any_requires_grad({a, b})) return out;
  const Shape sa = a.shape(), sb = b.shape();
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  return autograd::record(name, {a, b}, out, [rule, sa, sb, need_a, need_b](const Tensor& g) {
    auto [ga, gb] = rule(g);
    // An input that needs no gradient (a constant, a mask, a fill value) gets none, and its
    // broadcast dims are not summed for nothing.
    return std::vector<Tensor>{need_a && ga.defined() ? sum_to(ga, sa) : Tensor(),
                               need_b && gb.defined() ? sum_to(gb, sb) : Tensor()};
  }, saved);
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::Add, "add", a, b, false);
  return record_binary("add", a, b, out, [](const Tensor& g) { return std::pair{g, g}; });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::Sub, "sub", a, b, false);
  return record_binary("sub", a, b, out, [](const Tensor& g) { return std::pair{g, -g}; });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::Mul, "mul", a, b, false);
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  Tensor as = saved(a), bs = saved(b);
  return record_binary("mul", a, b, out, [as, bs, need_a, need_b](const Tensor& g) {
    return std::pair{need_a ? g * bs : Tensor(), need_b ? g * as : Tensor()};
  }, {as, bs});
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::Div, "div", a, b, false);
  const bool need_b = b.requires_grad();
  Tensor bs = saved(b), ys = saved(out);
  // d(a/b)/da = 1/b;  d(a/b)/db = -a/b^2 = -y/b
  return record_binary("div", a, b, out, [bs, ys, need_b](const Tensor& g) {
    Tensor ga = g / bs;
    return std::pair{ga, need_b ? -(ga * ys) : Tensor()};
  }, {bs, ys});
}

Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::Pow, "pow", a, b, false);
  const bool need_b = b.requires_grad();
  Tensor as = saved(a), bs = saved(b), ys = saved(out);
  // d(a^b)/da = b a^(b-1);  d(a^b)/db = a^b log(a)
  return record_binary("pow", a, b, out, [as, bs, ys, need_b](const Tensor& g) {
    Tensor ga = g * bs * pow(as, bs - 1.0f);
    return std::pair{ga, need_b ? g * ys * log(as) : Tensor()};
  }, {as, bs, ys});
}

// Where a == b the gradient is split evenly between the two inputs, as in PyTorch.
static Tensor extremum(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(op, name, a, b, false);
  Tensor as = saved(a), bs = saved(b);
  const bool is_max = op == BinaryOp::Maximum;
  return record_binary(name, a, b, out, [as, bs, is_max](const Tensor& g) {
    Tensor wins_a = (is_max ? gt(as, bs) : lt(as, bs)) + eq(as, bs) * 0.5f;
    Tensor ga = g * wins_a;
    return std::pair{ga, g - ga};
  }, {as, bs});
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  return extremum(BinaryOp::Maximum, "maximum", a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return extremum(BinaryOp::Minimum, "minimum", a, b);
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }

// ---------------------------------------------------------------------------- comparisons
// A comparison: a mask of 0s and 1s, not differentiable (binary_forward's last argument).
static Tensor compare(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  return binary_forward(op, name, a, b, true);
}
Tensor eq(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Eq, "eq", a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Ne, "ne", a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Lt, "lt", a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Le, "le", a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Gt, "gt", a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Ge, "ge", a, b); }

static Tensor scalar_like(const Tensor& a, float value, const char* op) {
  detail::check_defined(a, op);
  if (a.dtype() == DType::Int64) {
    LOOM_CHECK(value == std::floor(value), "{}: int64 tensor compared with non-integer {}", op,
               value);
    return tensor_i64({static_cast<int64_t>(value)}, {}).to(a.device());
  }
  return scalar_tensor(value, a.device());
}
Tensor eq(const Tensor& a, float b) { return eq(a, scalar_like(a, b, "eq")); }
Tensor lt(const Tensor& a, float b) { return lt(a, scalar_like(a, b, "lt")); }
Tensor gt(const Tensor& a, float b) { return gt(a, scalar_like(a, b, "gt")); }

// ---------------------------------------------------------------------------- selection
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  detail::check_defined(cond, "where");
  if (is_bf16(a) || is_bf16(b))
    return bf16_binary(a, b, [&](const Tensor& x, const Tensor& y) { return where(cond, x, y); });
  detail::check_float(a, "where");
  detail::check_float(b, "where");
  detail::check_same_device(a, b, "where");
  detail::check_same_device(cond, a, "where");
  Tensor c = cond.dtype() == DType::Float32 ? cond : ne(cond, scalar_like(cond, 0.0f, "where"));
  const Shape shape = broadcast_shapes(broadcast_shapes(c.shape(), a.shape(), "where"),
                                       b.shape(), "where");
  Tensor out = Tensor::empty(shape, DType::Float32, a.device());
  backend(a.device()).where(broadcast_view(c, shape), broadcast_view(a, shape),
                            broadcast_view(b, shape), out);
  Tensor cs = saved(c);
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  // Each input's gradient is g where it was chosen, 0 elsewhere. masked_fill's fill value needs
  // none, so its backward is a single pass over g.
  return record_binary("where", a, b, out, [cs, need_a, need_b](const Tensor& g) {
    Tensor zero = zeros({}, g.device());
    return std::pair{need_a ? where(cs, g, zero) : Tensor(),
                     need_b ? where(cs, zero, g) : Tensor()};
  }, {cs});
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, float value) {
  if (is_bf16(x))
    return bf16_unary(x, [&](const Tensor& xf) { return masked_fill(xf, mask, value); });
  detail::check_float(x, "masked_fill");
  detail::check_defined(mask, "masked_fill");
  LOOM_CHECK(broadcast_shapes(mask.shape(), x.shape(), "masked_fill") == x.shape(),
             "masked_fill: mask of shape {} cannot be broadcast to the input shape {}",
             shape_str(mask.shape()), shape_str(x.shape()));
  return where(mask, scalar_tensor(value, x.device()), x);
}

}  // namespace loom
