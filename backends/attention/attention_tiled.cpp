// The CPU's fused attention for float32 (attention.h): the arithmetic of the reference in
// attention.cpp, the same formulas term for term, arranged for the cache and the vector units.
// The reference walks one query row at a time with dot products; here each problem b (one
// batch element and head) is a few small matrix products over buffers that stay in the cache:
//
//   forward                              backward (P recomputed from lse, as FlashAttention-2)
//   S  = Q K^T           [T_q, T_k]      S  = Q K^T,  P_ij = exp(scale S_ij + mask_ij - lse_i)
//   P  = softmax(scale S + mask) * z     dP = dO V^T                          [T_q, T_k]
//   O  = P V             [T_q, d]        dS_ij = scale P_ij (z_ij dP_ij - D_i), D_i = dO_i . O_i
//                                        dV = (P z)^T dO,  dQ = dS K,  dK = dS^T Q
//
// Each product runs in tile_gemm (backends/gemm/tiled_gemm.h), whose inner block keeps a tile
// of the result in vector registers while it walks the shared dimension, as BLAS kernels do
// (the unfused path's products run in the same kernel, through cpu::gemm); here the scores
// also stay in the cache between the products, the scale, the mask and the softmax.
// The products read Q, K, V and dO where they lie and write O and the gradients in place when
// the head dim is whole vectors (else, where a row is read or written as vectors, through
// per-thread copies whose rows are padded with zeros); K and V are transposed once per problem,
// P and dS are read transposed through their strides. The padded keys of the scores are zeros,
// so they add nothing.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/attention/attention.h"
#include "backends/attention/attention_cpu.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/vec_math.h"
#include "backends/gemm/tiled_gemm.h"

namespace loom {
namespace {

using cpu::tile_gemm;
using Operand = cpu::TileOperand;

int64_t padded(int64_t n) { return cpu::tile_gemm_padded(n); }

// `rows` rows of `cols` floats at src with their rows padded to `ld` floats (zeros after col
// `cols`): src itself when cols == ld, else a copy in buf.
const float* rows_padded(const float* src, int64_t rows, int64_t cols, int64_t ld,
                         std::vector<float>& buf) {
  if (cols == ld) return src;
  cpu::pack_b(src, cols, /*transposed=*/false, cols, rows, buf.data(), ld);
  return buf.data();
}

using cpu::kInf, cpu::kNaN;

// scale * s_j + mask_ij over the visible keys j of query i, in place.
void scale_and_mask(const cpu::AttentionRows& rows, int64_t b, int64_t i, float* s) {
  const int64_t n = rows.visible(i);
  const float scale = rows.a.scale;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) s[j] *= scale;
  if (const float* mrow = rows.mask_row(b, i))
    for (int64_t j = 0; j < n; ++j) s[j] += mrow[j * rows.layout.col_stride];
}

// Query i's scores s[0, visible) -> its probabilities, in place: scaled and masked, then
// p_j = exp(s_j - m) / l with one exponential per score, which is exp(s_j - lse) up to rounding
// (the backward recomputes P in that second form from lse); lse stores lse_i. false, with lse
// NaN, when every key is blocked: no softmax (NaN, as the unfused path).
bool probabilities(const cpu::AttentionRows& rows, int64_t b, int64_t i, float* s, float& lse) {
  const int64_t visible = rows.visible(i);
  scale_and_mask(rows, b, i, s);
  const float m = cpu::max_of(s, visible);
  if (m == -kInf) {
    lse = kNaN;
    return false;
  }
  float l = 0.0f;
#pragma omp simd reduction(+ : l)
  for (int64_t j = 0; j < visible; ++j) {
    s[j] = cpu::exp_nonpositive_f(s[j] - m);
    l += s[j];
  }
  lse = m + std::log(l);
  const float inv_l = 1.0f / l;
#pragma omp simd
  for (int64_t j = 0; j < visible; ++j) s[j] *= inv_l;
  return true;
}

}  // namespace

