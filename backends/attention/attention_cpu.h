// What the CPU's attention kernels share (attention.cpp's reference, attention_tiled.cpp): the
// dot product of a score, and for query row i of problem b, the keys it sees, its mask row and
// the dropout factors z_ij.
#pragma once

#include <algorithm>
#include <cstdint>
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
