// Conv2d: 2-D cross-correlation with a square kernel (im2col + GEMM, see functional_conv.cpp),
// PyTorch's layout: weight [out_channels, in_channels, k, k], bias [out_channels].
#pragma once

#include "nn/module.h"

namespace loom::nn {

class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
         int64_t padding = 0, bool bias = true);

  // x [N, in_channels, H, W] -> [N, out_channels, H_out, W_out],
  // H_out = (H + 2 padding - kernel_size) / stride + 1
  Tensor forward(const Tensor& x) const;
  std::string extra_repr() const override;
  // PyTorch's default: weight and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in*k*k.
  void reset_parameters();

  int64_t in_channels, out_channels, kernel_size, stride, padding;
  Tensor weight;  // [out_channels, in_channels, k, k]
  Tensor bias;    // [out_channels], undefined when built with bias = false
};

}  // namespace loom::nn
