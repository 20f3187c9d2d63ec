// loom's CPU product kernel (tiled_gemm.h): register tiles of C over the shared dimension, and
// cpu::gemm's batched products through it in cache blocks.
#include "backends/gemm/tiled_gemm.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <utility>

#include "backends/cpu/huge_pages.h"
#include "backends/cpu/loops.h"
#include "backends/elementwise/activation_rows.h"

namespace loom::cpu {
namespace {

using Vec = VectorOf<kTileLanes>::type;

// What a tile writes: `columns` of C's values (fewer than its vectors hold at C's right edge),
// as alpha * product + (beta * C + bias): beta 0 reads no C, and a null bias adds none.
struct TileOutput {
  int64_t columns;
  float alpha, beta;
  const float* bias;  // the bias of the tile's first column, or null
};

// This thread's scratch buffer `slot` (0 or 1), at least `count` floats, kept from call to
// call: a product copies blocks of its operands there, writing every value it later reads, so
// the buffer needs no clearing, and the many small products of a step (a decoding step's
// Linears, the attention's per-head products) neither allocate nor clear one each. A big one
// lies in huge pages (huge_pages.h), as the operands the allocator gives do.
float* scratch(int slot, int64_t count) {
  thread_local HugePageBuffer buffers[2];
  return buffers[slot].reserve(static_cast<size_t>(count));
}

// The bias from column `column` on, or null for no bias.
const float* bias_from(const float* bias, int64_t column) {
  return bias != nullptr ? bias + column : nullptr;
}

// What one element of C starts from before the product is added: beta * c + *bias (beta 0
// reads no c; a null bias adds nothing), in the order cpu::gemm's own pass over C adds them.
float start_of(float c, float beta, const float* bias) {
  float start = beta != 0.0f ? beta * c : 0.0f;
  if (bias != nullptr) start += *bias;
  return start;
}

// The first `count` (< kTileLanes) lanes of value written to c as put writes them, each as
// value + start_of(c, beta, bias): where the build has AVX-512, in one masked load of C and of
// the bias (for the lanes that exist) and one masked store, rather than lane by lane through a
// copy in memory. The same operations lane for lane, so the same bits: start is 0 + bias or
// beta * c (+ bias), and it is added even when it is 0 (which makes a sum of -0 +0, as the
// loop's does). A product whose columns are not whole tiles has such a vector at the end of
// every row of every tile: attention's 50 or 49 keys, a vocabulary of 1000 words.
[[gnu::always_inline]] inline void put_lanes(float* c, const float* bias, const Vec& value,
                                             int64_t count, const TileOutput& out) {
#ifdef __AVX512F__
  static_assert(kTileLanes == 16);
  const auto mask = static_cast<__mmask16>((1u << count) - 1);
  Vec start = {};
  if (out.beta != 0.0f) start = out.beta * reinterpret_cast<Vec>(_mm512_maskz_loadu_ps(mask, c));
  if (bias != nullptr) start += reinterpret_cast<Vec>(_mm512_maskz_loadu_ps(mask, bias));
  _mm512_mask_storeu_ps(c, mask, reinterpret_cast<__m512>(value + start));
#else
  float lanes[kTileLanes];
  store(lanes, value);
  for (int64_t j = 0; j < count; ++j)
    c[j] = lanes[j] + start_of(c[j], out.beta, bias_from(bias, j));
#endif
}

// c[0, count) = alpha * value + (beta * c + bias) for the first `count` (1 to all) lanes of
// value, bias[0, count) the bias of those columns (or null). The bias is added where cpu::gemm
// would otherwise have started C from it in a pass of its own, in the same order, so the sums
// are the same to the bit. Inlined into each tile: a call per vector of C (24 per tile of 12 x 2)
// cost the products 5% (swin-fmnist's backward).
[[gnu::always_inline]] inline void put(float* c, const float* bias, const Vec& value, int64_t count,
                                       const TileOutput& out) {
  Vec v = value;
  if (out.alpha != 1.0f) v *= out.alpha;
  if (count >= kTileLanes) {
    if (out.beta != 0.0f || bias != nullptr) {
      Vec old = {};
      if (out.beta != 0.0f) {
        load(old, c);
        old *= out.beta;
      }
      if (bias != nullptr) {
        Vec b;
        load(b, bias);
        old += b;
      }
      v += old;
    }
    return store(c, v);
  }
  put_lanes(c, bias, v, count, out);
}

// How put_whole starts C before a whole tile's sums are added, as put does for alpha 1: from
// nothing, from the bias row (0 + bias, as put adds it), or from beta * C.
enum class Start { kZero, kBias, kScaledC };

// The R x V vectors of a tile whose every lane is a column of C, with alpha 1, written as put
// writes them, the same operations in the same order, but with the case decided once for the
// tile rather than per vector: the accumulators then stay in registers to the end (a loop of
// puts kept them in an array in memory, stored after the products and read back, and cleared
// before them).
template <int R, int V, Start K>
[[gnu::always_inline]] inline void put_whole(const Vec (&acc)[R][V], float* C, int64_t ldc,
                                             const TileOutput& out) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      float* c = C + r * ldc + v * kTileLanes;
      Vec value = acc[r][v];
      if constexpr (K != Start::kZero) {
        Vec old = {};
        if constexpr (K == Start::kScaledC) {
          load(old, c);
          old *= out.beta;
        } else {
          Vec b;
          load(b, out.bias + v * kTileLanes);
          old += b;
        }
        value += old;
      }
      store(c, value);
    }
}

// Which operand of a tile comes from memory, read once, so that the tile requests its lines
// ahead: none, A's rows (TileOperand::streamed), or B's rows (a panel of a B in panels).
enum class Stream { kNone, kA, kB };

// How far ahead along k a streamed A's rows are requested (four cache lines), and how often
// (once a line); how many rows ahead a streamed B's are (a panel's rows are two lines each,
// requested every step of k). 48 rows (12 KiB) rather than 16: seq2seq-mini-translate's beam-4
// decoding took 0.96 of the time and greedy 0.98 (2 Zen 5 cores, 2026-12-07, 6 pairs of runs
// alternated; 32 and 96 rows within the noise of 48).
constexpr int64_t kStreamAhead = 64, kStreamEvery = 64 / sizeof(float), kStreamRowsAhead = 48;

