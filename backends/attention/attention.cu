// Fused scaled-dot-product attention on the GPU: FlashAttention-2 (Dao 2023, "FlashAttention-2:
// Faster Attention with Better Parallelism and Work Partitioning"), forward and backward.
// Read it next to the paper's Algorithm 1 (forward) and Algorithm 2 (backward); the CPU
// reference (attention.cpp) computes the same numbers row by row.
//
// The problem (AttentionArgs, attention.h): n = batch * heads independent attentions,
// q/out [n, q_len, d], k/v [n, kv_len, d], contiguous (the forward reads k/v's matrices
// kv_stride elements apart), float32 or bfloat16 (uint16 bits); lse
// float32 [n, q_len]; an optional additive float32 mask read through its strides
// (AttentionMaskLayout); causal: key j is visible to query i iff j <= query_offset + i; dropout
// drawn from Philox exactly as loom::dropout draws it (core/rng.h).
//
// Two families of kernels share the problem set-up, the masking/dropout rules and the launch code:
//
// bfloat16: tensor cores through PTX's mma.sync (m16n8k16, bf16 inputs, float accumulators) and
// ldmatrix, FlashAttention-2's own instructions, whose register layouts are documented, so the
// softmax runs on the accumulators in registers (the layouts and the algorithm are described at
// the kernels below). 4 warps per block, each owning 16 query rows (forward) or 16 keys
// (backward); the K/V/Q/dO tiles live in dynamic shared memory with rows padded by 16 bytes (no
// bank conflicts for ldmatrix). head_dim d is padded with zeros to D = 32, 64 or 128 (zeros
// change no dot product; the padded columns are not stored). Tiles that every query sees whole
// (no mask, no causal boundary, no tail) skip the per-element masking rules.
//
// float32: plain FMA loops on CUDA cores (tile_mma), 128 threads (4 warps) per
// block, static shared memory (<= 48 KB, tile sizes in forward_tiles / backward_tiles), every
// accumulator in shared memory:
//   Forward (attention_forward_kernel; grid: one block per (problem b, query tile)):
//   load Q_tile [BR, D]; O = 0 (float, shared); per row m = -inf, l = 0
//   for each key tile [k0, k0 + BC) (causal: only up to the last key the tile's last query sees)
//     load K_tile, V_tile [BC, D]
//     S = Q_tile K_tile^T                      (tile_mma, [BR, BC] float in shared)
//     per row (128 / BR threads per row, shuffle reductions): the online softmax
//       m_new = max(m, max_j s), alpha = exp(m - m_new), p_j = exp(s_j - m_new),
//       l = alpha l + sum_j p_j, O_row *= alpha
//     O += P V_tile                             (tile_mma, accumulating into O in shared)
//   Backward (attention_backward_kernel; grid: one block per (problem b, key tile)):
//   load K_tile, V_tile; dK = dV = 0 (float, shared)
//   for each query tile: S, dP, then P Z and dS in place; dV += (P Z)^T dO, dK += dS^T Q
//     (accumulating in shared); dQ_part = dS K added with atomicAdd; dK * scale, dV stored.
//
// Decoding (at most kAttentionDecodeQueries queries, no dropout; either dtype): a query tile
// would be nearly empty and the blocks few (one per head), so the keys are split instead
// (Flash-Decoding, Dao et al. 2023): grid (problem b, chunk of kDecodeChunk keys), each warp
// runs the online softmax over its block's chunk 8 keys at a time (every 4th group of 8), one
// dot product per key across the warp's lanes (lane l holds dims l, l + 32, ...), their loads
// issued together; the block merges its warps and writes a partial (m, l, o[D]) per query
// row, and the problem's last block to finish merges the chunks (no second launch):
//   m = max_c m_c, l = sum_c l_c exp(m_c - m), out = sum_c o_c exp(m_c - m) / l, lse = m + log l.
// Up to kDecodeOneChunk keys are a single chunk, whose block writes out and lse itself.
// A key a query cannot see (a -inf mask, past the causal bound) is skipped before its K and V
// rows are read, so a recorded decoding step that covers the whole cache reads its filled part.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backends/attention/attention.h"
#include "backends/cuda/device.h"
#include "backends/cuda/device_utils.cuh"
#include "core/bfloat16.h"
#include "core/rng.h"
#ifdef LOOM_CUDA_EMULATED
#include "mma_ptx.h"  // the emulator's ldmatrix and mma.sync
#endif

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
// and op(B) [K, N] float32 tiles in shared memory: A row-major [M, K] (stride lda), or when kTransA
// its transpose stored row-major [K, M]; B row-major [K, N] (stride ldb), or when kTransB stored
// row-major [N, K]. Plain FMA loops on CUDA cores; every thread of the block calls it, the caller
// synchronises around it.
template <bool kTransA, bool kTransB, bool kAccumulate>
__device__ void tile_mma(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M,
                         int N, int K) {
  // B read transposed (B[j * ldb + k], neighbouring lanes at neighbouring j, ldb a multiple of
  // 32): lanes all starting at k = 0 would hit one shared-memory bank at once, so each lane
  // starts its sum at its own k (the same terms, in a rotated order).
  const int rot = kTransB ? static_cast<int>(threadIdx.x) % kWarp : 0;
  for (int e = static_cast<int>(threadIdx.x); e < M * N; e += kThreads) {
    const int i = e / N, j = e % N;
    float acc = kAccumulate ? C[i * ldc + j] : 0.0f;
    for (int kk = 0; kk < K; ++kk) {
      const int k = (kk + rot) % K;
      acc += (kTransA ? A[k * lda + i] : A[i * lda + k]) * (kTransB ? B[j * ldb + k] : B[k * ldb + j]);
    }
    C[i * ldc + j] = acc;
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
    load_tile<D>(sK, k + b * a.kv_stride, k0, BC, a.kv_len, d);
    load_tile<D>(sV, v + b * a.kv_stride, k0, BC, a.kv_len, d);
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
// Tensor cores through mma.sync (PTX's warp-level m16n8k16 bf16 product with float accumulation)
// and ldmatrix (shared memory -> fragments), as FlashAttention-2 itself issues them. Their
// register layouts are documented (the PTX ISA, and tests/cuda/emulator/mma_ptx.h, which
// emulates both): lane l, g = l / 4, t = l % 4,
//   A [16, 16]: 4 registers of 2 bf16 at (g, 2t..2t+1), (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..)
//   B [16, 8]:  2 registers at (k = 2t..2t+1, n = g), (k = 2t + 8.., n = g)
//   C [16, 8]:  4 floats at (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1)
// So each lane holds whole row pieces of a score tile, the softmax runs in registers (a row's 4
// lanes, a quad, reduce with two shuffles), and the C fragments of two neighbouring 8-column
// tiles, rounded to bf16 pairs, ARE the A fragment of the 16 x 16 tile: P goes from the S product
// into the P V product without touching shared memory (FA2, section 3.1; the same for dS).
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

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
#ifdef LOOM_CUDA_EMULATED
  const uint32_t b[2] = {b0, b1};
  ::emu::mma_m16n8k16_bf16(d, a, b);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// C tiles 2n and 2n + 1 (the two 8-column halves of a 16-column block) += A times the B
// fragments of one ldmatrix_x4 (registers 0, 1: the first half; 2, 3: the second; see b_rows).
template <int N>
__device__ __forceinline__ void mma_pair(float (&c)[N][4], int n, const uint32_t (&a)[4],
                                         const uint32_t (&b)[4]) {
  mma_bf16(c[2 * n], a, b[0], b[1]);
  mma_bf16(c[2 * n + 1], a, b[2], b[3]);
}

// Four 8 x 8 bf16 matrices from shared memory; lane l gives the address of row l % 8 of matrix
// l / 8. kTrans delivers each transposed.
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const Bits* row) {
#ifdef LOOM_CUDA_EMULATED
  ::emu::ldmatrix_x4(r, row, kTrans);
#else
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
#endif
}

// The lane addresses of ldmatrix_x4 for the three operand shapes the kernels load from a
// row-major shared tile `s` with row stride ld, the 16 x 16 block at (row0, col0):
//  a_rows: the A fragment of that block (rows = M, cols = K);
//  b_rows: B fragments of two 8-wide n-tiles when the tile is stored [n][k] (K for Q K^T):
//          registers 0, 1 for rows row0..+7, registers 2, 3 for rows row0 + 8..+15;
//  b_trans: B fragments of two n-tiles when the tile is stored [k][n] (V for P V), transposed
//          by ldmatrix: registers 0, 1 for cols col0..+7, 2, 3 for cols col0 + 8..+15;
//  a_trans: the A fragment when the tile is stored [k][m] (dS^T for dS K), transposed.
__device__ __forceinline__ const Bits* a_rows(const Bits* s, int ld, int row0, int col0, int lane) {
  return s + (row0 + lane % 16) * ld + col0 + (lane / 16) * 8;
}
__device__ __forceinline__ const Bits* b_rows(const Bits* s, int ld, int row0, int col0, int lane) {
  return s + (row0 + lane % 8 + (lane / 16) * 8) * ld + col0 + ((lane / 8) % 2) * 8;
}
// (The transposed loads take the other pattern's addresses: matrices 1 and 2 trade places.)
__device__ __forceinline__ const Bits* b_trans(const Bits* s, int ld, int row0, int col0, int lane) {
  return a_rows(s, ld, row0, col0, lane);
}
__device__ __forceinline__ const Bits* a_trans(const Bits* s, int ld, int row0, int col0, int lane) {
  return b_rows(s, ld, row0, col0, lane);
}

// Two floats as one register of two bf16 (rounded to nearest even), the first in the low half:
// one cvt instruction on the GPU (it takes the high half first).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
#ifdef LOOM_CUDA_EMULATED
  return float_to_bfloat16_bits(lo) | static_cast<uint32_t>(float_to_bfloat16_bits(hi)) << 16;
#else
  uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
#endif
}
// C fragments of the 8-column tiles 2kk and 2kk + 1 as the A fragment of 16 x 16 tile kk.
template <int N>
__device__ __forceinline__ void c_to_a(uint32_t (&a)[4], const float (&c)[N][4], int kk) {
  a[0] = pack_bf16(c[2 * kk][0], c[2 * kk][1]);
  a[1] = pack_bf16(c[2 * kk][2], c[2 * kk][3]);
  a[2] = pack_bf16(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = pack_bf16(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.69314718055994531f;

// cp.async (sm_80+): a 16-byte copy from global to shared memory that does not pass through
// registers and does not block the thread; cp_async_wait waits for every copy this thread
// issued (the block then needs a __syncthreads before reading other threads' copies). The
// emulator copies at once.
__device__ __forceinline__ void cp_async16(void* shared, const void* global) {
#ifdef LOOM_CUDA_EMULATED
  *static_cast<Vec16*>(shared) = *static_cast<const Vec16*>(global);
#else
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global));
#endif
}
__device__ __forceinline__ void cp_async_wait() {
#ifndef LOOM_CUDA_EMULATED
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// rows x D tile of `src` ([*, d] rows from row0, `valid` of them) into shared `dst` with row
// stride LD (D plus 8 elements: rows 16 bytes apart from a bank multiple, so the 8 addresses of
// an ldmatrix hit different banks); zeros past the end and in the padding columns d..D. When
// d = D and the rows are 16-byte aligned, the rows that exist are copied with cp.async (the
// caller waits with cp_async_wait and __syncthreads), otherwise element by element at once.
template <int D, int LD, int kN>
__device__ void load_rows(Bits* dst, const Bits* src, int64_t row0, int rows, int64_t valid, int d) {
  const Bits* first = src + row0 * d;
  if (d == D && reinterpret_cast<uintptr_t>(first) % sizeof(Vec16) == 0) {
    constexpr int kVecs = D / 8;  // 16-byte vectors per row
    for (int e = static_cast<int>(threadIdx.x); e < rows * kVecs; e += kN) {
      const int r = e / kVecs, c = (e % kVecs) * 8;
      if (row0 + r < valid)
        cp_async16(dst + r * LD + c, first + r * D + c);
      else
        *reinterpret_cast<Vec16*>(dst + r * LD + c) = Vec16{{0u, 0u, 0u, 0u}};
    }
    return;
  }
  for (int e = static_cast<int>(threadIdx.x); e < rows * D; e += kN) {
    const int r = e / D, c = e % D;
    dst[r * LD + c] = (row0 + r < valid && c < d) ? src[(row0 + r) * d + c] : Bits{0};
  }
}

// The sum over a quad (the 4 lanes that share a row of a C fragment) and its max.
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

constexpr int kMmaWarps = 4, kMmaThreads = kMmaWarps * kWarp;

// row[c] += x and row[c + 1] += y atomically (those of c, c + 1 that are < d): one 8-byte
// atomic on sm_90 when d is even (the pair is then 8-byte aligned), else one per element.
__device__ __forceinline__ void add_pair(float* row, int d, int c, float x, float y) {
#if defined(LOOM_CUDA_EMULATED) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
  if (d % 2 == 0 && c + 1 < d) {
    atomicAdd(reinterpret_cast<float2*>(row + c), make_float2(x, y));
    return;
  }
#endif
  if (c < d) atomicAdd(row + c, x);
  if (c + 1 < d) atomicAdd(row + c + 1, y);
}


// Row r (0: g, 1: g + 8) of a [16, D] C-fragment tile times `factor`, into the bf16 row `dst`
// of length d: this lane's column pairs (8n + 2t, 8n + 2t + 1) as one 32-bit store when d is
// even (every pair then starts 4-byte aligned), else one element at a time.
template <int D>
__device__ __forceinline__ void store_row_pairs(Bits* dst, int d, const float (&c)[D / 8][4],
                                                int r, int t, float factor) {
  #pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    const int col = n * 8 + 2 * t;
    const float x = c[n][2 * r] * factor, y = c[n][2 * r + 1] * factor;
    if (d % 2 == 0 && col + 1 < d) {
      *reinterpret_cast<uint32_t*>(dst + col) = pack_bf16(x, y);
    } else {
      if (col < d) dst[col] = from_float<Bits>(x);
      if (col + 1 < d) dst[col + 1] = from_float<Bits>(y);
    }
  }
}


// Forward (Algorithm 1, FA2's loop order): one block of 4 warps per (problem b, query tile of
// BR rows); warp w owns kM m-tiles of 16 rows (kM = 2 for D <= 64: every K and V fragment loaded
// from shared memory feeds twice the products; 1 for D = 128, to stay within the registers);
// BC = 64 keys per step. K and V have two buffers: the next key tile is copied (cp.async) while
// the current one is multiplied.
template <int D>
struct FwdMma {
  static constexpr int kM = D <= 64 ? 2 : 1, BR = 16 * kM * kMmaWarps, BC = 64, LD = D + 8;
  static constexpr size_t kv_tile = align128(BC * LD * 2);  // one K or V buffer
  static constexpr size_t q = 0, kv = q + align128(BR * LD * 2), bytes = kv + 4 * kv_tile;
};

// One online-softmax step for one m-tile (16 rows; this lane's rows rows[0], rows[1]): s holds
// the raw products Q K^T of key tile k0 and leaves holding P (dropout applied, not yet rounded);
// m, l are the rows' running max (base-2 units) and this lane's part of their sums; alpha is the
// factor by which O must be rescaled. `whole`: every query of the block sees the whole tile.
template <int BC>
__device__ __forceinline__ void softmax_step(const Problem& pb, float (&s)[BC / 8][4], float (&m)[2],
                                             float (&l)[2], float (&alpha)[2], bool whole,
                                             int64_t b, int64_t mask_base,
                                             const int64_t (&rows)[2], int64_t k0, int t) {
  const AttentionArgs& a = pb.args;
  float tile_max[2] = {-INFINITY, -INFINITY};
  if (whole) {
    const float scale_log2 = a.scale * kLog2e;
    #pragma unroll
    for (int n = 0; n < BC / 8; ++n)
      #pragma unroll
      for (int i = 0; i < 4; ++i) {
        s[n][i] *= scale_log2;
        tile_max[i / 2] = fmaxf(tile_max[i / 2], s[n][i]);
      }
  } else {
    #pragma unroll
    for (int n = 0; n < BC / 8; ++n)
      #pragma unroll
      for (int i = 0; i < 4; ++i) {
        s[n][i] = pb.score(s[n][i], mask_base, rows[i / 2], k0 + n * 8 + 2 * t + i % 2) * kLog2e;
        tile_max[i / 2] = fmaxf(tile_max[i / 2], s[n][i]);
      }
  }
  float m_sub[2];
  #pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float m_new = fmaxf(m[r], quad_max(tile_max[r]));
    // Nothing visible yet (m_new = -inf): subtract 0, so p = 2^-inf = 0, and O, l stay 0.
    alpha[r] = m_new == -INFINITY ? 1.0f : exp2f(m[r] - m_new);
    m_sub[r] = m_new == -INFINITY ? 0.0f : m_new;
    m[r] = m_new;
    l[r] *= alpha[r];
  }
  #pragma unroll
  for (int n = 0; n < BC / 8; ++n)
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
      s[n][i] = exp2f(s[n][i] - m_sub[i / 2]);
      l[i / 2] += s[n][i];
    }
  if (a.dropout_p > 0.0f)
    #pragma unroll
    for (int n = 0; n < BC / 8; ++n)
      #pragma unroll
      for (int i = 0; i < 4; ++i)
        if (s[n][i] != 0.0f) s[n][i] *= pb.keep(b, rows[i / 2], k0 + n * 8 + 2 * t + i % 2);
}

