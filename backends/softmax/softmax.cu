// softmax and log-softmax over the middle axis of a contiguous [outer, n, inner] block, with the
// two thread mappings of reduce.cu:
//   * inner == 1 (softmax over attention scores): one block owns a row of n contiguous floats
//     and its threads read it together;
//   * inner > 1: one thread per (o, i) column, consecutive threads on consecutive i, so every
//     step along n reads a contiguous run.
#include <cmath>
#include <cstdint>

#include "backends/cuda/device.h"
#include "backends/cuda/device_utils.cuh"
#include "backends/softmax/softmax.h"

namespace loom::cuda {
namespace {

// Thread mapping: one block per row of n (grid-stride over rows), threads strided along it.
// Three sweeps: the row max (for exp without overflow), the sum of exp(x - max), the output.
__global__ void softmax_rows_kernel(const float* x, int64_t rows, int64_t n, bool log, float* out) {
  __shared__ float shared[kWarp];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * n;
    float* yr = out + row * n;
    float max = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) max = fmaxf(max, xr[j]);
    max = block_max(max, shared);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += expf(xr[j] - max);
    sum = block_sum(sum, shared);
    // As the CPU backend: log_softmax = x - (max + log sum), softmax = exp(x - max) * (1/sum).
    const float lse = max + logf(sum), inv = 1.0f / sum;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      yr[j] = log ? xr[j] - lse : expf(xr[j] - max) * inv;
  }
}

// The same for rows short enough to stay in registers (n <= kRowItems * blockDim.x, e.g. the
// attention scores): each thread loads its kRowItems elements once and keeps them and their
// exponentials, so the row is read from memory once instead of three times.
constexpr int kRowItems = 8;
constexpr int64_t kMaxCachedRow = kRowItems * 512;

__global__ void softmax_rows_cached_kernel(const float* x, int64_t rows, int64_t n, bool log,
                                           float* out) {
  __shared__ float shared[kWarp];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * n;
    float* yr = out + row * n;
    float v[kRowItems], e[kRowItems];
    float max = -INFINITY;
#pragma unroll
    for (int k = 0; k < kRowItems; ++k) {
      const int64_t j = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      v[k] = j < n ? xr[j] : -INFINITY;
      max = fmaxf(max, v[k]);
    }
    max = block_max(max, shared);
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kRowItems; ++k) {
      const int64_t j = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      e[k] = j < n ? expf(v[k] - max) : 0.0f;
      sum += e[k];
    }
    sum = block_sum(sum, shared);
    const float lse = max + logf(sum), inv = 1.0f / sum;
#pragma unroll
    for (int k = 0; k < kRowItems; ++k) {
      const int64_t j = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      if (j < n) yr[j] = log ? v[k] - lse : e[k] * inv;
    }
  }
}

// Thread mapping: one thread per (o, i) column of [outer, n, inner]; consecutive threads take
// consecutive i, so every step along n reads a contiguous run of the block.
__global__ void softmax_columns_kernel(const float* x, int64_t outer, int64_t n, int64_t inner,
                                       bool log, float* out) {
  LOOM_GRID_STRIDE_LOOP(t, outer * inner) {
    const int64_t base = (t / inner) * n * inner + t % inner;
    float max = -INFINITY;
    for (int64_t j = 0; j < n; ++j) max = fmaxf(max, x[base + j * inner]);
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) sum += expf(x[base + j * inner] - max);
    const float lse = max + logf(sum), inv = 1.0f / sum;
    for (int64_t j = 0; j < n; ++j) {
      const float v = x[base + j * inner];
      out[base + j * inner] = log ? v - lse : expf(v - max) * inv;
    }
  }
}

// dx = y * (g - sum(g * y)) for softmax; dx = g - exp(y) * sum(g) for log_softmax.
// Thread mapping as softmax_rows_kernel.
__global__ void softmax_backward_rows_kernel(const float* grad, const float* y, int64_t rows,
                                             int64_t n, bool log, float* out) {
  __shared__ float shared[kWarp];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* gr = grad + row * n;
    const float* yr = y + row * n;
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dot += log ? gr[j] : gr[j] * yr[j];
    dot = block_sum(dot, shared);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      out[row * n + j] = log ? gr[j] - expf(yr[j]) * dot : yr[j] * (gr[j] - dot);
  }
}

