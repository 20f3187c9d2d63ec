// MaxPool2d: the maximum over each kernel_size x kernel_size window (see functional::max_pool2d).
#pragma once

#include "nn/module.h"

namespace loom::nn {

class MaxPool2d : public Module {
 public:
  // stride 0 means stride = kernel_size (PyTorch's default).
  explicit MaxPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0);

  // x [N, C, H, W] -> [N, C, H_out, W_out], H_out = (H + 2 padding - kernel_size) / stride + 1
  Tensor forward(const Tensor& x) const;
  std::string extra_repr() const override;

  int64_t kernel_size, stride, padding;
};

}  // namespace loom::nn
