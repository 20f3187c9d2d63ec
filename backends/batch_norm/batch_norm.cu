// Batch normalisation (batch_norm.h) on the GPU: one block per channel, its threads striding
// over the channel's N * S values (value t is sample t / S, position t % S). The sums are
// block reductions in double, as layer_norm.cu's, so they come out the same on every run.
#include <cstdint>

#include "backends/batch_norm/batch_norm.h"
#include "backends/cuda/device.h"
#include "backends/cuda/device_utils.cuh"

namespace loom::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ int64_t at(int64_t t, int64_t c, int64_t channels, int64_t spatial) {
  return (t / spatial * channels + c) * spatial + t % spatial;
}

__global__ void batch_norm_kernel(const float* x, int64_t n, int64_t channels, int64_t spatial,
                                  const float* weight, const float* bias, float eps,
                                  bool compute_stats, float* mean, float* rstd, float* y) {
  __shared__ double shared[kWarp];
  const int64_t m = n * spatial;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    if (compute_stats) {
      double sum = 0.0;
      for (int64_t t = threadIdx.x; t < m; t += blockDim.x) sum += x[at(t, c, channels, spatial)];
      const float mu = static_cast<float>(block_sum(sum, shared) / static_cast<double>(m));
      double squares = 0.0;
      for (int64_t t = threadIdx.x; t < m; t += blockDim.x) {
        const float d = x[at(t, c, channels, spatial)] - mu;
        squares += static_cast<double>(d * d);
      }
      const double var = block_sum(squares, shared) / static_cast<double>(m);
      __syncthreads();  // every thread has read mean[c] and rstd[c] of an earlier channel
      if (threadIdx.x == 0) {
        mean[c] = mu;
        rstd[c] = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
      }
      __syncthreads();
    }
    const float scale = rstd[c] * (weight ? weight[c] : 1.0f);
    const float shift = (bias ? bias[c] : 0.0f) - mean[c] * scale;
    for (int64_t t = threadIdx.x; t < m; t += blockDim.x) {
      const int64_t i = at(t, c, channels, spatial);
      y[i] = x[i] * scale + shift;
    }
  }
}

__global__ void batch_norm_backward_kernel(const float* dy, const float* x, int64_t n,
                                           int64_t channels, int64_t spatial, const float* weight,
                                           const float* mean, const float* rstd, bool training,
                                           float* dx, float* dweight, float* dbias) {
  __shared__ double shared[kWarp];
  const int64_t m = n * spatial;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    const float mu = mean[c], r = rstd[c];
    double sum_dy = 0.0, sum_dy_xc = 0.0;
    for (int64_t t = threadIdx.x; t < m; t += blockDim.x) {
      const int64_t i = at(t, c, channels, spatial);
      sum_dy += dy[i];
      sum_dy_xc += static_cast<double>(dy[i] * (x[i] - mu));
    }
    sum_dy = block_sum(sum_dy, shared);
    sum_dy_xc = block_sum(sum_dy_xc, shared);
    if (threadIdx.x == 0) {
      if (dweight) dweight[c] = static_cast<float>(sum_dy_xc * r);
      if (dbias) dbias[c] = static_cast<float>(sum_dy);
    }
    // As the CPU's: dx = w r (dy - mean(dy) - (x - mean) r^2 mean(dy (x - mean))) in training.
    const float wr = (weight ? weight[c] : 1.0f) * r;
    const float mean_dy = training ? static_cast<float>(sum_dy / static_cast<double>(m)) : 0.0f;
    const float slope =
        training ? static_cast<float>(sum_dy_xc / static_cast<double>(m)) * r * r : 0.0f;
    for (int64_t t = threadIdx.x; t < m; t += blockDim.x) {
      const int64_t i = at(t, c, channels, spatial);
      dx[i] = wr * (dy[i] - mean_dy - (x[i] - mu) * slope);
    }
  }
}

// The data of an optional tensor (weight, bias, dweight, dbias), or nullptr when undefined.
float* data_or_null(const Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

}  // namespace

// ---------------------------------------------------------------------------- the kernels
void batch_norm(const Tensor& x, int64_t n, int64_t channels, int64_t spatial,
                const Tensor& weight, const Tensor& bias, float eps, bool compute_stats,
                Tensor& mean, Tensor& rstd, Tensor& y) {
  batch_norm_kernel<<<grid_for(channels, 1), kThreads, 0, stream()>>>(
      x.data_ptr<float>(), n, channels, spatial, data_or_null(weight), data_or_null(bias), eps,
      compute_stats, mean.data_ptr<float>(), rstd.data_ptr<float>(), y.data_ptr<float>());
  LOOM_CUDA_CHECK_LAUNCH();
}

void batch_norm_backward(const Tensor& dy, const Tensor& x, int64_t n, int64_t channels,
                         int64_t spatial, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, bool training, Tensor& dx, Tensor& dweight,
                         Tensor& dbias) {
  batch_norm_backward_kernel<<<grid_for(channels, 1), kThreads, 0, stream()>>>(
      dy.data_ptr<float>(), x.data_ptr<float>(), n, channels, spatial, data_or_null(weight),
      mean.data_ptr<float>(), rstd.data_ptr<float>(), training, dx.data_ptr<float>(),
      data_or_null(dweight), data_or_null(dbias));
  LOOM_CUDA_CHECK_LAUNCH();
}

}  // namespace loom::cuda
