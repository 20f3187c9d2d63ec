// Elementwise ops: each forward calls one backend kernel; each backward sits right beside it.
#include <cmath>

#include "autograd/internal.h"

namespace loom {

using detail::bf16_binary;
using detail::bf16_unary;
using detail::broadcast_view;
using detail::is_bf16;
using detail::saved;

// ---------------------------------------------------------------------------- unary
namespace {

Tensor unary_grad_graph(UnaryOp op, const char* name, const Tensor& g, const Tensor& x,
                        const Tensor& ys, float a, float b);

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
      [op, name, xs, ys, a, b](const Tensor& g) {
        if (autograd::building_graph({g, xs}))  // create_graph: the derivative in ops
          return std::vector<Tensor>{unary_grad_graph(op, name, g, xs, ys, a, b)};
        Tensor dx = Tensor::empty(xs.shape(), xs.dtype(), xs.device());
        backend(xs.device()).unary_backward(op, g, xs, ys, dx, a, b);
        return std::vector<Tensor>{dx};
      },
      {xs, ys});
}

// g * f'(x) for the unary op `op`, written with recorded ops: the backward of a graph-building
// backward (create_graph), differentiable again, where the kernel's unary_backward is not. The
// same derivatives as the table in backends/unary_math.h. x is the saved input; ys the saved
// output (undefined when the forward did not keep it), used attached to its node.
Tensor unary_grad_graph(UnaryOp op, const char* name, const Tensor& g, const Tensor& x,
                        const Tensor& ys, float a, float b) {
  auto y = [&] { return ys.defined() ? autograd::unpack_output(ys) : unary_op(op, name, x, a, b); };
  const Tensor zero = zeros({}, g.device());
  constexpr float kInvSqrt2 = 0.7071067811865476f;
  switch (op) {
    case UnaryOp::Neg: return -g;
    case UnaryOp::Exp: return g * y();
    case UnaryOp::Log: return g / x;
    case UnaryOp::Sqrt: return g / y() * 0.5f;
    case UnaryOp::Rsqrt: return g * pow(y(), 3.0f) * -0.5f;
    case UnaryOp::Tanh: return g * (1.0f - y() * y());
    case UnaryOp::Sigmoid: return g * y() * (1.0f - y());
    case UnaryOp::Relu: return where(gt(x, 0.0f), g, zero);
    case UnaryOp::Gelu: {  // Phi(x) + x phi(x), Phi the normal CDF, phi its density
      const Tensor cdf = (1.0f + erf(x * kInvSqrt2)) * 0.5f;
      return g * (cdf + x * exp(x * x * -0.5f) * unary::kInvSqrt2Pi);
    }
    case UnaryOp::GeluTanh: {  // (1 + t)/2 + x/2 (1 - t^2) du/dx, t = tanh(u) (the table's)
      const Tensor t = tanh(x * (1.0f + x * x * unary::kGeluCubic) * unary::kSqrt2OverPi);
      const Tensor du = (x * x * (3.0f * unary::kGeluCubic) + 1.0f) * unary::kSqrt2OverPi;
      return g * ((1.0f + t) * 0.5f + x * 0.5f * (1.0f - t * t) * du);
    }
    case UnaryOp::Abs: return g * sign(x);
    case UnaryOp::Sin: return g * cos(x);
    case UnaryOp::Cos: return -(g * sin(x));
    case UnaryOp::Sign: return g * 0.0f;
    case UnaryOp::Pow: return a == 0.0f ? g * 0.0f : g * pow(x, a - 1.0f) * a;
    case UnaryOp::Affine: return g * a;
    case UnaryOp::RDiv: return g * (-a / (x * x));
    case UnaryOp::Clamp: return where(lt(x, a), zero, where(gt(x, b), zero, g));
    case UnaryOp::Reciprocal: return -(g * y() * y());
    case UnaryOp::Square: return g * x * 2.0f;
    case UnaryOp::Log1p: return g / (x + 1.0f);
    case UnaryOp::Expm1: return g * (y() + 1.0f);
    case UnaryOp::Log2: return g / (x * unary::kLn2);
    case UnaryOp::Exp2: return g * y() * unary::kLn2;
    case UnaryOp::Erf: return g * exp(-(x * x)) * unary::kTwoOverSqrtPi;
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
    case UnaryOp::Round:
    case UnaryOp::Trunc: return g * 0.0f;
    case UnaryOp::Silu: {  // s (1 + x (1 - s)), s = sigmoid(x)
      const Tensor s = sigmoid(x);
      return g * s * (1.0f + x * (1.0f - s));
    }
    case UnaryOp::Softplus:  // sigmoid(beta x) = z / (1 + z), 1 above the threshold
      return where(gt(x * a, b), g, g * sigmoid(x * a));
    case UnaryOp::LeakyRelu: return where(gt(x, 0.0f), g, g * a);
    case UnaryOp::Elu: return where(gt(x, 0.0f), g, g * exp(x) * a);
    case UnaryOp::Mish: {  // t + x sigmoid(x) (1 - t^2), t = tanh(softplus(x))
      const Tensor t = tanh(softplus(x));
      return g * (t + x * sigmoid(x) * (1.0f - t * t));
    }
    case UnaryOp::Hardswish:  // 0 below -3, x / 3 + 1/2 on [-3, 3], 1 above
      return where(lt(x, -3.0f), zero, where(gt(x, 3.0f), g, g * (x / 3.0f + 0.5f)));
    case UnaryOp::Logit: {  // 1 / (x (1 - x)) inside; outside 0 with eps, NaN without
      const float lo = a < 0.0f ? 0.0f : a, hi = a < 0.0f ? 1.0f : 1.0f - a;
      const Tensor outside = full({}, a < 0.0f ? NAN : 0.0f, g.device());
      return where(lt(x, lo), outside, where(gt(x, hi), outside, g / (x * (1.0f - x))));
    }
    case UnaryOp::Relu6: return where(gt(x, 0.0f), where(lt(x, 6.0f), g, zero), zero);
  }
  LOOM_FAIL("{}: no derivative in ops for unary op {}", name, unary_op_name(op));
}

