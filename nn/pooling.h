// Pooling layers (the functional forms are in nn/functional.h):
//   MaxPool2d          the maximum over each kernel window (padding counts as -inf)
//   AvgPool2d          the mean over each kernel window (padding counts as 0 and is counted,
//                      PyTorch's count_include_pad = True)
//   AdaptiveAvgPool2d  means over a grid of output_size windows that cover the input, whatever
//   AdaptiveAvgPool1d  its size: window i spans [floor(i In / Out), ceil((i + 1) In / Out))
// Sizes per spatial dim are ExpandingArrays: one number for every dim or {h, w}.
#pragma once

#include <initializer_list>

#include "nn/expanding_array.h"
#include "nn/module.h"

namespace loom::nn {

class MaxPool2d : public Module {
 public:
  // stride 0 means stride = kernel_size (PyTorch's default).
  explicit MaxPool2d(ExpandingArray<2> kernel_size, ExpandingArray<2> stride = 0,
                     ExpandingArray<2> padding = 0);
  // MaxPool2d({kh, kw}): without it the braces could also build a MaxPool2d(kh, kw) to copy from.
  explicit MaxPool2d(std::initializer_list<int64_t> kernel_size)
      : MaxPool2d(ExpandingArray<2>(kernel_size)) {}

  // x [N, C, H, W] -> [N, C, H_out, W_out], H_out = (H + 2 padding - kernel_size) / stride + 1
  Tensor forward(const Tensor& x) const;
  std::string extra_repr() const override;

  ExpandingArray<2> kernel_size, stride, padding;
};

class AvgPool2d : public Module {
 public:
  // stride 0 means stride = kernel_size (PyTorch's default).
  explicit AvgPool2d(ExpandingArray<2> kernel_size, ExpandingArray<2> stride = 0,
                     ExpandingArray<2> padding = 0);
  // AvgPool2d({kh, kw}): without it the braces could also build a AvgPool2d(kh, kw) to copy from.
  explicit AvgPool2d(std::initializer_list<int64_t> kernel_size)
      : AvgPool2d(ExpandingArray<2>(kernel_size)) {}

  // x [N, C, H, W] -> [N, C, H_out, W_out], H_out = (H + 2 padding - kernel_size) / stride + 1
  Tensor forward(const Tensor& x) const;
  std::string extra_repr() const override;

  ExpandingArray<2> kernel_size, stride, padding;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(ExpandingArray<2> output_size);
  Tensor forward(const Tensor& x) const;  // x [N, C, H, W] -> [N, C, out_h, out_w]
  std::string extra_repr() const override;

  ExpandingArray<2> output_size;
};

class AdaptiveAvgPool1d : public Module {
 public:
  explicit AdaptiveAvgPool1d(int64_t output_size);
  Tensor forward(const Tensor& x) const;  // x [N, C, L] -> [N, C, output_size]
  std::string extra_repr() const override;

  int64_t output_size;
};

}  // namespace loom::nn
