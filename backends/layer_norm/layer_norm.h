// Layer normalisation (Ba et al. 2016) over the rows of a contiguous [rows, cols] tensor:
// y = (x - mean) * rstd * weight + bias with rstd = 1 / sqrt(var + eps), var the biased
// variance (PyTorch's definition); the forward saves mean and rstd per row for the backward.
// add_layer_norm normalises x + residual, written out first, in the same pass. The checks, the
// public methods and the CPU loops are in layer_norm.cpp, the CUDA kernels in layer_norm.cu.
#pragma once

#include "core/tensor.h"

namespace loom {

// Backend::layer_norm's and add_layer_norm's arguments, after their checks: x contiguous
// float32 [rows, cols] with rows, cols > 0 (rows = mean.numel()); weight/bias undefined or
// [cols]. residual and sum are both undefined (layer_norm) or both [rows, cols]
// (add_layer_norm: the rows normalised are x + residual, written to sum; the residual float32
// or bfloat16, contiguous).
using LayerNormKernel = void(const Tensor& x, const Tensor& residual, const Tensor& weight,
                             const Tensor& bias, float eps, Tensor& sum, Tensor& y, Tensor& mean,
                             Tensor& rstd);
// Backend::layer_norm_backward's, after its checks: dy and x contiguous, rows, cols > 0;
// dweight and dbias are written when defined.
using LayerNormBackwardKernel = void(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                     const Tensor& mean, const Tensor& rstd, Tensor& dx,
                                     Tensor& dweight, Tensor& dbias);

namespace cpu {
LayerNormKernel layer_norm;
LayerNormBackwardKernel layer_norm_backward;
}  // namespace cpu

namespace cuda {
LayerNormKernel layer_norm;
LayerNormBackwardKernel layer_norm_backward;
}  // namespace cuda

}  // namespace loom
