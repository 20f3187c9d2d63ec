// Fused scaled-dot-product attention on the GPU: FlashAttention-2 (Dao 2023, "FlashAttention-2:
// Faster Attention with Better Parallelism and Work Partitioning"), forward and backward.
// Read it next to the paper's Algorithm 1 (forward) and Algorithm 2 (backward); the CPU
// reference (backends/cpu/attention.cpp) computes the same numbers row by row.
//
// The problem (AttentionArgs, backends/backend.h): n = batch * heads independent attentions,
// q/out [n, q_len, d], k/v [n, kv_len, d], contiguous, float32 or bfloat16 (uint16 bits); lse
// float32 [n, q_len]; an optional additive float32 mask read through its strides
// (AttentionMaskLayout); causal: key j is visible to query i iff j <= query_offset + i; dropout
// drawn from Philox exactly as loom::dropout draws it (core/rng.h).
//
// Tiles. A block has 128 threads (4 warps) and works on a tile of BR query rows against tiles
// of BC keys; head_dim d is padded with zeros to D = 32, 64 or 128 (zeros change no dot
// product, and the padded output columns are not stored). Everything a block touches lives in
// static shared memory (<= 48 KB, so no opt-in is needed); the tile sizes per (dtype, D) are in
// forward_tiles / backward_tiles below and were chosen to fit that budget.
//
// The two matrix products of each step go through tile_mma():
//   * bfloat16: tensor cores through WMMA, 16x16x16 bf16 fragments with float accumulators;
//     each warp takes 16x16 output tiles in turn. The results always go to shared memory as
//     float, and the elementwise work (masking, softmax, rescaling) reads them there, so no
//     code depends on the opaque layout of a fragment's elements.
//   * float32: plain FMA loops on CUDA cores, each thread computing some output elements.
//
// Forward (Algorithm 1; grid: one block per (problem b, query tile), FA2's loop order):
//   load Q_tile [BR, D]; O = 0 (float, shared); per row m = -inf, l = 0
//   for each key tile [k0, k0 + BC) (causal: only up to the last key the tile's last query sees)
//     load K_tile, V_tile [BC, D]
//     S = Q_tile K_tile^T                      (tile_mma, [BR, BC] float in shared)
//     per row (128 / BR threads per row, shuffle reductions):
//       s = scale * S + mask, -inf where not visible or past the end
//       m_new = max(m, max_j s); alpha = exp(m - m_new); p_j = exp(s_j - m_new)
//       l = alpha l + sum_j p_j;  O_row *= alpha;  P_j = p_j * dropout factor
//     O += P V_tile                             (tile_mma, accumulating into O in shared)
//   out = O / l and lse = m + log(l); a row with no visible key (l = 0) gets NaN for both, as
//   the unfused softmax gives.
// Backward (Algorithm 2; grid: one block per (problem b, key tile)):
//   D_i = rowsum(dout_i * out_i) first, by attention_rowdot_kernel (one warp per row).
//   load K_tile, V_tile; dK = dV = 0 (float, shared)
//   for each query tile (causal: from the first query that sees the tile's first key)
//     load Q_tile, dO_tile, lse and D of its rows
//     S = Q K^T, dP = dO V^T                    (tile_mma)
//     P = exp(scale S + mask - lse), Z the dropout factor, dS = P (Z dP - D)
//     dV += (P Z)^T dO, dK += dS^T Q           (tile_mma, accumulating)
//     dQ_part = dS K, added with atomicAdd into a float32 workspace [n, q_len, d]
//   dK *= scale and dV are stored; a last kernel rounds the dQ workspace (times scale) to dq.
//
// Layout in shared memory: row-major tiles, row r of a [R, D] tile at r * D; K is used as the
// column-major K^T of the first product (WMMA matrix_b col_major with ldm D), and P, dS as the
// column-major P^T, dS^T of the backward products. Every tile starts 32-byte aligned and every
// fragment pointer is at a multiple of 16 elements, as WMMA requires; every ldm is D or BC, a
// multiple of 16.
#include <cuda_bf16.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backends/cuda/device_utils.cuh"
#include "core/bfloat16.h"
#include "core/rng.h"

