// Branch-free float32 math functions that the compiler can vectorise inside `#pragma omp simd`
// loops. The C library's expf/tanhf/erff are opaque calls that keep a loop scalar (glibc only
// offers vector versions under -ffast-math), and exp/tanh/erf dominate softmax, GELU and
// cross-entropy. PyTorch does the same with its own vectorised kernels (Sleef, and
// Abramowitz-Stegun 7.1.26 for erf). Every function here is written with selects instead of
// branches, handles +-inf and NaN like the C library, and is tested against <cmath> in
// tests/core/test_cpu_backend.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

// These must be inlined into the loop that calls them, or the loop cannot be vectorised; GCC's
// inliner gives up on them when a file instantiates many loops, so force it.
#define LOOM_VEC_INLINE inline __attribute__((always_inline))

namespace loom::cpu {

LOOM_VEC_INLINE float bits_to_float(int32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);  // compiles to a register move; vectorises, unlike bit_cast
  return f;
}

// e^x with about 1 ulp error (Cephes expf): x = n ln2 + r with |r| <= ln2/2, e^r by a degree-6
// polynomial, 2^n built in the exponent bits. Results below FLT_MIN flush to 0 (the C library
// returns denormals there), so exp(-inf) == 0 exactly, as masked softmax needs.
// exp_f's range ends, ln(FLT_MAX) and ln(FLT_MIN), and its first step for an argument xc clamped
// to [kExpLo, kExpHi]: e^r and n.
constexpr float kExpHi = 88.72283935546875f, kExpLo = -87.33654022216797f;
struct ExpParts {
  float er, n;  // e^xc = er * 2^n
};
LOOM_VEC_INLINE ExpParts exp_parts_f(float xc) {
  const float n = std::nearbyint(xc * 1.44269504088896341f);  // round(x / ln2)
  // ln2 split in two so that n * ln2_hi is exact.
  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return {p * r * r + r + 1.0f, n};
}
// er * 2^n for n in [-126, 128]. At x == kExpHi, n == 128 does not fit the exponent field:
// scale by 2^floor(n/2), then by 2^(n - floor(n/2)). (Both products are exact but the last,
// below FLT_MIN, so any split of n gives the same bits; the shift, unlike n / 2, needs no
// correction for negative n.)
LOOM_VEC_INLINE float times_two_to_f(float er, float n) {
  const int32_t n_int = static_cast<int32_t>(n), n_half = n_int >> 1;
  const float scale1 = bits_to_float((n_half + 127) << 23);
  const float scale2 = bits_to_float((n_int - n_half + 127) << 23);
  return er * scale1 * scale2;
}
LOOM_VEC_INLINE float exp_f(float x) {
  // x clamped to [kExpLo, kExpHi]. A NaN fails `x > kExpLo` and becomes kExpLo, which keeps the
  // float->int conversion defined; the last line returns the NaN. (With the clamp written so,
  // and the split scale, the function is 24% faster than with n / 2 and a separate NaN select,
  // and each of the 2^32 results is the same to the bit: checked when it was written.)
  float xc = x > kExpLo ? x : kExpLo;
  xc = xc < kExpHi ? xc : kExpHi;
  const auto [er, n] = exp_parts_f(xc);
  float y = times_two_to_f(er, n);
  y = x < kExpLo ? 0.0f : y;
  y = x > kExpHi ? std::numeric_limits<float>::infinity() : y;
  return x != x ? x : y;  // NaN stays NaN
}

// exp_f for the arguments that softmax (x - max x) and the normal density (-x^2 / 2) give: x <= 0,
// or NaN. The same bits as exp_f for every such x (all 2^31 checked), with the upper end's
// steps left out: no clamp at kExpHi and no inf, and n in [-126, 0] is one exact factor 2^n.
// GELU's forward ran 37% faster on a Sapphire Rapids core, its backward 25%. A positive x is
// outside its contract: beyond kExpHi its n does not fit an int.
LOOM_VEC_INLINE float exp_nonpositive_f(float x) {
  const float xc = x > kExpLo ? x : kExpLo;  // a NaN becomes kExpLo, returned as NaN below
  const auto [er, n] = exp_parts_f(xc);
  const float y = er * bits_to_float((static_cast<int32_t>(n) + 127) << 23);
  return x != x ? x : (x < kExpLo ? 0.0f : y);
}

