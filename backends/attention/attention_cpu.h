// What the CPU's attention kernels share (attention.cpp's reference, attention_tiled.cpp): the
// dot product of a score and the sums of a vector's lanes, and for query row i of problem b, the
// keys it sees, its mask row and the dropout factors z_ij.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backends/attention/attention.h"
#include "core/rng.h"

namespace loom::cpu {

// -kInf starts a row's running maximum; kNaN is the result of a row whose every key is blocked.
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// a . b over d floats, the dot product both CPU kernels take a score from.
inline float dot(const float* a, const float* b, int64_t d) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t c = 0; c < d; ++c) s += a[c] * b[c];
  return s;
}

// The sum of v's lanes, halves added to halves in registers (4 steps for 16 lanes, not 15
// additions in turn): the decoding kernel's scores (attention_tiled.cpp).
// Vectors of 4, 8 and 16 floats (GCC's vector extension: the same types as tiled_gemm.h's
// VectorOf<4>, <8> and <16>).
typedef float Vec4 __attribute__((vector_size(4 * sizeof(float))));
typedef float Vec8 __attribute__((vector_size(8 * sizeof(float))));
typedef float Vec16 __attribute__((vector_size(16 * sizeof(float))));
inline float sum_lanes(const Vec4& v) { return (v[0] + v[2]) + (v[1] + v[3]); }
inline float sum_lanes(const Vec8& v) {
  return sum_lanes(Vec4{__builtin_shufflevector(v, v, 0, 1, 2, 3) +
                        __builtin_shufflevector(v, v, 4, 5, 6, 7)});
}
inline float sum_lanes(const Vec16& v) {
  return sum_lanes(Vec8{__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                        __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15)});
}

// The lane sums of 16 vectors of 16 floats at once, sums[j] = sum_lanes(p[j]) to the bit: the
// same halves added to halves in the same order, two vectors' halves side by side in each
// addition (45 shuffles and additions, where 16 sums one at a time take about 130). A template
// so that a build of 8-float vectors, which never calls it, does not compile its shuffles; no
// vector by value, so that files built for other vectors (the tests) share its calling
// convention.
template <class V16>
void sum_lanes_16(const V16 (&p)[16], float* sums) {
  V16 h[8];  // lanes 0-7: p[2a]'s halves added; 8-15: p[2a + 1]'s
  for (int a = 0; a < 8; ++a)
    h[a] = __builtin_shufflevector(p[2 * a], p[2 * a + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18,
                                   19, 20, 21, 22, 23) +
           __builtin_shufflevector(p[2 * a], p[2 * a + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25,
                                   26, 27, 28, 29, 30, 31);
  V16 q[4];  // four lanes each of p[4b] ... p[4b + 3]: their 8-lane halves' halves added
  for (int b = 0; b < 4; ++b)
    q[b] = __builtin_shufflevector(h[2 * b], h[2 * b + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18,
                                   19, 24, 25, 26, 27) +
           __builtin_shufflevector(h[2 * b], h[2 * b + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21,
                                   22, 23, 28, 29, 30, 31);
  V16 t[2];  // two lanes each of p[8e] ... p[8e + 7]: v[0] + v[2] and v[1] + v[3] of their four
  for (int e = 0; e < 2; ++e)
    t[e] = __builtin_shufflevector(q[2 * e], q[2 * e + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20,
                                   21, 24, 25, 28, 29) +
           __builtin_shufflevector(q[2 * e], q[2 * e + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19,
                                   22, 23, 26, 27, 30, 31);
  const V16 r = __builtin_shufflevector(t[0], t[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22,
                                        24, 26, 28, 30) +
                __builtin_shufflevector(t[0], t[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23,
                                        25, 27, 29, 31);
  std::memcpy(sums, &r, sizeof r);
}

struct AttentionRows {
  const AttentionArgs& a;
  const float* mask;  // mask data, or null
  AttentionMaskLayout layout;

  AttentionRows(const AttentionArgs& args, const Tensor& m)
      : a(args), mask(m.defined() ? m.data_ptr<float>() : nullptr),
        layout(attention_mask_layout(m)) {}

  // Keys 0..visible(i)-1 are visible to query i.
  int64_t visible(int64_t i) const {
    return a.causal ? std::min(a.kv_len, a.query_offset + i + 1) : a.kv_len;
  }
  // Query i's mask row (key j at j * layout.col_stride), or null without a mask.
  const float* mask_row(int64_t b, int64_t i) const {
    return mask ? mask + layout.batch_offset(b) + i * layout.row_stride : nullptr;
  }
  // 1 / (1 - p) if element (b, i, j) survives dropout, else 0 (1 without dropout).
  float keep(int64_t b, int64_t i, int64_t j) const {
    if (a.dropout_p <= 0.0f) return 1.0f;
    const uint64_t counter = a.offset + static_cast<uint64_t>((b * a.q_len + i) * a.kv_len + j);
    return philox_uniform(counter, a.seed) >= a.dropout_p ? 1.0f / (1.0f - a.dropout_p) : 0.0f;
  }
};

}  // namespace loom::cpu