namespace loom::cuda {

namespace {

constexpr int kThreads = 128;  // 4 warps per block

using Bits = uint16_t;  // a bfloat16 element, as its 16 bits

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(Bits x) { return bfloat16_bits_to_float(x); }
template <typename T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, Bits>)
    return float_to_bfloat16_bits(x);
  else
    return x;
}

// C (float, [M, N], row stride ldc) = (or += when kAccumulate) op(A) op(B), with op(A) [M, K]
// and op(B) [K, N] in shared memory: A row-major [M, K] (stride lda), or when kTransA its
// transpose stored row-major [K, M]; B row-major [K, N] (stride ldb), or when kTransB stored
// row-major [N, K]. Every thread of the block calls it; the caller synchronises around it.
template <bool kTransA, bool kTransB, bool kAccumulate, typename TA, typename TB>
__device__ void tile_mma(float* C, int ldc, const TA* A, int lda, const TB* B, int ldb, int M,
                         int N, int K) {
  if constexpr (std::is_same_v<TA, Bits> && std::is_same_v<TB, Bits>) {
    namespace wmma = nvcuda::wmma;
    using LayoutA = std::conditional_t<kTransA, wmma::col_major, wmma::row_major>;
    using LayoutB = std::conditional_t<kTransB, wmma::col_major, wmma::row_major>;
    const __nv_bfloat16* a = reinterpret_cast<const __nv_bfloat16*>(A);
    const __nv_bfloat16* b = reinterpret_cast<const __nv_bfloat16*>(B);
    const int tiles_n = N / 16, tiles = (M / 16) * tiles_n;
    for (int t = static_cast<int>(threadIdx.x) / kWarp; t < tiles; t += kThreads / kWarp) {
      const int i0 = (t / tiles_n) * 16, j0 = (t % tiles_n) * 16;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
      if (kAccumulate)
        wmma::load_matrix_sync(c, C + i0 * ldc + j0, ldc, wmma::mem_row_major);
      else
        wmma::fill_fragment(c, 0.0f);
      for (int k0 = 0; k0 < K; k0 += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, LayoutA> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, LayoutB> fb;
        wmma::load_matrix_sync(fa, kTransA ? a + k0 * lda + i0 : a + i0 * lda + k0, lda);
        wmma::load_matrix_sync(fb, kTransB ? b + j0 * ldb + k0 : b + k0 * ldb + j0, ldb);
        wmma::mma_sync(c, fa, fb, c);
      }
      wmma::store_matrix_sync(C + i0 * ldc + j0, c, ldc, wmma::mem_row_major);
    }
  } else {
    for (int e = static_cast<int>(threadIdx.x); e < M * N; e += kThreads) {
      const int i = e / N, j = e % N;
      float acc = kAccumulate ? C[i * ldc + j] : 0.0f;
      for (int k = 0; k < K; ++k)
        acc += to_float(kTransA ? A[k * lda + i] : A[i * lda + k]) *
               to_float(kTransB ? B[j * ldb + k] : B[k * ldb + j]);
      C[i * ldc + j] = acc;
    }
  }
}

// 16 bytes moved as one (a 128-bit load or store when aligned).
struct alignas(16) Vec16 {
  uint32_t word[4];
};