//   Q_w fragments loaded once; O_w = 0 ([16 kM, D] in C fragments); per row m = -inf, l = 0
//   for each key tile [k0, k0 + 64) (causal: only up to the last key the tile's last query sees)
//     (K_tile, V_tile [64, D] in shared; the next pair in flight)
//     S_w = Q_w K_tile^T                    (C fragments: 8 tiles of [16, 8] per m-tile)
//     in registers, per row, in base-2 units (exp2 is one instruction; scale * log2 e folded in):
//       s = scale S + mask (the general path) or scale S (a tile every row sees whole)
//       m_new = max(m, max_j s); alpha = 2^(m - m_new); p_j = 2^(s_j - m_new)
//       l = alpha l + sum_j p_j (each lane its part, summed over the quad at the end)
//       O_w *= alpha; P_w = p * dropout factor, rounded into A fragments
//     O_w += P_w V_tile
//   out = O / l, lse = (m + log2 l) ln 2; a row with no visible key (l = 0) gets NaN for both.
template <int D>
__global__ void __launch_bounds__(kMmaThreads)
    attention_forward_bf16_kernel(Problem pb, const Bits* __restrict__ q,
                                  const Bits* __restrict__ k, const Bits* __restrict__ v,
                                  Bits* __restrict__ out, float* __restrict__ lse,
                                  int64_t q_tiles) {
  using L = FwdMma<D>;
  constexpr int kM = L::kM, BR = L::BR, BC = L::BC, LD = L::LD;
  unsigned char* smem = dynamic_shared_memory();
  Bits* sQ = reinterpret_cast<Bits*>(smem + L::q);
  // Buffer i of K and of V (i = 0, 1).
  const auto sK = [&](int64_t i) { return reinterpret_cast<Bits*>(smem + L::kv + (2 * i) * L::kv_tile); };
  const auto sV = [&](int64_t i) { return reinterpret_cast<Bits*>(smem + L::kv + (2 * i + 1) * L::kv_tile); };
  const int tid = static_cast<int>(threadIdx.x), warp = tid / kWarp, lane = tid % kWarp;
  const int g = lane / 4, t = lane % 4;

  const AttentionArgs& a = pb.args;
  const int d = static_cast<int>(a.head_dim);
  // The last query tiles first (with causal masking they have the most key tiles to visit).
  const int64_t b = blockIdx.x / q_tiles, q0 = (q_tiles - 1 - blockIdx.x % q_tiles) * BR;
  const int64_t mask_base = pb.mask ? pb.layout.batch_offset(b) : 0;
  int64_t rows[kM][2];  // this lane's two rows in each m-tile
  #pragma unroll
  for (int mt = 0; mt < kM; ++mt) {
    rows[mt][0] = q0 + (warp * kM + mt) * 16 + g;
    rows[mt][1] = rows[mt][0] + 8;
  }

  const Bits* kb = k + b * a.kv_stride;
  const Bits* vb = v + b * a.kv_stride;
  load_rows<D, LD, kMmaThreads>(sQ, q + b * a.q_len * d, q0, BR, a.q_len, d);
  load_rows<D, LD, kMmaThreads>(sK(0), kb, 0, BC, a.kv_len, d);  // key tile 0, in flight
  load_rows<D, LD, kMmaThreads>(sV(0), vb, 0, BC, a.kv_len, d);
  cp_async_wait();
  __syncthreads();
  uint32_t qf[kM][D / 16][4];  // the warp's Q rows as A fragments, for the whole loop
  #pragma unroll
  for (int mt = 0; mt < kM; ++mt)
    #pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      ldmatrix_x4<false>(qf[mt][kk], a_rows(sQ, LD, (warp * kM + mt) * 16, kk * 16, lane));
  float o[kM][D / 8][4] = {};  // O of the warp's rows, unnormalised
  float m[kM][2], l[kM][2];    // per row; l this lane's part
  #pragma unroll
  for (int mt = 0; mt < kM; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;

  const int64_t last_q = (q0 + BR < a.q_len ? q0 + BR : a.q_len) - 1;
  const int64_t kv_end =
      a.causal && a.query_offset + last_q + 1 < a.kv_len ? a.query_offset + last_q + 1 : a.kv_len;
  for (int64_t k0 = 0, step = 0; k0 < kv_end; k0 += BC, ++step) {
    if (step > 0) {  // this step's tile has landed; every warp is done with the other buffer
      cp_async_wait();
      __syncthreads();
    }
    if (k0 + BC < kv_end) {  // the next tile into the other buffer, while this one is used
      load_rows<D, LD, kMmaThreads>(sK((step + 1) % 2), kb, k0 + BC, BC, a.kv_len, d);
      load_rows<D, LD, kMmaThreads>(sV((step + 1) % 2), vb, k0 + BC, BC, a.kv_len, d);
    }
    const Bits* sKt = sK(step % 2);
    const Bits* sVt = sV(step % 2);
    float s[kM][BC / 8][4] = {};  // S_w = Q_w K^T
    #pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t kf[BC / 16][4];
      #pragma unroll
      for (int n = 0; n < BC / 16; ++n)
        ldmatrix_x4<false>(kf[n], b_rows(sKt, LD, n * 16, kk * 16, lane));
      #pragma unroll
      for (int mt = 0; mt < kM; ++mt)
        #pragma unroll
        for (int n = 0; n < BC / 16; ++n) {
          mma_pair(s[mt], n, qf[mt][kk], kf[n]);
        }
    }
    // A tile that every row of the block sees whole needs no per-element rule.
    const bool whole = !pb.mask && k0 + BC <= a.kv_len &&
                       (!a.causal || k0 + BC - 1 <= a.query_offset + q0);
    uint32_t pf[kM][BC / 16][4];  // P_w as A fragments
    #pragma unroll
    for (int mt = 0; mt < kM; ++mt) {
      float alpha[2];
      softmax_step<BC>(pb, s[mt], m[mt], l[mt], alpha, whole, b, mask_base, rows[mt], k0, t);
      #pragma unroll
      for (int n = 0; n < D / 8; ++n)
        #pragma unroll
        for (int i = 0; i < 4; ++i) o[mt][n][i] *= alpha[i / 2];
      #pragma unroll
      for (int kk = 0; kk < BC / 16; ++kk) c_to_a(pf[mt][kk], s[mt], kk);
    }
    // O_w += P_w V  [16 kM, BC] x [BC, D]
    #pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk)
      #pragma unroll
      for (int n = 0; n < D / 16; ++n) {
        uint32_t vf[4];
        ldmatrix_x4<true>(vf, b_trans(sVt, LD, kk * 16, n * 16, lane));
        #pragma unroll
        for (int mt = 0; mt < kM; ++mt) {
          mma_pair(o[mt], n, pf[mt][kk], vf);
        }
      }
  }
  #pragma unroll
  for (int mt = 0; mt < kM; ++mt)
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = quad_sum(l[mt][r]);
      const int64_t row = rows[mt][r];
      if (row >= a.q_len) continue;
      const float inv = sum > 0.0f ? 1.0f / sum : NAN;  // no visible key: NaN, as unfused
      store_row_pairs<D>(out + (b * a.q_len + row) * d, d, o[mt], r, t, inv);
      if (t == 0) lse[b * a.q_len + row] = sum > 0.0f ? (m[mt][r] + log2f(sum)) * kLn2 : NAN;
    }
}

