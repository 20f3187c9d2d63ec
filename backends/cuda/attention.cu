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
// Two families of kernels share the problem set-up, the masking/dropout rules and the launch code:
//
// bfloat16: tensor cores through WMMA (nvcuda::wmma, 16x16x16 bf16 fragments with float
// accumulators). Each warp owns fixed output tiles and keeps their accumulators in fragments,
// i.e. in registers, for the whole loop; the tiles live in dynamic shared memory (over 48 KB
// for some head dims: the launch opts in with cudaFuncSetAttribute). head_dim d is padded with
// zeros to D = 32, 64 or 128 (zeros change no dot product; the padded columns are not stored).
// The elementwise work (masking, softmax, dropout) reads the scores as float from shared memory
// after store_matrix_sync, so no code depends on the opaque layout of a fragment's elements.
//   Forward (attention_forward_bf16_kernel; Algorithm 1, FA2's loop order and work split):
//   one block of 4 warps per (problem b, query tile of BR = 64 rows); warp w owns 16 rows.
//     Q_w fragments loaded once; O_w = 0 (fragments [16, D]); per row m = -inf, l = 0
//     for each key tile [k0, k0 + 64) (causal: only up to the last key the tile's last query sees)
//       load K_tile, V_tile [64, D] (the whole block; 16-byte vector loads)
//       S_w = Q_w K_tile^T                      (fragments -> the warp's float work area)
//       per row (2 lanes per row, one shuffle per reduction):
//         s = scale * S + mask, -inf where not visible or past the end
//         m_new = max_j s if it passes m by more than 8, else m (lazy rescaling: p <= e^8)
//         alpha = exp(m - m_new); p_j = exp(s_j - m_new)
//         l = alpha l + sum_j p_j;  P_j = p_j * dropout factor (bfloat16, shared)
//       O_w *= alpha per row: O_w goes through the work area and back (a fragment's rows are
//         not addressable); skipped when no row of the warp moved its max (alpha = 1)
//       O_w += P_w V_tile                       (fragments, in registers)
//     out = O / l and lse = m + log(l); a row with no visible key (l = 0) gets NaN for both, as
//     the unfused softmax gives. Only __syncwarp inside a step, two __syncthreads per key tile.
//   Backward (attention_backward_bf16_kernel; Algorithm 2): one block of 8 warps per
//   (problem b, key tile of BC = 64 rows). D_i = rowsum(dout_i * out_i) first, by
//   attention_rowdot_kernel (one warp per row).
//     load K_tile, V_tile; dK = dV = 0: the (64/16)(D/16) 16x16 tiles of each are dealt to the
//       warps (tile t to warp t % 8) and stay in their fragments over the whole loop
//     for each query tile of 64 rows (causal: from the first query that sees the first key)
//       load Q_tile, dO_tile, lse and D of its rows
//       S = Q K^T, dP = dO V^T                  (all warps, float to shared)
//       P = exp(scale S + mask - lse), Z the dropout factor, dS = P (Z dP - D)  (bf16, shared)
//       dV += (P Z)^T dO, dK += dS^T Q         (each warp its own tiles, in registers)
//       dQ_part = dS K (over S, dP in shared), added with atomicAdd into a float32 workspace
//     dK * scale and dV are stored once; a last kernel rounds the dQ workspace to dq.
//   Shared rows are padded (float by 4, bfloat16 by 8 elements) against bank conflicts; WMMA
//   needs every fragment pointer 32-byte aligned and ldm a multiple of 16 bytes: every array
//   starts 128-byte aligned, every fragment pointer is a multiple of 16 elements along a row
//   and of 16 rows down, and every ldm (D, D + 4, 64 + 4, 64 + 8) is a multiple of 16 bytes.
//
// float32: plain FMA loops on CUDA cores (tile_mma's scalar branch), 128 threads (4 warps) per
// block, static shared memory (<= 48 KB, tile sizes in forward_tiles / backward_tiles), every
// accumulator in shared memory:
//   Forward (attention_forward_kernel; grid: one block per (problem b, query tile)):
//   load Q_tile [BR, D]; O = 0 (float, shared); per row m = -inf, l = 0
//   for each key tile [k0, k0 + BC) (causal: only up to the last key the tile's last query sees)
//     load K_tile, V_tile [BC, D]
//     S = Q_tile K_tile^T                      (tile_mma, [BR, BC] float in shared)
//     per row (128 / BR threads per row, shuffle reductions): the online softmax above with
//       the exact running max (m_new = max(m, max_j s)), and O_row *= alpha
//     O += P V_tile                             (tile_mma, accumulating into O in shared)
//   Backward (attention_backward_kernel; grid: one block per (problem b, key tile)):
//   load K_tile, V_tile; dK = dV = 0 (float, shared)
//   for each query tile: S, dP, then P Z and dS in place; dV += (P Z)^T dO, dK += dS^T Q
//     (accumulating in shared); dQ_part = dS K added with atomicAdd; dK * scale, dV stored.
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
template <bool kTransA, bool kTransB, bool kAccumulate, int kWarps = kThreads / kWarp,
          typename TA, typename TB>
