// The unary ops of loom, each written once: its function y = f(x), its derivative, and which of
// x and y the derivative reads. The CPU loops (backends/elementwise/cpu_unary.cpp) and the CUDA
// kernels (backends/elementwise/elementwise.cu) are both instantiated from this table, so the
// two devices cannot disagree on a formula.
//
// To add a unary function (say silu), three library files:
//   1. here: add X(Silu) to LOOM_UNARY_OPS below (that also adds UnaryOp::Silu) and
//      X(Silu, silu) to LOOM_UNARY_FUNCTIONS, and write `template <class M> struct Silu` beside
//      the others: forward(x), backward(g, x, y) returning g * dy/dx, and its Def<...>: what
//      backward reads, and the cost of each way;
//   2. autograd/ops.h: declare `Tensor silu(const Tensor& x);` with the other functions;
//   3. core/tensor.h: declare its method form, `Tensor silu() const;`.
// The definitions of silu and Tensor::silu (autograd/ops_elementwise.cpp, whose unary_op records
// the backward, and autograd/tensor_methods.cpp) are generated from LOOM_UNARY_FUNCTIONS, and
// nothing in backends/elementwise changes. The tests: a reference formula in
// tests/core/test_cpu_backend.cpp, and the others autograd/ops.h lists.
//
// M is the device's math library, the only thing the devices do differently: M::exp, M::log,
// M::sqrt, M::tanh, M::sin, M::cos, M::abs, M::pow, M::normal_cdf (the standard normal CDF
// Phi) and M::normal_cdf_pdf (Phi and the density phi, as .cdf and .pdf), and the C library's
// log1p, expm1, log2, exp2, erf, floor, ceil, rint (to nearest, ties to even) and trunc. The
// CPU passes branch-free versions that vectorise where the loops are hot (CpuMath in
// backends/cpu/cpu_math.h, over backends/cpu/vec_math.h), CUDA its own math library
// (CudaMath in backends/cuda/device_utils.cuh).
#pragma once

#include <cmath>  // NAN

#include "core/host_device.h"