// Backward (Algorithm 2): one block of 4 warps per (problem b, key tile of BC = 64 keys); warp w
// owns keys 16w..16w + 15 and keeps dK_w, dV_w [16, D] in C fragments over every query tile of
// BR rows (64; 32 for D = 128, to stay within the registers). D_i = rowsum(dout_i * out_i) first,
// by attention_rowdot_kernel (one warp per row).
//   load K_tile, V_tile; dK_w = dV_w = 0
//   for each query tile (causal: from the first query that sees the tile's first key)
//     load Q_tile, dO_tile [BR, D], lse and D of its rows
//     S_w^T = K_w Q^T, dP_w^T = V_w dO^T        ([16, BR] C fragments: keys down, queries across)
//     P^T = 2^(scale S^T log2 e - lse log2 e), Z the dropout factor, dS^T = P^T (Z dP^T - D)
//     dV_w += (P Z)^T dO, dK_w += dS^T Q       (P Z and dS^T straight from C into A fragments)
//     dS^T to shared; then dQ_part = dS K: warps split the query rows (and D when BR = 32),
//       A read transposed from dS^T; added with atomicAdd into a float32 workspace
//   dK * scale and dV stored; a last kernel rounds the dQ workspace to dq.
template <int D>
struct BwdMma {
  static constexpr int BR = D <= 64 ? 64 : 32, BC = 16 * kMmaWarps, LD = D + 8, LDS = BR + 8;
  static constexpr int kRowGroups = BR / 16, kColSplit = kMmaWarps / kRowGroups;  // dQ's split
  static_assert(kRowGroups * kColSplit == kMmaWarps && (D / kColSplit) % 16 == 0, "dQ split");
  // K, V [BC, LD]; dS^T [BC, LDS]; then two buffers of the query tile: Q, dO [BR, LD] (bf16),
  // lse * log2 e and D [BR] (float).
  static constexpr size_t k = 0, v = k + align128(BC * LD * 2), ds = v + align128(BC * LD * 2),
                          tile = ds + align128(BC * LDS * 2),
                          q = 0, dout = q + align128(BR * LD * 2), lse = dout + align128(BR * LD * 2),
                          rowdot = lse + align128(BR * 4), tile_bytes = rowdot + align128(BR * 4),
                          bytes = tile + 2 * tile_bytes;  // q..rowdot: offsets inside a buffer
};

