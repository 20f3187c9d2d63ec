// Matrix products on the GPU (GemmArgs): cuBLAS for most (cublasSgemmStridedBatched, and
// cublasGemmStridedBatchedEx on tensor cores for bfloat16), and the products loom runs itself
// instead: products of a few rows with a Linear's weight, as in decoding one token at a time,
// and the bias rows a cuBLAS GEMM starts from (GemmArgs::bias). cuda::gemm, at the end, picks.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/device_utils.cuh"
#include "backends/cuda/launch_plan.h"
#include "backends/elementwise/elementwise.cuh"
#include "backends/gemm/gemm.h"
#include "backends/unary_math.h"
#include "core/bfloat16.h"

namespace loom::cuda {

// C = alpha A W^T + beta C + bias for A [m, k] with m <= kGemmRowsMax (row stride lda; any for
// one row), W [n, k] (row stride ldb: a Linear's weight), C [m, n] (row stride ldc), bias float32
// [n] or null, then `activation` if `activate`: GemmArgs' product of a few rows (batch 1,
// trans_b, not trans_a), summed in float32 and rounded once. A and W float32 or both bfloat16;
// C float32, or bfloat16 for bfloat16 A.
constexpr int64_t kGemmRowsMax = 8;
struct GemmRowsArgs {
  int64_t m, n, k;
  const void* a;
  int64_t lda;
  const void* b;
  int64_t ldb;
  void* c;
  int64_t ldc;
  float alpha, beta;
  const float* bias;
  bool activate;
  UnaryOp activation;  // Relu, Gelu or GeluTanh
};

namespace {

// 16 bytes of T, loaded or stored as one memory access.
template <typename T>
struct alignas(16) Vec16 {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

// The value a C element of type TC holds for v: v itself, or v rounded to bfloat16.
template <typename TC>
__device__ __forceinline__ float as_stored(float v) {
  if constexpr (std::is_same_v<TC, BFloat16>)
    return static_cast<float>(BFloat16(v));
  else
    return v;
}

// GemmArgs::activation of v (Backend::gemm admits these three).
__device__ __forceinline__ float activate(const GemmRowsArgs& g, float v) {
  if (!g.activate) return v;
  switch (g.activation) {
    case UnaryOp::Relu:
      return unary::Relu<CudaMath>{}.forward(v);
    case UnaryOp::Gelu:
      return unary::Gelu<CudaMath>{}.forward(v);
    case UnaryOp::GeluTanh:
      return unary::GeluTanh<CudaMath>{}.forward(v);
    default:
      return v;
  }
}

// C = beta * C + bias in every row of every batch item, the start of a cuBLAS GEMM with a bias
// and beta != 0; a bfloat16 C takes the bias rounded to bfloat16.
template <typename TC>
__global__ void bias_rows_kernel(TC* c, int64_t batch, int64_t m, int64_t n, int64_t ldc,
                                 int64_t stride_c, float beta, const float* bias) {
  LOOM_GRID_STRIDE_LOOP(i, batch * m * n) {
    const int64_t j = i % n, r = i / n % m, b = i / (n * m);
    TC& out = c[b * stride_c + r * ldc + j];
    out = TC(beta * static_cast<float>(out) + as_stored<TC>(bias[j]));
  }
}

// ---------------------------------------------------------------------------- few-row products
// C[r, j] = act(alpha * sum_p A[r, p] W[j, p] + beta * C[r, j] + bias[j]) for r < m <= M: a few
// rows of activations times a Linear's weight W [n, k] (row j of W is output column j). Such a
// product reads every weight once and does two flops per weight read, so its speed is the
// memory bandwidth's: one warp per output column streams row j of W in 16-byte loads, kUnroll
// of them in flight per lane, and multiplies each by the same elements of the m rows of A
// (a few KB, which stay in the caches); a butterfly sum per row then gives lane 0 the m dot
// products, which it finishes with the bias, C's old value and the activation, and rounds once
// to C's type.
// `vector`: every row of A and W starts 16-byte aligned, so the first k / (16 / sizeof(T))
// * (16 / sizeof(T)) elements go by vector; the rest of each row (or all of it) one by one.
// Every thread of the block reaches the warp reductions (no early return).
constexpr int kRowsWarps = 8;  // output columns per block of gemm_rows_kernel
// 16-byte weight loads in flight per lane: 8 covers a row of 768 float32 or 1,536 bfloat16
// (GPT-2's c_attn and c_fc) in one round trip to memory.
constexpr int kUnroll = 8;

template <int M, typename T, typename TC>
__global__ void __launch_bounds__(kRowsWarps* kWarp)
    gemm_rows_kernel(GemmRowsArgs g, const T* a, const T* w, TC* c, bool vector) {
  constexpr int N = Vec16<T>::kSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kRowsWarps + threadIdx.x / kWarp;
  const bool active = j < g.n;
  const T* wj = w + (active ? j : 0) * g.ldb;
  float acc[M] = {};
  int64_t done = 0;  // the elements of the row handled by the vector loop
  if (vector) {
    const int64_t vecs = active ? g.k / N : 0;
    const auto* wv = reinterpret_cast<const Vec16<T>*>(wj);
    for (int64_t base = 0; base < vecs; base += kWarp * kUnroll) {
      Vec16<T> wl[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {  // issue every load before using any
        const int64_t v = base + u * kWarp + lane;
        if (v < vecs) wl[u] = wv[v];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t v = base + u * kWarp + lane;
        if (v >= vecs) continue;
#pragma unroll
        for (int r = 0; r < M; ++r) {
          if (r >= g.m) break;
          const Vec16<T> av = reinterpret_cast<const Vec16<T>*>(a + r * g.lda)[v];
#pragma unroll
          for (int e = 0; e < N; ++e)
            acc[r] += static_cast<float>(wl[u].v[e]) * static_cast<float>(av.v[e]);
        }
      }
    }
    done = vecs * N;
  }
  for (int64_t p = done + lane; active && p < g.k; p += kWarp) {
    const float wp = static_cast<float>(wj[p]);
#pragma unroll
    for (int r = 0; r < M; ++r)
      if (r < g.m) acc[r] += wp * static_cast<float>(a[r * g.lda + p]);
  }
#pragma unroll
  for (int r = 0; r < M; ++r) acc[r] = warp_reduce(acc[r], SumOp{});
  if (!active || lane != 0) return;
  const float b = g.bias != nullptr ? as_stored<TC>(g.bias[j]) : 0.0f;
#pragma unroll
  for (int r = 0; r < M; ++r) {
    if (r >= g.m) break;
    TC& out = c[r * g.ldc + j];
    const float old = g.beta == 0.0f ? 0.0f : g.beta * static_cast<float>(out);
    out = TC(activate(g, g.alpha * acc[r] + old + b));
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <int M, typename T, typename TC>
void launch_rows(const GemmRowsArgs& g, cudaStream_t stream) {
  const auto* a = static_cast<const T*>(g.a);
  const auto* w = static_cast<const T*>(g.b);
  const int64_t size = sizeof(T);
  const bool vector = aligned16(a) && aligned16(w) && (g.m == 1 || g.lda * size % 16 == 0) &&
                      g.ldb * size % 16 == 0;
  const auto blocks = static_cast<unsigned>(ceil_div(g.n, kRowsWarps));
  gemm_rows_kernel<M, T, TC>
      <<<blocks, kRowsWarps * kWarp, 0, stream>>>(g, a, w, static_cast<TC*>(g.c), vector);
  LOOM_CUDA_CHECK_LAUNCH();
}

template <typename T, typename TC>
void launch_rows_typed(const GemmRowsArgs& g, cudaStream_t stream) {
  if (g.m == 1)
    launch_rows<1, T, TC>(g, stream);
  else if (g.m == 2)
    launch_rows<2, T, TC>(g, stream);
  else if (g.m <= 4)
    launch_rows<4, T, TC>(g, stream);
  else
    launch_rows<kGemmRowsMax, T, TC>(g, stream);
}

}  // namespace

void launch_gemm_rows(const GemmRowsArgs& g, DType ab_type, DType c_type, cudaStream_t stream) {
  if (ab_type == DType::Float32)
    launch_rows_typed<float, float>(g, stream);
  else if (c_type == DType::Float32)
    launch_rows_typed<BFloat16, float>(g, stream);
  else
    launch_rows_typed<BFloat16, BFloat16>(g, stream);
}

// C = beta * C + bias (GemmArgs::bias, beta != 0) over `batch` matrices [m, n] of c_type, row
// stride ldc, stride_c apart: the start of a cuBLAS product with a bias that adds to C (with
// beta 0, a Linear's, the bias is copied by launch_copy).
void launch_bias_rows(void* c, DType c_type, int64_t batch, int64_t m, int64_t n, int64_t ldc,
                      int64_t stride_c, float beta, const float* bias, cudaStream_t stream) {
  const unsigned grid = grid_for(batch * m * n);
  if (c_type == DType::BFloat16)
    bias_rows_kernel<<<grid, kBlock, 0, stream>>>(static_cast<BFloat16*>(c), batch, m, n, ldc,
                                                  stride_c, beta, bias);
  else
    bias_rows_kernel<<<grid, kBlock, 0, stream>>>(static_cast<float*>(c), batch, m, n, ldc,
                                                  stride_c, beta, bias);
  LOOM_CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------------------- the product
namespace {

// A stored gemm operand: `rows` x `cols` with row stride `ld`, batch items `stride` apart.
struct Matrix {
  const void* data;
  int64_t rows, cols, ld, stride;
};

// Whether gemm runs `g` in launch_gemm_rows (above) rather than cuBLAS: a product of at
// most kGemmRowsMax rows with a Linear's weight [n, k], as in decoding (a row per token or beam).
// It is a matrix-vector product, bound by reading the weight once; cuBLAS's GEMV kernels read
// GPT-2's weights at 0.4-0.8 TB/s on an H200 (of 4.8), and a bias took a launch of its own.
constexpr int64_t kGemmRowsMaxK = 16384;  // beyond it a warp per output column is too little
bool few_rows(const GemmArgs& g) {
  return g.batch == 1 && g.m <= kGemmRowsMax && g.k > 0 && g.k <= kGemmRowsMaxK &&
         !g.trans_a && g.trans_b;
}

cudaDataType cuda_type(DType type) { return type == DType::BFloat16 ? CUDA_R_16BF : CUDA_R_32F; }

int to_int(int64_t value, const char* what) {
  if (value < 0 || value > INT_MAX) throw_cublas_size_error("gemm", what, value);
  return static_cast<int>(value);
}

// BLAS requires ld >= max(1, cols). A single row may carry any stride (the stride of a size-1
// dim), so it gets the minimum; a real multi-row operand with ld < cols (a broadcast row,
// stride 0) is copied into a dense scratch buffer first.
Matrix legal_operand(Matrix op, DType type, int64_t batch, Scratch& scratch) {
  if (op.rows == 1) {
    op.ld = std::max(op.ld, op.cols);
    return op;
  }
  if (op.ld >= op.cols) return op;
  const int64_t items = op.stride == 0 ? 1 : batch, size = op.rows * op.cols;
  void* dense = scratch.get(static_cast<size_t>(items * size) * element_size(type));
  launch_copy(matrix_layout(items, op.rows, op.cols), matrix_operand(op.data, op.stride, op.ld),
              type, matrix_operand(dense, size, op.cols), type, stream());
  return {dense, op.rows, op.cols, op.cols, op.stride == 0 ? 0 : size};
}

}  // namespace

// cuBLAS is column-major, and a row-major matrix read as column-major is its transpose. So
// the row-major C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T: the
// operands swap places, m and n swap, and each keeps its own transpose flag and ld.
void gemm(const GemmArgs& g) {
  const int64_t ldc = g.m == 1 ? std::max(g.ldc, g.n) : g.ldc;
  if (few_rows(g)) {
    launch_gemm_rows(
        {g.m, g.n, g.k, g.a, g.lda, g.b, g.ldb, g.c, ldc, g.alpha, g.beta, g.bias,
         g.activation.has_value(), g.activation.value_or(UnaryOp::Relu)},
        g.ab_type, g.c_type, stream());
    return;
  }
  if (g.bias != nullptr) {  // cuBLAS starts from C = beta C + bias
    if (g.beta == 0.0f)     // a Linear's: the bias row copied into every row (by vectors)
      launch_copy(matrix_layout(g.batch, g.m, g.n), matrix_operand(g.bias, 0, 0), DType::Float32,
                  matrix_operand(g.c, g.stride_c, ldc), g.c_type, stream());
    else
      launch_bias_rows(g.c, g.c_type, g.batch, g.m, g.n, ldc, g.stride_c, g.beta, g.bias,
                       stream());
    GemmArgs rest = g;
    rest.bias = nullptr;
    rest.beta = 1.0f;
    return gemm(rest);
  }
  if (g.activation) {  // the product, then a pass of the activation over C (rounded twice)
    GemmArgs rest = g;
    rest.activation.reset();
    gemm(rest);
    Operand c = matrix_operand(g.c, g.stride_c, ldc);
    c.bf16 = g.c_type == DType::BFloat16;
    launch_unary(*g.activation, matrix_layout(g.batch, g.m, g.n), c, c, 0.0f, 0.0f, stream());
    return;
  }
  if (g.k == 0) {  // an empty sum: C = beta * C (float32 C: Backend::gemm checks)
    launch_scale(matrix_layout(g.batch, g.m, g.n), matrix_operand(g.c, g.stride_c, ldc), g.beta,
                 stream());
    return;
  }
  Scratch scratch;
  const Matrix a =
      legal_operand({g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.stride_a},
                    g.ab_type, g.batch, scratch);
  const Matrix b =
      legal_operand({g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.stride_b},
                    g.ab_type, g.batch, scratch);
  // cuBLAS is column-major: the row-major C = A B is computed as C^T = B^T A^T.
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (g.ab_type == DType::BFloat16) {
    // bfloat16 operands on tensor cores, accumulated in float32; C float32 or bfloat16.
    LOOM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        cublas(), op_b, op_a, to_int(g.n, "n"), to_int(g.m, "m"), to_int(g.k, "k"), &g.alpha,
        b.data, CUDA_R_16BF, to_int(b.ld, "ldb"), b.stride, a.data, CUDA_R_16BF,
        to_int(a.ld, "lda"), a.stride, &g.beta, g.c, cuda_type(g.c_type), to_int(ldc, "ldc"),
        g.stride_c, to_int(g.batch, "batch"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  LOOM_CUBLAS_CHECK(cublasSgemmStridedBatched(
      cublas_float32(), op_b, op_a, to_int(g.n, "n"), to_int(g.m, "m"), to_int(g.k, "k"), &g.alpha,
      static_cast<const float*>(b.data), to_int(b.ld, "ldb"), b.stride,
      static_cast<const float*>(a.data), to_int(a.ld, "lda"), a.stride, &g.beta,
      static_cast<float*>(g.c), to_int(ldc, "ldc"), g.stride_c, to_int(g.batch, "batch")));
}

}  // namespace loom::cuda