__device__ void tile_mma(float* C, int ldc, const TA* A, int lda, const TB* B, int ldb, int M,
                         int N, int K) {
  if constexpr (std::is_same_v<TA, Bits> && std::is_same_v<TB, Bits>) {
    namespace wmma = nvcuda::wmma;
    using LayoutA = std::conditional_t<kTransA, wmma::col_major, wmma::row_major>;
    using LayoutB = std::conditional_t<kTransB, wmma::col_major, wmma::row_major>;
    const __nv_bfloat16* a = reinterpret_cast<const __nv_bfloat16*>(A);
    const __nv_bfloat16* b = reinterpret_cast<const __nv_bfloat16*>(B);
    const int tiles_n = N / 16, tiles = (M / 16) * tiles_n;
    for (int t = static_cast<int>(threadIdx.x) / kWarp; t < tiles; t += kWarps) {
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
    // B read transposed (B[j * ldb + k], neighbouring lanes at neighbouring j, ldb a multiple
    // of 32): lanes all starting at k = 0 would hit one shared-memory bank at once, so each lane
    // starts its sum at its own k (the same terms, in a rotated order).
    const int rot = kTransB ? static_cast<int>(threadIdx.x) % kWarp : 0;
    for (int e = static_cast<int>(threadIdx.x); e < M * N; e += kWarps * kWarp) {
      const int i = e / N, j = e % N;
      float acc = kAccumulate ? C[i * ldc + j] : 0.0f;
      for (int kk = 0; kk < K; ++kk) {
        const int k = (kk + rot) % K;
        acc += to_float(kTransA ? A[k * lda + i] : A[i * lda + k]) *
               to_float(kTransB ? B[j * ldb + k] : B[k * ldb + j]);
      }
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
template <int D, typename T, int kN = kThreads>
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
    for (int e = static_cast<int>(threadIdx.x); e < rows * D / kPerVec; e += kN)
      to[e] = e < vecs ? from[e] : Vec16{{0u, 0u, 0u, 0u}};
    return;
  }
  for (int e = static_cast<int>(threadIdx.x); e < rows * D; e += kN) {
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

// Tile sizes of the float32 kernels (rows of queries BR, keys BC) per padded head dim, sized so
// their static shared memory stays under 48 KB (the bytes are summed in the comments).
struct Tiles {
  int BR, BC;
};
// Q, K, V, S (P in place), O: 32, 36, 33 KB for D = 32, 64, 128.
template <int D>
__host__ __device__ constexpr Tiles forward_tiles() {
  return D == 32 ? Tiles{64, 32} : D == 64 ? Tiles{32, 32} : Tiles{16, 16};
}
// K, V, Q, dO, dK, dV, S (then P Z), dP (then dS), dQ: 36, 40, 45 KB.
template <int D>
__host__ __device__ constexpr Tiles backward_tiles() {
  return D == 32 ? Tiles{32, 32} : D == 64 ? Tiles{8, 32} : Tiles{8, 16};
}

// ---------------------------------------------------------------------------- float32 forward
template <typename T, int D>
__global__ void attention_forward_kernel(Problem pb, const T* __restrict__ q,
                                         const T* __restrict__ k, const T* __restrict__ v,
                                         T* __restrict__ out, float* __restrict__ lse,
                                         int64_t q_tiles) {
  constexpr int BR = forward_tiles<D>().BR, BC = forward_tiles<D>().BC;
  constexpr int kLanes = kThreads / BR;  // threads per query row
  static_assert(std::is_same_v<T, float>, "bfloat16 takes attention_forward_bf16_kernel");
  static_assert(kLanes >= 1 && kLanes <= kWarp && kThreads % BR == 0, "rows per block");
  alignas(32) __shared__ T sQ[BR * D];
  alignas(32) __shared__ T sK[BC * D];
  alignas(32) __shared__ T sV[BC * D];
  alignas(32) __shared__ float sS[BR * BC];  // scores, then the probabilities
  alignas(32) __shared__ float sO[BR * D];

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
      s_row[j] = kept;
    }
    l = l * alpha + group_sum<kLanes>(tile_sum);
    m = m_new;
    for (int c = lane; c < D; c += kLanes) sO[row * D + c] *= alpha;
    __syncthreads();
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

// ---------------------------------------------------------------------------- backward: D, float32
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
  constexpr int BR = backward_tiles<D>().BR, BC = backward_tiles<D>().BC;
  static_assert(std::is_same_v<T, float>, "bfloat16 takes attention_backward_bf16_kernel");
  alignas(32) __shared__ T sK[BC * D];
  alignas(32) __shared__ T sV[BC * D];
  alignas(32) __shared__ T sQ[BR * D];
  alignas(32) __shared__ T sdO[BR * D];
  alignas(32) __shared__ float sdK[BC * D];
  alignas(32) __shared__ float sdV[BC * D];
  alignas(32) __shared__ float sS[BR * BC];   // S, then P Z
  alignas(32) __shared__ float sdP[BR * BC];  // dP, then dS
  alignas(32) __shared__ float sdQ[BR * D];
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
      sS[e] = p * z;
      sdP[e] = ds;
    }
    __syncthreads();
    tile_mma<true, false, true>(sdV, D, sS, BC, sdO, D, BC, D, BR);    // dV += (PZ)^T dO
    tile_mma<true, false, true>(sdK, D, sdP, BC, sQ, D, BC, D, BR);    // dK += dS^T Q
    tile_mma<false, false, false>(sdQ, D, sdP, BC, sK, D, BR, D, BC);  // dS K  [BR, D]
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

// ---------------------------------------------------------------------------- bfloat16 kernels
// The tensor-core kernels (see the top comment): warps own fixed output tiles and keep their
// accumulators in WMMA fragments (registers) across the whole loop; the tiles live in dynamic
// shared memory, carved out at the byte offsets of FwdBf16 / BwdBf16 (each 128-byte aligned).
namespace wmma = nvcuda::wmma;
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
using FragAT = wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::col_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

__device__ __forceinline__ const __nv_bfloat16* bf(const Bits* p) {
  return reinterpret_cast<const __nv_bfloat16*>(p);
}

// The block's dynamic shared memory (its size is the launch's third argument).
__device__ __forceinline__ unsigned char* dynamic_shared_memory() {
#ifdef LOOM_CUDA_EMULATED
  return ::emu::dynamic_shared();
#else
  extern __shared__ __align__(128) unsigned char dynamic_smem[];
  return dynamic_smem;
#endif
}

__host__ __device__ constexpr size_t align128(size_t bytes) { return (bytes + 127) / 128 * 128; }

// Forward: 4 warps, each owning 16 of the BR = 64 query rows; BC = 64 keys per step. Float rows
// are padded by 4 and bfloat16 rows by 8 elements (fewer shared-memory bank conflicts; WMMA
// wants ldm a multiple of 16 bytes and fragment pointers 32-byte aligned, which all are).
constexpr int kFwdWarps = 4, kFwdThreads = kFwdWarps * kWarp;
constexpr float kLazyMax = 8.0f;  // how far a score may pass the row's reference max
template <int D>
struct FwdBf16 {
  static constexpr int BR = 16 * kFwdWarps, BC = 64;
  static constexpr int ldS = BC + 4, ldO = D + 4, ldW = ldS > ldO ? ldS : ldO, ldP = BC + 8;
  // Q [BR, D], K and V [BC, D] (bfloat16); per warp: a float work area [16, ldW] (S, then O
  // when it is rescaled or stored), P [16, ldP] (bfloat16), alpha [16] (float).
  static constexpr size_t q = 0, k = q + align128(BR * D * 2), v = k + align128(BC * D * 2),
                          work = v + align128(BC * D * 2),
                          p = work + kFwdWarps * align128(16 * ldW * 4),
                          alpha = p + kFwdWarps * align128(16 * ldP * 2),
                          bytes = alpha + kFwdWarps * align128(16 * 4);
};

template <int D>
__global__ void __launch_bounds__(kFwdThreads)
    attention_forward_bf16_kernel(Problem pb, const Bits* __restrict__ q,
                                  const Bits* __restrict__ k, const Bits* __restrict__ v,
                                  Bits* __restrict__ out, float* __restrict__ lse,
                                  int64_t q_tiles) {
  using L = FwdBf16<D>;
  constexpr int BR = L::BR, BC = L::BC;
  unsigned char* smem = dynamic_shared_memory();
  const int tid = static_cast<int>(threadIdx.x), warp = tid / kWarp, lane = tid % kWarp;
  Bits* sQ = reinterpret_cast<Bits*>(smem + L::q);
  Bits* sK = reinterpret_cast<Bits*>(smem + L::k);
  Bits* sV = reinterpret_cast<Bits*>(smem + L::v);
  float* work = reinterpret_cast<float*>(smem + L::work + warp * align128(16 * L::ldW * 4));
  Bits* sP = reinterpret_cast<Bits*>(smem + L::p + warp * align128(16 * L::ldP * 2));
  float* sAlpha = reinterpret_cast<float*>(smem + L::alpha + warp * align128(16 * 4));

  const AttentionArgs& a = pb.args;
  const int d = static_cast<int>(a.head_dim);
  // The last query tiles first (with causal masking they have the most key tiles to visit).
  const int64_t b = blockIdx.x / q_tiles, q0 = (q_tiles - 1 - blockIdx.x % q_tiles) * BR;
  const int64_t mask_base = pb.mask ? pb.layout.batch_offset(b) : 0;
  // The elementwise work: lanes 2r and 2r + 1 take row r of the warp's 16, alternate columns.
  const int r = lane / 2, half = lane % 2;
  const int64_t qi = q0 + warp * 16 + r;

  load_tile<D, Bits, kFwdThreads>(sQ, q + b * a.q_len * d, q0, BR, a.q_len, d);
  __syncthreads();
  FragA qf[D / 16];  // the warp's Q rows, for the whole loop
  #pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    wmma::load_matrix_sync(qf[kk], bf(sQ + warp * 16 * D + kk * 16), D);
  FragC acc[D / 16];  // O [16, D] of the warp's rows, unnormalised
  #pragma unroll
  for (int c = 0; c < D / 16; ++c) wmma::fill_fragment(acc[c], 0.0f);
  float m = -INFINITY, l = 0.0f;  // row r's running max and sum (the same in its two lanes)

  const int64_t last_q = (q0 + BR < a.q_len ? q0 + BR : a.q_len) - 1;
  const int64_t kv_end =
      a.causal && a.query_offset + last_q + 1 < a.kv_len ? a.query_offset + last_q + 1 : a.kv_len;
  for (int64_t k0 = 0; k0 < kv_end; k0 += BC) {
    __syncthreads();  // every warp is done with sK, sV
    load_tile<D, Bits, kFwdThreads>(sK, k + b * a.kv_len * d, k0, BC, a.kv_len, d);
    load_tile<D, Bits, kFwdThreads>(sV, v + b * a.kv_len * d, k0, BC, a.kv_len, d);
    __syncthreads();
    // S = Q_w K^T  [16, BC], K read as the column-major K^T
    #pragma unroll
    for (int n = 0; n < BC / 16; ++n) {
      FragC s;
      wmma::fill_fragment(s, 0.0f);
      #pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        FragBT kf;
        wmma::load_matrix_sync(kf, bf(sK + n * 16 * D + kk * 16), D);
        wmma::mma_sync(s, qf[kk], kf, s);
      }
      wmma::store_matrix_sync(work + n * 16, s, L::ldS, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax of row r (as in the float32 kernel).
    float* s_row = work + r * L::ldS;
    float tile_max = -INFINITY;
    for (int j = half; j < BC; j += 2) {
      const float s = pb.score(s_row[j], mask_base, qi, k0 + j);
      s_row[j] = s;
      tile_max = fmaxf(tile_max, s);
    }
    // Lazy rescaling: the row's reference max moves only when a score passes it by more than
    // kLazyMax (or at its first visible score). Below that, p = exp(s - m) <= e^8 stays far
    // inside float's range and bfloat16 rounds it with the same relative error, and
    // out = O / l, lse = m + log l do not depend on which m is used; O is rescaled far less.
    const float tile_m = group_max<2>(tile_max);
    const float m_new = tile_m > m + kLazyMax ? tile_m : m;  // m = -inf: any visible score
    const bool none = m_new == -INFINITY;  // nothing visible yet: O and l stay 0, p = 0
    // m = -inf: O and l are still 0, nothing to rescale.
    const float alpha = m == -INFINITY || m_new == m ? 1.0f : expf(m - m_new);
    float tile_sum = 0.0f;
    for (int j = half; j < BC; j += 2) {
      const float p = none ? 0.0f : expf(s_row[j] - m_new);
      tile_sum += p;
      const float kept = p == 0.0f ? 0.0f : p * pb.keep(b, qi, k0 + j);
      sP[r * L::ldP + j] = from_float<Bits>(kept);
    }
    l = l * alpha + group_sum<2>(tile_sum);
    m = m_new;
    if (half == 0) sAlpha[r] = alpha;

    // O *= alpha per row. A fragment's element layout is opaque, so O makes a round trip
    // through the warp's work area (S there is consumed); skipped when no row's max moved.
    const bool rescale = __any_sync(0xffffffffu, alpha != 1.0f);
    __syncwarp();  // S read, P and alpha written
    if (rescale)
      #pragma unroll
      for (int c = 0; c < D / 16; ++c)
        wmma::store_matrix_sync(work + c * 16, acc[c], L::ldO, wmma::mem_row_major);
    __syncwarp();
    if (rescale)
      for (int e = lane; e < 16 * D; e += kWarp) work[(e / D) * L::ldO + e % D] *= sAlpha[e / D];
    __syncwarp();
    if (rescale)
      #pragma unroll
      for (int c = 0; c < D / 16; ++c)
        wmma::load_matrix_sync(acc[c], work + c * 16, L::ldO, wmma::mem_row_major);

    // O += P V  [16, BC] x [BC, D]
    #pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) {
      FragA pf;
      wmma::load_matrix_sync(pf, bf(sP + kk * 16), L::ldP);
      #pragma unroll
      for (int c = 0; c < D / 16; ++c) {
        FragB vf;
        wmma::load_matrix_sync(vf, bf(sV + kk * 16 * D + c * 16), D);
        wmma::mma_sync(acc[c], pf, vf, acc[c]);
      }
    }
  }
  __syncwarp();  // the last loads of the work area are done
  #pragma unroll
  for (int c = 0; c < D / 16; ++c)
    wmma::store_matrix_sync(work + c * 16, acc[c], L::ldO, wmma::mem_row_major);
  __syncwarp();
  if (qi < a.q_len) {
    const float inv = l > 0.0f ? 1.0f / l : NAN;  // l = 0: no visible key, NaN as unfused
    Bits* o = out + (b * a.q_len + qi) * d;
    for (int c = half; c < d; c += 2) o[c] = from_float<Bits>(work[r * L::ldO + c] * inv);
    if (half == 0) lse[b * a.q_len + qi] = l > 0.0f ? m + logf(l) : NAN;
  }
}

// Backward: 8 warps, a key tile of BC = 64 rows against query tiles of BR = 64 rows. dK and dV
// [BC, D] are (BC / 16) (D / 16) fragments each; warp w owns tiles w, w + 8, ... of both and
// keeps them in registers over all query tiles.
constexpr int kBwdWarps = 8, kBwdThreads = kBwdWarps * kWarp;
template <int D>
struct BwdBf16 {
  static constexpr int BR = 64, BC = 64, ldS = BC + 4, ldP = BC + 8, ldQ = D + 4;
  static constexpr int kOwned = (BC / 16) * (D / 16) / kBwdWarps;  // tiles per warp
  static_assert(kOwned >= 1 && (BC / 16) * (D / 16) % kBwdWarps == 0, "whole tiles per warp");
  // K, V [BC, D], Q, dO [BR, D] (bfloat16); S, dP [BR, ldS] (float; then dQ [BR, ldQ] and at
  // the end dK, dV [BC, ldQ] over both); P, dS [BR, ldP] (bfloat16); lse, D rows [BR].
  static constexpr size_t k = 0, v = k + align128(BC * D * 2), q = v + align128(BC * D * 2),
                          dout = q + align128(BR * D * 2), s = dout + align128(BR * D * 2),
                          dp = s + align128(BR * ldS * 4), p = dp + align128(BR * ldS * 4),
                          ds = p + align128(BR * ldP * 2), lse = ds + align128(BR * ldP * 2),
                          rowdot = lse + align128(BR * 4), bytes = rowdot + align128(BR * 4);
  static_assert(BR * ldQ * 4 <= p - s && BC * ldQ * 4 <= p - s, "dQ and dK/dV fit over S, dP");
};

template <int D>
__global__ void __launch_bounds__(kBwdThreads)
    attention_backward_bf16_kernel(Problem pb, const Bits* __restrict__ dout,
                                   const Bits* __restrict__ q, const Bits* __restrict__ k,
                                   const Bits* __restrict__ v, const float* __restrict__ lse,
                                   const float* __restrict__ rowdot, float* __restrict__ dq_acc,
                                   Bits* __restrict__ dk, Bits* __restrict__ dv,
                                   int64_t kv_tiles) {
  using L = BwdBf16<D>;
  constexpr int BR = L::BR, BC = L::BC;
  unsigned char* smem = dynamic_shared_memory();
  Bits* sK = reinterpret_cast<Bits*>(smem + L::k);
  Bits* sV = reinterpret_cast<Bits*>(smem + L::v);
  Bits* sQ = reinterpret_cast<Bits*>(smem + L::q);
  Bits* sdO = reinterpret_cast<Bits*>(smem + L::dout);
  float* sS = reinterpret_cast<float*>(smem + L::s);
  float* sdP = reinterpret_cast<float*>(smem + L::dp);
  float* sdQ = sS;  // after S and dP are consumed
  Bits* sP = reinterpret_cast<Bits*>(smem + L::p);
  Bits* sdS = reinterpret_cast<Bits*>(smem + L::ds);
  float* sL = reinterpret_cast<float*>(smem + L::lse);
  float* sD = reinterpret_cast<float*>(smem + L::rowdot);

  const AttentionArgs& a = pb.args;
  const int d = static_cast<int>(a.head_dim);
  const int64_t b = blockIdx.x / kv_tiles, k0 = (blockIdx.x % kv_tiles) * BC;
  const int64_t mask_base = pb.mask ? pb.layout.batch_offset(b) : 0;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / kWarp;

  load_tile<D, Bits, kBwdThreads>(sK, k + b * a.kv_len * d, k0, BC, a.kv_len, d);
  load_tile<D, Bits, kBwdThreads>(sV, v + b * a.kv_len * d, k0, BC, a.kv_len, d);
  FragC dK[L::kOwned], dV[L::kOwned];  // the warp's tiles of dK, dV [BC, D]
  #pragma unroll
  for (int i = 0; i < L::kOwned; ++i) {
    wmma::fill_fragment(dK[i], 0.0f);
    wmma::fill_fragment(dV[i], 0.0f);
  }

  int64_t q_first = a.causal ? k0 - a.query_offset : 0;
  q_first = q_first < 0 ? 0 : (q_first / BR) * BR;
  for (int64_t q0 = q_first; q0 < a.q_len; q0 += BR) {
    __syncthreads();  // the previous step is done with sQ, sdO, sP, sdS, sdQ
    load_tile<D, Bits, kBwdThreads>(sQ, q + b * a.q_len * d, q0, BR, a.q_len, d);
    load_tile<D, Bits, kBwdThreads>(sdO, dout + b * a.q_len * d, q0, BR, a.q_len, d);
    for (int i = tid; i < BR; i += kBwdThreads) {
      const bool in = q0 + i < a.q_len;
      sL[i] = in ? lse[b * a.q_len + q0 + i] : 0.0f;
      sD[i] = in ? rowdot[b * a.q_len + q0 + i] : 0.0f;
    }
    __syncthreads();
    tile_mma<false, true, false, kBwdWarps>(sS, L::ldS, sQ, D, sK, D, BR, BC, D);    // Q K^T
    tile_mma<false, true, false, kBwdWarps>(sdP, L::ldS, sdO, D, sV, D, BR, BC, D);  // dO V^T
    __syncthreads();
    for (int e = tid; e < BR * BC; e += kBwdThreads) {
      const int i = e / BC, j = e % BC;
      // As the float32 kernel: not visible, P = 0; a row with no visible key has lse NaN.
      const float p = pb.visible(q0 + i, k0 + j)
                          ? expf(pb.score(sS[i * L::ldS + j], mask_base, q0 + i, k0 + j) - sL[i])
                          : 0.0f;
      const float z = p == 0.0f ? 0.0f : pb.keep(b, q0 + i, k0 + j);
      sP[i * L::ldP + j] = from_float<Bits>(p * z);
      sdS[i * L::ldP + j] = from_float<Bits>(p * (z * sdP[i * L::ldS + j] - sD[i]));
    }
    __syncthreads();
    // dV += (P Z)^T dO and dK += dS^T Q on the warp's own tiles, P^T and dS^T read as
    // column-major [BC, BR].
    #pragma unroll
    for (int i = 0; i < L::kOwned; ++i) {
      const int t = warp + i * kBwdWarps, r0 = (t / (D / 16)) * 16, c0 = (t % (D / 16)) * 16;
      #pragma unroll 1  // unrolled, D = 128 spills; this way every D fits 128 registers
      for (int kk = 0; kk < BR / 16; ++kk) {
        FragAT at;
        FragB bt;
        wmma::load_matrix_sync(at, bf(sP + kk * 16 * L::ldP + r0), L::ldP);
        wmma::load_matrix_sync(bt, bf(sdO + kk * 16 * D + c0), D);
        wmma::mma_sync(dV[i], at, bt, dV[i]);
        wmma::load_matrix_sync(at, bf(sdS + kk * 16 * L::ldP + r0), L::ldP);
        wmma::load_matrix_sync(bt, bf(sQ + kk * 16 * D + c0), D);
        wmma::mma_sync(dK[i], at, bt, dK[i]);
      }
    }
    tile_mma<false, false, false, kBwdWarps>(sdQ, L::ldQ, sdS, L::ldP, sK, D, BR, D, BC);  // dS K
    __syncthreads();
    for (int e = tid; e < BR * D; e += kBwdThreads) {
      const int i = e / D, c = e % D;
      if (q0 + i < a.q_len && c < d)
        atomicAdd(dq_acc + (b * a.q_len + q0 + i) * d + c, sdQ[i * L::ldQ + c] * a.scale);
    }
  }
  // dK * scale, then dV, through shared memory (over S, dP) to global.
  #pragma unroll
  for (int pass = 0; pass < 2; ++pass) {
    __syncthreads();
    #pragma unroll
    for (int i = 0; i < L::kOwned; ++i) {
      const int t = warp + i * kBwdWarps, r0 = (t / (D / 16)) * 16, c0 = (t % (D / 16)) * 16;
      wmma::store_matrix_sync(sS + r0 * L::ldQ + c0, pass == 0 ? dK[i] : dV[i], L::ldQ,
                              wmma::mem_row_major);
    }
    __syncthreads();
    Bits* to = pass == 0 ? dk : dv;
    const float factor = pass == 0 ? a.scale : 1.0f;
    for (int e = tid; e < BC * D; e += kBwdThreads) {
      const int i = e / D, c = e % D;
      if (k0 + i < a.kv_len && c < d)
        to[(b * a.kv_len + k0 + i) * d + c] = from_float<Bits>(sS[i * L::ldQ + c] * factor);
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
  if constexpr (std::is_same_v<T, Bits>) {
    using L = FwdBf16<D>;
    const int64_t q_tiles = ceil_div(pb.args.q_len, L::BR);
    // Over 48 KB of dynamic shared memory needs the opt-in (set on every launch: it is per
    // device, and cheap).
    LOOM_CUDA_CHECK(cudaFuncSetAttribute(attention_forward_bf16_kernel<D>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(L::bytes)));
    attention_forward_bf16_kernel<D>
        <<<grid_of(pb.args.n, q_tiles), kFwdThreads, L::bytes, stream>>>(
            pb, static_cast<const Bits*>(q), static_cast<const Bits*>(k),
            static_cast<const Bits*>(v), static_cast<Bits*>(out), lse, q_tiles);
  } else {
    constexpr int BR = forward_tiles<D>().BR;
    const int64_t q_tiles = ceil_div(pb.args.q_len, BR);
    attention_forward_kernel<T, D><<<grid_of(pb.args.n, q_tiles), kThreads, 0, stream>>>(
        pb, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
        static_cast<T*>(out), lse, q_tiles);
  }
  LOOM_CUDA_CHECK_LAUNCH();
}

template <typename T, int D>
void backward(const Problem& pb, const void* dout, const void* q, const void* k, const void* v,
              const void* out, const float* lse, void* dq, void* dk, void* dv, Scratch& scratch,
              cudaStream_t stream) {
  const AttentionArgs& a = pb.args;
  const int64_t rows = a.n * a.q_len, dq_count = rows * a.head_dim;
  float* rowdot = static_cast<float*>(scratch.get(sizeof(float) * rows));
  float* dq_acc = static_cast<float*>(scratch.get(sizeof(float) * dq_count));
  LOOM_CUDA_CHECK(cudaMemsetAsync(dq_acc, 0, sizeof(float) * dq_count, stream));
  attention_rowdot_kernel<T><<<grid_for(rows, kThreads / kWarp), kThreads, 0, stream>>>(
      static_cast<const T*>(dout), static_cast<const T*>(out), rows, static_cast<int>(a.head_dim),
      rowdot);
  LOOM_CUDA_CHECK_LAUNCH();
  if constexpr (std::is_same_v<T, Bits>) {
    using L = BwdBf16<D>;
    const int64_t kv_tiles = ceil_div(a.kv_len, L::BC);
    LOOM_CUDA_CHECK(cudaFuncSetAttribute(attention_backward_bf16_kernel<D>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(L::bytes)));
    attention_backward_bf16_kernel<D>
        <<<grid_of(a.n, kv_tiles), kBwdThreads, L::bytes, stream>>>(
            pb, static_cast<const Bits*>(dout), static_cast<const Bits*>(q),
            static_cast<const Bits*>(k), static_cast<const Bits*>(v), lse, rowdot, dq_acc,
            static_cast<Bits*>(dk), static_cast<Bits*>(dv), kv_tiles);
  } else {
    const int64_t kv_tiles = ceil_div(a.kv_len, backward_tiles<D>().BC);
    attention_backward_kernel<T, D><<<grid_of(a.n, kv_tiles), kThreads, 0, stream>>>(
        pb, static_cast<const T*>(dout), static_cast<const T*>(q), static_cast<const T*>(k),
        static_cast<const T*>(v), lse, rowdot, dq_acc, static_cast<T*>(dk), static_cast<T*>(dv),
        kv_tiles);
  }
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
