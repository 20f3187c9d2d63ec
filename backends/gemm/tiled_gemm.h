// loom's own CPU kernel for float32 matrix products, where the build has 16-float vectors
// (AVX-512). OpenBLAS packs both operands into its own layout before it multiplies, and on
// this project's machines it runs in AVX2 (the environment sets OPENBLAS_CORETYPE=Haswell):
// about 200-250 GFLOP/s on two cores at a Linear layer's shapes, 115-170 at attention's. Here
// the product is computed in register tiles, in the widest vectors the build targets, as the
// inner kernel of a BLAS does:
//
//   C[M x N] = A[M x K] B[K x N]:  a tile of R rows x V vectors of C stays in R * V vector
//   registers while k walks the shared dimension; each step loads V vectors of B's row k and
//   multiplies each by one element of A broadcast, for each of the R rows.
//
// tile_gemm is that kernel over operands where they lie: the products of attention over short
// sequences (a ViT's 50 x 50 x 32 scores, a Swin window's 49 x 49 x 32), one per batch item and
// head, in the fused attention (backends/attention/attention_tiled.cpp). gemm_tiled, cpu::gemm's
// path for every float32 product (gemm.cpp), cuts a product into cache blocks around it: a
// block of op(B)'s rows and columns stays in the L2 cache while the row tiles pass over it,
// and a transposed A is copied to rows first, so that its elements are read in order (a small
// one, as attention's gradients have, is read where it lies: it stays in the cache; so is one
// that only a narrow part of C, two tiles of columns, passes over). A
// product of a few rows times a transposed B (a decoding step's x W^T) is computed as C^T =
// W op(A)^T, so that the weight is read where it lies rather than copied on every call; inside a
// PackedWeightsGuard the weight comes as W^T in panels (GemmArgs::b_panel), which the tiles read
// where they lie, a panel's rows one after another.
#pragma once

#include <cstdint>
#include <cstring>

#include "backends/gemm/gemm.h"

