// Batch normalisation (Ioffe & Szegedy 2015) of x [N, C, S] (S: the spatial positions, 1 for
// BatchNorm1d on [N, C]) per channel c, over its M = N * S values:
//   mean_c = 1/M sum x,  rstd_c = 1 / sqrt(1/M sum (x - mean_c)^2 + eps)   (biased variance)
//   y = (x - mean_c) * rstd_c * weight_c + bias_c
// and its backward. With xhat = (x - mean) rstd and g = dy weight, in training (the statistics
// are the batch's own, so they pass gradient too):
//   dx = rstd (g - mean(g) - xhat mean(g xhat)),   means over the channel's M values;
// in evaluation (fixed running statistics) dx = g rstd. In both, dweight_c = sum dy xhat and
// dbias_c = sum dy. The checks, the public methods and the CPU loops are in batch_norm.cpp, the
// CUDA kernels in batch_norm.cu.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace loom {

// Backend::batch_norm's arguments after its checks: x and y contiguous float32 [n, channels,
// spatial], all three > 0; weight and bias undefined or [channels]; mean and rstd [channels],
// written when compute_stats (training), read otherwise.
using BatchNormKernel = void(const Tensor& x, int64_t n, int64_t channels, int64_t spatial,
                             const Tensor& weight, const Tensor& bias, float eps,
                             bool compute_stats, Tensor& mean, Tensor& rstd, Tensor& y);
// Backend::batch_norm_backward's: dy, x and dx contiguous [n, channels, spatial]; dweight and
// dbias written when defined.
using BatchNormBackwardKernel = void(const Tensor& dy, const Tensor& x, int64_t n,
                                     int64_t channels, int64_t spatial, const Tensor& weight,
                                     const Tensor& mean, const Tensor& rstd, bool training,
                                     Tensor& dx, Tensor& dweight, Tensor& dbias);

namespace cpu {
BatchNormKernel batch_norm;
BatchNormBackwardKernel batch_norm_backward;
}  // namespace cpu

namespace cuda {
BatchNormKernel batch_norm;
BatchNormBackwardKernel batch_norm_backward;
}  // namespace cuda

}  // namespace loom