// rows x D tile of `src` ([*, d] rows from `row0`, `valid` of them) into shared `dst`, zeros
// past the end and in the padding columns. When d = D the existing rows are one contiguous
// run, copied 16 bytes at a time if it starts 16-byte aligned (shared tiles are 32-byte aligned).
template <int D, typename T>
__device__ void load_tile(T* dst, const T* src, int64_t row0, int rows, int64_t valid, int d) {
  constexpr int kPerVec = static_cast<int>(sizeof(Vec16) / sizeof(T));
  static_assert(D % kPerVec == 0, "a tile row is whole 16-byte vectors");
  const T* first = src + row0 * d;
  if (d == D && reinterpret_cast<uintptr_t>(first) % sizeof(Vec16) == 0) {
    const int64_t left = valid - row0;
    const int present = left <= 0 ? 0 : left < rows ? static_cast<int>(left) : rows;
    const int vecs = present * D / kPerVec;
    const Vec16* from = reinterpret_cast<const Vec16*>(first);
    Vec16* to = reinterpret_cast<Vec16*>(dst);
    for (int e = static_cast<int>(threadIdx.x); e < rows * D / kPerVec; e += kThreads)
      to[e] = e < vecs ? from[e] : Vec16{{0u, 0u, 0u, 0u}};
    return;
  }
  for (int e = static_cast<int>(threadIdx.x); e < rows * D; e += kThreads) {
    const int r = e / D, c = e % D;
    dst[e] = (row0 + r < valid && c < d) ? src[(row0 + r) * d + c] : from_float<T>(0.0f);
  }
}

// The reductions over the threads that share one row: `lanes` consecutive lanes of a warp.
template <int kLanes>
__device__ __forceinline__ float group_max(float v) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
template <int kLanes>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// What every kernel needs to know about one problem.
struct Problem {
  AttentionArgs args;
  const float* mask;  // null when there is none
  AttentionMaskLayout layout;

  // Whether key j is visible to query i (both inside the problem, and causal order).
  __device__ __forceinline__ bool visible(int64_t i, int64_t j) const {
    return i < args.q_len && j < args.kv_len && (!args.causal || j <= args.query_offset + i);
  }
  // The score of (b, i, j) from its raw dot product, -inf where j is not visible to i.
  __device__ __forceinline__ float score(float dot, int64_t mask_base, int64_t i, int64_t j) const {
    if (!visible(i, j)) return -INFINITY;
    float s = dot * args.scale;
    if (mask) s += mask[mask_base + i * layout.row_stride + j * layout.col_stride];
    return s;
  }
  // 1 / (1 - p) if (b, i, j) survives dropout, else 0; 1 without dropout.
  __device__ __forceinline__ float keep(int64_t b, int64_t i, int64_t j) const {
    if (args.dropout_p <= 0.0f) return 1.0f;
    const uint64_t counter =
        args.offset + static_cast<uint64_t>((b * args.q_len + i) * args.kv_len + j);
    return philox_uniform(counter, args.seed) >= args.dropout_p ? 1.0f / (1.0f - args.dropout_p)
                                                                : 0.0f;
  }
};

// Tile sizes (rows of queries BR, keys BC) per element type and padded head dim, sized so the
// static shared memory of each kernel stays under 48 KB (the bytes are summed in the comments).
struct Tiles {
  int BR, BC;
};
// bfloat16: Q, K, V (2 bytes), S and O (float), P (2 bytes): 44, 44, 46 KB for D = 32, 64, 128.
// float32: Q, K, V, S (P in place), O: 32, 36, 33 KB.
template <typename T, int D>
__host__ __device__ constexpr Tiles forward_tiles() {
  if constexpr (std::is_same_v<T, Bits>)
    return D == 32 ? Tiles{64, 64} : D == 64 ? Tiles{64, 32} : Tiles{32, 32};
  else
    return D == 32 ? Tiles{64, 32} : D == 64 ? Tiles{32, 32} : Tiles{16, 16};
}
// bfloat16: K, V, Q, dO (2 bytes), dK, dV, S, dP, dQ (float), P, dS (2 bytes): 32, 38, 43 KB.
// float32: the same without P and dS (they overwrite S and dP in place): 36, 40, 45 KB.
template <typename T, int D>
__host__ __device__ constexpr Tiles backward_tiles() {
  if constexpr (std::is_same_v<T, Bits>)
    return D == 32 ? Tiles{32, 32} : D == 64 ? Tiles{16, 32} : Tiles{16, 16};
  else
    return D == 32 ? Tiles{32, 32} : D == 64 ? Tiles{8, 32} : Tiles{8, 16};
}

