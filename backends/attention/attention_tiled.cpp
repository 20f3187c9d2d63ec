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
// Each product runs in small_gemm, whose inner block keeps a 6 x 16 tile of the result in
// twelve 8-float vector registers while it walks the shared dimension, as BLAS kernels do.
// That is what the unfused path cannot do for short sequences: a ViT's 50 x 50 x 32 products
// are too small for a BLAS call to pay for its packing (OpenBLAS: about 88 GFLOP/s on two cores
// at that shape, 220+ at the shapes of its linear layers), and the scores go through memory
// between the products, the scale, the mask and the softmax.
// Operands are copied into per-thread buffers whose rows are padded to a multiple of 8 floats
// (zeros in the padding, so padded keys and dims add nothing); results are copied out.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/attention/attention.h"
#include "backends/attention/attention_cpu.h"
#include "backends/cpu/vec_math.h"

namespace loom {
namespace {

// Eight floats, one AVX register (GCC and Clang split it into halves where the machine has
// only 128-bit vectors).
typedef float Vec __attribute__((vector_size(32)));
constexpr int64_t kLanes = 8;

Vec load_vec(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void store_vec(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

int64_t padded(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

// C[R x 8V] = A[R x K] B[K x 8V]: R rows of A, each element broadcast, times V vectors of each
// row of B, summed over K in R * V registers.
template <int R, int V>
void gemm_block(int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                int64_t ldc) {
  Vec acc[R][V] = {};
  for (int64_t k = 0; k < K; ++k) {
    Vec b[V];
    for (int v = 0; v < V; ++v) b[v] = load_vec(B + k * ldb + v * kLanes);
    for (int r = 0; r < R; ++r) {
      const float a = A[r * lda + k];
      for (int v = 0; v < V; ++v) acc[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) store_vec(C + r * ldc + v * kLanes, acc[r][v]);
}

template <int R>
void gemm_rows(int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
               float* C, int64_t ldc) {
  int64_t n = 0;
  for (; n + 2 * kLanes <= N; n += 2 * kLanes) gemm_block<R, 2>(K, A, lda, B + n, ldb, C + n, ldc);
  for (; n < N; n += kLanes) gemm_block<R, 1>(K, A, lda, B + n, ldb, C + n, ldc);
}

// C[M x N] = A[M x K] B[K x N], each contiguous and row-major; N is a multiple of kLanes.
void small_gemm(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C) {
  const int64_t lda = K, ldb = N, ldc = N;
  constexpr int kRows = 6;
  int64_t m = 0;
  for (; m + kRows <= M; m += kRows)
    gemm_rows<kRows>(N, K, A + m * lda, lda, B, ldb, C + m * ldc, ldc);
  const float* a = A + m * lda;
  float* c = C + m * ldc;
  switch (M - m) {  // the last 1-5 rows
    case 5: return gemm_rows<5>(N, K, a, lda, B, ldb, c, ldc);
    case 4: return gemm_rows<4>(N, K, a, lda, B, ldb, c, ldc);
    case 3: return gemm_rows<3>(N, K, a, lda, B, ldb, c, ldc);
    case 2: return gemm_rows<2>(N, K, a, lda, B, ldb, c, ldc);
    case 1: return gemm_rows<1>(N, K, a, lda, B, ldb, c, ldc);
    default: return;
  }
}

// rows x cols of src (leading dim ld) into dst [rows x ld_dst], zeros after col `cols`.
void copy_padded(const float* src, int64_t rows, int64_t cols, int64_t ld, float* dst,
                 int64_t ld_dst) {
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(src + r * ld, cols, dst + r * ld_dst);
    std::fill(dst + r * ld_dst + cols, dst + (r + 1) * ld_dst, 0.0f);
  }
}

// dst [cols x ld_dst] = the transpose of src [rows x cols] (leading dim ld), zeros after row
// `rows` of src (so after column `rows` of dst).
void transpose_padded(const float* src, int64_t rows, int64_t cols, int64_t ld, float* dst,
                      int64_t ld_dst) {
  for (int64_t c = 0; c < cols; ++c) {
    float* row = dst + c * ld_dst;
    for (int64_t r = 0; r < rows; ++r) row[r] = src[r * ld + c];
    std::fill(row + rows, row + ld_dst, 0.0f);
  }
}

// The largest of s[0..n), ignoring NaNs as std::max(m, s_j) does, eight lanes at a time (GCC
// leaves a float max reduction scalar even under `omp simd`).
float row_max(const float* s, int64_t n) {
  constexpr float kLow = -std::numeric_limits<float>::infinity();
  Vec m8 = {kLow, kLow, kLow, kLow, kLow, kLow, kLow, kLow};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    const Vec x = load_vec(s + j);
    m8 = x > m8 ? x : m8;
  }
  float m = kLow;
  for (int lane = 0; lane < kLanes; ++lane) m = std::max(m, m8[lane]);
  for (; j < n; ++j) m = std::max(m, s[j]);
  return m;
}

// scale * s_j + mask_ij over the visible keys j of query i, in place.
void scale_and_mask(const cpu::AttentionRows& rows, int64_t b, int64_t i, float* s) {
  const int64_t n = rows.visible(i);
  const float scale = rows.a.scale;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) s[j] *= scale;
  if (const float* mrow = rows.mask_row(b, i))
    for (int64_t j = 0; j < n; ++j) s[j] += mrow[j * rows.layout.col_stride];
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

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
    std::vector<float> qs(tq * dpad), kt(dpad * tkpad), vs(tkpad * dpad, 0.0f), s(tq * tkpad),
        o(tq * dpad);
#pragma omp for schedule(dynamic)
    for (int64_t b = 0; b < a.n; ++b) {
      copy_padded(qd + b * tq * d, tq, d, d, qs.data(), dpad);
      transpose_padded(kd + b * a.kv_stride, tk, d, d, kt.data(), tkpad);
      copy_padded(vd + b * a.kv_stride, tk, d, d, vs.data(), dpad);  // rows after tk stay 0
      small_gemm(tq, tkpad, dpad, qs.data(), kt.data(), s.data());  // S = Q K^T
      for (int64_t i = 0; i < tq; ++i) {  // S -> P, row by row
        float* si = s.data() + i * tkpad;
        const int64_t visible = rows.visible(i);
        scale_and_mask(rows, b, i, si);
        const float m = row_max(si, visible);
        std::fill(si + visible, si + tkpad, 0.0f);
        if (m == -kInf) {  // every key blocked: no softmax (NaN, as the unfused path)
          std::fill(si, si + visible, 0.0f);
          lse_data[b * tq + i] = kNaN;
          continue;
        }
        // One exponential per score: p_j = exp(s_j - m) / l, which is exp(s_j - lse) up to
        // rounding (the backward recomputes P in that second form from lse).
        float l = 0.0f;
#pragma omp simd reduction(+ : l)
        for (int64_t j = 0; j < visible; ++j) {
          si[j] = cpu::exp_f(si[j] - m);
          l += si[j];
        }
        lse_data[b * tq + i] = m + std::log(l);
        const float inv_l = 1.0f / l;
#pragma omp simd
        for (int64_t j = 0; j < visible; ++j) si[j] *= inv_l;
        if (a.dropout_p > 0.0f)
          for (int64_t j = 0; j < visible; ++j) si[j] *= rows.keep(b, i, j);
      }
      small_gemm(tq, dpad, tkpad, s.data(), vs.data(), o.data());  // O = P V
      for (int64_t i = 0; i < tq; ++i) {
        float* oi = od + (b * tq + i) * d;
        if (std::isnan(lse_data[b * tq + i]))
          std::fill(oi, oi + d, kNaN);
        else
          std::copy_n(o.data() + i * dpad, d, oi);
      }
    }
  }
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
    // Q, dO [tq, dpad]; K [tkpad, dpad] (rows after tk are 0) and K^T, V^T [dpad, tkpad]; P z
    // and dP -> dS [tq, tkpad] and their transposes [tk, tq]; the three gradients.
    std::vector<float> qs(tq * dpad), gs(tq * dpad), ks(tkpad * dpad, 0.0f);
    std::vector<float> kt(dpad * tkpad), vt(dpad * tkpad);
    std::vector<float> p(tq * tkpad), dprob(tq * tkpad), pz_t(tk * tq), ds_t(tk * tq);
    std::vector<float> dqs(tq * dpad), dks(tk * dpad), dvs(tk * dpad);
#pragma omp for schedule(dynamic)
    for (int64_t b = 0; b < a.n; ++b) {
      const int64_t qo = b * tq * d, kvo = b * tk * d;
      copy_padded(qd + qo, tq, d, d, qs.data(), dpad);
      copy_padded(gd + qo, tq, d, d, gs.data(), dpad);
      copy_padded(kd + kvo, tk, d, d, ks.data(), dpad);
      transpose_padded(kd + kvo, tk, d, d, kt.data(), tkpad);
      transpose_padded(vd + kvo, tk, d, d, vt.data(), tkpad);
      small_gemm(tq, tkpad, dpad, qs.data(), kt.data(), p.data());       // S = Q K^T
      small_gemm(tq, tkpad, dpad, gs.data(), vt.data(), dprob.data());  // dP = dO V^T
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
      transpose_padded(p.data(), tq, tk, tkpad, pz_t.data(), tq);
      transpose_padded(dprob.data(), tq, tk, tkpad, ds_t.data(), tq);
      small_gemm(tk, dpad, tq, pz_t.data(), gs.data(), dvs.data());      // dV = (P z)^T dO
      small_gemm(tq, dpad, tkpad, dprob.data(), ks.data(), dqs.data());  // dQ = dS K
      small_gemm(tk, dpad, tq, ds_t.data(), qs.data(), dks.data());      // dK = dS^T Q
      for (int64_t i = 0; i < tq; ++i) std::copy_n(dqs.data() + i * dpad, d, dqd + qo + i * d);
      for (int64_t j = 0; j < tk; ++j) {
        std::copy_n(dks.data() + j * dpad, d, dkd + kvo + j * d);
        std::copy_n(dvs.data() + j * dpad, d, dvd + kvo + j * d);
      }
    }
  }
}

}  // namespace loom
