// Fused scaled-dot-product attention (attention.h): Backend's checks, then the CPU reference
// implementation, written for clarity rather than speed. attention_tiled.cpp computes the same
// formulas as small matrix products for float32, and the CUDA kernels (attention.cu) tile by
// tile; the tests compare each with this file and this file with the unfused composite.
//
// Forward, per query row i of problem b (two passes over the keys):
//   s_j = scale * q_i . k_j + mask_bij          (j visible: j <= query_offset + i when causal)
//   m = max_j s_j,  l = sum_j exp(s_j - m),  lse_i = m + log(l)
//   out_i = sum_j exp(s_j - lse_i) * z_ij * v_j  (z_ij = keep_ij / (1 - p): the dropout draw)
// A row whose every score is -inf (all keys blocked) has no softmax: out_i = NaN and lse_i =
// NaN, as the unfused softmax gives.
// Backward (FlashAttention-2, Dao 2023, Algorithm 2): P_ij = exp(s_ij - lse_i) is recomputed,
//   D_i = dout_i . out_i,  dP_ij = z_ij * dout_i . v_j,  dS_ij = P_ij (dP_ij - D_i),
//   dv_j += P_ij z_ij dout_i,  dq_i += scale dS_ij k_j,  dk_j += scale dS_ij q_i.
// bfloat16 operands are upcast to float32 on loading; results are rounded once on storing.
#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/attention/attention.h"
#include "backends/attention/attention_cpu.h"
#include "backends/backend.h"
#include "core/bfloat16.h"
#include "core/error.h"
#include "core/rng.h"

namespace loom {

// ---------------------------------------------------------------------------- the public methods
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

// What the CUDA kernels (attention.cu) take beyond the checks above: head_dim up to 128, and
// one block per (problem, tile of at least 16 rows) within grid.x's 2^31 - 1.
void check_attention_launch(const char* op, const AttentionArgs& args) {
  LOOM_CHECK(args.head_dim <= 128, "{}: head_dim {} is above the CUDA kernel's 128", op,
             args.head_dim);
  const int64_t tiles = (std::max(args.q_len, args.kv_len) + 15) / 16;
  LOOM_CHECK(args.n <= INT_MAX / tiles, "{}: {} problems of {} tiles exceed the CUDA grid", op,
             args.n, tiles);
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
  if (device_ == Device::CUDA) check_attention_launch(op, a);
  run(cpu::attention_forward, LOOM_CUDA_IMPL(cuda::attention_forward), q, k, v, mask, a, out,
      lse);
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
  const Shape q_shape{args.n, args.q_len, args.head_dim};
  const Shape kv_shape{args.n, args.kv_len, args.head_dim};
  attention_operand(op, device_, dout, q.dtype(), q_shape, "grad");
  attention_operand(op, device_, out, q.dtype(), q_shape, "out");
  attention_operand(op, device_, lse, DType::Float32, {args.n, args.q_len}, "lse");
  attention_operand(op, device_, dq, q.dtype(), q_shape, "dq");
  attention_operand(op, device_, dk, q.dtype(), kv_shape, "dk");
  attention_operand(op, device_, dv, q.dtype(), kv_shape, "dv");
  if (device_ == Device::CUDA) check_attention_launch(op, a);
  run(cpu::attention_backward, LOOM_CUDA_IMPL(cuda::attention_backward), dout, q, k, v, mask, out,
      lse, a, dq, dk, dv);
}

// ---------------------------------------------------------------------------- the CPU
namespace {

using cpu::dot, cpu::kInf, cpu::kNaN;

// The float32 copy of `count` elements of a float32 or bfloat16 tensor's data, from element
// `first`.
std::vector<float> load(const Tensor& t, int64_t first, int64_t count) {
  std::vector<float> out(static_cast<size_t>(count));
  if (t.dtype() == DType::BFloat16) {
    const BFloat16* p = t.data_ptr<BFloat16>() + first;
    for (int64_t i = 0; i < count; ++i) out[i] = static_cast<float>(p[i]);
  } else {
    const float* p = t.data_ptr<float>() + first;
    for (int64_t i = 0; i < count; ++i) out[i] = p[i];
  }
  return out;
}

void store(const std::vector<float>& values, Tensor& t, int64_t first) {
  if (t.dtype() == DType::BFloat16) {
    BFloat16* p = t.data_ptr<BFloat16>() + first;
    for (size_t i = 0; i < values.size(); ++i) p[i] = BFloat16(values[i]);
  } else {
    float* p = t.data_ptr<float>() + first;
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  }
}

// The scores of query row i of problem b against its visible keys.
void scores(const cpu::AttentionRows& rows, int64_t b, int64_t i, const float* qi,
            const float* k, float* s) {
  const AttentionArgs& a = rows.a;
  const float* mrow = rows.mask_row(b, i);
  for (int64_t j = 0; j < rows.visible(i); ++j) {
    s[j] = a.scale * dot(qi, k + j * a.head_dim, a.head_dim);
    if (mrow) s[j] += mrow[j * rows.layout.col_stride];
  }
}

// Whether attention_forward/backward take the tiled kernels: float32, and scores [q_len,
// kv_len] of at most 1M elements (4 MB; the backward keeps two such buffers per thread).
bool tiled(const Tensor& q, const AttentionArgs& a) {
  constexpr int64_t kMaxScores = int64_t{1} << 20;
  return q.dtype() == DType::Float32 && a.q_len * (a.kv_len + 7) <= kMaxScores;
}

}  // namespace

void cpu::attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                            const AttentionArgs& a, Tensor& out, Tensor& lse) {
  if (!tiled(q, a))
    attention_forward_reference(q, k, v, mask, a, out, lse);
  else if (a.q_len <= kAttentionDecodeQueries)
    attention_forward_decoding(q, k, v, mask, a, out, lse);
  else
    attention_forward_tiled(q, k, v, mask, a, out, lse);
}

