// Matrix products: Backend::gemm's checks, then on the CPU batched products in loom's own
// register-tiled kernel where the build has 16-float vectors (tiled_gemm.h), else through
// OpenBLAS's cblas_sgemm; a single row or column by loom's own matrix-vector loops (gemv).
// Threading of the BLAS path: OpenBLAS (Debian's OpenMP build) runs single-threaded when called
// inside an OpenMP parallel region. So a batch of small products (attention scores: batch*heads
// matrices of [T, head_dim]) is spread over threads one product each, while a large product is
// cut into one panel of C per thread (sgemm_panels), and large products run one after another.
// bfloat16 operands or results (GemmArgs' types) go through float32 buffers: the operands are
// upcast exactly, multiplied by the same float32 products, and a bfloat16 result is rounded once.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/loops.h"
#include "backends/elementwise/elementwise.h"
#include "backends/gemm/gemm.h"
#include "backends/gemm/tiled_gemm.h"
#include "core/bfloat16.h"
#include "core/error.h"

namespace loom {

// Products up to this many multiply-adds are small: one BLAS call cannot keep several cores
// busy, so a batch of them spreads over the threads one item each.
constexpr int64_t kSmallProduct = 128 * 128 * 128;

// ---------------------------------------------------------------------------- the public method
void Backend::gemm(const GemmArgs& g) {
  LOOM_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 0,
             "gemm: negative size m={} n={} k={} batch={}", g.m, g.n, g.k, g.batch);
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  LOOM_CHECK(g.c != nullptr, "gemm: null output pointer for a [{},{}] result", g.m, g.n);
  LOOM_CHECK(g.k == 0 || (g.a != nullptr && g.b != nullptr),
             "gemm: null input pointer (m={} n={} k={})", g.m, g.n, g.k);
  LOOM_CHECK(g.m == 1 || g.ldc >= g.n, "gemm: output row stride {} is smaller than its {} columns",
             g.ldc, g.n);
  LOOM_CHECK(g.batch == 1 || g.stride_c != 0,
             "gemm: the {} batch items would all write the same output matrix (stride_c = 0)",
             g.batch);
  LOOM_CHECK(g.group >= 0 && (g.group == 0 || (g.batch % g.group == 0 &&
                                               (g.batch == g.group || g.group_stride_c != 0))),
             "gemm: {} batch items do not make groups of {} with their own outputs "
             "(group_stride_c = {})",
             g.batch, g.group, g.group_stride_c);
  const auto float_type = [](DType t) { return t == DType::Float32 || t == DType::BFloat16; };
  LOOM_CHECK(float_type(g.ab_type) && float_type(g.c_type),
             "gemm: operands of dtype {} and result of dtype {} (float32 or bfloat16 expected)",
             dtype_name(g.ab_type), dtype_name(g.c_type));
  LOOM_CHECK(g.c_type == DType::Float32 || g.ab_type == DType::BFloat16,
             "gemm: a bfloat16 result needs bfloat16 operands (got {})", dtype_name(g.ab_type));
  LOOM_CHECK(!g.activation || *g.activation == UnaryOp::Relu || *g.activation == UnaryOp::Gelu ||
                 *g.activation == UnaryOp::GeluTanh,
             "gemm: activation {} is not Relu, Gelu or GeluTanh", unary_op_name(*g.activation));
  LOOM_CHECK(g.activation_out == nullptr ||
                 (g.activation && device_ == Device::CPU && g.ab_type == DType::Float32 &&
                  g.c_type == DType::Float32 && g.batch == 1 && g.group == 0 &&
                  g.ld_activation_out >= g.n),
             "gemm: activation_out is written for a float32 product of one item on the cpu, "
             "with an activation and a row stride of at least n (got {} x {} x {}, {}, {} "
             "result, batch {}, activation {}, ld_activation_out {})",
             g.m, g.n, g.k, device_name(device_), dtype_name(g.c_type), g.batch,
             g.activation ? unary_op_name(*g.activation) : "none", g.ld_activation_out);
  LOOM_CHECK(g.activation_bias == nullptr || g.activation_out != nullptr,
             "gemm: activation_bias without activation_out ({} x {} x {}): a bias added to C "
             "goes in GemmArgs::bias",
             g.m, g.n, g.k);
  // cuBLAS has no product of an empty sum; C = beta * C is scaled in place, in float32 only.
  LOOM_CHECK(device_ != Device::CUDA || g.k > 0 || g.c_type == DType::Float32,
             "gemm: an empty product (k = 0) into a bfloat16 result is not supported on cuda "
             "(m={} n={})",
             g.m, g.n);
  // A B in panels: read by loom's CPU kernel only (tiled_gemm.h), in its panels' width.
  const int64_t panel = cpu::panel_columns();
  LOOM_CHECK(g.b_panel == 0 ||
                 (device_ == Device::CPU && g.b_panel == panel && !g.trans_b &&
                  g.ab_type == DType::Float32 && g.c_type == DType::Float32 && g.batch == 1 &&
                  g.group == 0 && g.ldb >= g.k * g.b_panel && cpu::use_tiled_gemm(g.m, g.n)),
             "gemm: B in panels of {} columns (ldb {}) is read by the CPU's tiles only, for a "
             "float32 product of one item, not transposed, in panels of {} columns, ldb >= k * "
             "{}, m and n > 1 (got {} x {} x {}, {}, batch {})",
             g.b_panel, g.ldb, panel, panel, g.m, g.n, g.k, device_name(device_), g.batch);
  if (g.group > 0 && !(device_ == Device::CPU && cpu::gemm_takes_groups(g))) {
    for (int64_t o = 0; o < g.batch / g.group; ++o)
      run(cpu::gemm, LOOM_CUDA_IMPL(cuda::gemm), g.group_args(o));
    return;
  }
  run(cpu::gemm, LOOM_CUDA_IMPL(cuda::gemm), g);
}

