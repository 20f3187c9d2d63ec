// Elementwise unary ops (float32) and their derivatives. Each op is a small functor; the switch
// on the op happens once per call, and the per-element loop is instantiated for each functor so
// the compiler can inline and vectorise it.
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/vec_math.h"

namespace loom {

namespace {

using cpu::Ptrs;
using cpu::Steps;

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2 / pi), for GELU's tanh form
constexpr float kGeluCubic = 0.044715f;

// ---------------------------------------------------------------------------- forward ops

struct NegF {
  float operator()(float x) const { return -x; }
};
struct ExpF {
  float operator()(float x) const { return cpu::exp_f(x); }
};
struct LogF {
  float operator()(float x) const { return std::log(x); }
};
struct SqrtF {
  float operator()(float x) const { return std::sqrt(x); }
};
struct RsqrtF {
  float operator()(float x) const { return 1.0f / std::sqrt(x); }
};
struct TanhF {
  float operator()(float x) const { return cpu::tanh_f(x); }
};
struct SigmoidF {
  float operator()(float x) const { return cpu::sigmoid_f(x); }
};
// x < 0 ? 0 : x lets NaN through, as torch.relu does.
struct ReluF {
  float operator()(float x) const { return x < 0.0f ? 0.0f : x; }
};
// GELU (Hendrycks & Gimpel 2016): x * Phi(x), Phi the standard normal CDF.
struct GeluF {
  float operator()(float x) const { return x * cpu::normal_cdf_f(x); }
};
// The tanh approximation used by GPT-2: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
struct GeluTanhF {
  float operator()(float x) const {
    return 0.5f * x * (1.0f + cpu::tanh_f(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
  }
};
struct AbsF {
  float operator()(float x) const { return std::fabs(x); }
};
struct SinF {
  float operator()(float x) const { return std::sin(x); }
};
struct CosF {
  float operator()(float x) const { return std::cos(x); }
};
// sign(0) = 0 and sign(NaN) = NaN, as in PyTorch.
struct SignF {
  float operator()(float x) const { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x); }
};
struct SquareF {
  float operator()(float x) const { return x * x; }
};
struct CubeF {
  float operator()(float x) const { return x * x * x; }
};
struct ReciprocalF {
  float operator()(float x) const { return 1.0f / x; }
};
struct OneF {
  float operator()(float) const { return 1.0f; }
};
struct PowF {
  float a;
  float operator()(float x) const { return std::pow(x, a); }
};
struct AffineF {
  float a, b;
  float operator()(float x) const { return a * x + b; }
};
struct RDivF {
  float a;
  float operator()(float x) const { return a / x; }
};
// NaN passes through both comparisons, as torch.clamp propagates NaN.
struct ClampF {
  float lo, hi;
  float operator()(float x) const { return x < lo ? lo : (x > hi ? hi : x); }
};

template <class F>
void unary_loop(const cpu::StridedIter<2>& iter, int64_t grain, F f) {
  iter.for_each(grain, [f](const Ptrs<2>& p, const Steps<2>& s, int64_t n) LOOM_FLATTEN {
    float* out = reinterpret_cast<float*>(p[0]);
    const float* x = reinterpret_cast<const float*>(p[1]);
    if (s[0] == 4 && s[1] == 4) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = f(x[i]);
    } else if (s[0] == 4 && s[1] == 0) {  // broadcast input: one value for the whole run
      const float v = f(*x);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = v;
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<float*>(p[0] + i * s[0]) =
            f(*reinterpret_cast<const float*>(p[1] + i * s[1]));
    }
  });
}

// x^a with the common exponents replaced by multiplications (std::pow is a slow scalar call).
void pow_forward(const cpu::StridedIter<2>& iter, float a) {
  using cpu::kGrainCheap;
  if (a == 1.0f) return unary_loop(iter, kGrainCheap, [](float x) { return x; });
  if (a == 2.0f) return unary_loop(iter, kGrainCheap, SquareF{});
  if (a == 3.0f) return unary_loop(iter, kGrainCheap, CubeF{});
  if (a == 0.5f) return unary_loop(iter, kGrainCheap, SqrtF{});
  if (a == -1.0f) return unary_loop(iter, kGrainCheap, ReciprocalF{});
  if (a == -0.5f) return unary_loop(iter, kGrainCheap, RsqrtF{});
  if (a == 0.0f) return unary_loop(iter, kGrainCheap, OneF{});  // pow(x, 0) == 1, even for NaN
  unary_loop(iter, cpu::kGrainHeavy, PowF{a});
}

// ---------------------------------------------------------------------------- derivatives
// Each functor maps (grad, x, y) to grad * dy/dx, where y = op(x) is the saved forward output.

struct NegB {
  float operator()(float g, float, float) const { return -g; }
};
struct ExpB {
  float operator()(float g, float, float y) const { return g * y; }
};
struct LogB {
  float operator()(float g, float x, float) const { return g / x; }
};
struct SqrtB {
  float operator()(float g, float, float y) const { return 0.5f * g / y; }
};
// d/dx x^{-1/2} = -x^{-3/2} / 2 = -y^3 / 2.
struct RsqrtB {
  float operator()(float g, float, float y) const { return -0.5f * g * y * y * y; }
};
struct TanhB {
  float operator()(float g, float, float y) const { return g * (1.0f - y * y); }
};
struct SigmoidB {
  float operator()(float g, float, float y) const { return g * y * (1.0f - y); }
};
struct ReluB {
  float operator()(float g, float x, float) const { return x > 0.0f ? g : 0.0f; }
};
// d/dx x Phi(x) = Phi(x) + x phi(x).
struct GeluB {
  float operator()(float g, float x, float) const {
    return g * (cpu::normal_cdf_f(x) + x * cpu::normal_pdf_f(x));
  }
};
// With u = sqrt(2/pi) (x + c x^3) and t = tanh(u):
// d/dx 0.5 x (1 + t) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 c x^2).
struct GeluTanhB {
  float operator()(float g, float x, float) const {
    const float x2 = x * x;
    const float t = cpu::tanh_f(kSqrt2OverPi * x * (1.0f + kGeluCubic * x2));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x2);
    return g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
  }
};
// d|x|/dx = sign(x), with 0 at 0 (PyTorch's choice).
struct AbsB {
  float operator()(float g, float x, float) const { return x > 0.0f ? g : (x < 0.0f ? -g : 0.0f); }
};
struct SinB {
  float operator()(float g, float x, float) const { return g * std::cos(x); }
};
struct CosB {
  float operator()(float g, float x, float) const { return -g * std::sin(x); }
};
struct ZeroB {
  float operator()(float, float, float) const { return 0.0f; }
};
struct PowB {
  float a;
  float operator()(float g, float x, float) const { return g * a * std::pow(x, a - 1.0f); }
};
struct PowTwoB {
  float operator()(float g, float x, float) const { return 2.0f * g * x; }
};
struct AffineB {
  float a;
  float operator()(float g, float, float) const { return a * g; }
};
// d/dx a/x = -a / x^2.
struct RDivB {
  float a;
  float operator()(float g, float x, float) const { return -a * g / (x * x); }
};
// The gradient passes where the input was inside [lo, hi] (torch.clamp's rule).
struct ClampB {
  float lo, hi;
  float operator()(float g, float x, float) const { return x >= lo && x <= hi ? g : 0.0f; }
};