// ---------------------------------------------------------------------------- forward
template <typename T, int D>
__global__ void attention_forward_kernel(Problem pb, const T* __restrict__ q,
                                         const T* __restrict__ k, const T* __restrict__ v,
                                         T* __restrict__ out, float* __restrict__ lse,
                                         int64_t q_tiles) {
  constexpr int BR = forward_tiles<T, D>().BR, BC = forward_tiles<T, D>().BC;
  constexpr int kLanes = kThreads / BR;  // threads per query row
  constexpr bool kBf16 = std::is_same_v<T, Bits>;
  static_assert(kLanes >= 1 && kLanes <= kWarp && kThreads % BR == 0, "rows per block");
  alignas(32) __shared__ T sQ[BR * D];
  alignas(32) __shared__ T sK[BC * D];
  alignas(32) __shared__ T sV[BC * D];
  alignas(32) __shared__ float sS[BR * BC];  // scores, then (float32) the probabilities
  alignas(32) __shared__ float sO[BR * D];
  alignas(32) __shared__ T sP[kBf16 ? BR * BC : 1];  // bfloat16 probabilities for the tensor cores

  const AttentionArgs& a = pb.args;
  const int d = static_cast<int>(a.head_dim);
  // The last query tiles first: with causal masking they have the most key tiles to visit, and
  // starting them early shortens the tail of the launch.
  const int64_t b = blockIdx.x / q_tiles, q0 = (q_tiles - 1 - blockIdx.x % q_tiles) * BR;
  const int64_t mask_base = pb.mask ? pb.layout.batch_offset(b) : 0;
  const int tid = static_cast<int>(threadIdx.x), row = tid / kLanes, lane = tid % kLanes;
  const int64_t qi = q0 + row;

  load_tile<D>(sQ, q + b * a.q_len * d, q0, BR, a.q_len, d);
  for (int e = tid; e < BR * D; e += kThreads) sO[e] = 0.0f;
  float m = -INFINITY, l = 0.0f;  // this row's running max and sum (the same in its lanes)

  // Causal: the tile's last query sees keys up to query_offset + its index.
  const int64_t last_q = (q0 + BR < a.q_len ? q0 + BR : a.q_len) - 1;
  const int64_t kv_end =
      a.causal && a.query_offset + last_q + 1 < a.kv_len ? a.query_offset + last_q + 1 : a.kv_len;
  for (int64_t k0 = 0; k0 < kv_end; k0 += BC) {
    __syncthreads();  // the previous step is done with sK, sV, sP
    load_tile<D>(sK, k + b * a.kv_len * d, k0, BC, a.kv_len, d);
    load_tile<D>(sV, v + b * a.kv_len * d, k0, BC, a.kv_len, d);
    __syncthreads();
    tile_mma<false, true, false>(sS, BC, sQ, D, sK, D, BR, BC, D);  // S = Q K^T  [BR, BC]
    __syncthreads();

    // Online softmax of row `row`, its lanes taking columns lane, lane + kLanes, ...
    float* s_row = sS + row * BC;
    float tile_max = -INFINITY;
    for (int j = lane; j < BC; j += kLanes) {
      const float s = pb.score(s_row[j], mask_base, qi, k0 + j);
      s_row[j] = s;
      tile_max = fmaxf(tile_max, s);
    }
    const float m_new = fmaxf(m, group_max<kLanes>(tile_max));
    // Nothing visible yet (m_new = -inf): keep O and l as they are (0) and take p = 0.
    const bool none = m_new == -INFINITY;
    const float alpha = none ? 1.0f : expf(m - m_new);
    float tile_sum = 0.0f;
    for (int j = lane; j < BC; j += kLanes) {
      const float p = none ? 0.0f : expf(s_row[j] - m_new);
      tile_sum += p;
      const float kept = p == 0.0f ? 0.0f : p * pb.keep(b, qi, k0 + j);
      if constexpr (kBf16)
        sP[row * BC + j] = from_float<T>(kept);
      else
        s_row[j] = kept;
    }
    l = l * alpha + group_sum<kLanes>(tile_sum);
    m = m_new;
    for (int c = lane; c < D; c += kLanes) sO[row * D + c] *= alpha;
    __syncthreads();
    if constexpr (kBf16)
      tile_mma<false, false, true>(sO, D, sP, BC, sV, D, BR, D, BC);
    else
      tile_mma<false, false, true>(sO, D, sS, BC, sV, D, BR, D, BC);  // O += P V
  }
  __syncthreads();
  if (qi < a.q_len) {
    const float inv = l > 0.0f ? 1.0f / l : NAN;  // l = 0: no visible key, NaN as unfused
    T* o = out + (b * a.q_len + qi) * d;
    for (int c = lane; c < d; c += kLanes) o[c] = from_float<T>(sO[row * D + c] * inv);
    if (lane == 0) lse[b * a.q_len + qi] = l > 0.0f ? m + logf(l) : NAN;
  }
}

