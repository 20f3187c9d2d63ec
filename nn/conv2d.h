// The convolution layers, PyTorch's layouts and names (weight, bias), computed by im2col + GEMM
// (functional_conv.cpp):
//   Conv1d           weight [out_channels, in_channels / groups, k]
//   Conv2d           weight [out_channels, in_channels / groups, kh, kw]
//   ConvTranspose2d  weight [in_channels, out_channels / groups, kh, kw]
// and bias [out_channels]. Sizes per spatial dim are ExpandingArrays: one number for every dim
// or {h, w}. Default initialisation as PyTorch's: weight kaiming_uniform_(a = sqrt(5)), bias
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = weight.size(1) * kernel elements.
#pragma once

#include <concepts>

#include "nn/expanding_array.h"
#include "nn/module.h"

namespace loom::nn {

// What the three layers share, as PyTorch's _ConvNd: the sizes, weight and bias, checked,
// registered and initialised by the constructor, and the repr. Size is the type of a per-dim
// size: int64_t for Conv1d, ExpandingArray<2> for the 2-d layers. A transposed layer's weight is
// [in_channels, out_channels / groups, kernel...] instead of [out_channels, in_channels /
// groups, kernel...], and only it takes an output_padding (0 for the others, as in PyTorch).
template <class Size>
class ConvNd : public Module {
 public:
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t in_channels, out_channels;
  Size kernel_size, stride, padding, output_padding, dilation;
  int64_t groups;
  Tensor weight;  // [out_channels, in_channels / groups, kernel...] (transposed: see above)
  Tensor bias;    // [out_channels], undefined when built with bias = false

 protected:
  // `layer` names the class in error messages.
  ConvNd(const char* layer, bool transposed, int64_t in_channels, int64_t out_channels,
         Size kernel_size, Size stride, Size padding, Size output_padding, Size dilation,
         int64_t groups, bool bias);
};

class Conv2d : public ConvNd<ExpandingArray<2>> {
 public:
  // PyTorch's argument order: Conv2d(3, 8, 3), Conv2d(3, 8, {3, 5}, {1, 2}, {1, 2}, 1, 2, false).
  Conv2d(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size,
         ExpandingArray<2> stride = 1, ExpandingArray<2> padding = 0,
         ExpandingArray<2> dilation = 1, int64_t groups = 1, bool bias = true);
  // loom's older short form, Conv2d(in, out, kernel, stride, padding, bias): a bool sixth
  // argument is the bias flag (a number there is the dilation, as in PyTorch).
  template <std::same_as<bool> Bool>
  Conv2d(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size,
         ExpandingArray<2> stride, ExpandingArray<2> padding, Bool bias)
      : Conv2d(in_channels, out_channels, kernel_size, stride, padding, 1, 1, bias) {}

  // x [N, in_channels, H, W] -> [N, out_channels, H_out, W_out],
  // H_out = (H + 2 padding - dilation (kernel_size - 1) - 1) / stride + 1
  Tensor forward(const Tensor& x) const;
};

class Conv1d : public ConvNd<int64_t> {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
         int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1, bool bias = true);

  // x [N, in_channels, L] -> [N, out_channels, L_out],
  // L_out = (L + 2 padding - dilation (kernel_size - 1) - 1) / stride + 1
  Tensor forward(const Tensor& x) const;
};

// The adjoint of Conv2d with respect to its input (a "deconvolution", Zeiler et al. 2010;
// Dumoulin & Visin 2016 give the arithmetic): each input pixel scatters a weighted kernel
// into the output. output_padding (< stride or < dilation) adds rows and columns at the
// bottom and right, picking one of the input sizes that a strided Conv2d maps to the same size.
class ConvTranspose2d : public ConvNd<ExpandingArray<2>> {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size,
                  ExpandingArray<2> stride = 1, ExpandingArray<2> padding = 0,
                  ExpandingArray<2> output_padding = 0, int64_t groups = 1, bool bias = true,
                  ExpandingArray<2> dilation = 1);

  // x [N, in_channels, H, W] -> [N, out_channels, H_out, W_out], H_out = (H - 1) stride -
  // 2 padding + dilation (kernel_size - 1) + output_padding + 1
  Tensor forward(const Tensor& x) const;
};

extern template class ConvNd<int64_t>;
extern template class ConvNd<ExpandingArray<2>>;

}  // namespace loom::nn