GemmArgs GemmArgs::group_args(int64_t o) const {
  GemmArgs one = *this;
  const int64_t ab_size = element_size(ab_type), c_size = element_size(c_type);
  one.a = static_cast<const char*>(a) + o * group_stride_a * ab_size;
  one.b = static_cast<const char*>(b) + o * group_stride_b * ab_size;
  one.c = static_cast<char*>(c) + o * group_stride_c * c_size;
  one.batch = group;
  one.group = 0;
  one.group_stride_a = one.group_stride_b = one.group_stride_c = 0;
  return one;
}

// ---------------------------------------------------------------------------- the CPU
namespace {

// A stored operand matrix: `rows` x `cols` with row stride `ld`, batch items `stride` apart.
struct BlasOperand {
  const float* data;
  int64_t rows, cols, ld, stride;
};

// BLAS requires ld >= max(1, cols). Callers legitimately pass any stride for a dimension of
// size 1 (e.g. the stride of a one-row view), so a single row gets the minimum. A real
// multi-row operand with ld < cols (a broadcast row, stride 0) is copied into a dense buffer.
BlasOperand legal_operand(BlasOperand op, int64_t batch, std::vector<float>& buffer) {
  if (op.rows == 1) {
    op.ld = std::max<int64_t>(op.ld, op.cols);
    return op;
  }
  if (op.ld >= op.cols) return op;
  const int64_t items = op.stride == 0 ? 1 : batch, size = op.rows * op.cols;
  buffer.resize(static_cast<size_t>(items * size));
  for (int64_t b = 0; b < items; ++b)
    for (int64_t r = 0; r < op.rows; ++r)
      std::memcpy(buffer.data() + b * size + r * op.cols, op.data + b * op.stride + r * op.ld,
                  static_cast<size_t>(op.cols) * sizeof(float));
  return {buffer.data(), op.rows, op.cols, op.cols, op.stride == 0 ? 0 : size};
}

// C = beta * C, for k == 0 (an empty sum); beta == 0 writes zeros without reading C, as BLAS
// does, so uninitialised or NaN contents of C do not leak through.
void scale_output(const GemmArgs& g, int64_t ldc) {
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t r = 0; r < g.m; ++r) {
      float* row = static_cast<float*>(g.c) + b * g.stride_c + r * ldc;
      for (int64_t j = 0; j < g.n; ++j) row[j] = g.beta == 0.0f ? 0.0f : g.beta * row[j];
    }
}