// op(x + bias) for a bias [C] along x's last dim, one kernel each way (Backend::bias_unary).
// The result has x's dtype (bias is the bias of the product x came from); the gradients are
// those of op(x + bias): dx = g * op'(x + bias) in x's dtype and db its column sums, summed in
// float32 and returned in bias's dtype.
// The node of op(x + bias) whose value `out` is already computed (by bias_unary_op's kernel, or
// by the product x came from: detail::activation_of_product).
Tensor record_bias_unary(UnaryOp op, const char* name, const Tensor& x, const Tensor& bias,
                         const Tensor& out) {
  if (!autograd::any_requires_grad({x, bias})) return out;
  const Tensor xs = saved(x), bs = saved(bias);
  const bool need_b = bias.requires_grad();
  return autograd::record(
      name, {x, bias}, out,
      [op, name, xs, bs, need_b](const Tensor& g) {
        if (autograd::building_graph({g, xs, bs})) {  // create_graph: the derivative in ops
          const Tensor dx = unary_grad_graph(op, name, g, xs + bs, Tensor(), 0.0f, 0.0f);
          return std::vector<Tensor>{dx, need_b ? sum_to(dx, bs.shape()) : Tensor()};
        }
        // dx, and db summed in float32 in the same pass (Backend::bias_unary_backward).
        Tensor dx = Tensor::empty(xs.shape(), xs.dtype(), xs.device());
        Tensor db = need_b ? Tensor::empty({bs.size(0)}, DType::Float32, xs.device()) : Tensor();
        backend(xs.device()).bias_unary_backward(op, g, xs, broadcast_view(bs, xs.shape()), dx,
                                                 db);
        return std::vector<Tensor>{dx, need_b ? db.to(bs.dtype()) : Tensor()};
      },
      {xs, bs});
}

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
  return record_bias_unary(op, name, x, bias, out);
}

// bias_relu's, bias_gelu's and bias_gelu_tanh's names.
const char* bias_unary_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Relu: return "bias_relu";
    case UnaryOp::Gelu: return "bias_gelu";
    case UnaryOp::GeluTanh: return "bias_gelu_tanh";
    default: LOOM_FAIL("activation: {} is not Relu, Gelu or GeluTanh", unary_op_name(op));
  }
}

}  // namespace

Tensor bias_relu(const Tensor& x, const Tensor& bias) {
  return bias_unary_op(UnaryOp::Relu, bias_unary_name(UnaryOp::Relu), x, bias);
}
Tensor bias_gelu(const Tensor& x, const Tensor& bias) {
  return bias_unary_op(UnaryOp::Gelu, bias_unary_name(UnaryOp::Gelu), x, bias);
}
Tensor bias_gelu_tanh(const Tensor& x, const Tensor& bias) {
  return bias_unary_op(UnaryOp::GeluTanh, bias_unary_name(UnaryOp::GeluTanh), x, bias);
}