template <int D>
__global__ void __launch_bounds__(kMmaThreads)
    attention_backward_bf16_kernel(Problem pb, const Bits* __restrict__ dout,
                                   const Bits* __restrict__ q, const Bits* __restrict__ k,
                                   const Bits* __restrict__ v, const float* __restrict__ lse,
                                   const float* __restrict__ rowdot, float* __restrict__ dq_acc,
                                   Bits* __restrict__ dk, Bits* __restrict__ dv,
                                   int64_t kv_tiles) {
  using L = BwdMma<D>;
  constexpr int BR = L::BR, BC = L::BC, LD = L::LD, LDS = L::LDS;
  unsigned char* smem = dynamic_shared_memory();
  Bits* sK = reinterpret_cast<Bits*>(smem + L::k);
  Bits* sV = reinterpret_cast<Bits*>(smem + L::v);
  Bits* sdSt = reinterpret_cast<Bits*>(smem + L::ds);  // dS^T [BC, BR]
  // Query-tile buffer i (i = 0, 1): Q, dO, lse * log2 e, D.
  const auto buffer = [&](int64_t i) { return smem + L::tile + i * L::tile_bytes; };
  const int tid = static_cast<int>(threadIdx.x), warp = tid / kWarp, lane = tid % kWarp;
  const int g = lane / 4, t = lane % 4;

  const AttentionArgs& a = pb.args;
  const int d = static_cast<int>(a.head_dim);
  const int64_t b = blockIdx.x / kv_tiles, k0 = (blockIdx.x % kv_tiles) * BC;
  const int64_t mask_base = pb.mask ? pb.layout.batch_offset(b) : 0;
  const int64_t keys[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};  // this lane's two keys

  // Query tile q0 into buffer i: Q and dO by cp.async, lse and D at once.
  const auto load_query_tile = [&](int64_t q0, int64_t i) {
    unsigned char* buf = buffer(i);
    load_rows<D, LD, kMmaThreads>(reinterpret_cast<Bits*>(buf + L::q), q + b * a.q_len * d, q0, BR,
                                  a.q_len, d);
    load_rows<D, LD, kMmaThreads>(reinterpret_cast<Bits*>(buf + L::dout), dout + b * a.q_len * d,
                                  q0, BR, a.q_len, d);
    float* l2 = reinterpret_cast<float*>(buf + L::lse);
    float* dd = reinterpret_cast<float*>(buf + L::rowdot);
    for (int r = tid; r < BR; r += kMmaThreads) {
      const bool in = q0 + r < a.q_len;
      l2[r] = in ? lse[b * a.q_len + q0 + r] * kLog2e : 0.0f;
      dd[r] = in ? rowdot[b * a.q_len + q0 + r] : 0.0f;
    }
  };
  int64_t q_first = a.causal ? k0 - a.query_offset : 0;
  q_first = q_first < 0 ? 0 : (q_first / BR) * BR;
  load_rows<D, LD, kMmaThreads>(sK, k + b * a.kv_len * d, k0, BC, a.kv_len, d);
  load_rows<D, LD, kMmaThreads>(sV, v + b * a.kv_len * d, k0, BC, a.kv_len, d);
  if (q_first < a.q_len) load_query_tile(q_first, 0);
  float dK[D / 8][4] = {}, dV[D / 8][4] = {};  // [16, D] of the warp's keys

  for (int64_t q0 = q_first, step = 0; q0 < a.q_len; q0 += BR, ++step) {
    // This step's tile has landed, and every warp is done with the previous step (the other
    // buffer and sdSt).
    cp_async_wait();
    __syncthreads();
    if (q0 + BR < a.q_len) load_query_tile(q0 + BR, (step + 1) % 2);  // in flight meanwhile
    const Bits* sQ = reinterpret_cast<const Bits*>(buffer(step % 2) + L::q);
    const Bits* sdO = reinterpret_cast<const Bits*>(buffer(step % 2) + L::dout);
    const float* sL = reinterpret_cast<const float*>(buffer(step % 2) + L::lse);
    const float* sD = reinterpret_cast<const float*>(buffer(step % 2) + L::rowdot);
    float st[BR / 8][4] = {}, dpt[BR / 8][4] = {};  // S_w^T, dP_w^T [16 keys, BR queries]
    #pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t kf[4], vf[4];
      ldmatrix_x4<false>(kf, a_rows(sK, LD, warp * 16, kk * 16, lane));
      ldmatrix_x4<false>(vf, a_rows(sV, LD, warp * 16, kk * 16, lane));
      #pragma unroll
      for (int n = 0; n < BR / 16; ++n) {
        uint32_t qf[4], of[4];
        ldmatrix_x4<false>(qf, b_rows(sQ, LD, n * 16, kk * 16, lane));
        ldmatrix_x4<false>(of, b_rows(sdO, LD, n * 16, kk * 16, lane));
        mma_pair(st, n, kf, qf);
        mma_pair(dpt, n, vf, of);
      }
    }
    // A tile pair where every query sees every key needs no per-element rule.
    const bool whole = !pb.mask && k0 + BC <= a.kv_len && q0 + BR <= a.q_len &&
                       (!a.causal || k0 + BC - 1 <= a.query_offset + q0);
    // P^T = 2^(scale S^T log2 e - lse log2 e); where not visible, P = 0 (as the float32
    // kernel; a row with no visible key has lse NaN, so its P is NaN where the mask blocks it).
    if (whole) {
      const float scale_log2 = a.scale * kLog2e;
      #pragma unroll
      for (int n = 0; n < BR / 8; ++n)
        #pragma unroll
        for (int i = 0; i < 4; ++i) st[n][i] = exp2f(st[n][i] * scale_log2 - sL[n * 8 + 2 * t + i % 2]);
    } else {
      #pragma unroll
      for (int n = 0; n < BR / 8; ++n)
        #pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int col = n * 8 + 2 * t + i % 2;  // the query, within the tile
          const int64_t key = keys[i / 2], query = q0 + col;
          st[n][i] = pb.visible(query, key)
                         ? exp2f(pb.score(st[n][i], mask_base, query, key) * kLog2e - sL[col])
                         : 0.0f;
        }
    }
    // dS^T = P^T (Z dP^T - D), then (P Z)^T in place of P^T (Z the dropout factor).
    if (a.dropout_p > 0.0f) {
      #pragma unroll
      for (int n = 0; n < BR / 8; ++n)
        #pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int col = n * 8 + 2 * t + i % 2;
          const float p = st[n][i];
          const float z = p != 0.0f ? pb.keep(b, q0 + col, keys[i / 2]) : 1.0f;
          st[n][i] = p * z;
          dpt[n][i] = p * (z * dpt[n][i] - sD[col]);
        }
    } else {
      #pragma unroll
      for (int n = 0; n < BR / 8; ++n)
        #pragma unroll
        for (int i = 0; i < 4; ++i) dpt[n][i] = st[n][i] * (dpt[n][i] - sD[n * 8 + 2 * t + i % 2]);
    }
    // dV_w += (P Z)^T dO, dK_w += dS^T Q: [16, BR] x [BR, D]
    #pragma unroll
    for (int kk = 0; kk < BR / 16; ++kk) {
      uint32_t pf[4], sf[4];
      c_to_a(pf, st, kk);
      c_to_a(sf, dpt, kk);
      #pragma unroll
      for (int n = 0; n < D / 16; ++n) {
        uint32_t of[4], qf[4];
        ldmatrix_x4<true>(of, b_trans(sdO, LD, kk * 16, n * 16, lane));
        ldmatrix_x4<true>(qf, b_trans(sQ, LD, kk * 16, n * 16, lane));
        mma_pair(dV, n, pf, of);
        mma_pair(dK, n, sf, qf);
      }
    }
    // dS^T to shared, for dQ = dS K, which needs every warp's keys.
    #pragma unroll
    for (int n = 0; n < BR / 8; ++n)
      #pragma unroll
      for (int r = 0; r < 2; ++r)
        *reinterpret_cast<uint32_t*>(sdSt + (warp * 16 + g + 8 * r) * LDS + n * 8 + 2 * t) =
            pack_bf16(dpt[n][2 * r], dpt[n][2 * r + 1]);
    __syncthreads();
    // dQ_part [BR, D] = dS [BR, BC] K [BC, D]: warp w takes query rows 16 (w % kRowGroups)..
    // and the columns of part w / kRowGroups of D.
    constexpr int kCols = D / L::kColSplit;
    const int r0 = (warp % L::kRowGroups) * 16, c0 = (warp / L::kRowGroups) * kCols;
    float dq[kCols / 8][4] = {};
    #pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) {
      uint32_t sf[4];
      ldmatrix_x4<true>(sf, a_trans(sdSt, LDS, kk * 16, r0, lane));
      #pragma unroll
      for (int n = 0; n < kCols / 16; ++n) {
        uint32_t kf[4];
        ldmatrix_x4<true>(kf, b_trans(sK, LD, kk * 16, c0 + n * 16, lane));
        mma_pair(dq, n, sf, kf);
      }
    }
    #pragma unroll
    for (int n = 0; n < kCols / 8; ++n)
      #pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int64_t query = q0 + r0 + g + 8 * r;
        const int c = c0 + n * 8 + 2 * t;
        if (query < a.q_len)
          add_pair(dq_acc + (b * a.q_len + query) * d, d, c, dq[n][2 * r] * a.scale,
                   dq[n][2 * r + 1] * a.scale);
      }
  }
  // dK * scale and dV, from the fragments straight to global memory.
  #pragma unroll
  for (int r = 0; r < 2; ++r)
    if (keys[r] < a.kv_len) {
      store_row_pairs<D>(dk + (b * a.kv_len + keys[r]) * d, d, dK, r, t, a.scale);
      store_row_pairs<D>(dv + (b * a.kv_len + keys[r]) * d, d, dV, r, t, 1.0f);
    }
}

