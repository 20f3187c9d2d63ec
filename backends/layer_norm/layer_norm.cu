// Layer normalisation on the GPU (layer_norm.h), forward and backward, each one pass over the
// rows where the composite would take a chain of elementwise and reduction launches.
#include <cmath>
#include <cstdint>

#include "backends/cuda/device.h"
#include "backends/cuda/device_utils.cuh"
#include "backends/layer_norm/layer_norm.h"
#include "backends/reduce/reduce.cuh"
#include "core/bfloat16.h"

namespace loom::cuda {
namespace {

// Ba et al. 2016: y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps), with the
// biased variance over the row, as torch.nn.LayerNorm.
// Thread mapping: one block per row (grid-stride over rows), threads strided along the row.
// As on the CPU, both sums run in double and the variance is a second sweep over
// (x - mean)^2, which does not cancel like E[x^2] - mean^2 for rows with a large mean.
// With a residual (add_layer_norm) the row is x + residual: the first sweep writes it to `sum`,
// and the later sweeps read it back there (each thread its own elements: no barrier needed).
// The residual is float32 or bfloat16 (R; a bfloat16 branch is added in float32).
template <typename R>
__global__ void layer_norm_kernel(const float* x, const R* residual, const float* weight,
                                  const float* bias, int64_t rows, int64_t cols, float eps,
                                  float* sum_out, float* y, float* mean, float* rstd) {
  __shared__ double shared[kWarp];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * cols;
    double sum = 0.0;
    if (residual) {
      const R* rr = residual + row * cols;
      float* sr = sum_out + row * cols;
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        const float v = xr[j] + static_cast<float>(rr[j]);
        sr[j] = v;
        sum += v;
      }
      xr = sr;
    } else {
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += xr[j];
    }
    const float mu = static_cast<float>(block_sum(sum, shared) / static_cast<double>(cols));
    double sq = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float d = xr[j] - mu;
      sq += static_cast<double>(d * d);
    }
    const double var = block_sum(sq, shared) / static_cast<double>(cols);
    const float r = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float normed = (xr[j] - mu) * r;
      y[row * cols + j] = (weight ? normed * weight[j] : normed) + (bias ? bias[j] : 0.0f);
    }
    if (threadIdx.x == 0) {
      mean[row] = mu;
      rstd[row] = r;
    }
  }
}

// The same normalisation, sums and rounding for rows of at most kWarpRowCols columns, with one
// warp per row (kWarpRows rows per block): each lane holds its elements j = lane + 32 i in
// registers, so the row is read once (the kernel above sweeps it three times) and the sums are
// warp shuffles, with no barrier. Decoding normalises one row at a time, which took the block
// kernel 5.2 us on an H200, mostly waiting: three dependent sweeps and four barriers.
// Every warp of a block runs the same number of loop trips (whole rows or none: `active`).
// Each loop either loads or stores, never both: a store may alias a later load as far as the
// compiler knows, so a loop that did both (v[i] = x[j] + residual[j]; sum_out[j] = v[i]) waited
// for each load in turn. Split so, GPT-2's bfloat16 training step went from 256k to 267k
// tokens/s on an H200 (2026-11-29). A lone row is still slower here than in the block kernel
// (Nsight Compute on the H200, GPT-2's decoding: 14 us a row, 17-19 before the split; the block
// kernel took 5.2 us): one warp runs the whole unrolled row by itself with nothing to hide its
// waits. So a few rows (decoding's) go to the block kernel, one block per row on its own SM.
constexpr int kWarpRowCols = 1024;
constexpr int kPerLane = kWarpRowCols / kWarp;
constexpr int kWarpRows = 4;
constexpr int64_t kWarpKernelMinRows = 128;  // about one row per SM of an H100/H200