// exp_f for x >= 0, or NaN (tanh's e^{2|x|}): the same bits for every such x (all 2^31
// checked), without the lower end's clamp and its flush to 0. GPT-2's tanh GELU ran 13% faster.
LOOM_VEC_INLINE float exp_nonnegative_f(float x) {
  const float xc = x < kExpHi ? x : kExpHi;  // a NaN becomes kExpHi, returned as NaN below
  const auto [er, n] = exp_parts_f(xc);
  const float y = times_two_to_f(er, n);
  return x != x ? x : (x > kExpHi ? std::numeric_limits<float>::infinity() : y);
}

// tanh: odd polynomial near 0 (Cephes tanhf, |x| < 0.625), else 1 - 2 / (e^{2|x|} + 1), which
// saturates to +-1 without overflow trouble (e^{2|x|} = inf gives exactly 1).
LOOM_VEC_INLINE float tanh_f(float x) {
  const float ax = std::fabs(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float big_abs = 1.0f - 2.0f / (exp_nonnegative_f(2.0f * ax) + 1.0f);
  const float big = x < 0.0f ? -big_abs : big_abs;
  return ax < 0.625f ? small : big;  // NaN: both branches are NaN
}

// The logistic function 1 / (1 + e^-x).
LOOM_VEC_INLINE float sigmoid_f(float x) { return 1.0f / (1.0f + exp_f(-x)); }

// erfc(|x|) = t P(t) e^{-x^2} with t = 1 / (1 + p|x|), Abramowitz & Stegun 7.1.26: absolute
// error <= 1.5e-7 for every x >= 0 (the approximation PyTorch's vectorised erf uses too).
// erfc_poly_f(|x|) is the factor t P(t).
LOOM_VEC_INLINE float erfc_poly_f(float ax) {
  const float t = 1.0f / (1.0f + 0.3275911f * ax);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  return p * t;
}

// The standard normal CDF Phi(x) = (1 + erf(x / sqrt 2)) / 2 = 1 - erfc(x / sqrt 2) / 2, with
// absolute error below 1e-7, and the density phi(x) = e^{-x^2/2} / sqrt(2 pi). For x < 0, Phi
// is erfc(|x| / sqrt 2) / 2 directly, which keeps the left tail free of the cancellation in
// 1 + erf(x). Both are multiples of e^{-x^2/2}, computed once (an exp is most of the cost of
// either), as GELU's derivative Phi(x) + x phi(x) needs them; it is taken as
// e^{-(|x| / sqrt 2)^2}, whose argument rounds once more than -x^2 / 2 (a few ulp in phi).
struct NormalCdfPdf {
  float cdf, pdf;
};
LOOM_VEC_INLINE NormalCdfPdf normal_cdf_pdf_f(float x) {
  const float ax = std::fabs(x) * 0.70710678118654752f;
  const float e = exp_nonpositive_f(-ax * ax);  // e^{-x^2/2}
  const float q = 0.5f * (erfc_poly_f(ax) * e);  // P(Z > |x|)
  return {x < 0.0f ? q : 1.0f - q, 0.3989422804014327f * e};
}
// Phi(x) alone (inlined, the unused density is never computed).
LOOM_VEC_INLINE float normal_cdf_f(float x) { return normal_cdf_pdf_f(x).cdf; }

// The largest of x[0], ..., x[n-1] (-inf for n == 0; NaNs are skipped, callers that need NaN
// to propagate get it from the arithmetic that follows). Sixteen independent running maxima
// let the loop vectorise: GCC does not vectorise a float max reduction on its own, because
// max is not associative in the presence of NaN and -0.
LOOM_VEC_INLINE float max_of(const float* x, int64_t n) {
  constexpr int64_t kLanes = 16;
  float lanes[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) lanes[l] = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
#pragma omp simd
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] = x[j + l] > lanes[l] ? x[j + l] : lanes[l];
  }
  float m = -std::numeric_limits<float>::infinity();
  for (; j < n; ++j) m = x[j] > m ? x[j] : m;
  for (int64_t l = 0; l < kLanes; ++l) m = lanes[l] > m ? lanes[l] : m;
  return m;
}

}  // namespace loom::cpu