Tensor detail::activation_of_product(UnaryOp op, const Tensor& x, const Tensor& bias,
                                     const Tensor& out) {
  return record_bias_unary(op, bias_unary_name(op), x, bias, out);
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
// sign and the roundings are piecewise constant: a zero gradient everywhere, as PyTorch's, so
// no graph is recorded (their result requires no grad).
static Tensor piecewise_constant(UnaryOp op, const char* name, const Tensor& x) {
  NoGradGuard guard;
  return unary_op(op, name, x);
}
Tensor sign(const Tensor& x) { return piecewise_constant(UnaryOp::Sign, "sign", x); }
Tensor floor(const Tensor& x) { return piecewise_constant(UnaryOp::Floor, "floor", x); }
Tensor ceil(const Tensor& x) { return piecewise_constant(UnaryOp::Ceil, "ceil", x); }
Tensor round(const Tensor& x) { return piecewise_constant(UnaryOp::Round, "round", x); }
Tensor trunc(const Tensor& x) { return piecewise_constant(UnaryOp::Trunc, "trunc", x); }
Tensor softplus(const Tensor& x, float beta, float threshold) {
  LOOM_CHECK(beta != 0.0f, "softplus: beta must be nonzero, got {}", beta);
  return unary_op(UnaryOp::Softplus, "softplus", x, beta, threshold);
}
Tensor leaky_relu(const Tensor& x, float negative_slope) {
  return unary_op(UnaryOp::LeakyRelu, "leaky_relu", x, negative_slope);
}
Tensor elu(const Tensor& x, float alpha) { return unary_op(UnaryOp::Elu, "elu", x, alpha); }
Tensor logit(const Tensor& x, std::optional<float> eps) {
  LOOM_CHECK(!eps || (*eps >= 0.0f && *eps <= 0.5f), "logit: eps must lie in [0, 0.5], got {}",
             eps.value_or(0.0f));
  return unary_op(UnaryOp::Logit, "logit", x, eps.value_or(-1.0f));  // a < 0: no eps
}
Tensor pow(const Tensor& x, float exponent) { return unary_op(UnaryOp::Pow, "pow", x, exponent); }
Tensor clamp(const Tensor& x, float min, float max) {
  LOOM_CHECK(min <= max, "clamp: min {} is greater than max {}", min, max);
  return unary_op(UnaryOp::Clamp, "clamp", x, min, max);
}
// An absent bound is an infinite one: the comparisons against it always pass.
Tensor clamp(const Tensor& x, std::optional<float> min, std::optional<float> max) {
  LOOM_CHECK(min || max, "clamp: at least one of min and max must be given");
  return clamp(x, min.value_or(-INFINITY), max.value_or(INFINITY));
}
Tensor clamp_min(const Tensor& x, float min) { return clamp(x, min, std::nullopt); }
Tensor clamp_max(const Tensor& x, float max) { return clamp(x, std::nullopt, max); }
// An int64 tensor negates as 0 - x (the unary kernels are floating-only), as PyTorch allows.
Tensor operator-(const Tensor& x) {
  return x.defined() && x.dtype() == DType::Int64 ? 0 - x : neg(x);
}

// ---------------------------------------------------------------------------- with a number
// A floating x keeps its dtype whatever the number (ops_dtype.h) and takes the one-pass affine
// kernel. An integer or bool x meets the number as a 0-d tensor of the number's own dtype, so
// that the binary op promotes: int64 * 2 stays int64, int64 * 2.0f and int64 / 2 are float32.
static bool affine(const Tensor& x) { return x.defined() && is_floating_point(x.dtype()); }
static Tensor number(const Scalar& s, const Tensor& x) {
  detail::check_defined(x, "a tensor op with a number");
  return detail::scalar_tensor_of(s, s.dtype(), x.device());
}
Tensor operator+(const Tensor& x, const Scalar& s) {
  if (affine(x)) return unary_op(UnaryOp::Affine, "add", x, 1.0f, s.to_float());
  return add(x, number(s, x));
}
Tensor operator-(const Tensor& x, const Scalar& s) {
  if (affine(x) && !s.is_bool()) return unary_op(UnaryOp::Affine, "sub", x, 1.0f, -s.to_float());
  return sub(x, number(s, x));
}
Tensor operator*(const Tensor& x, const Scalar& s) {
  if (affine(x)) return unary_op(UnaryOp::Affine, "mul", x, s.to_float(), 0.0f);
  return mul(x, number(s, x));
}
Tensor operator/(const Tensor& x, const Scalar& s) {
  if (affine(x)) return unary_op(UnaryOp::Affine, "div", x, 1.0f / s.to_float(), 0.0f);
  return div(x, number(s, x));
}
Tensor operator+(const Scalar& s, const Tensor& x) { return x + s; }
Tensor operator-(const Scalar& s, const Tensor& x) {
  if (affine(x) && !s.is_bool()) return unary_op(UnaryOp::Affine, "rsub", x, -1.0f, s.to_float());
  return sub(number(s, x), x);
}
Tensor operator*(const Scalar& s, const Tensor& x) { return x * s; }
Tensor operator/(const Scalar& s, const Tensor& x) {
  if (affine(x)) return unary_op(UnaryOp::RDiv, "rdiv", x, s.to_float());
  return div(number(s, x), x);
}

// ---------------------------------------------------------------------------- binary
namespace {

// Bool arithmetic as PyTorch computes it: + and maximum are logical or, * and minimum logical
// and; the others run on int64 (floor and truncating division) or float32 (true division).
BinaryOp bool_op(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
    case BinaryOp::Maximum:
      return BinaryOp::BitOr;
    case BinaryOp::Mul:
    case BinaryOp::Minimum:
      return BinaryOp::BitAnd;
    default:
      return op;
  }
}

}  // namespace

