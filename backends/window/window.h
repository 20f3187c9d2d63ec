// Sliding windows over a stack of images [planes, H, W] (planes = N * C): im2col gathers every
// window into a column (Chellapilla et al. 2006), so a convolution is one GEMM; col2im sums the
// columns back onto the image, im2col's adjoint (the gradient of a convolution's input);
// max_pool2d takes each window's largest value and remembers where it was, and
// max_pool2d_backward sends each gradient there. The checks, the public methods and the CPU
// loops are in window.cpp, the CUDA kernels in window.cu.
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "core/tensor.h"

namespace loom {

// A 2-D window: kernel size, stride, padding and dilation along (height, width).
struct WindowGeometry {
  int64_t kernel[2], stride[2], padding[2], dilation[2];
  // Window positions along dim d of an input of size `in` (PyTorch's formula).
  int64_t output_size(int d, int64_t in) const {
    return (in + 2 * padding[d] - dilation[d] * (kernel[d] - 1) - 1) / stride[d] + 1;
  }
};

// Throws a loom::Error naming `op` and the window unless its kernel, stride and dilation are
// positive and its padding is not negative (output_size divides by the stride).
void check_window_geometry(const WindowGeometry& w, const char* op);

// Where im2col puts the columns of a stack of images [images, channels, H, W], L = out_h * out_w
// window positions each:
//   per image   [images, channels, kh * kw, L]: a window's taps side by side (unfold, pooling);
//   batch last  [channels, kh * kw, images, L]: a convolution is then one GEMM over every image,
//               weight [C_out, channels * kh * kw] @ cols [channels * kh * kw, images * L].
struct ColumnLayout {
  int64_t images, channels;
  bool batch_last;
  LOOM_HOST_DEVICE int64_t planes() const { return images * channels; }
  // Where the row of tap k of plane p (= n * channels + c) starts, in units of L.
  LOOM_HOST_DEVICE int64_t row(int64_t p, int64_t k, int64_t taps) const {
    return batch_last ? ((p % channels) * taps + k) * images + p / channels : p * taps + k;
  }
};

// The arguments after the checks: x (or cols, dy) contiguous float32, planes, height, width > 0
// and at least one window position each way. The column of plane p, tap k = i * kw + j holds
// cols[row(p, k), oh * out_w + ow] = x[p, oh * sh + i * dh - ph, ow * sw + j * dw - pw], or
// pad_value where that pixel lies in the padding. col2im writes (overwrites) all of x. argmax is
// int64 [planes, out_h, out_w]: the position (row * W + column) in its plane of each maximum.
using Im2colKernel = void(const Tensor& x, const ColumnLayout& layout, int64_t height,
                          int64_t width, const WindowGeometry& w, float pad_value, Tensor& cols);
using Col2imKernel = void(const Tensor& cols, const ColumnLayout& layout, int64_t height,
                          int64_t width, const WindowGeometry& w, Tensor& x);
using MaxPool2dKernel = void(const Tensor& x, int64_t planes, int64_t height, int64_t width,
                             const WindowGeometry& w, Tensor& y, Tensor& argmax);
using MaxPool2dBackwardKernel = void(const Tensor& dy, const Tensor& argmax, int64_t planes,
                                     int64_t height, int64_t width, const WindowGeometry& w,
                                     Tensor& dx);

namespace cpu {
Im2colKernel im2col;
Col2imKernel col2im;
MaxPool2dKernel max_pool2d;
MaxPool2dBackwardKernel max_pool2d_backward;
}  // namespace cpu

namespace cuda {
Im2colKernel im2col;
Col2imKernel col2im;
MaxPool2dKernel max_pool2d;
MaxPool2dBackwardKernel max_pool2d_backward;
}  // namespace cuda

}  // namespace loom