// ---------------------------------------------------------------------------- backward
// D_i = sum_c dout[i, c] * out[i, c], one warp per row; every warp of a block runs the same
// number of iterations (the shuffles stay in uniform control flow).
template <typename T>
__global__ void attention_rowdot_kernel(const T* __restrict__ dout, const T* __restrict__ out,
                                        int64_t rows, int d, float* __restrict__ D) {
  const int warps = kThreads / kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * warps; base < rows;
       base += static_cast<int64_t>(gridDim.x) * warps) {
    const int64_t r = base + warp;
    float s = 0.0f;
    if (r < rows)
      for (int c = lane; c < d; c += kWarp)
        s += to_float(dout[r * d + c]) * to_float(out[r * d + c]);
    s = group_sum<kWarp>(s);
    if (lane == 0 && r < rows) D[r] = s;
  }
}

template <typename T, int D>
__global__ void attention_backward_kernel(Problem pb, const T* __restrict__ dout,
                                          const T* __restrict__ q, const T* __restrict__ k,
                                          const T* __restrict__ v, const float* __restrict__ lse,
                                          const float* __restrict__ rowdot,
                                          float* __restrict__ dq_acc, T* __restrict__ dk,
                                          T* __restrict__ dv, int64_t kv_tiles) {
  constexpr int BR = backward_tiles<T, D>().BR, BC = backward_tiles<T, D>().BC;
  constexpr bool kBf16 = std::is_same_v<T, Bits>;
  alignas(32) __shared__ T sK[BC * D];
  alignas(32) __shared__ T sV[BC * D];
  alignas(32) __shared__ T sQ[BR * D];
  alignas(32) __shared__ T sdO[BR * D];
  alignas(32) __shared__ float sdK[BC * D];
  alignas(32) __shared__ float sdV[BC * D];
  alignas(32) __shared__ float sS[BR * BC];   // S, then (float32) P Z
  alignas(32) __shared__ float sdP[BR * BC];  // dP, then (float32) dS
  alignas(32) __shared__ float sdQ[BR * D];
  alignas(32) __shared__ T sP[kBf16 ? BR * BC : 1];
  alignas(32) __shared__ T sdS[kBf16 ? BR * BC : 1];
  __shared__ float sL[BR], sD[BR];

  const AttentionArgs& a = pb.args;
  const int d = static_cast<int>(a.head_dim);
  const int64_t b = blockIdx.x / kv_tiles, k0 = (blockIdx.x % kv_tiles) * BC;
  const int64_t mask_base = pb.mask ? pb.layout.batch_offset(b) : 0;
  const int tid = static_cast<int>(threadIdx.x);

  load_tile<D>(sK, k + b * a.kv_len * d, k0, BC, a.kv_len, d);
  load_tile<D>(sV, v + b * a.kv_len * d, k0, BC, a.kv_len, d);
  for (int e = tid; e < BC * D; e += kThreads) sdK[e] = sdV[e] = 0.0f;

  // Causal: query i sees key k0 iff i >= k0 - query_offset; start at that query's tile.
  int64_t q_first = a.causal ? k0 - a.query_offset : 0;
  q_first = q_first < 0 ? 0 : (q_first / BR) * BR;
  for (int64_t q0 = q_first; q0 < a.q_len; q0 += BR) {
    __syncthreads();  // the previous step is done with sQ, sdO, sS, sdP, sdQ
    load_tile<D>(sQ, q + b * a.q_len * d, q0, BR, a.q_len, d);
    load_tile<D>(sdO, dout + b * a.q_len * d, q0, BR, a.q_len, d);
    for (int r = tid; r < BR; r += kThreads) {
      const bool in = q0 + r < a.q_len;
      sL[r] = in ? lse[b * a.q_len + q0 + r] : 0.0f;
      sD[r] = in ? rowdot[b * a.q_len + q0 + r] : 0.0f;
    }
    __syncthreads();
    tile_mma<false, true, false>(sS, BC, sQ, D, sK, D, BR, BC, D);    // S = Q K^T    [BR, BC]
    tile_mma<false, true, false>(sdP, BC, sdO, D, sV, D, BR, BC, D);  // dP = dO V^T  [BR, BC]
    __syncthreads();
    for (int e = tid; e < BR * BC; e += kThreads) {
      const int i = e / BC, j = e % BC;
      // Not visible: P = 0. A row with no visible key has lse NaN, so its P is NaN where the
      // mask blocks it, as the CPU kernel's.
      const float p = pb.visible(q0 + i, k0 + j)
                          ? expf(pb.score(sS[e], mask_base, q0 + i, k0 + j) - sL[i])
                          : 0.0f;
      const float z = p == 0.0f ? 0.0f : pb.keep(b, q0 + i, k0 + j);
      const float ds = p * (z * sdP[e] - sD[i]);
      if constexpr (kBf16) {
        sP[e] = from_float<T>(p * z);
        sdS[e] = from_float<T>(ds);
      } else {
        sS[e] = p * z;
        sdP[e] = ds;
      }
    }
    __syncthreads();
    if constexpr (kBf16) {
      tile_mma<true, false, true>(sdV, D, sP, BC, sdO, D, BC, D, BR);    // dV += (PZ)^T dO
      tile_mma<true, false, true>(sdK, D, sdS, BC, sQ, D, BC, D, BR);    // dK += dS^T Q
      tile_mma<false, false, false>(sdQ, D, sdS, BC, sK, D, BR, D, BC);  // dS K  [BR, D]
    } else {
      tile_mma<true, false, true>(sdV, D, sS, BC, sdO, D, BC, D, BR);
      tile_mma<true, false, true>(sdK, D, sdP, BC, sQ, D, BC, D, BR);
      tile_mma<false, false, false>(sdQ, D, sdP, BC, sK, D, BR, D, BC);
    }
    __syncthreads();
    for (int e = tid; e < BR * D; e += kThreads) {
      const int r = e / D, c = e % D;
      if (q0 + r < a.q_len && c < d)
        atomicAdd(dq_acc + (b * a.q_len + q0 + r) * d + c, sdQ[e] * a.scale);
    }
  }
  __syncthreads();
  for (int e = tid; e < BC * D; e += kThreads) {
    const int r = e / D, c = e % D;
    if (k0 + r < a.kv_len && c < d) {
      const int64_t at = (b * a.kv_len + k0 + r) * d + c;
      dk[at] = from_float<T>(sdK[e] * a.scale);
      dv[at] = from_float<T>(sdV[e]);
    }
  }
}