template <typename R>
__global__ void layer_norm_warp_kernel(const float* x, const R* residual, const float* weight,
                                       const float* bias, int64_t rows, int64_t cols, float eps,
                                       float* sum_out, float* y, float* mean, float* rstd) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * kWarpRows; first < rows;
       first += static_cast<int64_t>(gridDim.x) * kWarpRows) {
    const int64_t row = first + threadIdx.x / kWarp;
    const bool active = row < rows;
    auto in_row = [&](int i) { return active && lane + i * kWarp < cols; };
    auto at = [&](int i) { return row * cols + lane + i * kWarp; };  // element i's offset
    float v[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) v[i] = in_row(i) ? x[at(i)] : 0.0f;
    if (residual) {
#pragma unroll
      for (int i = 0; i < kPerLane; ++i)
        if (in_row(i)) v[i] += static_cast<float>(residual[at(i)]);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i)
        if (in_row(i)) sum_out[at(i)] = v[i];
    }
    double sum = 0.0;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) sum += v[i];  // 0 outside the row
    const float mu = static_cast<float>(warp_reduce(sum, SumOp{}) / static_cast<double>(cols));
    double sq = 0.0;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const float d = v[i] - mu;
      if (in_row(i)) sq += static_cast<double>(d * d);
    }
    const double var = warp_reduce(sq, SumOp{}) / static_cast<double>(cols);
    const float r = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {  // v becomes y: weight and bias loaded, nothing stored
      if (!in_row(i)) continue;
      const int j = lane + i * kWarp;
      const float normed = (v[i] - mu) * r;
      v[i] = (weight ? normed * weight[j] : normed) + (bias ? bias[j] : 0.0f);
    }
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (in_row(i)) y[at(i)] = v[i];
    if (active && lane == 0) {
      mean[row] = mu;
      rstd[row] = r;
    }
  }
}

template <typename R>
void layer_norm_rows(const float* x, const R* residual, const float* weight, const float* bias,
                     int64_t rows, int64_t cols, float eps, float* sum, float* y, float* mean,
                     float* rstd, cudaStream_t stream) {
  if (cols <= kWarpRowCols && rows >= kWarpKernelMinRows)
    layer_norm_warp_kernel<<<grid_for(ceil_div(rows, kWarpRows), 1), kWarpRows * kWarp, 0,
                             stream>>>(x, residual, weight, bias, rows, cols, eps, sum, y, mean,
                                       rstd);
  else
    layer_norm_kernel<<<grid_for(rows, 1), row_threads(cols), 0, stream>>>(
        x, residual, weight, bias, rows, cols, eps, sum, y, mean, rstd);
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight, xhat = (x-mean)*rstd.
// Thread mapping as layer_norm_kernel; the two row means come from one sweep.
__global__ void layer_norm_dx_kernel(const float* dy, const float* x, const float* weight,
                                     const float* mean, const float* rstd, int64_t rows,
                                     int64_t cols, float* dx) {
  __shared__ float shared[kWarp];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * cols;
    const float* dyr = dy + row * cols;
    const float mu = mean[row], r = rstd[row];
    float sum_g = 0.0f, sum_g_xhat = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float g = weight ? dyr[j] * weight[j] : dyr[j];
      sum_g += g;
      sum_g_xhat += g * (xr[j] - mu) * r;
    }
    const float mean_g = block_sum(sum_g, shared) / static_cast<float>(cols);
    const float mean_g_xhat = block_sum(sum_g_xhat, shared) / static_cast<float>(cols);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float g = weight ? dyr[j] * weight[j] : dyr[j];
      dx[row * cols + j] = r * (g - mean_g - (xr[j] - mu) * r * mean_g_xhat);
    }
  }
}

constexpr int kParamRows = 8;  // threadIdx.y extent of layer_norm_param_grad_kernel

// dweight[c] = sum_r dy[r, c] * xhat[r, c], dbias[c] = sum_r dy[r, c], over a chunk of rows.
// Thread mapping: blocks of 32 x 8 threads; blockIdx.x = chunk * tiles + tile picks 32
// consecutive columns (threadIdx.x, coalesced) and a chunk of rows, which the 8 rows of
// threads (threadIdx.y) share by taking every 8th row. Partials [chunks, cols] (null = skip).
__global__ void layer_norm_param_grad_kernel(const float* dy, const float* x, const float* mean,
                                             const float* rstd, int64_t rows, int64_t cols,
                                             int64_t chunk_len, float* dweight, float* dbias) {
  __shared__ float partial_w[kParamRows][kWarp], partial_b[kParamRows][kWarp];
  const int64_t tiles = ceil_div(cols, kWarp);
  const int64_t chunk = blockIdx.x / tiles, c = (blockIdx.x % tiles) * kWarp + threadIdx.x;
  const int64_t begin = chunk * chunk_len, end = min(rows, begin + chunk_len);
  float acc_w = 0.0f, acc_b = 0.0f;
  if (c < cols) {
    for (int64_t r = begin + threadIdx.y; r < end; r += kParamRows) {
      const float g = dy[r * cols + c];
      acc_w += g * (x[r * cols + c] - mean[r]) * rstd[r];
      acc_b += g;
    }
  }
  partial_w[threadIdx.y][threadIdx.x] = acc_w;
  partial_b[threadIdx.y][threadIdx.x] = acc_b;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int k = 1; k < kParamRows; ++k) {
      acc_w += partial_w[k][threadIdx.x];
      acc_b += partial_b[k][threadIdx.x];
    }
    if (dweight) dweight[chunk * cols + c] = acc_w;
    if (dbias) dbias[chunk * cols + c] = acc_b;
  }
}

}  // namespace

