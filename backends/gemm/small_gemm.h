// The CPU's kernel for small matrix products (each at most kSmallGemm multiply-adds): the
// products of attention over short sequences (a ViT's 50 x 50 x 32 scores, a Swin window's
// 49 x 49 x 32, DETR's 10-100-row queries), one per batch item and head. A BLAS call packs both
// operands into its own layout before it multiplies; for products this small the packing and
// the call cost as much as the arithmetic (OpenBLAS: about 115-170 GFLOP/s on two cores at
// these shapes, 230+ at a Linear layer's). Here the result is computed in register tiles
// straight from the operands where they lie, in the widest vectors the build targets, as the
// inner kernel of a BLAS does:
//
//   C[M x N] = A[M x K] B[K x N]:  a tile of R rows x V vectors of C stays in R * V vector
//   registers while k walks the shared dimension; each step loads V vectors of B's row k and
//   multiplies each by one element of A broadcast, for each of the R rows.
//
// Used by cpu::gemm (gemm.cpp) for every small float32 product, and by the fused attention
// kernels (backends/attention/attention_tiled.cpp).
#pragma once

#include <cstdint>

#include "backends/gemm/gemm.h"

namespace loom::cpu {

// The floats of one vector register: 16 where the build targets AVX-512 (-march=native on such
// a CPU; 32 registers, so a tile of 8 x 2 accumulators never spills), else 8 (AVX2; GCC splits
// a vector into halves where the target has only 128-bit registers).
#ifdef __AVX512F__
constexpr int64_t kSmallGemmLanes = 16;
#else
constexpr int64_t kSmallGemmLanes = 8;
#endif

// Products up to this many multiply-adds are small: below it one BLAS call cannot keep several
// cores busy, so a batch spreads over the threads one item each (and in gemm_small, with fewer
// items than threads, each item's columns are cut among them).
constexpr int64_t kSmallGemm = 128 * 128 * 128;

// n rounded up to whole vectors (a multiple of kSmallGemmLanes).
constexpr int64_t small_gemm_padded(int64_t n) {
  return (n + kSmallGemmLanes - 1) / kSmallGemmLanes * kSmallGemmLanes;
}

// A's element (r, c) at data[r * row + c * col]: a transposed matrix is the same data with the
// two strides swapped, so the kernel reads A^T (and, in attention, P^T and dS^T) where it lies.
struct SmallOperand {
  const float* data;
  int64_t row, col;
};

// C[M x N] = alpha A[M x K] B[K x N] + beta C, B and C row-major with leading dims ldb and
// ldc; beta 0 reads no C. B's rows are read in whole vectors, small_gemm_padded(N) floats each
// (what lies past column N only reaches lanes that are not written).
void small_gemm(int64_t M, int64_t N, int64_t K, SmallOperand A, const float* B, int64_t ldb,
                float* C, int64_t ldc, float alpha = 1.0f, float beta = 0.0f);

// op(B) [k, columns] into dst [k, ld_dst] (ld_dst >= columns), zeros after column `columns`:
// B stored [k, columns] (row stride ldb), or [columns, k] when `transposed` (then transposed in
// 8 x 8 blocks in registers). The layout small_gemm reads B in.
void pack_b(const float* b, int64_t ldb, bool transposed, int64_t columns, int64_t k,
            float* dst, int64_t ld_dst);

// Whether cpu::gemm computes a float32 product of m x n x k with small_gemm: small, not a single
// row or column (those are matrix-vector products, cblas_sgemv), and built with 16-float
// vectors. There it beats BLAS (2 cores, 2026-11-30: batches of ViT's, Swin's, BERT's and
// DETR's attention products at 200-400 GFLOP/s alone against OpenBLAS's 140-235, and in a ViT
// training step at 160-250 against 115-123); in 8-float vectors it only ties, so BLAS keeps
// them.
bool use_small_gemm(int64_t m, int64_t n, int64_t k);

// Every item of a batched float32 product (GemmArgs after Backend::gemm's checks, with no bias
// or activation, k > 0, row strides at least a row long) by small_gemm, the items spread over
// the OpenMP threads (with fewer items than threads, each item's columns cut among them).
// op(B) is copied into a row-major buffer of whole vectors when it is transposed (8 x 8 blocks
// transposed in registers) or its rows are not whole vectors.
void gemm_small(const GemmArgs& g);

}  // namespace loom::cpu