template <class F>
void backward_loop(const cpu::StridedIter<4>& iter, int64_t grain, F f) {
  iter.for_each(grain, [f](const Ptrs<4>& p, const Steps<4>& s, int64_t n) LOOM_FLATTEN {
    float* out = reinterpret_cast<float*>(p[0]);
    const float* g = reinterpret_cast<const float*>(p[1]);
    const float* x = reinterpret_cast<const float*>(p[2]);
    const float* y = reinterpret_cast<const float*>(p[3]);
    if (s[0] == 4 && s[1] == 4 && s[2] == 4 && s[3] == 4) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = f(g[i], x[i], y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<float*>(p[0] + i * s[0]) =
            f(*reinterpret_cast<const float*>(p[1] + i * s[1]),
              *reinterpret_cast<const float*>(p[2] + i * s[2]),
              *reinterpret_cast<const float*>(p[3] + i * s[3]));
    }
  });
}

// Which derivatives are written in terms of the output y rather than the input x.
bool backward_uses_y(UnaryOp op) {
  return op == UnaryOp::Exp || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt || op == UnaryOp::Tanh ||
         op == UnaryOp::Sigmoid;
}

bool backward_uses_x(UnaryOp op) {
  return !backward_uses_y(op) && op != UnaryOp::Neg && op != UnaryOp::Sign && op != UnaryOp::Affine;
}