template <typename T>
__global__ void attention_store_dq_kernel(const float* __restrict__ acc, int64_t count,
                                          T* __restrict__ dq) {
  LOOM_GRID_STRIDE_LOOP(i, count) dq[i] = from_float<T>(acc[i]);
}

// ---------------------------------------------------------------------------- decoding
constexpr int64_t kDecodeChunk = 64;  // keys per block of attention_decode_split_kernel
// Up to this many keys are one chunk: its block's result is the row's, with no merge (for a
// short cache, the two steps a split would save cost about what its merge does).
constexpr int64_t kDecodeOneChunk = 128;
constexpr int kDecodeKeys = 8;  // keys per warp and step of attention_decode_split_kernel

// Row r's partials, one per chunk, merged into out (T) and lse by one warp: every lane walks
// all the chunks (a few dozen at most for a cache of a few thousand positions), so it knows m
// and l itself; lane l merges output dims l, l + 32, ... A row that saw no key at all gets NaN,
// as the CPU kernel and the unfused softmax give. The partials were written by other blocks of
// the same launch: they are read through L2 (__ldcg), where those blocks' writes are.
template <typename T, int D>
__device__ void decode_merge_row(const float* part, int64_t chunks, int d, int64_t r, int lane,
                                 T* out, float* lse) {
  constexpr int kPer = D / kWarp;                // dims per lane
  const float* p = part + r * chunks * (D + 2);  // chunk c: m, l, o[D] at p + c * (D + 2)
  float m = -INFINITY;
  for (int64_t c = 0; c < chunks; ++c) m = fmaxf(m, __ldcg(p + c * (D + 2)));
  if (m == -INFINITY) {
    for (int col = lane; col < d; col += kWarp) out[r * d + col] = from_float<T>(NAN);
    if (lane == 0) lse[r] = NAN;
    return;
  }
  float l = 0.0f, o[kPer] = {};
  for (int64_t c = 0; c < chunks; ++c) {
    const float* chunk = p + c * (D + 2);
    const float w = expf(__ldcg(chunk) - m);  // 0 for a chunk that saw no key
    l += w * __ldcg(chunk + 1);
#pragma unroll
    for (int t = 0; t < kPer; ++t) o[t] += w * __ldcg(chunk + 2 + lane + t * kWarp);
  }
#pragma unroll
  for (int t = 0; t < kPer; ++t) {
    const int col = lane + t * kWarp;
    if (col < d) out[r * d + col] = from_float<T>(o[t] / l);
  }
  if (lane == 0) lse[r] = m + logf(l);
}