namespace loom {

// The list every switch over unary ops is generated from. Pow, Affine, RDiv and Clamp take
// the scalars a and b (see their definitions).
// clang-format off
#define LOOM_UNARY_OPS(X)                                                                       \
  X(Neg) X(Exp) X(Log) X(Sqrt) X(Rsqrt) X(Tanh) X(Sigmoid) X(Relu) X(Gelu) X(GeluTanh) X(Abs) \
  X(Sin) X(Cos) X(Sign) X(Pow) X(Affine) X(RDiv) X(Clamp) X(Reciprocal) X(Square) X(Log1p)    \
  X(Expm1) X(Log2) X(Exp2) X(Erf) X(Floor) X(Ceil) X(Round) X(Trunc) X(Silu) X(Softplus)     \
  X(LeakyRelu) X(Elu) X(Mish) X(Hardswish) X(Logit) X(Relu6)

// The ops that are a function of one tensor and nothing else, with the function's name: the
// definitions of `Tensor name(const Tensor& x)` (declared in autograd/ops.h) and of its method
// form x.name() (declared in core/tensor.h) are generated from this list. The other ops are
// operators (Affine, RDiv), take scalars (pow, clamp, softplus, leaky_relu, elu, logit) or
// have no gradient (sign, floor, ceil, round, trunc): they are written out in
// autograd/ops_elementwise.cpp.
#define LOOM_UNARY_FUNCTIONS(X)                                                               \
  X(Exp, exp) X(Log, log) X(Sqrt, sqrt) X(Rsqrt, rsqrt) X(Tanh, tanh) X(Sigmoid, sigmoid)    \
  X(Relu, relu) X(Gelu, gelu) X(GeluTanh, gelu_tanh) X(Abs, abs) X(Sin, sin) X(Cos, cos)     \
  X(Neg, neg) X(Reciprocal, reciprocal) X(Square, square) X(Log1p, log1p) X(Expm1, expm1)    \
  X(Log2, log2) X(Exp2, exp2) X(Erf, erf) X(Silu, silu) X(Mish, mish) X(Hardswish, hardswish) \
  X(Relu6, relu6)
// clang-format on

#define LOOM_UNARY_ENUM_ENTRY(Name) Name,
enum class UnaryOp { LOOM_UNARY_OPS(LOOM_UNARY_ENUM_ENTRY) };
#undef LOOM_UNARY_ENUM_ENTRY

// The op's name as LOOM_UNARY_OPS spells it ("GeluTanh"), for error messages.
inline const char* unary_op_name(UnaryOp op) {
  switch (op) {
#define LOOM_UNARY_NAME_CASE(Name) \
  case UnaryOp::Name:              \
    return #Name;
    LOOM_UNARY_OPS(LOOM_UNARY_NAME_CASE)
#undef LOOM_UNARY_NAME_CASE
  }
  return "?";
}

namespace unary {

enum class Reads { Nothing, Input, Output };  // what backward needs besides the gradient
enum class Cost { Cheap, Heavy };             // Heavy: a transcendental call per element

// What every op shares: its scalar arguments, what its backward reads, and the cost of its
// forward and backward (the CPU goes parallel sooner for heavy loops).
template <Reads R, Cost Forward, Cost Backward>
struct Def {
  static constexpr Reads reads = R;
  static constexpr Cost forward_cost = Forward, backward_cost = Backward;
  float a = 0.0f, b = 0.0f;
};
constexpr Reads kNothing = Reads::Nothing, kInput = Reads::Input, kOutput = Reads::Output;
constexpr Cost kCheap = Cost::Cheap, kHeavy = Cost::Heavy;

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2 / pi), for GELU's tanh form
constexpr float kGeluCubic = 0.044715f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;  // 1 / sqrt(2 pi), the normal density at 0
constexpr float kTwoOverSqrtPi = 1.1283791670955126f;  // 2 / sqrt(pi), erf'(0)
constexpr float kLn2 = 0.6931471805599453f;

// ---------------------------------------------------------------------------- the table
// forward(x) = y;  backward(g, x, y) = g * dy/dx.  NaN rules follow PyTorch.

template <class M>
struct Neg : Def<kNothing, kCheap, kCheap> {
  LOOM_HOST_DEVICE float forward(float x) const { return -x; }
  LOOM_HOST_DEVICE float backward(float g, float, float) const { return -g; }
};
template <class M>
struct Exp : Def<kOutput, kHeavy, kCheap> {  // d e^x = e^x = y
  LOOM_HOST_DEVICE float forward(float x) const { return M::exp(x); }
  LOOM_HOST_DEVICE float backward(float g, float, float y) const { return g * y; }
};
template <class M>
struct Log : Def<kInput, kHeavy, kCheap> {
  LOOM_HOST_DEVICE float forward(float x) const { return M::log(x); }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const { return g / x; }
};
template <class M>
struct Sqrt : Def<kOutput, kCheap, kCheap> {  // d sqrt(x) = 1 / (2 sqrt(x)) = 1 / 2y
  LOOM_HOST_DEVICE float forward(float x) const { return M::sqrt(x); }
  LOOM_HOST_DEVICE float backward(float g, float, float y) const { return 0.5f * g / y; }
};
template <class M>
struct Rsqrt : Def<kOutput, kCheap, kCheap> {  // d x^{-1/2} = -x^{-3/2} / 2 = -y^3 / 2
  LOOM_HOST_DEVICE float forward(float x) const { return 1.0f / M::sqrt(x); }
  LOOM_HOST_DEVICE float backward(float g, float, float y) const { return -0.5f * g * y * y * y; }
};
template <class M>
struct Tanh : Def<kOutput, kHeavy, kCheap> {  // d tanh = 1 - tanh^2
  LOOM_HOST_DEVICE float forward(float x) const { return M::tanh(x); }
  LOOM_HOST_DEVICE float backward(float g, float, float y) const { return g * (1.0f - y * y); }
};
template <class M>
struct Sigmoid : Def<kOutput, kHeavy, kCheap> {  // 1 / (1 + e^-x); d sigmoid = y (1 - y)
  LOOM_HOST_DEVICE float forward(float x) const { return 1.0f / (1.0f + M::exp(-x)); }
  LOOM_HOST_DEVICE float backward(float g, float, float y) const { return g * y * (1.0f - y); }
};
template <class M>
struct Relu : Def<kInput, kCheap, kCheap> {  // x < 0 ? 0 : x lets NaN through, as torch.relu
  LOOM_HOST_DEVICE float forward(float x) const { return x < 0.0f ? 0.0f : x; }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const { return x > 0.0f ? g : 0.0f; }
};
// GELU (Hendrycks & Gimpel 2016): x Phi(x), Phi the standard normal CDF, phi its density;
// d x Phi(x) = Phi(x) + x phi(x).
template <class M>
struct Gelu : Def<kInput, kHeavy, kHeavy> {
  LOOM_HOST_DEVICE float forward(float x) const { return x * M::normal_cdf(x); }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const {
    const auto [cdf, pdf] = M::normal_cdf_pdf(x);  // Phi(x), phi(x)
    return g * (cdf + x * pdf);
  }
};
// The tanh form used by GPT-2: x/2 (1 + t), t = tanh(u), u = sqrt(2/pi) (x + c x^3);
// d/dx = (1 + t)/2 + x/2 (1 - t^2) du/dx, du/dx = sqrt(2/pi) (1 + 3 c x^2).
template <class M>
struct GeluTanh : Def<kInput, kHeavy, kHeavy> {
  LOOM_HOST_DEVICE float forward(float x) const {
    return 0.5f * x * (1.0f + M::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
  }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const {
    const float x2 = x * x;
    const float t = M::tanh(kSqrt2OverPi * x * (1.0f + kGeluCubic * x2));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x2);
    return g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
  }
};
template <class M>
struct Abs : Def<kInput, kCheap, kCheap> {  // d|x| = sign(x), 0 at 0 (PyTorch's choice)
  LOOM_HOST_DEVICE float forward(float x) const { return M::abs(x); }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const {
    return x > 0.0f ? g : (x < 0.0f ? -g : 0.0f);
  }
};
template <class M>
struct Sin : Def<kInput, kHeavy, kHeavy> {
  LOOM_HOST_DEVICE float forward(float x) const { return M::sin(x); }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const { return g * M::cos(x); }
};
template <class M>
struct Cos : Def<kInput, kHeavy, kHeavy> {
  LOOM_HOST_DEVICE float forward(float x) const { return M::cos(x); }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const { return -g * M::sin(x); }
};
template <class M>
struct Sign : Def<kNothing, kCheap, kCheap> {  // sign(0) = 0, sign(NaN) = NaN
  LOOM_HOST_DEVICE float forward(float x) const { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x); }
  LOOM_HOST_DEVICE float backward(float, float, float) const { return 0.0f; }
};
template <class M>
struct Affine : Def<kNothing, kCheap, kCheap> {  // a x + b: scalar add, sub, mul, div
  LOOM_HOST_DEVICE float forward(float x) const { return a * x + b; }
  LOOM_HOST_DEVICE float backward(float g, float, float) const { return a * g; }
};
template <class M>
struct RDiv : Def<kInput, kCheap, kCheap> {  // a / x; d a/x = -a / x^2
  LOOM_HOST_DEVICE float forward(float x) const { return a / x; }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const { return -a * g / (x * x); }
};
// min(max(x, a), b). NaN passes both comparisons, as torch.clamp propagates it; the gradient
// passes where x was inside [a, b] (torch.clamp's rule).
template <class M>
struct Clamp : Def<kInput, kCheap, kCheap> {
  LOOM_HOST_DEVICE float forward(float x) const { return x < a ? a : (x > b ? b : x); }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const {
    return x >= a && x <= b ? g : 0.0f;
  }
};


