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

// What MaxPool2d and AvgPool2d share: the window sizes, checked by the constructor, which both
// inherit (`using Pool2d::Pool2d`). Layer is the class deriving from it (the "curiously
// recurring template pattern"): its kName names it in the constructor's error messages.
template <class Layer>
class Pool2d : public Module {
 public:
  // stride 0 means stride = kernel_size (PyTorch's default).
  explicit Pool2d(ExpandingArray<2> kernel_size, ExpandingArray<2> stride = 0,
                  ExpandingArray<2> padding = 0);
  // MaxPool2d({kh, kw}): without it the braces could also build a MaxPool2d(kh, kw) to copy from.
  explicit Pool2d(std::initializer_list<int64_t> kernel_size)
      : Pool2d(ExpandingArray<2>(kernel_size)) {}
  std::string extra_repr() const override;  // "kernel_size=2, stride=2, padding=0"

  ExpandingArray<2> kernel_size, stride, padding;
};

// forward: x [N, C, H, W] -> [N, C, H_out, W_out], H_out = (H + 2 padding - kernel_size) /
// stride + 1, for both.
class MaxPool2d : public Pool2d<MaxPool2d> {
 public:
  static constexpr const char* kName = "MaxPool2d";
  using Pool2d::Pool2d;
  Tensor forward(const Tensor& x) const;
  // PyTorch's, with the two arguments loom does not take at their defaults.
  std::string extra_repr() const override;
};

class AvgPool2d : public Pool2d<AvgPool2d> {
 public:
  static constexpr const char* kName = "AvgPool2d";
  using Pool2d::Pool2d;
  Tensor forward(const Tensor& x) const;
};

extern template class Pool2d<MaxPool2d>;
extern template class Pool2d<AvgPool2d>;

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