void cpu::attention_forward_tiled(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& mask, const AttentionArgs& a, Tensor& out,
                                  Tensor& lse) {
  const cpu::AttentionRows rows(a, mask);
  const int64_t tq = a.q_len, tk = a.kv_len, d = a.head_dim;
  const int64_t dpad = padded(d), tkpad = padded(tk);  // the buffers' row lengths
  const float *qd = q.data_ptr<float>(), *kd = k.data_ptr<float>(), *vd = v.data_ptr<float>();
  float *od = out.data_ptr<float>(), *lse_data = lse.data_ptr<float>();
#pragma omp parallel
  {
    // V with rows padded to dpad (when d is not a multiple of 8), K^T, the scores, and O.
    std::vector<float> vs(tk * dpad), kt(d * tkpad), s(tq * tkpad), o(tq * dpad);
#pragma omp for schedule(dynamic) nowait
    for (int64_t b = 0; b < a.n; ++b) {
      const float* vb = rows_padded(vd + b * a.kv_stride, tk, d, dpad, vs);
      cpu::pack_b(kd + b * a.kv_stride, d, /*transposed=*/true, tk, d, kt.data(), tkpad);  // K^T
      tile_gemm(tq, tkpad, d, {qd + b * tq * d, d, 1}, kt.data(), tkpad, s.data(), tkpad);
      for (int64_t i = 0; i < tq; ++i) {  // S -> P, row by row
        float* si = s.data() + i * tkpad;
        const int64_t visible = rows.visible(i);
        std::fill(si + visible, si + tkpad, 0.0f);
        if (!probabilities(rows, b, i, si, lse_data[b * tq + i])) {
          std::fill(si, si + visible, 0.0f);  // a blocked row adds nothing to O (then NaN)
          continue;
        }
        if (a.dropout_p > 0.0f)
          for (int64_t j = 0; j < visible; ++j) si[j] *= rows.keep(b, i, j);
      }
      // O = P V over the tk keys; straight into out when its rows need no padding.
      float* ob = dpad == d ? od + b * tq * d : o.data();
      tile_gemm(tq, dpad, tk, {s.data(), tkpad, 1}, vb, dpad, ob, dpad);
      for (int64_t i = 0; i < tq; ++i) {
        float* oi = od + (b * tq + i) * d;
        if (std::isnan(lse_data[b * tq + i]))
          std::fill(oi, oi + d, kNaN);
        else if (dpad != d)
          std::copy_n(o.data() + i * dpad, d, oi);
      }
    }
  }
}

// A decoding step's attention: each problem has a few queries (one new token, or a beam's few
// against one memory) and its keys and values lie in a KV cache. A product of so few rows does
// not pay for transposing K into the tiles' layout, so each score is a dot product of q_i with
// a row of K, and O_i the rows of V weighted by P, both read where they lie. For a head dim of
// whole vectors (32, 64, 128 floats) q_i and O_i stay in vector registers while the keys pass.
// The formulas are the tiled forward's.
namespace {

// A vector register of floats (cpu::kTileLanes of them), as tiled_gemm's kernel holds them.
constexpr int64_t kLanes = cpu::kTileLanes;
using Vec = cpu::VectorOf<kLanes>::type;
using cpu::load, cpu::sum_lanes, cpu::sum_lanes_16;

// The largest head dim, in vectors, whose query and output rows the decoding kernel holds in
// registers (8: 128 floats with AVX-512).
constexpr int kMaxHeadVectors = 8;

// Problem b's queries (a decoding step's one, or a beam's few) against its keys and values,
// where they lie, for a head dim of V whole vectors: q_i and O_i stay in V registers each, a
// score is one vector of products summed across its lanes, and O_i = sum_j P_ij v_j gathers in
// the registers before it is stored once.
template <int V>
void decode_problem(const cpu::AttentionRows& rows, int64_t b, const float* qd, const float* kb,
                    const float* vb, float* od, float* lse_data, float* s) {
  const int64_t tq = rows.a.q_len, d = V * kLanes;
  for (int64_t i = 0; i < tq; ++i) {
    const float* qi = qd + (b * tq + i) * d;
    float* oi = od + (b * tq + i) * d;
    const int64_t visible = rows.visible(i);
    Vec q[V], row;
    for (int v = 0; v < V; ++v) load(q[v], qi + v * kLanes);
    const auto products_with = [&](int64_t j) {  // q_i * k_j, lane by lane, summed over V
      const float* kj = kb + j * d;
      Vec products = {};
      for (int v = 0; v < V; ++v) {
        load(row, kj + v * kLanes);
        products += q[v] * row;
      }
      return products;
    };
    int64_t j = 0;
    if constexpr (kLanes == 16)
      for (; j + 16 <= visible; j += 16) {  // 16 keys' scores, their lanes summed together
        Vec products[16];
        for (int key = 0; key < 16; ++key) products[key] = products_with(j + key);
        sum_lanes_16(products, s + j);
      }
    for (; j < visible; ++j) s[j] = sum_lanes(products_with(j));  // q_i . k_j
    if (!probabilities(rows, b, i, s, lse_data[b * tq + i])) {
      std::fill(oi, oi + d, kNaN);
      continue;
    }
    Vec o[V] = {};
    for (int64_t j = 0; j < visible; ++j) {  // O_i = sum_j P_ij v_j
      const float p = s[j] * rows.keep(b, i, j);
      const float* vj = vb + j * d;
      for (int v = 0; v < V; ++v) {
        load(row, vj + v * kLanes);
        o[v] += p * row;
      }
    }
    std::memcpy(oi, o, sizeof o);
  }
}

// The same for any head dim: dot products and row updates of d floats in memory.
void decode_problem_any(const cpu::AttentionRows& rows, int64_t b, const float* qd,
                        const float* kb, const float* vb, float* od, float* lse_data, float* s) {
  const int64_t tq = rows.a.q_len, d = rows.a.head_dim;
  for (int64_t i = 0; i < tq; ++i) {
    const float* qi = qd + (b * tq + i) * d;
    float* oi = od + (b * tq + i) * d;
    const int64_t visible = rows.visible(i);
    for (int64_t j = 0; j < visible; ++j) s[j] = cpu::dot(qi, kb + j * d, d);  // q_i . k_j
    if (!probabilities(rows, b, i, s, lse_data[b * tq + i])) {
      std::fill(oi, oi + d, kNaN);
      continue;
    }
    std::fill(oi, oi + d, 0.0f);
    for (int64_t j = 0; j < visible; ++j) {  // O_i = sum_j P_ij v_j
      const float p = s[j] * rows.keep(b, i, j);
      const float* vj = vb + j * d;
#pragma omp simd
      for (int64_t c = 0; c < d; ++c) oi[c] += p * vj[c];
    }
  }
}

using DecodeProblem = void (*)(const cpu::AttentionRows&, int64_t, const float*, const float*,
                               const float*, float*, float*, float*);

// decode_problem<V> for a head dim of V <= kMaxHeadVectors whole vectors, else the general one.
DecodeProblem decode_problem_for(int64_t d) {
  if (d % kLanes != 0 || d / kLanes > kMaxHeadVectors) return decode_problem_any;
  static constexpr DecodeProblem kByVectors[] = {
      decode_problem<1>, decode_problem<2>, decode_problem<3>, decode_problem<4>,
      decode_problem<5>, decode_problem<6>, decode_problem<7>, decode_problem<8>};
  return kByVectors[d / kLanes - 1];
}

}  // namespace