template <typename T>
__global__ void attention_store_dq_kernel(const float* __restrict__ acc, int64_t count,
                                          T* __restrict__ dq) {
  LOOM_GRID_STRIDE_LOOP(i, count) dq[i] = from_float<T>(acc[i]);
}

// The padded head dim of the kernels: 32, 64 or 128.
int padded_dim(int64_t d) { return d <= 32 ? 32 : d <= 64 ? 64 : 128; }

// One block per (problem, tile); CudaBackend checked that the count fits grid.x (2^31 - 1).
unsigned grid_of(int64_t n, int64_t tiles) { return static_cast<unsigned>(n * tiles); }

template <typename T, int D>
void forward(const Problem& pb, const void* q, const void* k, const void* v, void* out, float* lse,
             cudaStream_t stream) {
  constexpr int BR = forward_tiles<T, D>().BR;
  const int64_t q_tiles = ceil_div(pb.args.q_len, BR);
  attention_forward_kernel<T, D><<<grid_of(pb.args.n, q_tiles), kThreads, 0, stream>>>(
      pb, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
      static_cast<T*>(out), lse, q_tiles);
  LOOM_CUDA_CHECK_LAUNCH();
}

template <typename T, int D>
void backward(const Problem& pb, const void* dout, const void* q, const void* k, const void* v,
              const void* out, const float* lse, void* dq, void* dk, void* dv, Scratch& scratch,
              cudaStream_t stream) {
  constexpr int BC = backward_tiles<T, D>().BC;
  const AttentionArgs& a = pb.args;
  const int64_t rows = a.n * a.q_len, dq_count = rows * a.head_dim;
  float* rowdot = static_cast<float*>(scratch.get(sizeof(float) * rows));
  float* dq_acc = static_cast<float*>(scratch.get(sizeof(float) * dq_count));
  LOOM_CUDA_CHECK(cudaMemsetAsync(dq_acc, 0, sizeof(float) * dq_count, stream));
  attention_rowdot_kernel<T><<<grid_for(rows, kThreads / kWarp), kThreads, 0, stream>>>(
      static_cast<const T*>(dout), static_cast<const T*>(out), rows, static_cast<int>(a.head_dim),
      rowdot);
  LOOM_CUDA_CHECK_LAUNCH();
  const int64_t kv_tiles = ceil_div(a.kv_len, BC);
  attention_backward_kernel<T, D><<<grid_of(a.n, kv_tiles), kThreads, 0, stream>>>(
      pb, static_cast<const T*>(dout), static_cast<const T*>(q), static_cast<const T*>(k),
      static_cast<const T*>(v), lse, rowdot, dq_acc, static_cast<T*>(dk), static_cast<T*>(dv),
      kv_tiles);
  LOOM_CUDA_CHECK_LAUNCH();
  attention_store_dq_kernel<T>
      <<<grid_for(dq_count), kBlock, 0, stream>>>(dq_acc, dq_count, static_cast<T*>(dq));
  LOOM_CUDA_CHECK_LAUNCH();
}