// ------------------------------------------------- the functions of PyTorch's elementwise API
template <class M>
struct Reciprocal : Def<kOutput, kCheap, kCheap> {  // d 1/x = -1/x^2 = -y^2
  LOOM_HOST_DEVICE float forward(float x) const { return 1.0f / x; }
  LOOM_HOST_DEVICE float backward(float g, float, float y) const { return -g * y * y; }
};
template <class M>
struct Square : Def<kInput, kCheap, kCheap> {
  LOOM_HOST_DEVICE float forward(float x) const { return x * x; }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const { return 2.0f * g * x; }
};
template <class M>
struct Log1p : Def<kInput, kHeavy, kCheap> {  // log(1 + x) without the rounding of 1 + x
  LOOM_HOST_DEVICE float forward(float x) const { return M::log1p(x); }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const { return g / (1.0f + x); }
};
template <class M>
struct Expm1 : Def<kOutput, kHeavy, kCheap> {  // d (e^x - 1) = e^x = y + 1
  LOOM_HOST_DEVICE float forward(float x) const { return M::expm1(x); }
  LOOM_HOST_DEVICE float backward(float g, float, float y) const { return g * (y + 1.0f); }
};
template <class M>
struct Log2 : Def<kInput, kHeavy, kCheap> {  // d log2(x) = 1 / (x ln 2)
  LOOM_HOST_DEVICE float forward(float x) const { return M::log2(x); }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const { return g / (x * kLn2); }
};
template <class M>
struct Exp2 : Def<kOutput, kHeavy, kCheap> {  // d 2^x = 2^x ln 2
  LOOM_HOST_DEVICE float forward(float x) const { return M::exp2(x); }
  LOOM_HOST_DEVICE float backward(float g, float, float y) const { return g * y * kLn2; }
};
template <class M>
struct Erf : Def<kInput, kHeavy, kHeavy> {  // d erf(x) = 2 / sqrt(pi) e^{-x^2}
  LOOM_HOST_DEVICE float forward(float x) const { return M::erf(x); }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const {
    return g * kTwoOverSqrtPi * M::exp(-x * x);
  }
};
// The four roundings are piecewise constant: a zero derivative everywhere, as PyTorch's.
template <class M>
struct Floor : Def<kNothing, kCheap, kCheap> {
  LOOM_HOST_DEVICE float forward(float x) const { return M::floor(x); }
  LOOM_HOST_DEVICE float backward(float, float, float) const { return 0.0f; }
};
template <class M>
struct Ceil : Def<kNothing, kCheap, kCheap> {
  LOOM_HOST_DEVICE float forward(float x) const { return M::ceil(x); }
  LOOM_HOST_DEVICE float backward(float, float, float) const { return 0.0f; }
};
template <class M>
struct Round : Def<kNothing, kCheap, kCheap> {  // half to even, as torch.round: 2.5 -> 2
  LOOM_HOST_DEVICE float forward(float x) const { return M::rint(x); }
  LOOM_HOST_DEVICE float backward(float, float, float) const { return 0.0f; }
};
template <class M>
struct Trunc : Def<kNothing, kCheap, kCheap> {
  LOOM_HOST_DEVICE float forward(float x) const { return M::trunc(x); }
  LOOM_HOST_DEVICE float backward(float, float, float) const { return 0.0f; }
};
// SiLU (Elfwing et al. 2017): x s with s = sigmoid(x); d x s = s + x s (1 - s).
template <class M>
struct Silu : Def<kInput, kHeavy, kHeavy> {
  LOOM_HOST_DEVICE float forward(float x) const { return x / (1.0f + M::exp(-x)); }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const {
    const float s = 1.0f / (1.0f + M::exp(-x));
    return g * s * (1.0f + x * (1.0f - s));
  }
};
// log(1 + e^{a x}) / a with a = beta, and x where a x > b = threshold (torch's softplus, which
// switches to the identity there); d/dx = z / (1 + z), z = e^{a x}.
template <class M>
struct Softplus : Def<kInput, kHeavy, kHeavy> {
  LOOM_HOST_DEVICE float forward(float x) const {
    return a * x > b ? x : M::log1p(M::exp(a * x)) / a;
  }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const {
    const float z = M::exp(a * x);
    return a * x > b ? g : g * z / (z + 1.0f);
  }
};
template <class M>
struct LeakyRelu : Def<kInput, kCheap, kCheap> {  // a = negative_slope
  LOOM_HOST_DEVICE float forward(float x) const { return x > 0.0f ? x : a * x; }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const { return x > 0.0f ? g : a * g; }
};
// ELU (Clevert et al. 2016): x > 0 ? x : a (e^x - 1), a = alpha; the slope a e^x below 0.
template <class M>
struct Elu : Def<kInput, kHeavy, kHeavy> {
  LOOM_HOST_DEVICE float forward(float x) const { return x > 0.0f ? x : a * M::expm1(x); }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const {
    return x > 0.0f ? g : g * a * M::exp(x);
  }
};
// Mish (Misra 2019): x t with t = tanh(softplus(x)); d x t = t + x sigmoid(x) (1 - t^2).
template <class M>
struct Mish : Def<kInput, kHeavy, kHeavy> {
  LOOM_HOST_DEVICE float forward(float x) const { return x * M::tanh(M::log1p(M::exp(x))); }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const {
    const float t = M::tanh(M::log1p(M::exp(x)));
    const float s = 1.0f / (1.0f + M::exp(-x));
    return g * (t + x * s * (1.0f - t * t));
  }
};
// Hard swish (Howard et al. 2019, MobileNetV3): x relu6(x + 3) / 6; slope x / 3 + 1/2 on
// [-3, 3], PyTorch's choice at the two kinks.
template <class M>
struct Hardswish : Def<kInput, kCheap, kCheap> {
  LOOM_HOST_DEVICE float forward(float x) const {
    const float r = x + 3.0f < 0.0f ? 0.0f : (x + 3.0f > 6.0f ? 6.0f : x + 3.0f);
    return x * r / 6.0f;
  }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const {
    return x < -3.0f ? 0.0f : (x <= 3.0f ? g * (x / 3.0f + 0.5f) : g);
  }
};
// log(z / (1 - z)), z = x clamped to [a, 1 - a] for an eps a >= 0, z = x when a < 0 (no eps);
// d/dx = 1 / (x (1 - x)), 0 where the clamp holds x, NaN outside [0, 1] without eps (as
// torch.logit's backward).
template <class M>
struct Logit : Def<kInput, kHeavy, kCheap> {
  LOOM_HOST_DEVICE float forward(float x) const {
    const float z = a < 0.0f ? x : (x < a ? a : (x > 1.0f - a ? 1.0f - a : x));
    return M::log(z / (1.0f - z));
  }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const {
    const bool outside = a < 0.0f ? x < 0.0f || x > 1.0f : x < a || x > 1.0f - a;
    return outside ? (a < 0.0f ? NAN : 0.0f) : g / (x * (1.0f - x));
  }
};
// min(max(x, 0), 6) (torch's hardtanh(0, 6)): the gradient passes strictly inside (0, 6).
template <class M>
struct Relu6 : Def<kInput, kCheap, kCheap> {
  LOOM_HOST_DEVICE float forward(float x) const { return x < 0.0f ? 0.0f : (x > 6.0f ? 6.0f : x); }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const {
    return x > 0.0f && x < 6.0f ? g : 0.0f;
  }
};

