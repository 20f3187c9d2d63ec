// Pooling layers (functional::max_pool2d, avg_pool2d, adaptive_avg_pool2d/1d).
#include "nn/pooling.h"

#include "nn/functional.h"

namespace loom::nn {

namespace {

// stride 0 means stride = kernel_size (PyTorch's default).
ExpandingArray<2> default_stride(ExpandingArray<2> stride, ExpandingArray<2> kernel) {
  return {stride[0] == 0 ? kernel[0] : stride[0], stride[1] == 0 ? kernel[1] : stride[1]};
}

}  // namespace

template <class Layer>
Pool2d<Layer>::Pool2d(ExpandingArray<2> k, ExpandingArray<2> stride_, ExpandingArray<2> padding_)
    : kernel_size(k), stride(default_stride(stride_, k)), padding(padding_) {
  for (int d = 0; d < 2; ++d)
    LOOM_CHECK(k[d] > 0 && stride[d] > 0 && padding[d] >= 0 && 2 * padding[d] <= k[d],
               "{}: invalid kernel_size {}, stride {}, padding {} (padding at most half the "
               "kernel)",
               Layer::kName, k.str(), stride.str(), padding.str());
}

template <class Layer>
std::string Pool2d<Layer>::extra_repr() const {
  return fmt::format("kernel_size={}, stride={}, padding={}", kernel_size.compact_str(),
                     stride.compact_str(), padding.compact_str());
}

template class Pool2d<MaxPool2d>;
template class Pool2d<AvgPool2d>;

Tensor MaxPool2d::forward(const Tensor& x) const {
  return functional::max_pool2d(x, kernel_size, stride, padding);
}

std::string MaxPool2d::extra_repr() const {
  return Pool2d::extra_repr() + ", dilation=1, ceil_mode=False";
}

Tensor AvgPool2d::forward(const Tensor& x) const {
  return functional::avg_pool2d(x, kernel_size, stride, padding);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(ExpandingArray<2> size) : output_size(size) {
  LOOM_CHECK(size[0] > 0 && size[1] > 0, "AdaptiveAvgPool2d: invalid output_size {}", size.str());
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) const {
  // x [N, C, H, W] -> [N, C, out_h, out_w]
  return functional::adaptive_avg_pool2d(x, output_size);
}

std::string AdaptiveAvgPool2d::extra_repr() const {
  return "output_size=" + output_size.compact_str();
}

AdaptiveAvgPool1d::AdaptiveAvgPool1d(int64_t size) : output_size(size) {
  LOOM_CHECK(size > 0, "AdaptiveAvgPool1d: invalid output_size {}", size);
}

Tensor AdaptiveAvgPool1d::forward(const Tensor& x) const {
  // x [N, C, L] -> [N, C, output_size]
  return functional::adaptive_avg_pool1d(x, output_size);
}

std::string AdaptiveAvgPool1d::extra_repr() const {
  return fmt::format("output_size={}", output_size);
}

}  // namespace loom::nn