// Blocks (problem b = problem0 + blockIdx.x / chunks, chunk of chunk_len keys). part
// [n * q_len, chunks, D + 2]: for each query row and chunk, the chunk's running max m, its sum
// l of exp(s - m), and its unnormalised output o = sum_j exp(s_j - m) v_j (m = -inf, l = 0,
// o = 0 when the row sees no key of the chunk). The last of a problem's blocks to finish
// merges its rows' partials into out and lse (decode_merge_row): it knows it is last from
// counters[blockIdx.x / chunks], which every block of the problem increments once and the last
// sets back to 0 for the next launch (the counters start at 0). With one chunk (part null) the
// block writes its rows' results itself.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    attention_decode_split_kernel(Problem pb, const T* __restrict__ q, const T* __restrict__ k,
                                  const T* __restrict__ v, float* __restrict__ part, int64_t chunks,
                                  int64_t chunk_len, int64_t problem0, unsigned* counters,
                                  T* __restrict__ out, float* __restrict__ lse) {
  constexpr int kPer = D / kWarp;  // dims per lane
  constexpr int kWarps = kThreads / kWarp;
  __shared__ float warp_m[kWarps], warp_l[kWarps], warp_o[kWarps][D];
  __shared__ bool merges;  // whether this block is its problem's last
  const AttentionArgs& a = pb.args;
  const int64_t b = problem0 + blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  const int lane = static_cast<int>(threadIdx.x) % kWarp,
            warp = static_cast<int>(threadIdx.x) / kWarp;
  const int d = static_cast<int>(a.head_dim);
  const int64_t first = chunk * chunk_len;
  const int64_t end = first + chunk_len < a.kv_len ? first + chunk_len : a.kv_len;
  const int64_t mask_base = pb.mask ? pb.layout.batch_offset(b) : 0;
  for (int64_t i = 0; i < a.q_len; ++i) {
    float qi[kPer], o[kPer];
#pragma unroll
    for (int t = 0; t < kPer; ++t) {
      const int c = lane + t * kWarp;
      qi[t] = c < d ? to_float(q[(b * a.q_len + i) * d + c]) : 0.0f;
      o[t] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    // Each step a warp takes kDecodeKeys keys at once: their mask values first, then the K and
    // V rows of those the query sees, every load issued before any is used, so a step costs
    // two round trips to memory whatever its number of keys (one key per step would cost two
    // per key: at the 128 keys of a short cache, 64 round trips of 4 warps in a row). Every
    // warp runs the same number of steps (its keys may lie past the chunk's end), so that all
    // the block's threads reach each shuffle, as CUDA's rules for them ask.
    for (int64_t base = first; base < end; base += kWarps * kDecodeKeys) {
      const int64_t j0 = base + warp * kDecodeKeys;  // this warp's first key of the step
      float add[kDecodeKeys];  // the mask's value, -inf for a key this query cannot see
#pragma unroll
      for (int u = 0; u < kDecodeKeys; ++u) {
        const int64_t j = j0 + u;
        add[u] = -INFINITY;
        if (j < end && pb.visible(i, j))
          add[u] = pb.mask
                       ? pb.mask[mask_base + i * pb.layout.row_stride + j * pb.layout.col_stride]
                       : 0.0f;
      }
      float kr[kDecodeKeys][kPer], vr[kDecodeKeys][kPer];  // a blocked key's rows are not read
#pragma unroll
      for (int u = 0; u < kDecodeKeys; ++u) {
        const int64_t kv_at = b * a.kv_stride + (j0 + u) * d;  // key j0 + u in k and v
#pragma unroll
        for (int t = 0; t < kPer; ++t) {
          const int c = lane + t * kWarp;
          const bool read = add[u] != -INFINITY && c < d;
          kr[u][t] = read ? to_float(k[kv_at + c]) : 0.0f;
          vr[u][t] = read ? to_float(v[kv_at + c]) : 0.0f;
        }
      }
      float s[kDecodeKeys];  // Problem::score's values, -inf for the keys not seen
      float m_new = m;
#pragma unroll
      for (int u = 0; u < kDecodeKeys; ++u) {
        float dot = 0.0f;
#pragma unroll
        for (int t = 0; t < kPer; ++t) dot += qi[t] * kr[u][t];
        dot = group_sum<kWarp>(dot);
        s[u] = add[u] == -INFINITY ? -INFINITY : dot * a.scale + add[u];
        m_new = fmaxf(m_new, s[u]);
      }
      if (m_new == -INFINITY) continue;  // no key seen yet
      // The online softmax over the step's keys: rescale what came before to the new max once.
      const float alpha = expf(m - m_new);
      l *= alpha;
#pragma unroll
      for (int t = 0; t < kPer; ++t) o[t] *= alpha;
#pragma unroll
      for (int u = 0; u < kDecodeKeys; ++u) {
        const float p = expf(s[u] - m_new);  // 0 for a key not seen
        l += p;
#pragma unroll
        for (int t = 0; t < kPer; ++t) o[t] += p * vr[u][t];
      }
      m = m_new;
    }
    // The block's warps merged into this chunk's partial.
    if (lane == 0) warp_m[warp] = m, warp_l[warp] = l;
#pragma unroll
    for (int t = 0; t < kPer; ++t) warp_o[warp][lane + t * kWarp] = o[t];
    __syncthreads();
    float m_all = -INFINITY;
    for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, warp_m[w]);
    auto weight = [&](int w) { return warp_m[w] == -INFINITY ? 0.0f : expf(warp_m[w] - m_all); };
    float l_all = 0.0f;
    for (int w = 0; w < kWarps; ++w) l_all += weight(w) * warp_l[w];
    auto o_all = [&](int c) {  // output dim c of the block's merged partial
      float sum = 0.0f;
      for (int w = 0; w < kWarps; ++w) sum += weight(w) * warp_o[w][c];
      return sum;
    };
    const int64_t r = b * a.q_len + i;  // the query row
    if (part != nullptr) {
      float* row = part + (r * chunks + chunk) * (D + 2);
      for (int c = static_cast<int>(threadIdx.x); c < D; c += kThreads) row[2 + c] = o_all(c);
      if (threadIdx.x == 0) row[0] = m_all, row[1] = l_all;
    } else {  // decode_merge_row's arithmetic for one chunk (its weight is 1)
      for (int c = static_cast<int>(threadIdx.x); c < d; c += kThreads)
        out[r * d + c] = from_float<T>(m_all == -INFINITY ? NAN : o_all(c) / l_all);
      if (threadIdx.x == 0) lse[r] = m_all == -INFINITY ? NAN : m_all + logf(l_all);
    }
    __syncthreads();  // warp_* are written again for the next row
  }
  if (part == nullptr) return;
  // Split-K's "last block" reduction (CUDA's threadFenceReduction sample): each thread's
  // partials are made visible device-wide before the block counts itself in.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* counter = counters + blockIdx.x / chunks;
    merges = atomicAdd(counter, 1u) == static_cast<unsigned>(chunks - 1);
    if (merges) *counter = 0;  // every other block of the problem has counted itself
  }
  __syncthreads();
  if (!merges) return;
  __threadfence();  // and the other blocks' partials are read after their counts were seen
  for (int64_t i = warp; i < a.q_len; i += kWarps)
    decode_merge_row<T, D>(part, chunks, d, b * a.q_len + i, lane, out, lse);
}