void cpu::attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& mask, const Tensor& out, const Tensor& lse,
                             const AttentionArgs& a, Tensor& dq, Tensor& dk, Tensor& dv) {
  if (tiled(q, a))
    attention_backward_tiled(dout, q, k, v, mask, out, lse, a, dq, dk, dv);
  else
    attention_backward_reference(dout, q, k, v, mask, out, lse, a, dq, dk, dv);
}

void cpu::attention_forward_reference(const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor& mask, const AttentionArgs& a, Tensor& out,
                                      Tensor& lse) {
  const cpu::AttentionRows row(a, mask);
  const int64_t d = a.head_dim;
  float* lse_data = lse.data_ptr<float>();
#pragma omp parallel for schedule(dynamic)
  for (int64_t b = 0; b < a.n; ++b) {
    const std::vector<float> qb = load(q, b * a.q_len * d, a.q_len * d);
    const std::vector<float> kb = load(k, b * a.kv_stride, a.kv_len * d);
    const std::vector<float> vb = load(v, b * a.kv_stride, a.kv_len * d);
    std::vector<float> ob(static_cast<size_t>(a.q_len * d), 0.0f), s(a.kv_len);
    for (int64_t i = 0; i < a.q_len; ++i) {
      const int64_t visible = row.visible(i);
      scores(row, b, i, qb.data() + i * d, kb.data(), s.data());
      float m = -kInf;
      for (int64_t j = 0; j < visible; ++j) m = std::max(m, s[j]);
      float* oi = ob.data() + i * d;
      if (m == -kInf) {  // every key blocked: no softmax (NaN, as the unfused path)
        for (int64_t c = 0; c < d; ++c) oi[c] = kNaN;
        lse_data[b * a.q_len + i] = kNaN;
        continue;
      }
      float l = 0.0f;
      for (int64_t j = 0; j < visible; ++j) l += std::exp(s[j] - m);
      const float row_lse = m + std::log(l);
      lse_data[b * a.q_len + i] = row_lse;
      for (int64_t j = 0; j < visible; ++j) {
        const float p = std::exp(s[j] - row_lse) * row.keep(b, i, j);
        if (p == 0.0f) continue;
        const float* vj = vb.data() + j * d;
#pragma omp simd
        for (int64_t c = 0; c < d; ++c) oi[c] += p * vj[c];
      }
    }
    store(ob, out, b * a.q_len * d);
  }
}

void cpu::attention_backward_reference(const Tensor& dout, const Tensor& q, const Tensor& k,
                                       const Tensor& v, const Tensor& mask, const Tensor& out,
                                       const Tensor& lse, const AttentionArgs& a, Tensor& dq,
                                       Tensor& dk, Tensor& dv) {
  const cpu::AttentionRows row(a, mask);
  const int64_t d = a.head_dim;
  const float* lse_data = lse.data_ptr<float>();
#pragma omp parallel for schedule(dynamic)
  for (int64_t b = 0; b < a.n; ++b) {
    const int64_t qo = b * a.q_len * d, kvo = b * a.kv_len * d;
    const std::vector<float> qb = load(q, qo, a.q_len * d), kb = load(k, kvo, a.kv_len * d);
    const std::vector<float> vb = load(v, kvo, a.kv_len * d), ob = load(out, qo, a.q_len * d);
    const std::vector<float> gb = load(dout, qo, a.q_len * d);
    std::vector<float> dqb(static_cast<size_t>(a.q_len * d), 0.0f);
    std::vector<float> dkb(static_cast<size_t>(a.kv_len * d), 0.0f), dvb(dkb.size(), 0.0f);
    std::vector<float> s(a.kv_len);
    for (int64_t i = 0; i < a.q_len; ++i) {
      const float* qi = qb.data() + i * d;
      const float* gi = gb.data() + i * d;
      float* dqi = dqb.data() + i * d;
      scores(row, b, i, qi, kb.data(), s.data());
      const float row_lse = lse_data[b * a.q_len + i];
      const float D = dot(gi, ob.data() + i * d, d);  // = sum_j P_ij dP_ij
      for (int64_t j = 0; j < row.visible(i); ++j) {
        const float p = std::exp(s[j] - row_lse), z = row.keep(b, i, j);
        const float* kj = kb.data() + j * d;
        float* dkj = dkb.data() + j * d;
        float* dvj = dvb.data() + j * d;
        const float pz = p * z;
        const float ds = a.scale * p * (z * dot(gi, vb.data() + j * d, d) - D);
#pragma omp simd
        for (int64_t c = 0; c < d; ++c) {
          dvj[c] += pz * gi[c];
          dqi[c] += ds * kj[c];
          dkj[c] += ds * qi[c];
        }
      }
    }
    store(dqb, dq, qo);
    store(dkb, dk, kvo);
    store(dvb, dv, kvo);
  }
}

}  // namespace loom