void dispatch_backward(UnaryOp op, const cpu::StridedIter<4>& it, float a, float b) {
  using cpu::kGrainCheap;
  using cpu::kGrainHeavy;
  switch (op) {
    case UnaryOp::Neg:
      return backward_loop(it, kGrainCheap, NegB{});
    case UnaryOp::Exp:
      return backward_loop(it, kGrainCheap, ExpB{});
    case UnaryOp::Log:
      return backward_loop(it, kGrainCheap, LogB{});
    case UnaryOp::Sqrt:
      return backward_loop(it, kGrainCheap, SqrtB{});
    case UnaryOp::Rsqrt:
      return backward_loop(it, kGrainCheap, RsqrtB{});
    case UnaryOp::Tanh:
      return backward_loop(it, kGrainCheap, TanhB{});
    case UnaryOp::Sigmoid:
      return backward_loop(it, kGrainCheap, SigmoidB{});
    case UnaryOp::Relu:
      return backward_loop(it, kGrainCheap, ReluB{});
    case UnaryOp::Gelu:
      return backward_loop(it, kGrainHeavy, GeluB{});
    case UnaryOp::GeluTanh:
      return backward_loop(it, kGrainHeavy, GeluTanhB{});
    case UnaryOp::Abs:
      return backward_loop(it, kGrainCheap, AbsB{});
    case UnaryOp::Sin:
      return backward_loop(it, kGrainHeavy, SinB{});
    case UnaryOp::Cos:
      return backward_loop(it, kGrainHeavy, CosB{});
    case UnaryOp::Sign:
      return backward_loop(it, kGrainCheap, ZeroB{});
    case UnaryOp::Pow:
      if (a == 0.0f) return backward_loop(it, kGrainCheap, ZeroB{});
      if (a == 1.0f) return backward_loop(it, kGrainCheap, AffineB{1.0f});
      if (a == 2.0f) return backward_loop(it, kGrainCheap, PowTwoB{});
      return backward_loop(it, kGrainHeavy, PowB{a});
    case UnaryOp::Affine:
      return backward_loop(it, kGrainCheap, AffineB{a});
    case UnaryOp::RDiv:
      return backward_loop(it, kGrainCheap, RDivB{a});
    case UnaryOp::Clamp:
      return backward_loop(it, kGrainCheap, ClampB{a, b});
  }
  LOOM_FAIL("unary_backward: unknown op {}", static_cast<int>(op));
}

}  // namespace

void CpuBackend::unary(UnaryOp op, const Tensor& x, Tensor& out, float a, float b) {
  cpu::check_dtype(x, DType::Float32, "unary", "input");
  cpu::check_dtype(out, DType::Float32, "unary", "out");
  const cpu::StridedIter<2> it({&out, &x}, "unary");
  using cpu::kGrainCheap;
  using cpu::kGrainHeavy;
  switch (op) {
    case UnaryOp::Neg:
      return unary_loop(it, kGrainCheap, NegF{});
    case UnaryOp::Exp:
      return unary_loop(it, kGrainHeavy, ExpF{});
    case UnaryOp::Log:
      return unary_loop(it, kGrainHeavy, LogF{});
    case UnaryOp::Sqrt:
      return unary_loop(it, kGrainCheap, SqrtF{});
    case UnaryOp::Rsqrt:
      return unary_loop(it, kGrainCheap, RsqrtF{});
    case UnaryOp::Tanh:
      return unary_loop(it, kGrainHeavy, TanhF{});
    case UnaryOp::Sigmoid:
      return unary_loop(it, kGrainHeavy, SigmoidF{});
    case UnaryOp::Relu:
      return unary_loop(it, kGrainCheap, ReluF{});
    case UnaryOp::Gelu:
      return unary_loop(it, kGrainHeavy, GeluF{});
    case UnaryOp::GeluTanh:
      return unary_loop(it, kGrainHeavy, GeluTanhF{});
    case UnaryOp::Abs:
      return unary_loop(it, kGrainCheap, AbsF{});
    case UnaryOp::Sin:
      return unary_loop(it, kGrainHeavy, SinF{});
    case UnaryOp::Cos:
      return unary_loop(it, kGrainHeavy, CosF{});
    case UnaryOp::Sign:
      return unary_loop(it, kGrainCheap, SignF{});
    case UnaryOp::Pow:
      return pow_forward(it, a);
    case UnaryOp::Affine:
      return unary_loop(it, kGrainCheap, AffineF{a, b});
    case UnaryOp::RDiv:
      return unary_loop(it, kGrainCheap, RDivF{a});
    case UnaryOp::Clamp:
      return unary_loop(it, kGrainCheap, ClampF{a, b});
  }
  LOOM_FAIL("unary: unknown op {}", static_cast<int>(op));
}

void CpuBackend::unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y,
                                Tensor& out, float a, float b) {
  const char* name = "unary_backward";
  cpu::check_dtype(grad, DType::Float32, name, "grad");
  cpu::check_dtype(out, DType::Float32, name, "out");
  // Callers may pass only the tensor the derivative needs; the other slot is filled with an
  // operand the functor ignores. If y is needed but was not saved, recompute it from x.
  Tensor xx = x, yy = y;
  if (backward_uses_y(op) && !yy.defined()) {
    cpu::check_dtype(x, DType::Float32, name, "x (needed to recompute y)");
    yy = Tensor::empty(x.shape());
    unary(op, x, yy, a, b);
  }
  if (backward_uses_x(op)) cpu::check_dtype(x, DType::Float32, name, "x");
  if (!xx.defined()) xx = yy.defined() ? yy : grad;
  if (!yy.defined()) yy = xx;
  cpu::check_dtype(xx, DType::Float32, name, "x");
  cpu::check_dtype(yy, DType::Float32, name, "y");
  const cpu::StridedIter<4> it({&out, &grad, &xx, &yy}, name);
  dispatch_backward(op, it, a, b);
}

}  // namespace loom