// The padded head dim of the kernels: 32, 64 or 128.
int padded_dim(int64_t d) { return d <= 32 ? 32 : d <= 64 ? 64 : 128; }

// One block per (problem, tile); Backend checked that the count fits grid.x (2^31 - 1).
unsigned grid_of(int64_t n, int64_t tiles) { return static_cast<unsigned>(n * tiles); }

// The decoding kernel's launch (see the top of the file), when the problem is one: at most
// kAttentionDecodeQueries queries, no dropout, and a grid that fits. false: nothing launched.
template <typename T, int D>
bool decode(const Problem& pb, const void* q, const void* k, const void* v, void* out, float* lse,
            Scratch& scratch, unsigned* counters, cudaStream_t stream) {
  const AttentionArgs& a = pb.args;
  const int64_t chunk_len = a.kv_len <= kDecodeOneChunk ? a.kv_len : kDecodeChunk;
  const int64_t chunks = chunk_len == 0 ? 0 : ceil_div(a.kv_len, chunk_len);
  const int64_t rows = a.n * a.q_len;
  if (a.q_len > kAttentionDecodeQueries || a.dropout_p > 0.0f || rows == 0 || chunks == 0 ||
      a.n * chunks >= (int64_t{1} << 31) || rows >= (int64_t{1} << 31))
    return false;
  float* part = chunks == 1
                    ? nullptr
                    : static_cast<float*>(scratch.get(sizeof(float) * rows * chunks * (D + 2)));
  // One launch per kDecodeCounters problems (one counter each); a single launch in practice.
  for (int64_t problem0 = 0; problem0 < a.n; problem0 += kDecodeCounters) {
    const int64_t problems = std::min<int64_t>(a.n - problem0, kDecodeCounters);
    attention_decode_split_kernel<T, D><<<grid_of(problems, chunks), kThreads, 0, stream>>>(
        pb, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), part,
        chunks, chunk_len, problem0, counters, static_cast<T*>(out), lse);
    LOOM_CUDA_CHECK_LAUNCH();
  }
  return true;
}