void cpu::attention_forward_decoding(const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& mask, const AttentionArgs& a, Tensor& out,
                                     Tensor& lse) {
  const cpu::AttentionRows rows(a, mask);
  const int64_t tk = a.kv_len, d = a.head_dim;
  const float *qd = q.data_ptr<float>(), *kd = k.data_ptr<float>(), *vd = v.data_ptr<float>();
  float *od = out.data_ptr<float>(), *lse_data = lse.data_ptr<float>();
  const DecodeProblem problem = decode_problem_for(d);
  // A thread is worth starting for a few problems' keys and values, not for one.
  const bool parallel = a.n > 1 && a.n * tk * d >= 16 * 1024;
  cpu::parallel_region(parallel, [&] {
    std::vector<float> scores(tk);
#pragma omp for schedule(static) nowait
    for (int64_t b = 0; b < a.n; ++b) {
      const float* kb = kd + b * a.kv_stride;
      const float* vb = vd + b * a.kv_stride;
      // The next problem's keys and values, a few KB each that a cache seldom still holds
      // (a step reads every layer's cache in turn), are requested while this one computes.
      if (b + 1 < a.n)
        for (int64_t e = 0; e < tk * d; e += 64 / sizeof(float)) {
          __builtin_prefetch(kb + a.kv_stride + e);
          __builtin_prefetch(vb + a.kv_stride + e);
        }
      problem(rows, b, qd, kb, vb, od, lse_data, scores.data());
    }
  });
}

