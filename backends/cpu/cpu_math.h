// The CPU's math library for the unary table (backends/unary_math.h): branch-free versions of
// exp, tanh and the normal CDF (alone and with its density) that vectorise inside
// `#pragma omp simd` loops (vec_math.h), <cmath> for the rest. The element-wise kernels
// (backends/elementwise/cpu_unary.cpp) and the activation a product applies to its rows
// (cpu_activation_rows.cpp) compute with it, so their values are the same to the bit.
#pragma once

#include <cmath>

#include "backends/cpu/vec_math.h"

namespace loom::cpu {

// The functions of the table's math library that <cmath> gives under the same name, each
// M::f(x) being std::f(x) (the float overload).
// clang-format off
#define LOOM_CPU_STD_MATH(X) \
  X(log) X(sqrt) X(sin) X(cos) X(abs) X(log1p) X(expm1) X(log2) X(exp2) X(erf) X(floor) X(ceil) \
  X(trunc)
// clang-format on

struct CpuMath {
  static LOOM_VEC_INLINE float exp(float x) { return exp_f(x); }
  static LOOM_VEC_INLINE float tanh(float x) { return tanh_f(x); }
  static LOOM_VEC_INLINE float normal_cdf(float x) { return normal_cdf_f(x); }
  static LOOM_VEC_INLINE NormalCdfPdf normal_cdf_pdf(float x) { return normal_cdf_pdf_f(x); }
  static LOOM_VEC_INLINE float pow(float x, float a) { return std::pow(x, a); }
  static LOOM_VEC_INLINE float rint(float x) { return std::nearbyint(x); }  // ties to even
#define LOOM_CPU_STD_FUNCTION(f) \
  static LOOM_VEC_INLINE float f(float x) { return std::f(x); }
  LOOM_CPU_STD_MATH(LOOM_CPU_STD_FUNCTION)
#undef LOOM_CPU_STD_FUNCTION
};
#undef LOOM_CPU_STD_MATH

}  // namespace loom::cpu