// C = beta * C + bias in C's dtype (the bias rounded to bfloat16 for a bfloat16 C), the start of
// a GEMM with GemmArgs::bias; beta == 0 does not read C.
void add_bias_rows(const GemmArgs& g) {
  const int64_t ldc = g.m == 1 ? std::max(g.ldc, g.n) : g.ldc;
  const bool bf16 = g.c_type == DType::BFloat16;
  // One row (a decoding step's Linear) stays on this thread: a team costs more than the row.
  cpu::parallel_region(g.batch * g.m * g.n >= cpu::kGrainCheap, [&] {
#pragma omp for collapse(2) schedule(static) nowait
    for (int64_t b = 0; b < g.batch; ++b)
      for (int64_t r = 0; r < g.m; ++r) {
        const int64_t row = b * g.stride_c + r * ldc;
        for (int64_t j = 0; j < g.n; ++j) {
          if (bf16) {
            auto* c = static_cast<BFloat16*>(g.c) + row;
            const float old = g.beta == 0.0f ? 0.0f : g.beta * static_cast<float>(c[j]);
            c[j] = BFloat16(old + static_cast<float>(BFloat16(g.bias[j])));
          } else {
            float* c = static_cast<float*>(g.c) + row;
            c[j] = (g.beta == 0.0f ? 0.0f : g.beta * c[j]) + g.bias[j];
          }
        }
      }
  });
}

// One row-major cblas_sgemm call: C = alpha op(A) op(B) + beta C, C being m x n.
struct Sgemm {
  CBLAS_TRANSPOSE trans_a, trans_b;
  int64_t m, n, k;
  float alpha;
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  float beta;
  float* c;
  int64_t ldc;
};

void sgemm(const Sgemm& s) {
  cblas_sgemm(CblasRowMajor, s.trans_a, s.trans_b, static_cast<int>(s.m), static_cast<int>(s.n),
              static_cast<int>(s.k), s.alpha, s.a, static_cast<int>(s.lda), s.b,
              static_cast<int>(s.ldb), s.beta, s.c, static_cast<int>(s.ldc));
}

// Panels are cut in whole blocks of 16 rows (or columns), at least kMinPanelBlocks per thread.
constexpr int64_t kPanelBlock = 16, kMinPanelBlocks = 4;

// One large product over the OpenMP threads: C cut into one panel per thread, along its rows
// (A's rows with them) or, when C is wider than tall, along its columns (B's columns), each
// panel a single-threaded cblas_sgemm (OpenBLAS's OpenMP build runs single-threaded inside a
// parallel region). OpenBLAS's own threading shares its packed blocks and waits for all threads
// at every block of k; independent panels pack their own and never wait. On 2 cores this ran
// the products of a ViT training step at 206-240 GFLOP/s against 151-196 (the weight
// gradients, whose k is the batch's 6,400 rows, gained most).
void sgemm_panels(const Sgemm& s) {
  if (s.m * s.n * s.k <= kSmallProduct) return sgemm(s);
  const bool by_rows = s.m >= s.n;
  const int64_t length = by_rows ? s.m : s.n;
  const auto panel = [&](int64_t block_begin, int64_t block_end) {
    const int64_t begin = block_begin * kPanelBlock;
    const int64_t size = std::min(block_end * kPanelBlock, length) - begin;
    Sgemm part = s;
    if (by_rows) {  // rows [begin, begin + size) of C and of op(A) (A stored [m, k] or [k, m])
      part.m = size;
      part.a += s.trans_a == CblasNoTrans ? begin * s.lda : begin;
      part.c += begin * s.ldc;
    } else {  // columns [begin, begin + size) of C and of op(B) (B stored [k, n] or [n, k])
      part.n = size;
      part.b += s.trans_b == CblasNoTrans ? begin : begin * s.ldb;
      part.c += begin;
    }
    sgemm(part);
  };
  cpu::parallel_for(0, (length + kPanelBlock - 1) / kPanelBlock, kMinPanelBlocks, panel);
}

// BLAS takes 32-bit sizes and strides (the rest of the contract is checked by Backend::gemm).
void check_int_sizes(const GemmArgs& g) {
  constexpr int64_t kIntMax = 2147483647;
  LOOM_CHECK(g.m <= kIntMax && g.n <= kIntMax && g.k <= kIntMax && g.lda <= kIntMax &&
                 g.ldb <= kIntMax && g.ldc <= kIntMax,
             "gemm: size or stride beyond 2^31 (m={} n={} k={} lda={} ldb={} ldc={})", g.m, g.n,
             g.k, g.lda, g.ldb, g.ldc);
}