// x^a. pow is a slow call (and keeps a CPU loop scalar), so the exponents models use are
// written out: visit() picks PowOf<M, pow_kind(a)> once per launch, and the loop has no branch.
enum class PowKind { Zero, One, Two, Three, Half, MinusOne, MinusHalf, Any };

// clang-format off
template <class M, PowKind K>
struct PowOf : Def<kInput, K == PowKind::Any ? kHeavy : kCheap,
                   K <= PowKind::Two ? kCheap : kHeavy> {
  LOOM_HOST_DEVICE float forward(float x) const {
    if constexpr (K == PowKind::Zero) return 1.0f;  // pow(x, 0) == 1, even for NaN
    else if constexpr (K == PowKind::One) return x;
    else if constexpr (K == PowKind::Two) return x * x;
    else if constexpr (K == PowKind::Three) return x * x * x;
    else if constexpr (K == PowKind::Half) return M::sqrt(x);
    else if constexpr (K == PowKind::MinusOne) return 1.0f / x;
    else if constexpr (K == PowKind::MinusHalf) return 1.0f / M::sqrt(x);
    else return M::pow(x, this->a);
  }
  LOOM_HOST_DEVICE float backward(float g, float x, float) const {  // d x^a = a x^(a-1)
    if constexpr (K == PowKind::Zero) return 0.0f;
    else if constexpr (K == PowKind::One) return g;
    else if constexpr (K == PowKind::Two) return 2.0f * g * x;
    else return g * this->a * M::pow(x, this->a - 1.0f);
  }
};
// clang-format on
template <class M>
using Pow = PowOf<M, PowKind::Any>;