void cpu::attention_backward_tiled(const Tensor& dout, const Tensor& q, const Tensor& k,
                                   const Tensor& v, const Tensor& mask, const Tensor& out,
                                   const Tensor& lse, const AttentionArgs& a, Tensor& dq,
                                   Tensor& dk, Tensor& dv) {
  const cpu::AttentionRows rows(a, mask);
  const int64_t tq = a.q_len, tk = a.kv_len, d = a.head_dim;
  const int64_t dpad = padded(d), tkpad = padded(tk);  // the buffers' row lengths
  const float *qd = q.data_ptr<float>(), *kd = k.data_ptr<float>(), *vd = v.data_ptr<float>();
  const float *od = out.data_ptr<float>(), *gd = dout.data_ptr<float>();
  const float* lse_data = lse.data_ptr<float>();
  float *dqd = dq.data_ptr<float>(), *dkd = dk.data_ptr<float>(), *dvd = dv.data_ptr<float>();
#pragma omp parallel
  {
    // Q, dO [tq, dpad] and K [tk, dpad] (rows padded when d is not a multiple of 8), K^T and
    // V^T [d, tkpad], P z and dP -> dS [tq, tkpad], the three gradients [., dpad].
    std::vector<float> qs(tq * dpad), gs(tq * dpad), ks(tk * dpad);
    std::vector<float> kt(d * tkpad), vt(d * tkpad), p(tq * tkpad), dprob(tq * tkpad);
    std::vector<float> dqs(tq * dpad), dks(tk * dpad), dvs(tk * dpad);
#pragma omp for schedule(dynamic) nowait
    for (int64_t b = 0; b < a.n; ++b) {
      const int64_t qo = b * tq * d, kvo = b * tk * d;
      const float* qb = rows_padded(qd + qo, tq, d, dpad, qs);
      const float* gb = rows_padded(gd + qo, tq, d, dpad, gs);
      const float* kb = rows_padded(kd + kvo, tk, d, dpad, ks);
      cpu::pack_b(kd + kvo, d, /*transposed=*/true, tk, d, kt.data(), tkpad);  // K^T
      cpu::pack_b(vd + kvo, d, /*transposed=*/true, tk, d, vt.data(), tkpad);  // V^T
      tile_gemm(tq, tkpad, d, {qd + qo, d, 1}, kt.data(), tkpad, p.data(), tkpad);  // S = Q K^T
      tile_gemm(tq, tkpad, d, {gd + qo, d, 1}, vt.data(), tkpad, dprob.data(), tkpad);  // dO V^T
      for (int64_t i = 0; i < tq; ++i) {  // S -> P z (kept in p), dP -> dS (kept in dprob)
        float* pi = p.data() + i * tkpad;
        float* dpi = dprob.data() + i * tkpad;
        const int64_t visible = rows.visible(i);
        scale_and_mask(rows, b, i, pi);
        const float row_lse = lse_data[b * tq + i];
        float D = 0.0f;  // = sum_j P_ij dP_ij = dO_i . O_i
        const float* gi = gd + qo + i * d;
        const float* oi = od + qo + i * d;
#pragma omp simd reduction(+ : D)
        for (int64_t c = 0; c < d; ++c) D += gi[c] * oi[c];
        if (a.dropout_p > 0.0f) {
          for (int64_t j = 0; j < visible; ++j) {
            const float pij = cpu::exp_f(pi[j] - row_lse), z = rows.keep(b, i, j);
            pi[j] = pij * z;
            dpi[j] = a.scale * pij * (z * dpi[j] - D);
          }
        } else {  // z = 1: the same arithmetic, in vector registers
#pragma omp simd
          for (int64_t j = 0; j < visible; ++j) {
            const float pij = cpu::exp_f(pi[j] - row_lse);
            pi[j] = pij;
            dpi[j] = a.scale * pij * (dpi[j] - D);
          }
        }
        std::fill(pi + visible, pi + tkpad, 0.0f);
        std::fill(dpi + visible, dpi + tkpad, 0.0f);
      }
      // The gradients, straight into dq, dk, dv when their rows need no padding; (P z)^T and
      // dS^T are P z and dS read with their strides swapped.
      const bool direct = dpad == d;
      float* dqb = direct ? dqd + qo : dqs.data();
      float* dkb = direct ? dkd + kvo : dks.data();
      float* dvb = direct ? dvd + kvo : dvs.data();
      tile_gemm(tk, dpad, tq, {p.data(), 1, tkpad}, gb, dpad, dvb, dpad);      // (P z)^T dO
      tile_gemm(tq, dpad, tk, {dprob.data(), tkpad, 1}, kb, dpad, dqb, dpad);  // dQ = dS K
      tile_gemm(tk, dpad, tq, {dprob.data(), 1, tkpad}, qb, dpad, dkb, dpad);  // dS^T Q
      if (direct) continue;
      for (int64_t i = 0; i < tq; ++i) std::copy_n(dqs.data() + i * dpad, d, dqd + qo + i * d);
      for (int64_t j = 0; j < tk; ++j) {
        std::copy_n(dks.data() + j * dpad, d, dkd + kvo + j * d);
        std::copy_n(dvs.data() + j * dpad, d, dvd + kvo + j * d);
      }
    }
  }
}

}  // namespace loom
