// 2-D convolution and max pooling by im2col (Chellapilla et al. 2006): the sliding windows
// are gathered with one index_select into columns, so a convolution becomes one GEMM and a
// pooling one max over the window dim. index_select's backward (index_add) scatters the
// column gradients back onto the image: that is col2im, and no new kernel is needed.
#include <cmath>
#include <limits>

#include "autograd/ops.h"
#include "core/error.h"
#include "nn/functional.h"

namespace loom::nn::functional {

namespace {

int64_t output_size(int64_t in, int64_t kernel, int64_t stride, int64_t padding) {
  return (in + 2 * padding - kernel) / stride + 1;
}

// For each kernel offset (i, j) and output position (oh, ow), the flat position of the input
// pixel in an H*W image, or H*W (the appended padding slot) when it falls in the padding.
Tensor window_index(int64_t height, int64_t width, int64_t kernel, int64_t stride, int64_t padding,
                    Device device) {
  const int64_t out_h = output_size(height, kernel, stride, padding);
  const int64_t out_w = output_size(width, kernel, stride, padding);
  std::vector<int64_t> index;
  index.reserve(kernel * kernel * out_h * out_w);
  for (int64_t i = 0; i < kernel; ++i)
    for (int64_t j = 0; j < kernel; ++j)
      for (int64_t oh = 0; oh < out_h; ++oh)
        for (int64_t ow = 0; ow < out_w; ++ow) {
          const int64_t r = oh * stride + i - padding, c = ow * stride + j - padding;
          const bool inside = r >= 0 && r < height && c >= 0 && c < width;
          index.push_back(inside ? r * width + c : height * width);
        }
  return tensor_i64(std::move(index), {kernel * kernel * out_h * out_w}).to(device);
}

}  // namespace

Tensor unfold2d(const Tensor& x, int64_t kernel_size, int64_t stride, int64_t padding,
                float pad_value) {
  // x [N, C, H, W] -> [N, C, k*k, H_out*W_out]
  LOOM_CHECK(x.defined() && x.dim() == 4, "unfold2d: expected input [N, C, H, W], got {}",
             x.defined() ? shape_str(x.shape()) : "undefined");
  LOOM_CHECK(kernel_size > 0 && stride > 0 && padding >= 0,
             "unfold2d: invalid kernel_size {}, stride {}, padding {}", kernel_size, stride,
             padding);
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t out_h = output_size(h, kernel_size, stride, padding);
  const int64_t out_w = output_size(w, kernel_size, stride, padding);
  LOOM_CHECK(h + 2 * padding >= kernel_size && w + 2 * padding >= kernel_size,
             "unfold2d: kernel_size {} is larger than the padded input {} (padding {})",
             kernel_size, shape_str(x.shape()), padding);
  Tensor flat = x.reshape({n, c, h * w});  // [N, C, H*W]
  // One extra slot holding the padding value, which every out-of-image window position reads.
  flat = cat({flat, full({n, c, 1}, pad_value, x.device())}, 2);  // [N, C, H*W + 1]
  const Tensor index = window_index(h, w, kernel_size, stride, padding, x.device());
  Tensor cols = index_select(flat, 2, index);                             // [N, C, k*k*L]
  return cols.reshape({n, c, kernel_size * kernel_size, out_h * out_w});  // [N, C, k*k, L]
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding) {
  // x [N, C_in, H, W], weight [C_out, C_in, k, k], bias [C_out] -> [N, C_out, H_out, W_out]
  LOOM_CHECK(weight.defined() && weight.dim() == 4 && weight.size(2) == weight.size(3),
             "conv2d: expected a square kernel weight [C_out, C_in, k, k], got {}",
             weight.defined() ? shape_str(weight.shape()) : "undefined");
  LOOM_CHECK(x.defined() && x.dim() == 4 && x.size(1) == weight.size(1),
             "conv2d: input {} does not match weight {} (expected [N, {}, H, W])",
             x.defined() ? shape_str(x.shape()) : "undefined", shape_str(weight.shape()),
             weight.size(1));
  const int64_t c_out = weight.size(0), k = weight.size(2);
  LOOM_CHECK(!bias.defined() || bias.shape() == Shape{c_out},
             "conv2d: bias of shape {} does not match {} output channels", shape_str(bias.shape()),
             c_out);
  const int64_t n = x.size(0), k_in = x.size(1) * k * k;
  const int64_t out_h = output_size(x.size(2), k, stride, padding);
  const int64_t out_w = output_size(x.size(3), k, stride, padding);
  // Columns ordered (c, i, j) like the weight's flattened [C_in, k, k].
  Tensor cols =
      unfold2d(x, k, stride, padding).reshape({n, k_in, out_h * out_w});  // [N, C_in*k*k, L]
  Tensor y = matmul(weight.reshape({c_out, k_in}), cols);  // [C_out, C_in*k*k] @ -> [N, C_out, L]
  if (bias.defined()) y = y + bias.reshape({1, c_out, 1});
  return y.reshape({n, c_out, out_h, out_w});  // [N, C_out, H_out, W_out]
}

Tensor max_pool2d(const Tensor& x, int64_t kernel_size, int64_t stride, int64_t padding) {
  // x [N, C, H, W] -> [N, C, H_out, W_out]
  if (stride == 0) stride = kernel_size;
  LOOM_CHECK(padding * 2 <= kernel_size,
             "max_pool2d: padding {} should be at most half of kernel_size {}", padding,
             kernel_size);
  LOOM_CHECK(x.defined() && x.dim() == 4, "max_pool2d: expected input [N, C, H, W], got {}",
             x.defined() ? shape_str(x.shape()) : "undefined");
  const int64_t out_h = output_size(x.size(2), kernel_size, stride, padding);
  const int64_t out_w = output_size(x.size(3), kernel_size, stride, padding);
  // Padding reads -inf, so it never wins the max (PyTorch's behaviour).
  const float neg_inf = -std::numeric_limits<float>::infinity();
  Tensor cols = unfold2d(x, kernel_size, stride, padding, neg_inf);   // [N, C, k*k, L]
  return max(cols, 2).reshape({x.size(0), x.size(1), out_h, out_w});  // [N, C, H_out, W_out]
}

}  // namespace loom::nn::functional