// ---------------------------------------------------------------------------- launchers
// weight/bias may be null (no affine transform). residual and sum are both null (layer_norm)
// or both set (add_layer_norm: the rows normalised are x + residual, written to sum); the
// residual is float32, or bfloat16 when residual_bf16.
void launch_layer_norm(const float* x, const void* residual, bool residual_bf16,
                       const float* weight, const float* bias, int64_t rows, int64_t cols,
                       float eps, float* sum, float* y, float* mean, float* rstd,
                       cudaStream_t stream) {
  if (residual_bf16)
    layer_norm_rows(x, static_cast<const BFloat16*>(residual), weight, bias, rows, cols, eps, sum,
                    y, mean, rstd, stream);
  else
    layer_norm_rows(x, static_cast<const float*>(residual), weight, bias, rows, cols, eps, sum, y,
                    mean, rstd, stream);
  LOOM_CUDA_CHECK_LAUNCH();
}

// dweight/dbias may be null (not wanted); weight may be null (identity).
void launch_layer_norm_backward(const float* dy, const float* x, const float* weight,
                                const float* mean, const float* rstd, int64_t rows, int64_t cols,
                                float* dx, float* dweight, float* dbias, Scratch& scratch,
                                cudaStream_t stream) {
  layer_norm_dx_kernel<<<grid_for(rows, 1), row_threads(cols), 0, stream>>>(dy, x, weight, mean,
                                                                            rstd, rows, cols, dx);
  LOOM_CUDA_CHECK_LAUNCH();
  if (!dweight && !dbias) return;
  // Column sums over rows: chunks of rows reduced by separate blocks into [chunks, cols]
  // partials, which the deterministic column reduction of reduce.cu then adds up.
  const int64_t tiles = ceil_div(cols, kWarp);
  const Split split = plan_split(tiles, rows, 8 * kParamRows);
  const bool direct = split.chunks == 1;
  const size_t partial_bytes = split.chunks * cols * sizeof(float);
  float* partial_w = !dweight ? nullptr
                     : direct ? dweight
                              : static_cast<float*>(scratch.get(partial_bytes));
  float* partial_b = !dbias   ? nullptr
                     : direct ? dbias
                              : static_cast<float*>(scratch.get(partial_bytes));
  layer_norm_param_grad_kernel<<<static_cast<unsigned>(tiles * split.chunks),
                                 dim3(kWarp, kParamRows), 0, stream>>>(
      dy, x, mean, rstd, rows, cols, split.chunk_len, partial_w, partial_b);
  LOOM_CUDA_CHECK_LAUNCH();
  if (direct) return;
  if (dweight)
    launch_reduce(ReduceOp::Sum, partial_w, DType::Float32, 1, split.chunks, cols, dweight, scratch,
                  stream);
  if (dbias)
    launch_reduce(ReduceOp::Sum, partial_b, DType::Float32, 1, split.chunks, cols, dbias, scratch,
                  stream);
}

// ---------------------------------------------------------------------------- the kernels
void layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                float eps, Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd) {
  const int64_t rows = mean.numel(), cols = x.numel() / rows;
  launch_layer_norm(x.data_ptr<float>(), residual.defined() ? residual.raw_data() : nullptr,
                    residual.defined() && residual.dtype() == DType::BFloat16, ptr<float>(weight),
                    ptr<float>(bias), rows, cols, eps, ptr<float>(sum), y.data_ptr<float>(),
                    mean.data_ptr<float>(), rstd.data_ptr<float>(), stream());
}

void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                         const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dweight,
                         Tensor& dbias) {
  const int64_t rows = mean.numel(), cols = x.numel() / rows;
  Scratch scratch;
  launch_layer_norm_backward(dy.data_ptr<float>(), x.data_ptr<float>(), ptr<float>(weight),
                             mean.data_ptr<float>(), rstd.data_ptr<float>(), rows, cols,
                             dx.data_ptr<float>(), ptr<float>(dweight), ptr<float>(dbias), scratch,
                             stream());
}

}  // namespace loom::cuda
