// MaxPool2d layer.
#include "nn/pooling.h"

#include "nn/functional.h"

namespace loom::nn {

MaxPool2d::MaxPool2d(int64_t k, int64_t stride_, int64_t padding_)
    : kernel_size(k), stride(stride_ == 0 ? k : stride_), padding(padding_) {
  LOOM_CHECK(k > 0 && stride > 0 && padding_ >= 0 && 2 * padding_ <= k,
             "MaxPool2d: invalid kernel_size {}, stride {}, padding {} (padding at most half "
             "the kernel)",
             k, stride_, padding_);
}

Tensor MaxPool2d::forward(const Tensor& x) const {
  // x [N, C, H, W] -> [N, C, H_out, W_out]
  return functional::max_pool2d(x, kernel_size, stride, padding);
}

std::string MaxPool2d::extra_repr() const {
  return fmt::format("kernel_size={}, stride={}, padding={}, dilation=1, ceil_mode=False",
                     kernel_size, stride, padding);
}

}  // namespace loom::nn