inline PowKind pow_kind(float a) {
  if (a == 0.0f) return PowKind::Zero;
  if (a == 1.0f) return PowKind::One;
  if (a == 2.0f) return PowKind::Two;
  if (a == 3.0f) return PowKind::Three;
  if (a == 0.5f) return PowKind::Half;
  if (a == -1.0f) return PowKind::MinusOne;
  if (a == -0.5f) return PowKind::MinusHalf;
  return PowKind::Any;
}

// ---------------------------------------------------------------------------- dispatch
// The only switches over UnaryOp, generated from LOOM_UNARY_OPS; they run on the host, once per
// kernel launch, and hand the loop or kernel a concrete op type to inline.

// fn(op) where op is the table entry, e.g. Exp<M>{a, b}. fn must return the same type for all.
template <class Op, class Fn>
decltype(auto) call_with(const Op& op, Fn& fn) {
  return fn(op);
}
template <class M, class Fn>
decltype(auto) call_with(const Pow<M>& op, Fn& fn) {
  const float a = op.a, b = op.b;
  // clang-format off
  switch (pow_kind(a)) {
    case PowKind::Zero: return fn(PowOf<M, PowKind::Zero>{{a, b}});
    case PowKind::One: return fn(PowOf<M, PowKind::One>{{a, b}});
    case PowKind::Two: return fn(PowOf<M, PowKind::Two>{{a, b}});
    case PowKind::Three: return fn(PowOf<M, PowKind::Three>{{a, b}});
    case PowKind::Half: return fn(PowOf<M, PowKind::Half>{{a, b}});
    case PowKind::MinusOne: return fn(PowOf<M, PowKind::MinusOne>{{a, b}});
    case PowKind::MinusHalf: return fn(PowOf<M, PowKind::MinusHalf>{{a, b}});
    case PowKind::Any: break;
  }
  // clang-format on
  return fn(op);
}