Tensor detail::binary_forward(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  detail::check_defined(a, name);
  detail::check_defined(b, name);
  detail::check_same_device(a, b, name);
  // The dtype the kernel computes in (PyTorch's promotion, ops_dtype.h) and the result's.
  DType type = result_type(a, b), out_type = type;
  if (is_comparison(op)) {
    if (type == DType::BFloat16) type = DType::Float32;  // compares the exact upcast values
    out_type = DType::Bool;
  } else if (type == DType::Bool && !is_bitwise(op)) {
    op = bool_op(op);
    if (!is_bitwise(op)) type = out_type = DType::Int64;
  }
  if (op == BinaryOp::Div && !is_floating_point(type)) type = out_type = DType::Float32;
  LOOM_CHECK(op != BinaryOp::Pow || is_floating_point(type),
             "{}: integer powers of {} and {} tensors are not supported; cast to float32 first",
             name, dtype_name(a.dtype()), dtype_name(b.dtype()));
  // bfloat16 (see ops.h): an arithmetic kernel reads each floating operand as it is (float32 or
  // bfloat16), computes in float32 and rounds the result to bfloat16 once when the promoted
  // dtype is bfloat16. The caller records the op on the operands as they came, so its backward
  // computes in their dtypes too.
  const bool floating = is_arithmetic(op) && is_floating_point(type);
  auto operand = [&](const Tensor& t) {
    const Tensor d = t.detach();
    return floating && is_floating_point(t.dtype()) ? d : d.to(type);
  };
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = Tensor::empty(shape, out_type, a.device());
  backend(a.device()).binary(op, broadcast_view(operand(a), shape),
                             broadcast_view(operand(b), shape), out);
  return out;
}

namespace {

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
  Tensor out = detail::binary_forward(BinaryOp::Add, "add", a, b);
  return record_binary("add", a, b, out, [](const Tensor& g) { return std::pair{g, g}; });
}

// As PyTorch, a bool operand has no subtraction: a mask is inverted by ~ or logical_not, two
// masks differ by ^ or logical_xor.
static void check_not_bool(const Tensor& t, const char* name) {
  LOOM_CHECK(!t.defined() || t.dtype() != DType::Bool,
             "{}: subtraction with a bool tensor (shape {}) is not supported; to invert a mask "
             "use ~ or logical_not, for two masks ^ or logical_xor",
             name, shape_str(t.shape()));
}

Tensor sub(const Tensor& a, const Tensor& b) {
  check_not_bool(a, "sub");
  check_not_bool(b, "sub");
  Tensor out = detail::binary_forward(BinaryOp::Sub, "sub", a, b);
  return record_binary("sub", a, b, out, [](const Tensor& g) { return std::pair{g, -g}; });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = detail::binary_forward(BinaryOp::Mul, "mul", a, b);
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  Tensor as = saved(a), bs = saved(b);
  return record_binary("mul", a, b, out, [as, bs, need_a, need_b](const Tensor& g) {
    return std::pair{need_a ? g * bs : Tensor(), need_b ? g * as : Tensor()};
  }, {as, bs});
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = detail::binary_forward(BinaryOp::Div, "div", a, b);
  const bool need_b = b.requires_grad();
  Tensor bs = saved(b), ys = saved(out);
  // d(a/b)/da = 1/b;  d(a/b)/db = -a/b^2 = -y/b
  return record_binary("div", a, b, out, [bs, ys, need_b](const Tensor& g) {
    Tensor ga = g / bs;
    return std::pair{ga, need_b ? -(ga * autograd::unpack_output(ys)) : Tensor()};
  }, {bs, ys});
}

Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = detail::binary_forward(BinaryOp::Pow, "pow", a, b);
  const bool need_b = b.requires_grad();
  Tensor as = saved(a), bs = saved(b), ys = saved(out);
  // d(a^b)/da = b a^(b-1);  d(a^b)/db = a^b log(a)
  return record_binary("pow", a, b, out, [as, bs, ys, need_b](const Tensor& g) {
    Tensor ga = g * bs * pow(as, bs - 1.0f);
    return std::pair{ga, need_b ? g * autograd::unpack_output(ys) * log(as) : Tensor()};
  }, {as, bs, ys});
}

