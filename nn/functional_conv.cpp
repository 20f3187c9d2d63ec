// Convolution and pooling by im2col (Chellapilla et al. 2006): the sliding windows are gathered
// into columns (loom::im2col, backends/window), so a convolution becomes a GEMM and an average
// pooling one mean over the window dim; the columns' gradient is summed back onto the image by
// col2im, im2col's adjoint (loom::conv2d_im2col, autograd/ops_window.cpp, runs conv2d's GEMM on
// a few images' columns at a time, so that they stay in the cache). The transposed convolution
// runs the same two steps the other way round: a GEMM makes the columns, col2im sums them into
// the image. Max pooling keeps, per window, the position of its maximum, where the backward
// sends the gradient.
#include <cmath>

#include "autograd/internal.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "nn/functional.h"

namespace loom::nn::functional {

namespace {

// The geometry of a 2-D sliding window: kernel size, stride, padding and dilation per dim.
struct Window {
  ExpandingArray<2> kernel, stride, padding, dilation;

  // The number of window positions along dim d of an input of size `in` (PyTorch's formula).
  int64_t output_size(int d, int64_t in) const {
    return (in + 2 * padding[d] - dilation[d] * (kernel[d] - 1) - 1) / stride[d] + 1;
  }
  int64_t kernel_elements() const { return kernel[0] * kernel[1]; }
  WindowGeometry geometry() const {
    return {{kernel[0], kernel[1]}, {stride[0], stride[1]}, {padding[0], padding[1]},
            {dilation[0], dilation[1]}};
  }
  std::string str() const {
    return fmt::format("kernel_size {}, stride {}, padding {}, dilation {}", kernel.str(),
                       stride.str(), padding.str(), dilation.str());
  }
};

using detail::shape_of;  // autograd/internal.h

void check_window(const Window& w, const char* op) {
  for (int d = 0; d < 2; ++d)
    LOOM_CHECK(w.kernel[d] > 0 && w.stride[d] > 0 && w.padding[d] >= 0 && w.dilation[d] > 0,
               "{}: invalid {}", op, w.str());
}

// weight [C_out, C_in / groups, kh, kw] (or, transposed, [C_in, C_out / groups, kh, kw]) against
// input x [N, C, ...]: both checked, naming `op`.
void check_conv_operands(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         int64_t groups, bool transposed, int64_t x_rank, const char* op) {
  const char* layout = transposed ? "[C_in, C_out / groups, ...]" : "[C_out, C_in / groups, ...]";
  LOOM_CHECK(weight.defined() && weight.dim() == x_rank, "{}: expected a weight {} of {} dims, "
             "got {}", op, layout, x_rank, shape_of(weight));
  LOOM_CHECK(x.defined() && x.dim() == x_rank, "{}: expected input of {} dims [N, C_in, ...], "
             "got {}", op, x_rank, shape_of(x));
  LOOM_CHECK(groups > 0, "{}: groups {} must be positive", op, groups);
  const int64_t c_in = x.size(1);
  const int64_t c_out = transposed ? weight.size(1) * groups : weight.size(0);
  const bool channels_fit = transposed ? weight.size(0) == c_in
                                       : weight.size(1) * groups == c_in;
  LOOM_CHECK(c_in % groups == 0 && (transposed ? true : c_out % groups == 0) && channels_fit,
             "{}: input {} does not match weight {} with groups {} (weight {}; both channel "
             "counts divisible by groups)",
             op, shape_of(x), shape_of(weight), groups, layout);
  LOOM_CHECK(!bias.defined() || bias.shape() == Shape{c_out},
             "{}: bias of shape {} does not match {} output channels", op, shape_of(bias), c_out);
}

}  // namespace

Tensor unfold2d(const Tensor& x, ExpandingArray<2> kernel_size, ExpandingArray<2> stride,
                ExpandingArray<2> padding, float pad_value, ExpandingArray<2> dilation) {
  // x [N, C, H, W] -> [N, C, kh*kw, H_out*W_out]
  LOOM_CHECK(x.defined() && x.dim() == 4, "unfold2d: expected input [N, C, H, W], got {}",
             shape_of(x));
  const Window w{kernel_size, stride, padding, dilation};
  check_window(w, "unfold2d");
  const int64_t out_h = w.output_size(0, x.size(2)), out_w = w.output_size(1, x.size(3));
  LOOM_CHECK(out_h > 0 && out_w > 0, "unfold2d: the padded input {} is smaller than the kernel "
             "({})", shape_str(x.shape()), w.str());
  // im2col computes in float32: a bfloat16 image (autocast) is widened and its columns rounded.
  if (x.dtype() == DType::BFloat16)
    return im2col(x.to(DType::Float32), w.geometry(), pad_value).to(DType::BFloat16);
  return im2col(x, w.geometry(), pad_value);  // [N, C, kh*kw, H_out*W_out]
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, ExpandingArray<2> stride,
              ExpandingArray<2> padding, ExpandingArray<2> dilation, int64_t groups) {
  // x [N, C_in, H, W], weight [C_out, C_in/G, kh, kw], bias [C_out] -> [N, C_out, H_out, W_out]
  check_conv_operands(x, weight, bias, groups, false, 4, "conv2d");
  const Window w{{weight.size(2), weight.size(3)}, stride, padding, dilation};
  check_window(w, "conv2d");
  const int64_t n = x.size(0), c_out = weight.size(0), g = groups;
  const int64_t out_h = w.output_size(0, x.size(2)), out_w = w.output_size(1, x.size(3));
  LOOM_CHECK(out_h > 0 && out_w > 0, "conv2d: input {} with {} is smaller than the kernel {}",
             shape_str(x.shape()), w.str(), shape_str(weight.shape()));
  // Columns with the batch last, rows ordered (c, i, j) like the weight's flattened
  // [C_in/G, kh, kw], one block of rows per group: [C_in * kh*kw, N * L] as [G, K, N * L].
  const int64_t k_group = weight.size(1) * w.kernel_elements();  // K = C_in/G * kh * kw
  const int64_t positions = out_h * out_w;                        // L
  const bool bf16 = x.dtype() == DType::BFloat16;  // (autocast) columns in float32, then rounded
  if (!bf16 && weight.dtype() == DType::Float32 &&
      (!bias.defined() || bias.dtype() == DType::Float32))
    return conv2d_im2col(x, weight, bias, w.geometry(), groups);  // what follows, by chunks
  Tensor cols = im2col(bf16 ? x.to(DType::Float32) : x, w.geometry(), 0.0f, /*batch_last=*/true)
                    .reshape({g, k_group, n * positions});
  if (bf16) cols = cols.to(DType::BFloat16);
  // [G, C_out/G, K] @ [G, K, N * L] -> [G, C_out/G, N * L]: one GEMM per group, every image at
  // once (a long GEMM runs near the machine's peak, where one per image would not).
  Tensor y = matmul(weight.reshape({g, c_out / g, k_group}), cols);
  y = y.reshape({c_out, n, positions}).transpose(0, 1);  // [N, C_out, L], a view
  // The bias add writes the batch-first layout in the same pass; without a bias, a copy does.
  y = bias.defined() ? y + bias.reshape({1, c_out, 1}) : y.contiguous();
  return y.reshape({n, c_out, out_h, out_w});  // [N, C_out, H_out, W_out]
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding, int64_t dilation, int64_t groups) {
  // x [N, C_in, L], weight [C_out, C_in/G, k] -> [N, C_out, L_out]: an image of height 1.
  check_conv_operands(x, weight, bias, groups, false, 3, "conv1d");
  const Tensor y = conv2d(x.unsqueeze(2), weight.unsqueeze(2), bias, {1, stride}, {0, padding},
                          {1, dilation}, groups);  // [N, C_out, 1, L_out]
  return y.squeeze(2);
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        ExpandingArray<2> stride, ExpandingArray<2> padding,
                        ExpandingArray<2> output_padding, int64_t groups,
                        ExpandingArray<2> dilation) {
  // x [N, C_in, H, W], weight [C_in, C_out/G, kh, kw], bias [C_out] -> [N, C_out, H_out, W_out]
  check_conv_operands(x, weight, bias, groups, true, 4, "conv_transpose2d");
  // The window of the forward conv2d that maps the output back onto the input's size.
  const Window w{{weight.size(2), weight.size(3)}, stride, padding, dilation};
  check_window(w, "conv_transpose2d");
  for (int d = 0; d < 2; ++d)
    LOOM_CHECK(output_padding[d] >= 0 &&
                   (output_padding[d] < stride[d] || output_padding[d] < dilation[d]),
               "conv_transpose2d: output_padding {} must be smaller than stride {} or dilation {}",
               output_padding.str(), stride.str(), dilation.str());
  const int64_t n = x.size(0), h = x.size(2), wd = x.size(3), g = groups;
  const int64_t c_in = x.size(1), c_out = weight.size(1) * g, k = w.kernel_elements();
  int64_t out_size[2];
  for (int d = 0; d < 2; ++d)
    out_size[d] = (x.size(2 + d) - 1) * stride[d] - 2 * padding[d] +
                  dilation[d] * (w.kernel[d] - 1) + output_padding[d] + 1;
  LOOM_CHECK(out_size[0] > 0 && out_size[1] > 0,
             "conv_transpose2d: input {} with {} gives an empty output", shape_str(x.shape()),
             w.str());
  // Each input pixel's contribution to its kernel window, for every output channel:
  // [G, C_out/G * kh*kw, C_in/G] @ [N, G, C_in/G, H*W] -> [N, G, C_out/G * kh*kw, H*W].
  const Tensor w_t = weight.reshape({g, c_in / g, c_out / g * k}).transpose(1, 2);
  Tensor cols = matmul(w_t, x.reshape({n, g, c_in / g, h * wd}));
  cols = cols.reshape({n, c_out, k, h * wd});  // [N, C_out, kh*kw, H*W]
  // col2im: column (i, j, ih, iw) lands on the output pixel that conv2d's window (i, j) at
  // position (ih, iw) reads; those in the padding are dropped.
  if (cols.dtype() != DType::Float32) cols = cols.to(DType::Float32);
  Tensor y = col2im(cols, out_size[0], out_size[1], w.geometry());
  y = y.reshape({n, c_out, out_size[0] * out_size[1]});  // [N, C_out, H_out*W_out]
  if (bias.defined()) y = y + bias.reshape({1, c_out, 1});
  return y.reshape({n, c_out, out_size[0], out_size[1]});  // [N, C_out, H_out, W_out]
}

namespace {

// The windows of a pooling: stride 0 means stride = kernel_size (PyTorch's default), and the
// padding may be at most half the kernel (so that no window lies wholly in the padding).
Window pool_window(ExpandingArray<2> kernel_size, ExpandingArray<2> stride,
                   ExpandingArray<2> padding, const char* op) {
  const ExpandingArray<2> step{stride[0] == 0 ? kernel_size[0] : stride[0],
                               stride[1] == 0 ? kernel_size[1] : stride[1]};
  const Window w{kernel_size, step, padding, 1};
  check_window(w, op);
  for (int d = 0; d < 2; ++d)
    LOOM_CHECK(padding[d] * 2 <= kernel_size[d],
               "{}: padding {} should be at most half of kernel_size {}", op, padding.str(),
               kernel_size.str());
  return w;
}

// The windows of x [N, C, H, W] as columns [N, C, kh*kw, H_out*W_out], and the pooled output's
// shape [N, C, H_out, W_out].
std::pair<Tensor, Shape> pool_columns(const Tensor& x, const Window& w, float pad_value,
                                      const char* op) {
  LOOM_CHECK(x.defined() && x.dim() == 4, "{}: expected input [N, C, H, W], got {}", op,
             shape_of(x));
  const Shape out_shape{x.size(0), x.size(1), w.output_size(0, x.size(2)),
                        w.output_size(1, x.size(3))};
  return {unfold2d(x, w.kernel, w.stride, w.padding, pad_value), out_shape};
}

}  // namespace

Tensor max_pool2d(const Tensor& x, ExpandingArray<2> kernel_size, ExpandingArray<2> stride,
                  ExpandingArray<2> padding) {
  // x [N, C, H, W] -> [N, C, H_out, W_out]
  const Window w = pool_window(kernel_size, stride, padding, "max_pool2d");
  // Padding never wins the max (PyTorch's behaviour): the kernel skips it.
  LOOM_CHECK(x.defined() && x.dim() == 4, "max_pool2d: expected input [N, C, H, W], got {}",
             shape_of(x));
  if (x.dtype() == DType::BFloat16)  // the kernel compares in float32
    return max_pool2d(x.to(DType::Float32), kernel_size, stride, padding).to(DType::BFloat16);
  return std::get<0>(max_pool2d_with_indices(x, w.geometry()));
}

Tensor avg_pool2d(const Tensor& x, ExpandingArray<2> kernel_size, ExpandingArray<2> stride,
                  ExpandingArray<2> padding) {
  // x [N, C, H, W] -> [N, C, H_out, W_out]
  const Window w = pool_window(kernel_size, stride, padding, "avg_pool2d");
  // Padding reads 0 and is counted: every window divides by kh * kw (count_include_pad).
  const auto [cols, out_shape] = pool_columns(x, w, 0.0f, "avg_pool2d");  // [N, C, kh*kw, L]
  return mean(cols, 2).reshape(out_shape);                                // [N, C, H_out, W_out]
}

}  // namespace loom::nn::functional