// The batch items of a stored bfloat16 matrix (rows x cols, row stride ld, items `stride` apart;
// one item when stride is 0) upcast into a dense float32 buffer.
std::vector<float> upcast_matrices(const void* data, int64_t rows, int64_t cols, int64_t ld,
                                   int64_t stride, int64_t batch) {
  const auto* src = static_cast<const BFloat16*>(data);
  const int64_t items = stride == 0 ? 1 : batch, size = rows * cols;
  std::vector<float> dense(static_cast<size_t>(items * size));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < items; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j)
        dense[b * size + r * cols + j] = src[b * stride + r * ld + j];
  return dense;
}

// A product with bfloat16 operands or result: the same product in float32 on exactly upcast
// operands (bfloat16 products are exact in float32), then a bfloat16 C rounded once.
void gemm_bfloat16(const GemmArgs& g) {
  GemmArgs f = g;
  f.ab_type = f.c_type = DType::Float32;
  std::vector<float> a, b, c;
  if (g.ab_type == DType::BFloat16) {
    a = upcast_matrices(g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.stride_a,
                        g.batch);
    b = upcast_matrices(g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.stride_b,
                        g.batch);
    f.a = a.data(), f.lda = g.trans_a ? g.m : g.k, f.stride_a = g.stride_a == 0 ? 0 : g.m * g.k;
    f.b = b.data(), f.ldb = g.trans_b ? g.k : g.n, f.stride_b = g.stride_b == 0 ? 0 : g.k * g.n;
  }
  if (g.c_type == DType::BFloat16) {  // a dense float32 C (holding beta's old C), rounded back
    const int64_t ldc = g.m == 1 ? std::max(g.ldc, g.n) : g.ldc;
    c = g.beta == 0.0f ? std::vector<float>(static_cast<size_t>(g.batch * g.m * g.n))
                       : upcast_matrices(g.c, g.m, g.n, ldc, g.stride_c, g.batch);
    f.c = c.data(), f.ldc = g.n, f.stride_c = g.m * g.n;
    cpu::gemm(f);
    auto* out = static_cast<BFloat16*>(g.c);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < g.batch; ++i)
      for (int64_t r = 0; r < g.m; ++r)
        for (int64_t j = 0; j < g.n; ++j)
          out[i * g.stride_c + r * ldc + j] = BFloat16(c[(i * g.m + r) * g.n + j]);
    return;
  }
  cpu::gemm(f);
}

// Matrix-vector products stream the matrix once, so they are paced by memory, not by
// arithmetic: each thread takes at least kGemvGrain of the matrix's elements (128 KiB), below
// which starting a second thread costs more than it saves. A generated token's weights come
// from the L3 cache or memory, where one thread streams about 25 GB/s and two about 45: on 2
// cores (2026-12-03), gpt-mini-generate's 768 x 256 and 256 x 256 products on two threads
// instead of one made it 108-114 -> 100-104 ms, in alternation. (A grain of 512 KiB had been
// chosen on matrices timed alone, which the cache keeps: 256 x 256, 8 us on two threads
// against 4 on one.) Each row's or column's sum is one thread's, however many: the same bits.
constexpr int64_t kGemvGrain = 32 * 1024;

// out[j * out_step] = alpha * (v . M[j, 0..len)) + beta * out[j * out_step] for j in
// [begin, end): dot products of a contiguous vector with the rows of M (row stride ld). beta 0
// reads no out.
void gemv_dot_rows(const float* __restrict v, const float* __restrict M, int64_t ld,
                   int64_t begin, int64_t end, int64_t len, float alpha, float beta,
                   float* __restrict out, int64_t out_step) {
  const auto put = [=](int64_t j, float sum) {
    float& o = out[j * out_step];
    o = alpha * sum + (beta != 0.0f ? beta * o : 0.0f);
  };
  int64_t j = begin;
  for (; j + 4 <= end; j += 4) {  // four rows at a time: each load of v serves four
    const float *m0 = M + j * ld, *m1 = m0 + ld, *m2 = m1 + ld, *m3 = m2 + ld;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
    for (int64_t p = 0; p < len; ++p) {
      s0 += v[p] * m0[p];
      s1 += v[p] * m1[p];
      s2 += v[p] * m2[p];
      s3 += v[p] * m3[p];
    }
    put(j, s0), put(j + 1, s1), put(j + 2, s2), put(j + 3, s3);
  }
  for (; j < end; ++j) {
    const float* row = M + j * ld;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t p = 0; p < len; ++p) sum += v[p] * row[p];
    put(j, sum);
  }
}