// Where a == b the gradient is split evenly between the two inputs, as in PyTorch.
static Tensor extremum(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  Tensor out = detail::binary_forward(op, name, a, b);
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
// A comparison: a Bool tensor, not differentiable (binary_forward records nothing). With a
// number, the number is a 0-d tensor of the dtype it promotes the tensor to (ops_dtype.h): a
// bfloat16 tensor is compared with the number rounded to bfloat16, as PyTorch does.
static Tensor compare(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  return detail::binary_forward(op, name, a, b);
}
static Tensor compare(BinaryOp op, const char* name, const Tensor& a, const Scalar& b) {
  detail::check_defined(a, name);
  return compare(op, name, a, detail::scalar_tensor_of(b, result_type(a, b), a.device()));
}
#define LOOM_COMPARISON(Op, name)                                                       \
  Tensor name(const Tensor& a, const Tensor& b) { return compare(BinaryOp::Op, #name, a, b); } \
  Tensor name(const Tensor& a, const Scalar& b) { return compare(BinaryOp::Op, #name, a, b); }
LOOM_COMPARISON(Eq, eq)
LOOM_COMPARISON(Ne, ne)
LOOM_COMPARISON(Lt, lt)
LOOM_COMPARISON(Le, le)
LOOM_COMPARISON(Gt, gt)
LOOM_COMPARISON(Ge, ge)
#undef LOOM_COMPARISON

// ---------------------------------------------------------------------------- selection
// cond of any dtype, nonzero = true: a bool, float32 or int64 cond goes to the kernel as it is,
// a bfloat16 one as bool. a and b are promoted to result_type(a, b) first (the casts between
// floating dtypes are recorded, so gradients reach each input in its own dtype); a bfloat16
// pair is chosen from in float32 and rounded back, which is exact.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  detail::check_defined(cond, "where");
  detail::check_defined(a, "where");
  detail::check_defined(b, "where");
  const DType type = result_type(a, b);
  if (a.dtype() != type || b.dtype() != type) return where(cond, a.to(type), b.to(type));
  if (is_bf16(a))
    return bf16_binary(a, b, [&](const Tensor& x, const Tensor& y) { return where(cond, x, y); });
  detail::check_same_device(a, b, "where");
  detail::check_same_device(cond, a, "where");
  const Tensor c = is_bf16(cond) ? cond.to(DType::Bool) : cond.detach();
  const Shape shape = broadcast_shapes(broadcast_shapes(c.shape(), a.shape(), "where"),
                                       b.shape(), "where");
  Tensor out = Tensor::empty(shape, type, a.device());
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

// The number as a 0-d tensor of the dtype it promotes the other operand to, as torch.where.
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) {
  detail::check_defined(a, "where");
  return where(cond, a, detail::scalar_tensor_of(b, result_type(a, b), a.device()));
}
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b) {
  detail::check_defined(b, "where");
  return where(cond, detail::scalar_tensor_of(a, result_type(a, b), b.device()), b);
}

// The value takes x's dtype (an int64 x filled with 2.5 gets 2, as in PyTorch).
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  if (is_bf16(x))
    return bf16_unary(x, [&](const Tensor& xf) { return masked_fill(xf, mask, value); });
  detail::check_defined(x, "masked_fill");
  detail::check_defined(mask, "masked_fill");
  LOOM_CHECK(broadcast_shapes(mask.shape(), x.shape(), "masked_fill") == x.shape(),
             "masked_fill: mask of shape {} cannot be broadcast to the input shape {}",
             shape_str(mask.shape()), shape_str(x.shape()));
  return where(mask, detail::scalar_tensor_of(value, x.dtype(), x.device()), x);
}

}  // namespace loom