// C[R x (V vectors)] = A[R x K] B[K x (V vectors)]: R rows of A, each element broadcast, times
// V vectors of each row of B (leading dim ldb), summed over K in R * V registers; then written
// as `out` says. S: the operand whose lines are requested ahead, if any.
template <int R, int V, Stream S>
void tile(int64_t K, TileOperand A, const float* B, int64_t ldb, float* C, int64_t ldc,
          const TileOutput& out) {
  constexpr int64_t lanes = kTileLanes;
  // The accumulators, zeroed one by one: written "= {}", GCC 12 cleared the array in memory
  // with a call to memset (1.5 KiB for 12 x 2) before every tile, 1-4% of the products' time.
  Vec acc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = Vec{};
  for (int64_t k = 0; k < K; ++k) {
    if constexpr (S == Stream::kA)
      if (k % kStreamEvery == 0)
        for (int r = 0; r < R; ++r) __builtin_prefetch(A.data + r * A.row + k + kStreamAhead);
    if constexpr (S == Stream::kB)
      for (int v = 0; v < V; ++v) __builtin_prefetch(B + (k + kStreamRowsAhead) * ldb + v * lanes);
    Vec b[V];
    for (int v = 0; v < V; ++v) load(b[v], B + k * ldb + v * lanes);
    for (int r = 0; r < R; ++r) {
      const float a = A.data[r * A.row + k * A.col];
      for (int v = 0; v < V; ++v) acc[r][v] += a * b[v];
    }
  }
  // A whole tile (every lane a column of C) with alpha 1, as most are, is written straight from
  // the registers (put_whole); any other through put, vector by vector, in loops unrolled so
  // that each accumulator is read at a fixed place and stays in its register.
  if (out.columns >= V * lanes && out.alpha == 1.0f) {
    if (out.beta == 0.0f)
      return out.bias == nullptr ? put_whole<R, V, Start::kZero>(acc, C, ldc, out)
                                 : put_whole<R, V, Start::kBias>(acc, C, ldc, out);
    if (out.bias == nullptr) return put_whole<R, V, Start::kScaledC>(acc, C, ldc, out);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      if (v * lanes < out.columns)
        put(C + r * ldc + v * lanes, bias_from(out.bias, v * lanes), acc[r][v],
            out.columns - v * lanes, out);
}

// R rows of C across its N columns: two vectors at a time, then one if that is all that is left.
template <int R, Stream S>
void tile_rows(int64_t N, int64_t K, TileOperand A, const float* B, int64_t ldb, float* C,
               int64_t ldc, float alpha, float beta, const float* bias) {
  constexpr int64_t lanes = kTileLanes;
  for (int64_t n = 0; n < N; n += 2 * lanes) {
    const TileOutput out{N - n, alpha, beta, bias_from(bias, n)};
    if (N - n > lanes)
      tile<R, 2, S>(K, A, B + n, ldb, C + n, ldc, out);
    else
      tile<R, 1, S>(K, A, B + n, ldb, C + n, ldc, out);
  }
}

template <int R>
void tile_rows(int64_t N, int64_t K, TileOperand A, const float* B, int64_t ldb, float* C,
               int64_t ldc, float alpha, float beta, const float* bias, bool b_streamed) {
  if (A.streamed && A.col == 1)
    tile_rows<R, Stream::kA>(N, K, A, B, ldb, C, ldc, alpha, beta, bias);
  else if (b_streamed)
    tile_rows<R, Stream::kB>(N, K, A, B, ldb, C, ldc, alpha, beta, bias);
  else
    tile_rows<R, Stream::kNone>(N, K, A, B, ldb, C, ldc, alpha, beta, bias);
}

// The most rows a tile takes: R * 2 accumulators, two vectors of B and a broadcast must fit the
// vector registers (32 with AVX-512, 16 with AVX2). With AVX-512, 12 rows (27 registers): each
// k then loads 2 vectors of B for 24 multiply-adds rather than for 16. On 2 Sapphire Rapids
// cores, 8 -> 12 rows: 1024^3 238-241 -> 256-261 GFLOP/s, 6400 x 512 x 128 261-270 -> 275-279,
// a weight gradient 1024 x 1024 x 4096 (TN) 202-205 -> 218-220, 4096 x 64 x 64 258-270 -> 277-283.
constexpr int kMaxTileRows = kTileLanes == 16 ? 12 : 6;

// gemm_tiled's cache blocks: the shared dimension cut into equal blocks of at most kMaxBlockK,
// and op(B)'s block, as many columns as fit kBlockFloats (128 KiB, an eighth of a Zen core's
// L2 cache), in whole tiles of two vectors; a transposed A is copied kBlockRowsA rows at a time
// (256 KiB at most). Tuned on 2 Zen 5 cores over the shapes of the models' steps and 1024^3.
// Where op(B) is copied too, a transposed A of at most 2 * kBlockRowsA rows is copied in one
// block (512 KiB at most), so that each block of op(B) is copied once rather than once for each
// of A's: on 2 Intel Xeon cores (2026-12-07) the gradients 256 x 1024 x 2048 and 4096 (TN, GPT's
// and BERT's second MLP layer, whose X has rows 4 KiB apart) ran 1.06-1.10x as fast alone, and
// 221-230 -> 243 GFLOP/s in gpt-mini's step (gpt-mini 0.997 of the step's time, 6 pairs).
constexpr int64_t kMaxBlockK = 512, kBlockFloats = 32 * 1024, kBlockRowsA = 128;
// The copied A's rows are kRowSkew floats longer than a block of k: a tile reads R of them side
// by side and the 8 x 8 transposes write 8, and rows a power of two apart (blocks of 512 or 256,
// as a model's 4,096 tokens give) would fall in the same few sets of the L1 cache and evict one
// another (256 x 256 x 4,096 ran at 150 GFLOP/s where 256 x 256 x 4,000 ran at 290).
constexpr int64_t kRowSkew = 16;
// Small operands, of at most kSmallOperand floats (64 KiB) an item: attention's. A transposed
// one is read where it lies, not copied: the tile's R rows at one step of k are then R
// neighbouring floats of one stored row, and the whole item stays in the L1/L2 cache across
// its tiles. The copy cost as much as it saved: the gradients of attention's small products
// (512 x 50x32x50 TN, P^T dO) ran at 300 GFLOP/s alone instead of 205-210, and BERT's
// 128x64x128 at 205 instead of 168. And while a thread computes one small item, the next
// item's operands are requested (prefetch_rows): in a step they come from memory, and heads
// read in place (GemmArgs::group) lie in rows far apart that no hardware prefetcher follows
// from one item to the next. vit-fmnist's attention products, 14.6-15.1 ms a step instead of
// 16.0-17.4.
constexpr int64_t kSmallOperand = 16 * 1024;
// A larger transposed A is read where it lies too when a part of C spans at most
// kNarrowColumns columns (two tiles): each row of A then passes under one or two tiles, and the
// copy, a transpose of every row, costs more than the reads in order save. Weight gradients of
// 64 or 128 outputs per part, on 2 Zen 5 cores: swin-fmnist's 256 x 64 x 12,544 TN 228 -> 252
// GFLOP/s and 192 x 64 x 12,544 289 -> 329, detr-fmnist's 128 x 128 x 512 TN 299 -> 320
// (columns cut in two parts of 64); at four tiles and more, copying stays as fast or faster
// (768 x 256 x 2,048: 338 copied, 312 in place).
constexpr int64_t kNarrowColumns = 4 * kTileLanes;
// op(B) stored in rows a multiple of 4 KiB apart (1024 floats, 2048, ...) is copied, though its
// rows are whole vectors: such rows start at the same offset within a page, so the lines of a
// block read where it lies fall in the same few sets of the caches and evict one another. On 2
// Sapphire Rapids cores (48 KiB L1, 2 MiB L2) 1024 x 1024 x 1024 ran at 121-128 GFLOP/s read in
// place and 237-240 copied, 6400 x 1024 x 256 at 211-227 and 238-244; at other strides reading
// in place was 0-10% faster than copying (6400 x 512 x 128: 253-258 against 233).
constexpr bool conflicting_stride(int64_t ld) { return ld % 1024 == 0; }
// op(B) that at most kOnePassRows rows of A pass over (11 tiles), and that is not small, is
// copied too: each of its blocks is then read from memory about once, and read where it lies,
// as short segments of rows far apart, its lines came one miss at a time, where the copy asks
// for a row's lines together and the tiles then read a buffer in order. On 2 Sapphire Rapids
// cores: vit-fmnist's weight gradient 128 x 512 x 6400 (TN) 159-171 -> 199-208 GFLOP/s in the
// step, swin-fmnist's 64 x 256 x 12544 127 -> 149-153; beam-4's 128-row products over the
// copies of W^T that PackedWeightsGuard keeps made its decoding 171-184 -> 160-165 ms (read in
// place, they were slower than copying W^T transposed on every call). From 512 rows on, reading
// in place is faster again (vit's 512 x 128 x 6400: 205-214 against 198-203).
constexpr int64_t kOnePassRows = 128;
constexpr bool read_about_once(int64_t rows, int64_t b_floats) {
  return rows <= kOnePassRows && b_floats > kSmallOperand;
}

// The shared dimension's cache blocks: k in equal blocks of at most kMaxBlockK. Each element of
// C adds its blocks' sums in order, so the blocks fix the result's bits.
int64_t block_of_k(int64_t k) {
  const int64_t blocks = (k + kMaxBlockK - 1) / kMaxBlockK;
  return (k + blocks - 1) / blocks;
}

// How gemm_tiled cuts each item's C among the threads when there are fewer items than threads
// (a large product is one item): a part of C's rows reads all of op(B), a part of its columns
// all of op(A), so the longer side is cut first: rows in whole tiles (at least four each),
// columns in whole vectors (at least two each).
struct CutOfC {
  int64_t row_parts, col_parts;
};
CutOfC cut_of_c(const GemmArgs& g, int64_t threads) {
  const int64_t wanted = (threads + g.batch - 1) / g.batch;
  const int64_t most_row_parts = std::max<int64_t>(g.m / (4 * kMaxTileRows), 1);
  const int64_t most_col_parts = std::max<int64_t>(tile_gemm_padded(g.n) / kTileLanes / 2, 1);
  const auto fewest = [&](int64_t have, int64_t most) {  // the other side's parts for `wanted`
    return std::clamp<int64_t>((wanted + have - 1) / have, 1, most);
  };
  if (g.m > g.n) {
    const int64_t rows = std::min(wanted, most_row_parts);
    return {rows, fewest(rows, most_col_parts)};
  }
  const int64_t columns = std::min(wanted, most_col_parts);
  return {fewest(columns, most_row_parts), columns};
}

// A split of k's runs: `blocks` blocks of k, the first thread's run [0, first_later), the
// other threads' runs cut evenly from the rest (gemm_tiled), whose sums go to buffers.
struct RunsOfK {
  int64_t blocks, first_later;
  int64_t later() const { return blocks - first_later; }
};
RunsOfK runs_of_k(int64_t k, int64_t k_block, int64_t threads) {
  const int64_t blocks = (k + k_block - 1) / k_block;
  return {blocks, (blocks + threads - 1) / threads};
}

// Whether one product (a batch of one) has its k cut among the threads rather than its C: each
// thread takes a run of k's blocks (those of kMaxBlockK) for the whole of C. A weight's gradient
// dW = dY^T X over a batch's thousands of tokens is such a product: C is small and k long. With
// C cut, each thread reads all of one operand (and, transposed, copies it); with k cut, each
// reads its own blocks of both, but every block past the first run is written to a buffer of
// C's size and added to C afterwards (see gemm_tiled). The floats moved per thread decide:
//   C cut in row_parts x col_parts:  A / row_parts + B / col_parts
//   k cut:                           (A + B) / threads + 2 C (blocks past the first run)
// and a tie goes to the split of k, which also copies A's blocks once instead of per part.
// Measured alone on 2 Sapphire Rapids cores (scripts/gemm_ab.sh, 2026-12-03, several runs):
// swin-fmnist's weight gradients 64 x 64 x 12544 (TN) 1.16-1.31x as fast, 64 x 256 x 12544
// 1.05-1.18x, bert's and gpt's 256 x 256 x 4096 1.04-1.16x, and the gradients of a few
// outputs over many positions (detr-fmnist's first convolution, 32 x 9 x 32768 NT) 1.8-2.0x;
// vit-fmnist's 512 x 128 x 6400, whose rows are cut without copying A twice, ran 4% slower
// split alone. In the steps, though, a transposed A is a saved activation that comes from
// memory, and there the split wins where its runs share out evenly (the longest at most 1/12
// over the mean): each thread then reads whole rows of its own blocks of A, and half of B.
// Alternating the builds (2 Zen 5 cores, 2026-12-07, 4-5 pairs of runs, median ratios of the
// step's time): vit-fmnist 0.96 (13 blocks of k, 7 and 6 a thread; its 384 x 128 x 6400 TN
// 267-282 -> 302-304 GFLOP/s), gpt-mini 0.97 (4 blocks), seq2seq-mini 0.97, bert-mini 0.99;
// swin-fmnist's 3,136 tokens (7 blocks, 4 and 3) stay cut by rows, as the rule below leaves
// them.
// alpha 1 only: a block's buffer then holds its sums as they are (alpha * sums could round a
// tiny negative sum to -0, which adds to C differently from the sums in registers). The
// buffers, kept by the calling thread from call to call, hold at most kSplitKBuffer floats.
constexpr double kSplitKBuffer = 4 * 1024 * 1024;  // 16 MiB
bool splits_k(const GemmArgs& g, int64_t threads, const CutOfC& cut) {
  const RunsOfK runs = runs_of_k(g.k, block_of_k(g.k), threads);
  if (g.batch != 1 || threads < 2 || g.alpha != 1.0f || runs.blocks < threads) return false;
  const double a = static_cast<double>(g.m) * g.k, b = static_cast<double>(g.n) * g.k;
  const double c = static_cast<double>(g.m) * g.n;
  const int64_t later = runs.later();  // blocks past the first run
  const bool even = 12 * runs.first_later * threads <= 13 * runs.blocks;  // longest run <= 13/12
  return c * later <= kSplitKBuffer &&
         ((g.trans_a && even) ||
          (a + b) / threads + 2.0 * c * later <= a / cut.row_parts + b / cut.col_parts);
}

// Whether gemm_tiled computes C^T = op(B)^T op(A)^T and writes it transposed into C, rather
// than C itself: a weight's gradient dW = dY^T X of a Linear with more outputs than inputs
// (vit-fmnist's 512 x 128 x 6400 TN, its MLP's first layer; GPT's and BERT's 1024 x 256), whose
// transposed operand, the larger, is the one a copy must transpose block by block. Swapped, the
// smaller operand is transposed (X^T: 128 rows instead of 512), in one block of all its rows (at
// most 2 * kBlockRowsA), the larger is copied row by row as it lies, each of its blocks once
// (tiled_product's `swapped`), and C^T, m x n floats, is transposed once at the end. The same
// bits: each element of C adds the same products (a * b = b * a) over the same blocks of k in
// the same order, from zero (beta 0, no bias), and a sum of products started from +0 is never
// -0, so nothing put() would add to it changes a bit either way. Measured alone on 2 Intel Xeon
// cores (AVX-512, 2 MiB L2, scripts/gemm_ab.sh, 2026-12-07; operands in the caches / after 64
// MB of other writes): 512 x 128 x 6400 1.15 / 1.10x as fast, 384 x 128 x 6400 1.14 / 1.12,
// 256 x 64 x 12544 1.17 / 1.24, 512 x 128 x 3136 1.11 / 1.10, 1024 x 256 x 2048 1.13 / 1.12,
// 1024 x 256 x 4096 1.16 / 1.16, 8192 x 256 x 4096 1.15 / 1.15; where the outputs are fewer than
// three times the inputs (128 x 64 x 2048: 0.93-0.94) or k is short (384 x 128 x 1024:
// 0.91-0.97, 512 x 128 x 512: 0.91-0.96), the product is computed as it is. In the steps
// (scripts/step_ab.sh, pairs of runs alternated, medians of the step's time): swin-fmnist
// 0.975, vit-fmnist 0.978 and 1.009 (two rounds), gpt-mini 0.983, bert-mini 0.994.
constexpr int64_t kLongK = 2048;
bool transposes_c(const GemmArgs& g) {
  return g.trans_a && !g.trans_b && g.b_panel == 0 && g.batch == 1 && g.alpha == 1.0f &&
         g.beta == 0.0f && g.bias == nullptr && g.n >= 4 * kTileLanes && g.n <= 2 * kBlockRowsA &&
         g.m >= 3 * g.n && g.k >= kLongK;
}

// op(A) and op(B) of C^T = op(B)^T op(A)^T for C = op(A) op(B) with a transposed A and a B in
// rows (transposes_c): A' = B read transposed, B' = A as it lies, C^T written to ct [n, m].
GemmArgs transposed_product(const GemmArgs& g, float* ct) {
  GemmArgs t = g;
  t.m = g.n, t.n = g.m;
  t.a = g.b, t.lda = g.ldb, t.trans_a = true;
  t.b = g.a, t.ldb = g.lda, t.trans_b = false;
  t.c = ct, t.ldc = g.m;
  return t;
}

// The columns of one panel of a B in panels (GemmArgs::b_panel): a tile's two vectors.
constexpr int64_t kPanelColumns = 2 * kTileLanes;

// Products of at most kFewRows rows times a transposed B take gemm_few_rows, which computes C^T
// kFewRowsPanel rows at a time (a panel of 128 x 32 floats, 16 KiB).
constexpr int64_t kFewRows = 32, kFewRowsPanel = 128;

// The rows of one of `parts` parts of `length` rows, in whole tiles of kMaxTileRows.
int64_t rows_per_part(int64_t length, int64_t parts) {
  const int64_t tiles = (length + kMaxTileRows - 1) / kMaxTileRows;
  return (tiles + parts - 1) / parts * kMaxTileRows;
}

// R rows of C (1 <= R <= kMaxTileRows), by tile_rows<R>.
void tile_rows(int R, int64_t N, int64_t K, TileOperand A, const float* B, int64_t ldb,
               float* C, int64_t ldc, float alpha, float beta, const float* bias,
               bool b_streamed) {
  switch (R) {
    case 1: return tile_rows<1>(N, K, A, B, ldb, C, ldc, alpha, beta, bias, b_streamed);
    case 2: return tile_rows<2>(N, K, A, B, ldb, C, ldc, alpha, beta, bias, b_streamed);
    case 3: return tile_rows<3>(N, K, A, B, ldb, C, ldc, alpha, beta, bias, b_streamed);
    case 4: return tile_rows<4>(N, K, A, B, ldb, C, ldc, alpha, beta, bias, b_streamed);
    case 5: return tile_rows<5>(N, K, A, B, ldb, C, ldc, alpha, beta, bias, b_streamed);
    case 6: return tile_rows<6>(N, K, A, B, ldb, C, ldc, alpha, beta, bias, b_streamed);
    default:
      if constexpr (kMaxTileRows > 6) {
        if (R == 7) return tile_rows<7>(N, K, A, B, ldb, C, ldc, alpha, beta, bias, b_streamed);
        if (R == 8) return tile_rows<8>(N, K, A, B, ldb, C, ldc, alpha, beta, bias, b_streamed);
        if (R == 9) return tile_rows<9>(N, K, A, B, ldb, C, ldc, alpha, beta, bias, b_streamed);
        if (R == 10) return tile_rows<10>(N, K, A, B, ldb, C, ldc, alpha, beta, bias, b_streamed);
        if (R == 11) return tile_rows<11>(N, K, A, B, ldb, C, ldc, alpha, beta, bias, b_streamed);
        if (R == 12) return tile_rows<12>(N, K, A, B, ldb, C, ldc, alpha, beta, bias, b_streamed);
      }
  }
}

using Vec8 = VectorOf<8>::type;

// The transpose of the 8 x 8 block at src (row stride ld_src) into dst (row stride ld_dst), in
// registers: rows interleaved by ones, then by pairs, then by halves (24 shuffles in place of 64
// scalar loads and stores).
void transpose_8x8(const float* src, int64_t ld_src, float* dst, int64_t ld_dst) {
  Vec8 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) load(r[i], src + i * ld_src);
  for (int i = 0; i < 8; i += 2) {  // t: r[i] and r[i+1] interleaved by elements
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4)  // u: 4 rows' elements 0, 4 / 1, 5 / 2, 6 / 3, 7 side by side
    for (int h = 0; h < 2; ++h) {
      u[i + 2 * h] = __builtin_shufflevector(t[i + h], t[i + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      u[i + 2 * h + 1] =
          __builtin_shufflevector(t[i + h], t[i + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int c = 0; c < 4; ++c) {  // columns c and c + 4 of src, from rows 0-3 and 4-7
    store(dst + c * ld_dst, __builtin_shufflevector(u[c], u[c + 4], 0, 1, 2, 3, 8, 9, 10, 11));
    store(dst + (c + 4) * ld_dst,
          __builtin_shufflevector(u[c], u[c + 4], 4, 5, 6, 7, 12, 13, 14, 15));
  }
}

}  // namespace

void tile_gemm(int64_t M, int64_t N, int64_t K, TileOperand A, const float* B, int64_t ldb,
               float* C, int64_t ldc, float alpha, float beta, const float* bias,
               bool b_streamed, const TileActivation* activation) {
  // The M rows in `groups` of nearly equal size (e.g. 50 rows: 5 tiles of 10 rows rather than
  // 4 of 12 and a last one of 2, whose few accumulators would leave the vector units waiting on
  // each other).
  const int64_t groups = (M + kMaxTileRows - 1) / kMaxTileRows;
  int64_t m = 0;
  for (int64_t t = 0; t < groups; ++t) {
    const int64_t rows = M / groups + (t < M % groups ? 1 : 0);
    tile_rows(static_cast<int>(rows), N, K, {A.data + m * A.row, A.row, A.col, A.streamed}, B,
              ldb, C + m * ldc, ldc, alpha, beta, bias, b_streamed);
    if (activation != nullptr)  // the band just written, still in the L1 cache
      bias_unary_rows(activation->op, C + m * ldc, ldc, activation->bias,
                      activation->out + m * activation->ldo, activation->ldo, rows, N);
    m += rows;
  }
}

namespace {

// Requests the cache lines of a stored matrix of rows x cols, rows ld floats apart.
void prefetch_rows(const float* data, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) prefetch_floats(data + r * ld, cols);
}

// dst[p * ld_dst + j] = b[j * ldb + p] for j < columns, p < k: b's rows transposed into dst's
// columns, in 8 x 8 blocks in registers, the edges element by element.
void transpose_rows(const float* b, int64_t ldb, int64_t columns, int64_t k, float* dst,
                    int64_t ld_dst) {
  const int64_t n8 = columns / 8 * 8, k8 = k / 8 * 8;
  // While eight rows of b are transposed, the eight that come kAhead rows later are requested:
  // a weight gradient's transposed A is an activation saved in the forward, read from memory
  // eight rows at a time. Alternated in the steps (2 Zen 5 cores, 2026-12-07, 12 pairs of
  // runs): vit-fmnist 0.98 and swin-fmnist 0.96-0.98 of the step's time, gpt-mini 1.00; 64 rows
  // ahead did no better. (Alone, 16 rows ahead had changed nothing in `scripts/gemm_ab.sh`,
  // 2026-12-06, whose operands come from the caches, not from memory.)
  constexpr int64_t kAhead = 32;
  for (int64_t j = 0; j < n8; j += 8) {
    if (j + kAhead + 8 <= columns) prefetch_rows(b + (j + kAhead) * ldb, 8, k, ldb);
    for (int64_t p = 0; p < k8; p += 8)
      transpose_8x8(b + j * ldb + p, ldb, dst + p * ld_dst + j, ld_dst);
  }
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = p < k8 ? n8 : 0; j < columns; ++j) dst[p * ld_dst + j] = b[j * ldb + p];
}

// row[from, to) = 0: whole vectors, then the lanes left in one masked store where the build has
// AVX-512. A copied block's rows end in such a tail (attention's 50 keys padded to 64), where
// std::fill was a call to memset for every row: without those calls the scores' product 512 x
// 50x50x32 (Q K^T, its K^T copied for every item) ran 1.03-1.05x as fast on one thread and
// 1.01-1.04x on two (scripts/gemm_ab.sh, 2 Intel Xeon cores, 2026-12-08).
void zero_tail(float* row, int64_t from, int64_t to) {
  int64_t j = from;
  for (; j + kTileLanes <= to; j += kTileLanes) store(row + j, Vec{});
#ifdef __AVX512F__
  if (j < to)
    _mm512_mask_storeu_ps(row + j, static_cast<__mmask16>((1u << (to - j)) - 1),
                          _mm512_setzero_ps());
#else
  for (; j < to; ++j) row[j] = 0.0f;
#endif
}

}  // namespace

void pack_b(const float* b, int64_t ldb, bool transposed, int64_t columns, int64_t k,
            float* dst, int64_t ld_dst) {
  if (transposed) transpose_rows(b, ldb, columns, k, dst, ld_dst);
  for (int64_t p = 0; p < k; ++p) {
    float* row = dst + p * ld_dst;
    if (!transposed) std::copy_n(b + p * ldb, columns, row);
    zero_tail(row, columns, ld_dst);
  }
}

int64_t panel_columns() { return kPanelColumns; }

int64_t panel_count(int64_t n) { return (n + kPanelColumns - 1) / kPanelColumns; }

void pack_panels(const float* w, int64_t ldw, int64_t n, int64_t k, float* dst) {
  const int64_t ld = k * kPanelColumns;
  const auto pack = [&](int64_t first, int64_t last) {  // panels [first, last)
    for (int64_t j = first; j < last; ++j) {
      const int64_t column = j * kPanelColumns;
      pack_b(w + column * ldw, ldw, /*transposed=*/true, std::min(kPanelColumns, n - column), k,
             dst + j * ld, kPanelColumns);
    }
  };
  parallel_for(0, panel_count(n), std::max<int64_t>(1, kGrainCheap / ld), pack);
}

namespace {

// A product of a few rows times a transposed B: a decoding step's Linear, x W^T for the few
// rows of x. The general path would copy W transposed on every call, which costs more than the
// product itself at these sizes. Here the tiles compute C^T = B op(A)^T instead: W is the
// broadcast operand, read where it lies, and only op(A)^T ([k, m], a few columns) is copied.
// C^T is computed kFewRowsPanel rows at a time into a buffer, transposed back in 8 x 8 register
// blocks, and written into C a row at a time. C^T's rows, C's columns, are cut among the threads.
// W's rows come from memory (a step's weights, 12 MB for seq2seq-mini's decoder, pass through
// once per token) and are streamed: greedy decoding ran 5-8% faster with their lines requested
// ahead, 32 x 256 x 256 alone on one core 110 -> 160 GFLOP/s.
void gemm_few_rows(const GemmArgs& g) {
  const int64_t m = g.m, n = g.n, k = g.k, mpad = tile_gemm_padded(m);
  const auto* a_data = static_cast<const float*>(g.a);
  const auto* b_data = static_cast<const float*>(g.b);
  auto* c_data = static_cast<float*>(g.c);
  const int64_t threads = max_threads(), wanted = (threads + g.batch - 1) / g.batch;
  const int64_t parts =
      std::clamp<int64_t>(wanted, 1, std::max<int64_t>(n / (4 * kMaxTileRows), 1));
  const int64_t chunk = rows_per_part(n, parts);  // C^T's rows a part
  const int64_t units = g.batch * parts;
  parallel_region(units > 1 && threads > 1, [&] {
    // op(A)^T [k, mpad]; a panel of C^T [kFewRowsPanel, mpad], then of C [m, kFewRowsPanel].
    float* a_transposed = scratch(0, k * mpad);
    float* panel = scratch(1, 2 * kFewRowsPanel * mpad);
    float* c_rows = panel + kFewRowsPanel * mpad;
#pragma omp for schedule(static) nowait
    for (int64_t u = 0; u < units; ++u) {
      const int64_t i = u / parts, first = u % parts * chunk;
      const int64_t last = std::min(n, first + chunk);
      if (last <= first) continue;
      // op(A)^T as [k, mpad]: A stored [m, k] is read transposed, A stored [k, m] copied.
      pack_b(a_data + g.offset_a(i), g.lda, !g.trans_a, m, k, a_transposed, mpad);
      float* c_item = c_data + g.offset_c(i);
      for (int64_t j0 = first; j0 < last; j0 += kFewRowsPanel) {
        const int64_t rows = std::min(kFewRowsPanel, last - j0);
        // B's rows j0.., read once from memory: streamed.
        const TileOperand w{b_data + g.offset_b(i) + j0 * g.ldb, g.ldb, 1, /*streamed=*/true};
        tile_gemm(rows, m, k, w, a_transposed, mpad, panel, mpad);  // C^T's rows j0..
        pack_b(panel, mpad, true, rows, m, c_rows, kFewRowsPanel);  // -> C's columns j0..
        const float* bias = bias_from(g.bias, j0);
        for (int64_t r = 0; r < m; ++r) {  // C[r, j0..] = alpha C^T[j0.., r] + its start
          float* c = c_item + r * g.ldc + j0;
          const float* product = c_rows + r * kFewRowsPanel;
          for (int64_t j = 0; j < rows; ++j)
            c[j] = g.alpha * product[j] + start_of(c[j], g.beta, bias_from(bias, j));
        }
      }
    }
  });
}

}  // namespace

bool use_tiled_gemm(int64_t m, int64_t n) {
  return kTileLanes >= 16 && m > 1 && n > 1;
}

// Whether gemm_tiled's product of m rows by a transposed B [n, k] is gemm_few_rows's.
static bool few_rows(int64_t m, int64_t n) { return m <= kFewRows && n >= 4 * m; }

// Whether gemm_tiled sums all of k at once rather than in blocks: a few rows' product with B
// in panels, as gemm_few_rows does with B in rows, so that the panels a PackedWeightsGuard keeps
// give the same bits as the weight read where it lies.
static bool sums_all_of_k(const GemmArgs& g) { return g.b_panel > 0 && few_rows(g.m, g.n); }

bool gemm_tiled_transposes_c(const GemmArgs& g) { return transposes_c(g); }

// Whether tiled_product writes GemmArgs::activation_out as it goes (not in C^T's product, nor
// in the few-rows product of gemm_few_rows).
static bool tiles_write_activation(const GemmArgs& g) {
  return !(g.trans_b && few_rows(g.m, g.n)) && !transposes_c(g);
}

void activation_rows(const GemmArgs& g, int64_t first, int64_t last) {
  bias_unary_rows(*g.activation, static_cast<const float*>(g.c) + first * g.ldc, g.ldc,
                  g.activation_bias, g.activation_out + first * g.ld_activation_out,
                  g.ld_activation_out, last - first, g.n);
}

void activation_rows(const GemmArgs& g) {
  parallel_for(0, g.m, row_grain(g.n),
               [&](int64_t first, int64_t last) { activation_rows(g, first, last); });
}

GemmArgs product_alone(const GemmArgs& g) {
  GemmArgs product = g;
  product.activation.reset();
  product.activation_out = nullptr;
  product.activation_bias = nullptr;
  return product;
}

bool gemm_tiled_splits_k(const GemmArgs& g) {
  if ((g.trans_b && few_rows(g.m, g.n)) || sums_all_of_k(g)) return false;
  if (transposes_c(g)) return gemm_tiled_splits_k(transposed_product(g, nullptr));
  const int64_t threads = max_threads();
  return splits_k(g, threads, cut_of_c(g, threads));
}

namespace {

// gemm_tiled's product of C, or, `swapped`, of C^T for a product that transposes_c computes so:
// then op(B), the larger operand, is always copied (as it lies), and so op(A), at most 2 *
// kBlockRowsA rows, in one block of all its rows: each block of op(B) is copied once.
void tiled_product(const GemmArgs& g, bool swapped) {
  const int64_t m = g.m, n = g.n, k = g.k, npad = tile_gemm_padded(n);
  // op(B) is read in place when it is in panels, or [k, n] row-major with rows of whole vectors,
  // at a stride that spreads its rows over the cache's sets, and many rows of A pass over each
  // block (but not in C^T's product, whose blocks of op(B) one pass of op(A) reads: copied).
  const bool panels = g.b_panel > 0;
  const bool b_in_place = panels || (!g.trans_b && n == npad && !conflicting_stride(g.ldb) &&
                                     !read_about_once(m, k * n) && !swapped);
  const auto* a_data = static_cast<const float*>(g.a);
  const auto* b_data = static_cast<const float*>(g.b);
  auto* c_data = static_cast<float*>(g.c);
  // A stored [m, k], or [k, m] when transposed: element (r, p) of op(A) read where it lies.
  const int64_t a_row = g.trans_a ? 1 : g.lda, a_col = g.trans_a ? g.lda : 1;
  const int64_t threads = max_threads(), vectors = npad / kTileLanes;
  const CutOfC cut = cut_of_c(g, threads);
  const int64_t row_parts = cut.row_parts, col_parts = cut.col_parts;
  // A part's columns: whole vectors, or whole panels.
  const int64_t part_step = panels ? kPanelColumns / kTileLanes : 1;
  const int64_t col_chunk =
      ((vectors + col_parts - 1) / col_parts + part_step - 1) / part_step * part_step * kTileLanes;
  const int64_t row_chunk = rows_per_part(m, row_parts);
  const int64_t parts = row_parts * col_parts, units = g.batch * parts;
  // The cache blocks: k_block of the shared dimension by n_block columns of op(B) (one panel of
  // a B in panels), a_rows rows of op(A) (all of them, read in place, when A is not transposed;
  // up to 2 * kBlockRowsA of a transposed A at once, where op(B) is copied).
  const bool all_of_k = sums_all_of_k(g);
  const int64_t k_block = all_of_k ? k : block_of_k(k), tile_columns = 2 * kTileLanes;
  const int64_t n_block =
      panels ? kPanelColumns
             : std::min(npad, std::max<int64_t>(kBlockFloats / k_block / tile_columns, 1) *
                                  tile_columns);
  const bool split_k = !all_of_k && splits_k(g, threads, cut);
  const int64_t c_columns = split_k ? n : col_chunk;  // the columns of C a thread passes over
  const bool a_copied = g.trans_a && m * k > kSmallOperand && c_columns > kNarrowColumns;
  const int64_t a_rows = a_copied && (b_in_place || m > 2 * kBlockRowsA) ? kBlockRowsA : m;
  // Where block p of k goes: C itself (the first block from beta * C + bias, a later one added
  // to what the earlier wrote), or, in a split of k, a buffer of its own (below). The last
  // block into C also writes GemmArgs::activation_out's rows (act_out: its row r0), if any.
  struct Destination {
    float* c;
    int64_t ldc;
    float beta;
    const float* bias;
    float* act_out;
  };
  // Item i's rows [r0, r0 + rows) and columns [c0, c1) of C over the blocks of k from
  // p_begin to p_end, block p written where dest(i, r0, p) says.
  const auto multiply = [&](int64_t i, int64_t r0, int64_t rows, int64_t c0, int64_t c1,
                            int64_t p_begin, int64_t p_end, float* b_buffer, float* a_buffer,
                            const auto& dest) {
    const float* a_item = a_data + g.offset_a(i) + r0 * a_row;
    const float* b_item = b_data + g.offset_b(i);
    for (int64_t p = p_begin; p < p_end; p += k_block) {
      const int64_t depth = std::min(k_block, k - p);
      const Destination to = dest(i, r0, p);
      // op(A)'s rows [r, r + count) of this block of k: where they lie, or transposed into
      // rows in 8 x 8 register blocks.
      const auto a_block = [&](int64_t r, int64_t count) -> TileOperand {
        const float* a = a_item + r * a_row + p * a_col;
        if (!a_copied) return {a, a_row, a_col};
        // (no zeros after each row, as pack_b writes: a tile reads A's rows to `depth` only)
        transpose_rows(a, g.lda, depth, count, a_buffer, depth + kRowSkew);
        return {a_buffer, depth + kRowSkew, 1};
      };
      // op(B)'s columns [first, first + columns) of this block of k, and their row stride:
      // where they lie (in their panel), or copied as [depth, padded] with zeros after
      // `columns`.
      using Block = std::pair<const float*, int64_t>;
      const auto b_block = [&](int64_t first, int64_t columns) -> Block {
        if (panels) return {b_item + first / kPanelColumns * g.ldb + p * kPanelColumns,
                            kPanelColumns};
        if (b_in_place) return {b_item + p * g.ldb + first, g.ldb};
        const int64_t ldb = tile_gemm_padded(columns);
        pack_b(b_item + (g.trans_b ? first * g.ldb + p : p * g.ldb + first), g.ldb, g.trans_b,
               columns, depth, b_buffer, ldb);
        return {b_buffer, ldb};
      };
      const auto columns_at = [&](int64_t first) { return std::min(c1, first + n_block) - first; };
      const auto tiles = [&](int64_t r, int64_t count, TileOperand a, int64_t first,
                             int64_t columns, const float* b, int64_t ldb) {
        const int64_t ldo = g.ld_activation_out;
        const TileActivation act{g.activation.value_or(UnaryOp::Relu),
                                 to.act_out != nullptr ? to.act_out + r * ldo + first : nullptr,
                                 ldo, bias_from(g.activation_bias, first)};
        tile_gemm(count, columns, depth, a, b, ldb, to.c + r * to.ldc + first, to.ldc, g.alpha,
                  to.beta, bias_from(to.bias, first), /*b_streamed=*/panels,
                  to.act_out != nullptr ? &act : nullptr);
      };
      if (a_copied) {
        // Each of A's row blocks copied once, passed over every block of op(B). Where op(B)
        // is copied too, its blocks are copied again for each of A's row blocks (rows / 128
        // times, a plain copy) rather than A's again for each of op(B)'s blocks (a transpose,
        // once per n_block columns).
        for (int64_t r = 0; r < rows; r += a_rows) {
          const int64_t count = std::min(a_rows, rows - r);
          const TileOperand a = a_block(r, count);
          for (int64_t first = c0; first < c1; first += n_block) {
            const int64_t columns = columns_at(first);
            const auto [b, ldb] = b_block(first, columns);
            tiles(r, count, a, first, columns, b, ldb);
          }
        }
      } else {
        // op(B)'s block stays in the cache while every row tile of the part passes over it.
        for (int64_t first = c0; first < c1; first += n_block) {
          const int64_t columns = columns_at(first);
          const auto [b, ldb] = b_block(first, columns);
          for (int64_t r = 0; r < rows; r += a_rows) {
            const int64_t count = std::min(a_rows, rows - r);
            tiles(r, count, a_block(r, count), first, columns, b, ldb);
          }
        }
      }
    }
  };
  // Block p of item i written into C: the first block from beta * C + bias, a later one added
  // to what the earlier ones wrote (beta 1, and no bias again).
  const auto into_c = [&](int64_t i, int64_t r0, int64_t p) -> Destination {
    const bool last = p + k_block >= k && !split_k;  // (a split of k: see below)
    return {c_data + g.offset_c(i) + r0 * g.ldc, g.ldc, p == 0 ? g.beta : 1.0f,
            p == 0 ? g.bias : nullptr,
            last && g.activation_out != nullptr ? g.activation_out + r0 * g.ld_activation_out
                                                : nullptr};
  };

  if (split_k) {
    // One item whose k is many blocks long and whose C is small: each thread takes a run of
    // the blocks of k for the whole of C (see splits_k). The first run goes into C as above;
    // each block of a later run into a buffer of its own, its sums alone (alpha is 1); then C
    // adds those buffers in the order of their blocks, so that every element of C adds the
    // same blocks in the same order as one thread would have: the same bits.
    const RunsOfK runs = runs_of_k(k, k_block, threads);
    const int64_t first_later = runs.first_later, buffers = runs.later(), slot = m * n;
    // Kept from call to call, as the allocator would; the workers see the calling thread's.
    thread_local HugePageBuffer later;
    float* later_data = later.reserve(static_cast<size_t>(buffers * slot));
    const auto into_buffer = [&](int64_t, int64_t, int64_t p) -> Destination {
      return {later_data + (p / k_block - first_later) * slot, n, 0.0f, nullptr, nullptr};
    };
    parallel_region(true, [&] {
      float* b_buffer = b_in_place ? nullptr : scratch(0, k_block * n_block);
      float* a_buffer = a_copied ? scratch(1, (k_block + kRowSkew) * a_rows) : nullptr;
#pragma omp for schedule(static)
      for (int64_t t = 0; t < threads; ++t) {
        const int64_t b0 = t == 0 ? 0 : first_later + (t - 1) * buffers / (threads - 1);
        const int64_t b1 = t == 0 ? first_later : first_later + t * buffers / (threads - 1);
        if (t == 0)
          multiply(0, 0, m, 0, n, 0, b1 * k_block, b_buffer, a_buffer, into_c);
        else
          multiply(0, 0, m, 0, n, b0 * k_block, std::min(k, b1 * k_block), b_buffer, a_buffer,
                   into_buffer);
      }
      // (the loop's barrier: every block's sums are written)
#pragma omp for schedule(static) nowait
      for (int64_t r = 0; r < m; ++r) {
        float* c = c_data + r * g.ldc;
        for (int64_t j = 0; j < buffers; ++j) {
          const float* add = later_data + j * slot + r * n;
#pragma omp simd
          for (int64_t col = 0; col < n; ++col) c[col] = add[col] + c[col];
        }
        if (g.activation_out != nullptr) activation_rows(g, r, r + 1);  // the row is whole
      }
    });
    return;
  }

  parallel_region(units > 1 && threads > 1, [&] {
    float* b_buffer = b_in_place ? nullptr : scratch(0, k_block * n_block);
    float* a_buffer = a_copied ? scratch(1, (k_block + kRowSkew) * a_rows) : nullptr;
#pragma omp for schedule(static) nowait
    for (int64_t u = 0; u < units; ++u) {
      const int64_t i = u / parts, part = u % parts;  // item i: rows and columns of C
      const int64_t r0 = part / col_parts * row_chunk, rows = std::min(m, r0 + row_chunk) - r0;
      const int64_t c0 = part % col_parts * col_chunk, c1 = std::min(n, c0 + col_chunk);
      if (rows <= 0 || c1 <= c0) continue;
      if (parts == 1 && u + 1 < units) {  // whole items: ask for the next one's operands
        if (m * k <= kSmallOperand)
          prefetch_rows(a_data + g.offset_a(i + 1), g.trans_a ? k : m, g.trans_a ? m : k, g.lda);
        if (k * n <= kSmallOperand)
          prefetch_rows(b_data + g.offset_b(i + 1), g.trans_b ? n : k, g.trans_b ? k : n, g.ldb);
      }
      multiply(i, r0, rows, c0, c1, 0, k, b_buffer, a_buffer, into_c);
    }
  });
}

}  // namespace

void gemm_tiled(const GemmArgs& g) {
  if (g.activation_out != nullptr && !tiles_write_activation(g)) {
    gemm_tiled(product_alone(g));  // the product, then GemmArgs::activation_out in a pass
    return activation_rows(g);
  }
  if (g.trans_b && few_rows(g.m, g.n)) return gemm_few_rows(g);
  if (!transposes_c(g)) return tiled_product(g, /*swapped=*/false);
  // C^T into a buffer, kept from call to call
  thread_local HugePageBuffer transposed;
  float* ct = transposed.reserve(static_cast<size_t>(g.m * g.n));
  tiled_product(transposed_product(g, ct), /*swapped=*/true);
  // C = (C^T)^T: each thread transposes a band of C^T's rows (C's columns), 8 at a time.
  const int64_t m = g.m, n = g.n;
  auto* c = static_cast<float*>(g.c);
  parallel_for(0, (n + 7) / 8, std::max<int64_t>(1, kGrainCheap / (8 * m)),
               [&](int64_t first, int64_t last) {
    const int64_t j0 = 8 * first, j1 = std::min(n, 8 * last);
    transpose_rows(ct + j0 * m, m, j1 - j0, m, c + j0, g.ldc);
  });
}

}  // namespace loom::cpu