// Calls fn(entry) with the table entry of `op` for the math library M and the scalars a, b.
// op must be a valid UnaryOp (Backend::unary checks that before any kernel runs).
template <class M, class Fn>
decltype(auto) visit(UnaryOp op, float a, float b, Fn&& fn) {
  switch (op) {
#define LOOM_UNARY_VISIT_CASE(Name) \
  case UnaryOp::Name:               \
    return call_with(Name<M>{{a, b}}, fn);
    LOOM_UNARY_OPS(LOOM_UNARY_VISIT_CASE)
#undef LOOM_UNARY_VISIT_CASE
  }
  return call_with(Neg<M>{{a, b}}, fn);  // not reached
}

// What the backward of `op` reads besides the gradient (the same for every M).
struct NoMath {};
inline Reads backward_reads(UnaryOp op) {
  return visit<NoMath>(op, 0.0f, 0.0f, [](auto entry) { return decltype(entry)::reads; });
}

// Whether `op` is one of the enumerators (a cast int may not be).
constexpr bool is_valid(UnaryOp op) {
#define LOOM_UNARY_COUNT(Name) +1
  return static_cast<int>(op) >= 0 && static_cast<int>(op) < 0 LOOM_UNARY_OPS(LOOM_UNARY_COUNT);
#undef LOOM_UNARY_COUNT
}

}  // namespace unary
}  // namespace loom