// The same with the row's grad and y held in registers (see softmax_rows_cached_kernel).
__global__ void softmax_backward_rows_cached_kernel(const float* grad, const float* y, int64_t rows,
                                                    int64_t n, bool log, float* out) {
  __shared__ float shared[kWarp];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* gr = grad + row * n;
    const float* yr = y + row * n;
    float g[kRowItems], yv[kRowItems];
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < kRowItems; ++k) {
      const int64_t j = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      g[k] = j < n ? gr[j] : 0.0f;
      yv[k] = j < n ? yr[j] : 0.0f;
      dot += log ? g[k] : g[k] * yv[k];
    }
    dot = block_sum(dot, shared);
#pragma unroll
    for (int k = 0; k < kRowItems; ++k) {
      const int64_t j = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
      if (j < n) out[row * n + j] = log ? g[k] - expf(yv[k]) * dot : yv[k] * (g[k] - dot);
    }
  }
}

// Thread mapping as softmax_columns_kernel.
__global__ void softmax_backward_columns_kernel(const float* grad, const float* y, int64_t outer,
                                                int64_t n, int64_t inner, bool log, float* out) {
  LOOM_GRID_STRIDE_LOOP(t, outer * inner) {
    const int64_t base = (t / inner) * n * inner + t % inner;
    float dot = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = base + j * inner;
      dot += log ? grad[at] : grad[at] * y[at];
    }
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = base + j * inner;
      out[at] = log ? grad[at] - expf(y[at]) * dot : y[at] * (grad[at] - dot);
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------- launchers
void launch_softmax(const float* x, int64_t outer, int64_t n, int64_t inner, bool log, float* out,
                    cudaStream_t stream) {
  if (outer * n * inner == 0) return;
  if (inner == 1 && n <= kMaxCachedRow)  // row_threads(n) * kRowItems >= n up to this length
    softmax_rows_cached_kernel<<<grid_for(outer, 1), row_threads(n), 0, stream>>>(x, outer, n,
                                                                                  log, out);
  else if (inner == 1)
    softmax_rows_kernel<<<grid_for(outer, 1), row_threads(n), 0, stream>>>(x, outer, n, log, out);
  else
    softmax_columns_kernel<<<grid_for(outer * inner), kBlock, 0, stream>>>(x, outer, n, inner, log,
                                                                           out);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_softmax_backward(const float* grad, const float* y, int64_t outer, int64_t n,
                             int64_t inner, bool log, float* out, cudaStream_t stream) {
  if (outer * n * inner == 0) return;
  if (inner == 1 && n <= kMaxCachedRow)
    softmax_backward_rows_cached_kernel<<<grid_for(outer, 1), row_threads(n), 0, stream>>>(
        grad, y, outer, n, log, out);
  else if (inner == 1)
    softmax_backward_rows_kernel<<<grid_for(outer, 1), row_threads(n), 0, stream>>>(grad, y, outer,
                                                                                    n, log, out);
  else
    softmax_backward_columns_kernel<<<grid_for(outer * inner), kBlock, 0, stream>>>(
        grad, y, outer, n, inner, log, out);
  LOOM_CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------------------- the kernels
void softmax(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log, Tensor& out) {
  launch_softmax(x.data_ptr<float>(), outer, n, inner, log, out.data_ptr<float>(), stream());
}

void softmax_backward(const Tensor& grad, const Tensor& y, int64_t outer, int64_t n,
                      int64_t inner, bool log, Tensor& out) {
  launch_softmax_backward(grad.data_ptr<float>(), y.data_ptr<float>(), outer, n, inner, log,
                          out.data_ptr<float>(), stream());
}

}  // namespace loom::cuda
