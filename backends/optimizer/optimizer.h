// The optimizer kernels: one Adam(W) step on a parameter (Kingma & Ba 2015; Loshchilov & Hutter
// 2019 for the decoupled weight decay), and clip_grad_norm's sum of squares and scaling, each
// also over a list of tensors (one launch for many on CUDA: multi-tensor apply). The checks, the
// public methods and the CPU loops are in optimizer.cpp; the CUDA kernels in adam.cu and
// multi_tensor.cu.
#pragma once

#include <span>

#include "core/tensor.h"

namespace loom {

struct AdamArgs {
  // One decoupled-or-not Adam(W) update on a contiguous float32 parameter, in place:
  //   g = grad + weight_decay*param            (if !decoupled)
  //   param *= 1 - lr*weight_decay             (if decoupled)
  //   m = beta1*m + (1-beta1) g;  v = beta2*v + (1-beta2) g^2
  //   param -= lr * (m / bias1) / (sqrt(v / bias2) + eps)
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  float bias1 = 1.0f, bias2 = 1.0f;  // 1 - beta^step
  bool decoupled = false;
};

// The arguments of the Backend methods of the same names, after their checks: non-empty
// tensors, float32 and contiguous (but sum_of_squares_multi's inputs, made contiguous); the
// multi-tensor kernels get non-empty lists of equal length.
using AdamKernel = void(const AdamArgs& args, Tensor& param, const Tensor& grad, Tensor& m,
                        Tensor& v);
using AdamMultiKernel = void(const AdamArgs& args, std::span<Tensor> params,
                             std::span<const Tensor> grads, std::span<Tensor> ms,
                             std::span<Tensor> vs);
using SumOfSquaresMultiKernel = void(std::span<const Tensor> xs, Tensor& out);
using ScaleMultiKernel = void(std::span<Tensor> xs, float alpha);
using ZeroMultiKernel = void(std::span<Tensor> xs);

namespace cpu {
AdamKernel adam_step;
AdamMultiKernel adam_step_multi;
SumOfSquaresMultiKernel sum_of_squares_multi;
ScaleMultiKernel scale_multi;
ZeroMultiKernel zero_multi;
}  // namespace cpu

namespace cuda {
AdamKernel adam_step;
AdamMultiKernel adam_step_multi;
SumOfSquaresMultiKernel sum_of_squares_multi;
ScaleMultiKernel scale_multi;
ZeroMultiKernel zero_multi;
}  // namespace cuda

}  // namespace loom
