// The small-product kernel (small_gemm.h): register tiles of C over the shared dimension, and
// cpu::gemm's batched products through it.
#include "backends/gemm/small_gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/loops.h"

namespace loom::cpu {
namespace {

// A vector of `lanes` floats: one register (kSmallGemmLanes), or 8 for an 8 x 8 transpose.
template <int64_t lanes>
struct VectorOf {
  typedef float type __attribute__((vector_size(lanes * sizeof(float))));
};

// By reference, not by value: without AVX enabled (LOOM_NATIVE=OFF), GCC warns that passing a
// 32-byte vector by value changes the ABI.
template <class V>
void load(V& v, const float* p) {
  std::memcpy(&v, p, sizeof v);
}
template <class V>
void store(float* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}

using Vec = VectorOf<kSmallGemmLanes>::type;

// What a tile writes: `columns` of C's values (fewer than its vectors hold at C's right edge),
// as alpha * product + beta * C (beta 0 reads no C).
struct TileOutput {
  int64_t columns;
  float alpha, beta;
};

// c[0, count) = alpha * value + beta * c for the first `count` (1 to all) lanes of value.
void put(float* c, const Vec& value, int64_t count, const TileOutput& out) {
  Vec v = value;
  if (out.alpha != 1.0f) v *= out.alpha;
  if (count >= kSmallGemmLanes) {
    if (out.beta != 0.0f) {
      Vec old;
      load(old, c);
      v += out.beta * old;
    }
    return store(c, v);
  }
  float lanes[kSmallGemmLanes];
  store(lanes, v);
  for (int64_t j = 0; j < count; ++j) c[j] = lanes[j] + (out.beta != 0.0f ? out.beta * c[j] : 0.0f);
}

// C[R x (V vectors)] = A[R x K] B[K x (V vectors)]: R rows of A, each element broadcast, times
// V vectors of each row of B (leading dim ldb), summed over K in R * V registers; then written
// as `out` says.
template <int R, int V>
void tile(int64_t K, SmallOperand A, const float* B, int64_t ldb, float* C, int64_t ldc,
          const TileOutput& out) {
  constexpr int64_t lanes = kSmallGemmLanes;
  Vec acc[R][V] = {};
  for (int64_t k = 0; k < K; ++k) {
    Vec b[V];
    for (int v = 0; v < V; ++v) load(b[v], B + k * ldb + v * lanes);
    for (int r = 0; r < R; ++r) {
      const float a = A.data[r * A.row + k * A.col];
      for (int v = 0; v < V; ++v) acc[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V && v * lanes < out.columns; ++v)
      put(C + r * ldc + v * lanes, acc[r][v], out.columns - v * lanes, out);
}

// R rows of C across its N columns: two vectors at a time, then one if that is all that is left.
template <int R>
void tile_rows(int64_t N, int64_t K, SmallOperand A, const float* B, int64_t ldb, float* C,
               int64_t ldc, float alpha, float beta) {
  constexpr int64_t lanes = kSmallGemmLanes;
  for (int64_t n = 0; n < N; n += 2 * lanes) {
    const TileOutput out{N - n, alpha, beta};
    if (N - n > lanes)
      tile<R, 2>(K, A, B + n, ldb, C + n, ldc, out);
    else
      tile<R, 1>(K, A, B + n, ldb, C + n, ldc, out);
  }
}

// The most rows a tile takes: R * 2 accumulators, two vectors of B and a broadcast must fit the
// vector registers (32 with AVX-512, 16 with AVX2).
constexpr int kMaxTileRows = kSmallGemmLanes == 16 ? 8 : 6;

// R rows of C (1 <= R <= kMaxTileRows), by tile_rows<R>.
void tile_rows(int R, int64_t N, int64_t K, SmallOperand A, const float* B, int64_t ldb,
               float* C, int64_t ldc, float alpha, float beta) {
  switch (R) {
    case 1: return tile_rows<1>(N, K, A, B, ldb, C, ldc, alpha, beta);
    case 2: return tile_rows<2>(N, K, A, B, ldb, C, ldc, alpha, beta);
    case 3: return tile_rows<3>(N, K, A, B, ldb, C, ldc, alpha, beta);
    case 4: return tile_rows<4>(N, K, A, B, ldb, C, ldc, alpha, beta);
    case 5: return tile_rows<5>(N, K, A, B, ldb, C, ldc, alpha, beta);
    case 6: return tile_rows<6>(N, K, A, B, ldb, C, ldc, alpha, beta);
    default:
      if constexpr (kMaxTileRows > 6) {
        if (R == 7) return tile_rows<7>(N, K, A, B, ldb, C, ldc, alpha, beta);
        if (R == 8) return tile_rows<8>(N, K, A, B, ldb, C, ldc, alpha, beta);
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

void small_gemm(int64_t M, int64_t N, int64_t K, SmallOperand A, const float* B, int64_t ldb,
                float* C, int64_t ldc, float alpha, float beta) {
  // The M rows in `tiles` groups of nearly equal size (e.g. 50 rows: 7 tiles of 8, 7, ..., 7
  // rows, rather than 8 of 6 and a last one of 2, whose few accumulators would leave the vector
  // units waiting on each other).
  const int64_t tiles = (M + kMaxTileRows - 1) / kMaxTileRows;
  int64_t m = 0;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t rows = M / tiles + (t < M % tiles ? 1 : 0);
    tile_rows(static_cast<int>(rows), N, K, {A.data + m * A.row, A.row, A.col}, B, ldb,
              C + m * ldc, ldc, alpha, beta);
    m += rows;
  }
}

void pack_b(const float* b, int64_t ldb, bool transposed, int64_t columns, int64_t k,
            float* dst, int64_t ld_dst) {
  if (transposed) {  // 8 x 8 blocks in registers, the edges element by element
    const int64_t n8 = columns / 8 * 8, k8 = k / 8 * 8;
    for (int64_t j = 0; j < n8; j += 8)
      for (int64_t p = 0; p < k8; p += 8)
        transpose_8x8(b + j * ldb + p, ldb, dst + p * ld_dst + j, ld_dst);
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = p < k8 ? n8 : 0; j < columns; ++j) dst[p * ld_dst + j] = b[j * ldb + p];
  }
  for (int64_t p = 0; p < k; ++p) {
    float* row = dst + p * ld_dst;
    if (!transposed) std::copy_n(b + p * ldb, columns, row);
    std::fill(row + columns, row + ld_dst, 0.0f);
  }
}

bool use_small_gemm(int64_t m, int64_t n, int64_t k) {
  return kSmallGemmLanes >= 16 && m > 1 && n > 1 && m * n * k <= kSmallGemm;
}

void gemm_small(const GemmArgs& g) {
  const int64_t m = g.m, n = g.n, k = g.k, npad = small_gemm_padded(n);
  // op(B) is read in place when it is [k, n] row-major with rows of whole vectors.
  const bool b_in_place = !g.trans_b && n == npad;
  const auto* a_data = static_cast<const float*>(g.a);
  const auto* b_data = static_cast<const float*>(g.b);
  auto* c_data = static_cast<float*>(g.c);
  // A stored [m, k], or [k, m] when transposed: element (r, p) of op(A) read where it lies.
  const int64_t a_row = g.trans_a ? 1 : g.lda, a_col = g.trans_a ? g.lda : 1;
  // Fewer items than threads (a decoding step's Linear is one product of a few rows): each
  // item's columns are cut into `parts` of whole vectors, at least two vectors each, so that
  // every thread has work.
  const int64_t threads = max_threads(), vectors = npad / kSmallGemmLanes;
  const int64_t parts =
      std::clamp<int64_t>((threads + g.batch - 1) / g.batch, 1, std::max<int64_t>(vectors / 2, 1));
  const int64_t chunk = (vectors + parts - 1) / parts * kSmallGemmLanes;  // columns of a part
  const int64_t units = g.batch * parts;
#pragma omp parallel if (units > 1 && threads > 1)
  {
    std::vector<float> b_buffer(b_in_place ? 0 : k * npad);
#pragma omp for schedule(static)
    for (int64_t u = 0; u < units; ++u) {
      const int64_t i = u / parts, first = u % parts * chunk;  // item i, columns [first, last)
      const int64_t columns = std::min(n, first + chunk) - first;
      if (columns <= 0) continue;
      const float* b = b_data + i * g.stride_b;
      int64_t ldb = g.ldb;
      if (b_in_place) {
        b += first;
      } else {  // op(B)'s columns [first, last) as [k, padded], zeros after `columns`
        ldb = small_gemm_padded(columns);
        pack_b(b + (g.trans_b ? first * g.ldb : first), g.ldb, g.trans_b, columns, k,
               b_buffer.data(), ldb);
        b = b_buffer.data();
      }
      small_gemm(m, columns, k, {a_data + i * g.stride_a, a_row, a_col}, b, ldb,
                 c_data + i * g.stride_c + first, g.ldc, g.alpha, g.beta);
    }
  }
}

}  // namespace loom::cpu
