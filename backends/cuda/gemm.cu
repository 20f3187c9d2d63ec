// The matrix products loom runs itself instead of through cuBLAS (cuda_backend.cpp's gemm_impl
// picks): products of a few rows with a Linear's weight, as in decoding one token at a time, and
// the bias rows a cuBLAS GEMM starts from (GemmArgs::bias).
#include <type_traits>

#include "backends/cuda/device_utils.cuh"
#include "backends/unary_math.h"
#include "core/bfloat16.h"

namespace loom::cuda {
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

}  // namespace loom::cuda
