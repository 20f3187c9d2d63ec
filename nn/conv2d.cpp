// Conv2d layer.
#include "nn/conv2d.h"

#include <cmath>

#include "nn/functional.h"
#include "nn/init.h"

namespace loom::nn {

Conv2d::Conv2d(int64_t in, int64_t out, int64_t k, int64_t stride_, int64_t padding_, bool bias_)
    : in_channels(in), out_channels(out), kernel_size(k), stride(stride_), padding(padding_) {
  LOOM_CHECK(in > 0 && out > 0 && k > 0 && stride_ > 0 && padding_ >= 0,
             "Conv2d: invalid in_channels {}, out_channels {}, kernel_size {}, stride {}, "
             "padding {}",
             in, out, k, stride_, padding_);
  weight = register_parameter("weight", Tensor::empty({out, in, k, k}));
  if (bias_) bias = register_parameter("bias", Tensor::empty({out}));
  reset_parameters();
}

void Conv2d::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound =
        1.0 / std::sqrt(static_cast<double>(in_channels * kernel_size * kernel_size));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Conv2d::forward(const Tensor& x) const {
  // x [N, C_in, H, W] -> [N, C_out, H_out, W_out]
  LOOM_CHECK(x.defined() && x.dim() == 4 && x.size(1) == in_channels,
             "Conv2d({}, {}, kernel_size={}): expected input [N, {}, H, W], got {}", in_channels,
             out_channels, kernel_size, in_channels,
             x.defined() ? shape_str(x.shape()) : "undefined");
  LOOM_CHECK(x.size(2) + 2 * padding >= kernel_size && x.size(3) + 2 * padding >= kernel_size,
             "Conv2d({}, {}, kernel_size={}): input {} with padding {} is smaller than the kernel",
             in_channels, out_channels, kernel_size, shape_str(x.shape()), padding);
  return functional::conv2d(x, weight, bias, stride, padding);
}

std::string Conv2d::extra_repr() const {
  std::string s = fmt::format("{}, {}, kernel_size=({}, {}), stride=({}, {})", in_channels,
                              out_channels, kernel_size, kernel_size, stride, stride);
  if (padding != 0) s += fmt::format(", padding=({}, {})", padding, padding);
  if (!bias.defined()) s += ", bias=False";
  return s;
}

}  // namespace loom::nn