void gemv_dots(const float* v, const float* M, int64_t ld, int64_t count, int64_t len,
               float alpha, float beta, float* out, int64_t out_step) {
  cpu::parallel_for(0, count, std::max<int64_t>(1, kGemvGrain / std::max<int64_t>(len, 1)),
                    [&](int64_t begin, int64_t end) {
                      gemv_dot_rows(v, M, ld, begin, end, len, alpha, beta, out, out_step);
                    });
}

// out[j * out_step] = alpha * sum_p v[p] M[p, j] + beta * out[j * out_step] for j < count,
// p < len: the rows of M (row stride ld) scaled by v and summed, kept in registers
// kGemvColumns columns at a time. beta 0 reads no out.
constexpr int64_t kGemvColumns = 64;
void gemv_sums(const float* v, const float* M, int64_t ld, int64_t count, int64_t len,
               float alpha, float beta, float* out, int64_t out_step) {
  const int64_t chunks = (count + kGemvColumns - 1) / kGemvColumns;
  const int64_t grain = std::max<int64_t>(1, kGemvGrain / std::max<int64_t>(len * kGemvColumns, 1));
  cpu::parallel_for(0, chunks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const int64_t first = c * kGemvColumns, width = std::min(kGemvColumns, count - first);
      float sum[kGemvColumns] = {};
      for (int64_t p = 0; p < len; ++p) {
        const float x = v[p], *row = M + p * ld + first;
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) sum[j] += x * row[j];
      }
      for (int64_t j = 0; j < width; ++j) {
        float& o = out[(first + j) * out_step];
        o = alpha * sum[j] + (beta != 0.0f ? beta * o : 0.0f);
      }
    }
  });
}

// One item of a product with a single row (m == 1) or column (n == 1): a matrix-vector
// product. The vector is a's row or b's column (copied when its elements are strided); the
// matrix, op(B) or op(A), is multiplied as stored: by dot products with its rows when it is
// stored transposed relative to the vector, else as a sum of its rows. lda and ldb are the
// operands' row strides as legal_operand left them.
void gemv(const GemmArgs& g, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
          int64_t ldc) {
  const bool row = g.m == 1;
  const float* vec = row ? a : b;
  const int64_t step = row ? (g.trans_a ? lda : 1) : (g.trans_b ? 1 : ldb);
  std::vector<float> gathered;
  if (step != 1 && g.k > 1) {
    gathered.resize(static_cast<size_t>(g.k));
    for (int64_t p = 0; p < g.k; ++p) gathered[static_cast<size_t>(p)] = vec[p * step];
    vec = gathered.data();
  }
  // c (1 x n) = vec op(B): B stored [n, k] has vec's dots in its rows; [k, n] sums its rows.
  // c (m x 1) = op(A) vec: A stored [m, k] has them in its rows; [k, m] sums its rows.
  const float* matrix = row ? b : a;
  const int64_t ld = row ? ldb : lda, count = row ? g.n : g.m;
  const int64_t out_step = row ? 1 : ldc;
  if (row ? g.trans_b : !g.trans_a)
    gemv_dots(vec, matrix, ld, count, g.k, g.alpha, g.beta, c, out_step);
  else
    gemv_sums(vec, matrix, ld, count, g.k, g.alpha, g.beta, c, out_step);
}

}  // namespace

bool cpu::gemm_takes_groups(const GemmArgs& g) {
  // The tiles read each operand where it lies; one whose rows overlap (a broadcast row, ld
  // smaller than a row) would be copied first (legal_operand), item by item of one stride.
  const auto rows_apart = [](int64_t rows, int64_t cols, int64_t ld) {
    return rows == 1 || ld >= cols;
  };
  return g.ab_type == DType::Float32 && g.c_type == DType::Float32 && g.k > 0 &&
         !g.activation && cpu::use_tiled_gemm(g.m, g.n) &&
         rows_apart(g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda) &&
         rows_apart(g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb);
}