namespace loom::cpu {

// The floats of one vector register: 16 where the build targets AVX-512 (-march=native on such
// a CPU; 32 registers, so a tile of 12 x 2 accumulators never spills), else 8 (AVX2; GCC splits
// a vector into halves where the target has only 128-bit registers).
#ifdef __AVX512F__
constexpr int64_t kTileLanes = 16;
#else
constexpr int64_t kTileLanes = 8;
#endif

// A vector of `lanes` floats (GCC's vector extension): one register (kTileLanes), or fewer (an
// 8 x 8 transpose's rows, a sum of lanes by halves).
template <int64_t lanes>
struct VectorOf {
  typedef float type __attribute__((vector_size(lanes * sizeof(float))));
};

// By reference, not by value: without AVX enabled (LOOM_NATIVE=OFF), GCC warns that passing a
// 32-byte vector by value changes the ABI.
template <class V>
inline void load(V& v, const float* p) {
  std::memcpy(&v, p, sizeof v);
}
template <class V>
inline void store(float* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}

// n rounded up to whole vectors (a multiple of kTileLanes).
constexpr int64_t tile_gemm_padded(int64_t n) {
  return (n + kTileLanes - 1) / kTileLanes * kTileLanes;
}

// A's element (r, c) at data[r * row + c * col]: a transposed matrix is the same data with the
// two strides swapped, so the kernel reads A^T (and, in attention, P^T and dS^T) where it lies.
// `streamed`: A's rows (col 1) come from memory once each, a decoding step's weight (gemm.cpp's
// few-rows path), so each tile asks for their lines a few ahead of its use; elsewhere A's rows
// are in the cache or a hardware prefetcher keeps up, and the requests only cost time.
struct TileOperand {
  const float* data;
  int64_t row, col;
  bool streamed = false;
};

// C[M x N] = alpha A[M x K] B[K x N] + (beta C + bias), B and C row-major with leading dims ldb
// and ldc; beta 0 reads no C, and bias (N floats added to every row, or null) is added as each
// tile is written. B's rows are read in whole vectors, tile_gemm_padded(N) floats each (what
// lies past column N only reaches lanes that are not written). `b_streamed`: B's rows come from
// memory, one after another (a panel of a B in panels, GemmArgs::b_panel), so each step of k
// requests the lines of a row a few ahead.
// `activation` (or null): each band of C's rows, once written, gives out[r, j] = op(C[r, j] +
// bias[j]) (cpu::bias_unary_rows; a null bias adds nothing), while the band is in the cache.
struct TileActivation {
  UnaryOp op;
  float* out;  // out's element (0, 0), that of C's
  int64_t ldo;
  const float* bias;  // the bias of C's first column, or null
};
void tile_gemm(int64_t M, int64_t N, int64_t K, TileOperand A, const float* B, int64_t ldb,
               float* C, int64_t ldc, float alpha = 1.0f, float beta = 0.0f,
               const float* bias = nullptr, bool b_streamed = false,
               const TileActivation* activation = nullptr);

// op(B) [k, columns] into dst [k, ld_dst] (ld_dst >= columns), zeros after column `columns`:
// B stored [k, columns] (row stride ldb), or [columns, k] when `transposed` (then transposed in
// 8 x 8 blocks in registers). The layout tile_gemm reads B in.
void pack_b(const float* b, int64_t ldb, bool transposed, int64_t columns, int64_t k,
            float* dst, int64_t ld_dst);

// The columns of one panel of a B in panels (GemmArgs::b_panel): the two vectors of a tile of
// the library's build (a function, not a constant: a file built for other vectors, as the tests
// may be, still sees the library's width).
int64_t panel_columns();

// The panels of n columns (the last one padded with zeros).
int64_t panel_count(int64_t n);

// W [n, k] (row stride ldw), a Linear's weight [out, in], as op(B) = W^T [k, n] in panels
// (GemmArgs::b_panel = panel_columns(), ldb = k * panel_columns()): panel j, W's rows from
// j * panel_columns() on, transposed into [k, panel_columns()] by pack_b, at dst + j * ldb, zeros
// past column n (no garbage reaches a tile's padded lanes). The panels are spread over the
// threads. What PackedWeightsGuard keeps of a weight (autograd/packed_weights.h).
void pack_panels(const float* w, int64_t ldw, int64_t n, int64_t k, float* dst);

// Whether cpu::gemm computes a float32 product of m x n with gemm_tiled: not a single row or
// column (those are matrix-vector products, gemm.cpp's gemv), and built with 16-float vectors.
// There it beats OpenBLAS at every shape of the models' steps (2 cores, 2026-11-30:
// attention's batches at 200-400 GFLOP/s against 140-235; the Linear layers' 512 x 128 x 128
// to 6400 x 512 x 128 at 250-380 against 175-205; 1024^3 at 255-340 against 190-210); in
// 8-float vectors it only ties, so BLAS keeps them. Only these products read a B in panels.
bool use_tiled_gemm(int64_t m, int64_t n);

// Every item of a batched float32 product (GemmArgs after Backend::gemm's checks, with no
// activation into C, k > 0, row strides at least a row long) by tile_gemm, the items spread over
// the OpenMP threads (with fewer items than threads, each item's rows or columns cut among
// them; one item whose C is small and whose k is long, its blocks of k). Blocks of op(B) are
// copied into row-major buffers of whole vectors when B is transposed (8 x 8 blocks
// transposed in registers) or its rows are not whole vectors; blocks
// of a transposed A are copied to rows the same way (unless it is small, or a part of C spans
// at most two tiles of columns). A B in panels (GemmArgs::b_panel) is read where it lies, a
// panel's block of k at a time. A bias is added as the first block of k writes each tile, not
// in a pass over C of its own. A weight's gradient of at least three times more outputs than
// inputs over a long k is computed as C^T and written transposed into C
// (gemm_tiled_transposes_c). GemmArgs::activation_out is written as the last block of k
// finishes each band of C's rows (cut along k: as each row's sums are added up; where the
// product is C^T or a few rows: by a pass over C's rows after it; cpu::bias_unary_rows all
// the same).
void gemm_tiled(const GemmArgs& g);

// GemmArgs::activation_out of a product already in C (one float32 item): a pass over C's rows,
// spread over the threads (cpu::bias_unary_rows).
void activation_rows(const GemmArgs& g);
// The same for C's rows [first, last) alone, on the calling thread.
void activation_rows(const GemmArgs& g, int64_t first, int64_t last);
// g without its activation (GemmArgs::activation and activation_out's fields): the product
// alone, which activation_rows then finishes.
GemmArgs product_alone(const GemmArgs& g);

// Whether gemm_tiled computes this product as C^T = op(B)^T op(A)^T, transposed into C at the
// end (a transposed A whose m is at least three times n, n from 64 to 256, over a long k; alpha
// 1, beta 0, no bias): the same bits either way, which the tests check.
bool gemm_tiled_transposes_c(const GemmArgs& g);

// Whether gemm_tiled cuts this product's shared dimension among the threads (a weight's
// gradient over many tokens: C small, k long) instead of C, on the calling thread's number of
// threads: the same bits either way, which the tests check on the products that take it.
bool gemm_tiled_splits_k(const GemmArgs& g);

}  // namespace loom::cpu
