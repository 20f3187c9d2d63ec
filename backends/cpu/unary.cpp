// Unary ops (float32) and their derivatives: one loop for every entry of the table in
// backends/unary_math.h. unary::visit switches on the op once per call and hands the loop the
// op's type, so each op gets its own instantiation that the compiler inlines and vectorises.
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/vec_math.h"
#include "backends/unary_math.h"

namespace loom {

namespace {

using cpu::Ptrs;
using cpu::Steps;

// The CPU's math library for the table: branch-free versions of exp, tanh and the normal CDF
// that vectorise inside `#pragma omp simd` loops (vec_math.h), <cmath> for the rest.
struct CpuMath {
  static LOOM_VEC_INLINE float exp(float x) { return cpu::exp_f(x); }
  static LOOM_VEC_INLINE float tanh(float x) { return cpu::tanh_f(x); }
  static LOOM_VEC_INLINE float normal_cdf(float x) { return cpu::normal_cdf_f(x); }
  static LOOM_VEC_INLINE float log(float x) { return std::log(x); }
  static LOOM_VEC_INLINE float sqrt(float x) { return std::sqrt(x); }
  static LOOM_VEC_INLINE float sin(float x) { return std::sin(x); }
  static LOOM_VEC_INLINE float cos(float x) { return std::cos(x); }
  static LOOM_VEC_INLINE float abs(float x) { return std::fabs(x); }
  static LOOM_VEC_INLINE float pow(float x, float a) { return std::pow(x, a); }
};

constexpr int64_t grain(unary::Cost cost) {
  return cost == unary::Cost::Heavy ? cpu::kGrainHeavy : cpu::kGrainCheap;
}

// out = op.forward(x) over one strided iteration space.
template <class Op>
void forward_loop(const cpu::StridedIter<2>& iter, Op op) {
  iter.for_each(grain(Op::forward_cost),
                [op](const Ptrs<2>& p, const Steps<2>& s, int64_t n) LOOM_FLATTEN {
                  float* out = reinterpret_cast<float*>(p[0]);
                  const float* x = reinterpret_cast<const float*>(p[1]);
                  if (s[0] == 4 && s[1] == 4) {
#pragma omp simd
                    for (int64_t i = 0; i < n; ++i) out[i] = op.forward(x[i]);
                  } else if (s[0] == 4 && s[1] == 0) {  // broadcast input: one value for the run
                    const float v = op.forward(*x);
#pragma omp simd
                    for (int64_t i = 0; i < n; ++i) out[i] = v;
                  } else {
                    for (int64_t i = 0; i < n; ++i)
                      *reinterpret_cast<float*>(p[0] + i * s[0]) =
                          op.forward(*reinterpret_cast<const float*>(p[1] + i * s[1]));
                  }
                });
}

// out = op.backward(grad, x, y) = grad * dy/dx.
template <class Op>
void backward_loop(const cpu::StridedIter<4>& iter, Op op) {
  iter.for_each(grain(Op::backward_cost),
                [op](const Ptrs<4>& p, const Steps<4>& s, int64_t n) LOOM_FLATTEN {
                  float* out = reinterpret_cast<float*>(p[0]);
                  const float* g = reinterpret_cast<const float*>(p[1]);
                  const float* x = reinterpret_cast<const float*>(p[2]);
                  const float* y = reinterpret_cast<const float*>(p[3]);
                  if (s[0] == 4 && s[1] == 4 && s[2] == 4 && s[3] == 4) {
#pragma omp simd
                    for (int64_t i = 0; i < n; ++i) out[i] = op.backward(g[i], x[i], y[i]);
                  } else {
                    for (int64_t i = 0; i < n; ++i)
                      *reinterpret_cast<float*>(p[0] + i * s[0]) =
                          op.backward(*reinterpret_cast<const float*>(p[1] + i * s[1]),
                                      *reinterpret_cast<const float*>(p[2] + i * s[2]),
                                      *reinterpret_cast<const float*>(p[3] + i * s[3]));
                  }
                });
}

// out = op.forward(x + bias): the add and the activation in one pass.
template <class Op>
void bias_forward_loop(const cpu::StridedIter<3>& iter, Op op) {
  iter.for_each(grain(Op::forward_cost),
                [op](const Ptrs<3>& p, const Steps<3>& s, int64_t n) LOOM_FLATTEN {
                  float* out = reinterpret_cast<float*>(p[0]);
                  const float* x = reinterpret_cast<const float*>(p[1]);
                  const float* b = reinterpret_cast<const float*>(p[2]);
                  if (s[0] == 4 && s[1] == 4 && s[2] == 4) {  // a row of x and the bias
#pragma omp simd
                    for (int64_t i = 0; i < n; ++i) out[i] = op.forward(x[i] + b[i]);
                  } else {
                    for (int64_t i = 0; i < n; ++i)
                      *reinterpret_cast<float*>(p[0] + i * s[0]) =
                          op.forward(*reinterpret_cast<const float*>(p[1] + i * s[1]) +
                                     *reinterpret_cast<const float*>(p[2] + i * s[2]));
                  }
                });
}

// out = op.backward(grad, x + bias) = grad * op'(x + bias).
template <class Op>
void bias_backward_loop(const cpu::StridedIter<4>& iter, Op op) {
  iter.for_each(grain(Op::backward_cost),
                [op](const Ptrs<4>& p, const Steps<4>& s, int64_t n) LOOM_FLATTEN {
                  float* out = reinterpret_cast<float*>(p[0]);
                  const float* g = reinterpret_cast<const float*>(p[1]);
                  const float* x = reinterpret_cast<const float*>(p[2]);
                  const float* b = reinterpret_cast<const float*>(p[3]);
                  if (s[0] == 4 && s[1] == 4 && s[2] == 4 && s[3] == 4) {
#pragma omp simd
                    for (int64_t i = 0; i < n; ++i) out[i] = op.backward(g[i], x[i] + b[i], 0.0f);
                  } else {
                    for (int64_t i = 0; i < n; ++i)
                      *reinterpret_cast<float*>(p[0] + i * s[0]) =
                          op.backward(*reinterpret_cast<const float*>(p[1] + i * s[1]),
                                      *reinterpret_cast<const float*>(p[2] + i * s[2]) +
                                          *reinterpret_cast<const float*>(p[3] + i * s[3]),
                                      0.0f);
                  }
                });
}

}  // namespace

Tensor CpuBackend::float32_copy(const Tensor& t) {
  if (!t.defined() || t.dtype() == DType::Float32) return t;
  Tensor f = Tensor::empty(t.shape(), DType::Float32, Device::CPU);
  copy(t, f);
  return f;
}

void CpuBackend::unary_impl(UnaryOp op, const Tensor& x, Tensor& out, float a, float b) {
  if (x.dtype() != DType::Float32 || out.dtype() != DType::Float32)  // bfloat16: see into()
    return into(out, [&](Tensor& o) { unary_impl(op, float32_copy(x), o, a, b); });
  const cpu::StridedIter<2> it({&out, &x}, "unary");
  unary::visit<CpuMath>(op, a, b, [&](auto entry) { forward_loop(it, entry); });
}

void CpuBackend::activate_gemm_output(const GemmArgs& g) {
  const int64_t ldc = g.m == 1 ? std::max(g.ldc, g.n) : g.ldc;
  unary::visit<CpuMath>(*g.activation, 0.0f, 0.0f, [&](auto entry) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < g.batch; ++b)
      for (int64_t r = 0; r < g.m; ++r) {
        float* row = static_cast<float*>(g.c) + b * g.stride_c + r * ldc;
#pragma omp simd
        for (int64_t j = 0; j < g.n; ++j) row[j] = entry.forward(row[j]);
      }
  });
}