void cpu::gemm(const GemmArgs& g) {
  // gemm_tiled adds the bias as it writes each tile of C; on the other paths C = beta C + bias
  // is written first, and the product is then added to it.
  const bool by_tiles = g.ab_type == DType::Float32 && g.c_type == DType::Float32 && g.k > 0 &&
                       cpu::use_tiled_gemm(g.m, g.n);
  if (g.bias != nullptr && !by_tiles) {
    add_bias_rows(g);
    GemmArgs rest = g;
    rest.bias = nullptr;
    rest.beta = 1.0f;
    return gemm(rest);
  }
  if (g.activation_out != nullptr && !by_tiles) {  // the product, then act(C + bias) out
    gemm(cpu::product_alone(g));
    return cpu::activation_rows(g);
  }
  if (g.activation && g.activation_out == nullptr && g.c_type == DType::Float32) {
    // the product, then act over C
    GemmArgs rest = g;
    rest.activation.reset();
    gemm(rest);
    return unary_rows(*g.activation, static_cast<float*>(g.c), g.batch, g.m, g.n,
                      g.m == 1 ? std::max(g.ldc, g.n) : g.ldc, g.stride_c);
  }
  // (A bfloat16 C: gemm_bfloat16's float32 product takes the activation, before rounding.)
  if (g.ab_type != DType::Float32 || g.c_type != DType::Float32) return gemm_bfloat16(g);
  check_int_sizes(g);
  const int64_t ldc = g.m == 1 ? std::max(g.ldc, g.n) : g.ldc;
  if (g.k == 0) return scale_output(g, ldc);

  // Stored shapes: A is [m, k] or, transposed, [k, m]; B is [k, n] or [n, k], or in panels
  // (Backend::gemm checked them: read by the tiles as they lie).
  if (g.b_panel > 0) return cpu::gemm_tiled(g);
  std::vector<float> a_buffer, b_buffer;
  const BlasOperand a = legal_operand({static_cast<const float*>(g.a), g.trans_a ? g.k : g.m,
                                   g.trans_a ? g.m : g.k, g.lda, g.stride_a},
                                  g.batch, a_buffer);
  const BlasOperand b = legal_operand({static_cast<const float*>(g.b), g.trans_b ? g.n : g.k,
                                   g.trans_b ? g.k : g.n, g.ldb, g.stride_b},
                                  g.batch, b_buffer);
  if (by_tiles) {  // register tiles, no BLAS call (tiled_gemm.h)
    GemmArgs tiled = g;
    tiled.a = a.data, tiled.lda = a.ld, tiled.stride_a = a.stride;
    tiled.b = b.data, tiled.ldb = b.ld, tiled.stride_b = b.stride;
    return cpu::gemm_tiled(tiled);
  }
  const CBLAS_TRANSPOSE ta = g.trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = g.trans_b ? CblasTrans : CblasNoTrans;
  // A one-row or one-column product is a matrix-vector product (gemv), which streams the
  // matrix once, where sgemm would pack it first (this is what makes KV-cached generation fast).
  auto product = [&](int64_t i) {
    const float* ai = a.data + i * a.stride;
    const float* bi = b.data + i * b.stride;
    float* ci = static_cast<float*>(g.c) + i * g.stride_c;
    if (g.m == 1 || g.n == 1) return gemv(g, ai, a.ld, bi, b.ld, ci, ldc);
    sgemm_panels({ta, tb, g.m, g.n, g.k, g.alpha, ai, a.ld, bi, b.ld, g.beta, ci, ldc});
  };

  const int threads = cpu::max_threads();
  const bool small = g.m * g.n * g.k <= kSmallProduct;
  const bool batch_parallel =
      g.batch > 1 && g.batch >= threads && (small || g.batch % threads == 0);
  if (batch_parallel && threads > 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < g.batch; ++i) product(i);
  } else {
    for (int64_t i = 0; i < g.batch; ++i) product(i);
  }
}

}  // namespace loom