template <typename T, int D>
void forward(const Problem& pb, const void* q, const void* k, const void* v, void* out, float* lse,
             Scratch& scratch, unsigned* decode_counters, cudaStream_t stream) {
  if (decode<T, D>(pb, q, k, v, out, lse, scratch, decode_counters, stream)) return;
  if constexpr (std::is_same_v<T, Bits>) {
    using L = FwdMma<D>;
    const int64_t q_tiles = ceil_div(pb.args.q_len, L::BR);
    // Over 48 KB of dynamic shared memory needs the opt-in (set on every launch: it is per
    // device, and cheap).
    LOOM_CUDA_CHECK(cudaFuncSetAttribute(attention_forward_bf16_kernel<D>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(L::bytes)));
    attention_forward_bf16_kernel<D>
        <<<grid_of(pb.args.n, q_tiles), kMmaThreads, L::bytes, stream>>>(
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
    using L = BwdMma<D>;
    const int64_t kv_tiles = ceil_div(a.kv_len, L::BC);
    LOOM_CUDA_CHECK(cudaFuncSetAttribute(attention_backward_bf16_kernel<D>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(L::bytes)));
    attention_backward_bf16_kernel<D>
        <<<grid_of(a.n, kv_tiles), kMmaThreads, L::bytes, stream>>>(
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

// Calls f.template operator()<T, D>() for the element type and padded head dim (Backend checked
// 1 <= head_dim <= 128).
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

// Fused attention (AttentionArgs, attention.h): q, k, v, out, dout, dq, dk, dv contiguous
// [n, T, head_dim] (the forward's k and v: matrices args.kv_stride elements apart) of `type`
// (float32, or bfloat16 as its uint16 bits); lse float32 [n, q_len]; mask float32 read through
// `layout`, or null. head_dim 1..128 (padded to 32, 64 or 128).
// decode_counters: the device's kDecodeCounters zeros (backends/cuda/device.h), which the
// forward's decoding kernel uses (and leaves zero) to find the last block of each problem.
void launch_attention_forward(const AttentionArgs& args, DType type, const void* q, const void* k,
                              const void* v, const float* mask, const AttentionMaskLayout& layout,
                              void* out, float* lse, Scratch& scratch, unsigned* decode_counters,
                              cudaStream_t stream) {
  const Problem pb{args, mask, layout};
  dispatch(type, args.head_dim, [&]<typename T, int D>() {
    forward<T, D>(pb, q, k, v, out, lse, scratch, decode_counters, stream);
  });
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

// ---------------------------------------------------------------------------- the kernels
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                       const AttentionArgs& args, Tensor& out, Tensor& lse) {
  Scratch scratch;  // the decoding kernel's partial results
  launch_attention_forward(args, q.dtype(), q.raw_data(), k.raw_data(), v.raw_data(),
                           ptr<float>(mask), attention_mask_layout(mask), out.raw_data(),
                           lse.data_ptr<float>(), scratch, decode_counters(), stream());
}

void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& mask, const Tensor& out, const Tensor& lse,
                        const AttentionArgs& args, Tensor& dq, Tensor& dk, Tensor& dv) {
  Scratch scratch;
  launch_attention_backward(args, q.dtype(), dout.raw_data(), q.raw_data(), k.raw_data(),
                            v.raw_data(), ptr<float>(mask), attention_mask_layout(mask),
                            out.raw_data(), lse.data_ptr<float>(), dq.raw_data(), dk.raw_data(),
                            dv.raw_data(), scratch, stream());
}

}  // namespace loom::cuda
