// Batch normalisation (batch_norm.h): Backend's checks, then the CPU loops, one channel per
// task. A channel's values are N rows of S contiguous floats; each row is summed in float32
// (a vectorised loop) and the row sums in double, so a channel of a million values keeps
// float32 accuracy in its mean and variance.
#include "backends/batch_norm/batch_norm.h"

#include <cmath>
#include <cstdint>

#include "backends/backend.h"
#include "backends/contract.h"
#include "backends/cpu/loops.h"
#include "core/error.h"

namespace loom {

// ---------------------------------------------------------------------------- the public methods
namespace {

void check_extents(const Contract& c, int64_t n, int64_t channels, int64_t spatial) {
  LOOM_CHECK(n > 0 && channels > 0 && spatial > 0, "{}: empty input [{}, {}, {}]", c.op, n,
             channels, spatial);
}

void check_channel_vector(const Contract& c, const Tensor& t, int64_t channels,
                          const char* name) {
  if (t.defined()) c.output(t, DType::Float32, channels, name);  // contiguous float32 [C]
}

}  // namespace

void Backend::batch_norm(const Tensor& x, int64_t n, int64_t channels, int64_t spatial,
                         const Tensor& weight, const Tensor& bias, float eps, bool compute_stats,
                         Tensor& mean, Tensor& rstd, Tensor& y) {
  const Contract c{device_, "batch_norm"};
  check_extents(c, n, channels, spatial);
  const int64_t numel = n * channels * spatial;
  c.input(x, DType::Float32, numel, "input");
  c.output(y, DType::Float32, numel, "out");
  check_channel_vector(c, weight, channels, "weight");
  check_channel_vector(c, bias, channels, "bias");
  c.output(mean, DType::Float32, channels, "mean");
  c.output(rstd, DType::Float32, channels, "rstd");
  run(cpu::batch_norm, LOOM_CUDA_IMPL(cuda::batch_norm), contiguous(x), n, channels, spatial,
      weight, bias, eps, compute_stats, mean, rstd, y);
}

void Backend::batch_norm_backward(const Tensor& dy, const Tensor& x, int64_t n, int64_t channels,
                                  int64_t spatial, const Tensor& weight, const Tensor& mean,
                                  const Tensor& rstd, bool training, Tensor& dx, Tensor& dweight,
                                  Tensor& dbias) {
  const Contract c{device_, "batch_norm_backward"};
  check_extents(c, n, channels, spatial);
  const int64_t numel = n * channels * spatial;
  c.input(dy, DType::Float32, numel, "grad");
  c.input(x, DType::Float32, numel, "input");
  c.output(dx, DType::Float32, numel, "out");
  check_channel_vector(c, weight, channels, "weight");
  check_channel_vector(c, mean, channels, "mean");
  check_channel_vector(c, rstd, channels, "rstd");
  check_channel_vector(c, dweight, channels, "dweight");
  check_channel_vector(c, dbias, channels, "dbias");
  run(cpu::batch_norm_backward, LOOM_CUDA_IMPL(cuda::batch_norm_backward), contiguous(dy),
      contiguous(x), n, channels, spatial, weight, mean, rstd, training, dx, dweight, dbias);
}

// ---------------------------------------------------------------------------- the CPU
namespace cpu {

void batch_norm(const Tensor& x, int64_t n, int64_t channels, int64_t spatial,
                const Tensor& weight, const Tensor& bias, float eps, bool compute_stats,
                Tensor& mean, Tensor& rstd, Tensor& y) {
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const float* wp = weight.defined() ? weight.data_ptr<float>() : nullptr;
  const float* bp = bias.defined() ? bias.data_ptr<float>() : nullptr;
  float* mp = mean.data_ptr<float>();
  float* rp = rstd.data_ptr<float>();
  const int64_t m = n * spatial;
  parallel_for_each(channels, m, [&](int64_t c) {
    const auto row = [&](const float* base, int64_t i) {  // sample i's values of channel c
      return base + (i * channels + c) * spatial;
    };
    if (compute_stats) {
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        const float* xr = row(xp, i);
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t k = 0; k < spatial; ++k) s += xr[k];
        sum += s;
      }
      const float mu = static_cast<float>(sum / static_cast<double>(m));
      double squares = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        const float* xr = row(xp, i);
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t k = 0; k < spatial; ++k) s += (xr[k] - mu) * (xr[k] - mu);
        squares += s;
      }
      mp[c] = mu;
      rp[c] = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(m) + eps));
    }
    // y = x * scale + shift, the normalisation and the affine map folded into one per channel.
    const float scale = rp[c] * (wp ? wp[c] : 1.0f);
    const float shift = (bp ? bp[c] : 0.0f) - mp[c] * scale;
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = row(xp, i);
      float* yr = yp + (i * channels + c) * spatial;
#pragma omp simd
      for (int64_t k = 0; k < spatial; ++k) yr[k] = xr[k] * scale + shift;
    }
  });
}

void batch_norm_backward(const Tensor& dy, const Tensor& x, int64_t n, int64_t channels,
                         int64_t spatial, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, bool training, Tensor& dx, Tensor& dweight,
                         Tensor& dbias) {
  const float* gp = dy.data_ptr<float>();
  const float* xp = x.data_ptr<float>();
  const float* wp = weight.defined() ? weight.data_ptr<float>() : nullptr;
  const float* mp = mean.data_ptr<float>();
  const float* rp = rstd.data_ptr<float>();
  float* dxp = dx.data_ptr<float>();
  const int64_t m = n * spatial;
  parallel_for_each(channels, m, [&](int64_t c) {
    const float mu = mp[c], r = rp[c];
    // sum dy and sum dy * (x - mean): dbias, and dweight once scaled by rstd.
    double sum_dy = 0.0, sum_dy_xc = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const float* g = gp + (i * channels + c) * spatial;
      const float* xr = xp + (i * channels + c) * spatial;
      float s = 0.0f, sx = 0.0f;
#pragma omp simd reduction(+ : s, sx)
      for (int64_t k = 0; k < spatial; ++k) {
        s += g[k];
        sx += g[k] * (xr[k] - mu);
      }
      sum_dy += s;
      sum_dy_xc += sx;
    }
    if (dweight.defined()) dweight.data_ptr<float>()[c] = static_cast<float>(sum_dy_xc * r);
    if (dbias.defined()) dbias.data_ptr<float>()[c] = static_cast<float>(sum_dy);
    // dx = w r (dy - mean(dy) - xhat mean(dy xhat)) with xhat mean(dy xhat) = (x - mean) slope
    // in training; dx = w r dy in evaluation.
    const float wr = (wp ? wp[c] : 1.0f) * r;
    const float mean_dy = training ? static_cast<float>(sum_dy / static_cast<double>(m)) : 0.0f;
    const float slope =
        training ? static_cast<float>(sum_dy_xc / static_cast<double>(m)) * r * r : 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      const float* g = gp + (i * channels + c) * spatial;
      const float* xr = xp + (i * channels + c) * spatial;
      float* d = dxp + (i * channels + c) * spatial;
#pragma omp simd
      for (int64_t k = 0; k < spatial; ++k) d[k] = wr * (g[k] - mean_dy - (xr[k] - mu) * slope);
    }
  });
}

}  // namespace cpu
}  // namespace loom