void CpuBackend::unary_backward_impl(UnaryOp op, const Tensor& grad, const Tensor& x,
                                     const Tensor& y, Tensor& out, float a, float b) {
  for (const Tensor* t : {&grad, &x, &y, static_cast<const Tensor*>(&out)})
    if (t->defined() && t->dtype() != DType::Float32)  // bfloat16: see into()
      return into(out, [&](Tensor& o) {
        unary_backward_impl(op, float32_copy(grad), float32_copy(x), float32_copy(y), o, a, b);
      });
  // The derivative reads at most one of x and y; the other slot gets an operand it ignores.
  const Tensor& xs = x.defined() ? x : grad;
  const Tensor& ys = y.defined() ? y : grad;
  const cpu::StridedIter<4> it({&out, &grad, &xs, &ys}, "unary_backward");
  unary::visit<CpuMath>(op, a, b, [&](auto entry) { backward_loop(it, entry); });
}

void CpuBackend::bias_unary_impl(UnaryOp op, const Tensor& x, const Tensor& bias, Tensor& out) {
  for (const Tensor* t : {&x, &bias, static_cast<const Tensor*>(&out)})
    if (t->dtype() != DType::Float32)  // bfloat16: see into()
      return into(out,
                  [&](Tensor& o) { bias_unary_impl(op, float32_copy(x), float32_copy(bias), o); });
  const cpu::StridedIter<3> it({&out, &x, &bias}, "bias_unary");
  // Only ops whose derivative reads the input get here (Backend::bias_unary); the others are
  // not instantiated.
  unary::visit<CpuMath>(op, 0.0f, 0.0f, [&](auto entry) {
    if constexpr (decltype(entry)::reads != unary::Reads::Output) bias_forward_loop(it, entry);
  });
}

void CpuBackend::bias_unary_backward_impl(UnaryOp op, const Tensor& grad, const Tensor& x,
                                          const Tensor& bias, Tensor& out) {
  for (const Tensor* t : {&grad, &x, &bias, static_cast<const Tensor*>(&out)})
    if (t->dtype() != DType::Float32)
      return into(out, [&](Tensor& o) {
        bias_unary_backward_impl(op, float32_copy(grad), float32_copy(x), float32_copy(bias), o);
      });
  const cpu::StridedIter<4> it({&out, &grad, &x, &bias}, "bias_unary_backward");
  unary::visit<CpuMath>(op, 0.0f, 0.0f, [&](auto entry) {
    if constexpr (decltype(entry)::reads != unary::Reads::Output) bias_backward_loop(it, entry);
  });
}

}  // namespace loom