// Calls f.template operator()<T, D>() for the element type and padded head dim (CudaBackend
// checked 1 <= head_dim <= 128).
template <typename F>
void dispatch(DType type, int64_t head_dim, const F& f) {
  const int D = padded_dim(head_dim);
  if (type == DType::BFloat16) {
    if (D == 32)
      f.template operator()<Bits, 32>();
    else if (D == 64)
      f.template operator()<Bits, 64>();
    else
      f.template operator()<Bits, 128>();
  } else {
    if (D == 32)
      f.template operator()<float, 32>();
    else if (D == 64)
      f.template operator()<float, 64>();
    else
      f.template operator()<float, 128>();
  }
}

}  // namespace

void launch_attention_forward(const AttentionArgs& args, DType type, const void* q, const void* k,
                              const void* v, const float* mask, const AttentionMaskLayout& layout,
                              void* out, float* lse, cudaStream_t stream) {
  const Problem pb{args, mask, layout};
  dispatch(type, args.head_dim,
           [&]<typename T, int D>() { forward<T, D>(pb, q, k, v, out, lse, stream); });
}

void launch_attention_backward(const AttentionArgs& args, DType type, const void* dout,
                               const void* q, const void* k, const void* v, const float* mask,
                               const AttentionMaskLayout& layout, const void* out, const float* lse,
                               void* dq, void* dk, void* dv, Scratch& scratch,
                               cudaStream_t stream) {
  const Problem pb{args, mask, layout};
  dispatch(type, args.head_dim, [&]<typename T, int D>() {
    backward<T, D>(pb, dout, q, k, v, out, lse, dq, dk, dv, scratch, stream);
  });
}

}  // namespace loom::cuda
