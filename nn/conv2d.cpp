// Conv1d, Conv2d and ConvTranspose2d layers (functional::conv1d, conv2d, conv_transpose2d).
#include "nn/conv2d.h"

#include <cmath>

#include "nn/functional.h"
#include "nn/init.h"

namespace loom::nn {

namespace {

void check_sizes(const char* layer, int64_t in, int64_t out, int64_t groups,
                 std::initializer_list<std::pair<const char*, ExpandingArray<2>>> sizes) {
  LOOM_CHECK(in > 0 && out > 0 && groups > 0,
             "{}: invalid in_channels {}, out_channels {} or groups {}", layer, in, out, groups);
  LOOM_CHECK(in % groups == 0 && out % groups == 0,
             "{}: in_channels {} and out_channels {} must be divisible by groups {}", layer, in,
             out, groups);
  for (const auto& [what, size] : sizes) {
    const bool positive = std::string(what) == "kernel_size" || std::string(what) == "stride" ||
                          std::string(what) == "dilation";
    LOOM_CHECK(positive ? size[0] > 0 && size[1] > 0 : size[0] >= 0 && size[1] >= 0,
               "{}: invalid {} {}", layer, what, size.compact_str());
  }
}

// A size as PyTorch prints it: "(3, 3)", or "(3,)" for a 1-d layer.
std::string size_str(const ExpandingArray<2>& size) { return size.str(); }
std::string size_str(int64_t size) { return fmt::format("({},)", size); }

// ", what=(a, b)" unless the size is its default (PyTorch's Conv extra_repr lists only those).
template <class Size>
std::string size_repr(const char* what, const Size& size, int64_t default_value) {
  return size == Size(default_value) ? "" : fmt::format(", {}={}", what, size_str(size));
}

std::string input_shape(const Tensor& x) {
  return x.defined() ? shape_str(x.shape()) : "undefined";
}

// The weight's kernel dims: {k} for a 1-d layer, {kh, kw} for a 2-d one.
Shape kernel_dims(int64_t k) { return {k}; }
Shape kernel_dims(const ExpandingArray<2>& k) { return {k[0], k[1]}; }

}  // namespace

// ---------------------------------------------------------------------------- ConvNd

template <class Size>
ConvNd<Size>::ConvNd(const char* layer, bool transposed, int64_t in, int64_t out, Size kernel,
                     Size stride_, Size padding_, Size output_padding_, Size dilation_,
                     int64_t groups_, bool bias_)
    : in_channels(in),
      out_channels(out),
      kernel_size(kernel),
      stride(stride_),
      padding(padding_),
      output_padding(output_padding_),
      dilation(dilation_),
      groups(groups_) {
  check_sizes(layer, in, out, groups_,
              {{"kernel_size", kernel}, {"stride", stride_}, {"padding", padding_},
               {"output_padding", output_padding_}, {"dilation", dilation_}});
  const ExpandingArray<2> extra(output_padding_), step(stride_), spacing(dilation_);
  for (int d = 0; d < 2; ++d)
    LOOM_CHECK(extra[d] < step[d] || extra[d] < spacing[d],
               "{}: output_padding {} must be smaller than stride {} or dilation {}", layer,
               extra.str(), step.str(), spacing.str());
  Shape shape = transposed ? Shape{in, out / groups_} : Shape{out, in / groups_};
  for (int64_t k : kernel_dims(kernel)) shape.push_back(k);
  weight = register_parameter("weight", Tensor::empty(shape));
  if (bias_) bias = register_parameter("bias", Tensor::empty({out}));
  reset_parameters();
}

// PyTorch's _ConvNd.reset_parameters: weight kaiming_uniform_(a = sqrt(5)) and bias
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in from the weight's dims 1.. (in / groups * kernel,
// or for a transposed convolution out / groups * kernel).
template <class Size>
void ConvNd<Size>::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double fan_in = static_cast<double>(init::calculate_fan_in_and_fan_out(weight).first);
    init::uniform_(bias, -1.0 / std::sqrt(fan_in), 1.0 / std::sqrt(fan_in));
  }
}

// PyTorch's _ConvNd.extra_repr: the channels, kernel and stride, then each other size that is
// not its default.
template <class Size>
std::string ConvNd<Size>::extra_repr() const {
  std::string s = fmt::format("{}, {}, kernel_size={}, stride={}", in_channels, out_channels,
                              size_str(kernel_size), size_str(stride));
  s += size_repr("padding", padding, 0) + size_repr("dilation", dilation, 1) +
       size_repr("output_padding", output_padding, 0);
  if (groups != 1) s += fmt::format(", groups={}", groups);
  if (!bias.defined()) s += ", bias=False";
  return s;
}

template class ConvNd<int64_t>;
template class ConvNd<ExpandingArray<2>>;

// ---------------------------------------------------------------------------- Conv2d
Conv2d::Conv2d(int64_t in, int64_t out, ExpandingArray<2> kernel, ExpandingArray<2> stride_,
               ExpandingArray<2> padding_, ExpandingArray<2> dilation_, int64_t groups_,
               bool bias_)
    : ConvNd("Conv2d", false, in, out, kernel, stride_, padding_, 0, dilation_, groups_, bias_) {}

Tensor Conv2d::forward(const Tensor& x) const {
  // x [N, C_in, H, W] -> [N, C_out, H_out, W_out]
  LOOM_CHECK(x.defined() && x.dim() == 4 && x.size(1) == in_channels,
             "Conv2d({}, {}, kernel_size={}): expected input [N, {}, H, W], got {}", in_channels,
             out_channels, kernel_size.str(), in_channels, input_shape(x));
  for (int d = 0; d < 2; ++d)
    LOOM_CHECK(x.size(2 + d) + 2 * padding[d] >= dilation[d] * (kernel_size[d] - 1) + 1,
               "Conv2d({}, {}, kernel_size={}): input {} with padding {} is smaller than the "
               "kernel",
               in_channels, out_channels, kernel_size.str(), shape_str(x.shape()), padding.str());
  return functional::conv2d(x, weight, bias, stride, padding, dilation, groups);
}

// ---------------------------------------------------------------------------- Conv1d
Conv1d::Conv1d(int64_t in, int64_t out, int64_t kernel, int64_t stride_, int64_t padding_,
               int64_t dilation_, int64_t groups_, bool bias_)
    : ConvNd("Conv1d", false, in, out, kernel, stride_, padding_, 0, dilation_, groups_, bias_) {}

Tensor Conv1d::forward(const Tensor& x) const {
  // x [N, C_in, L] -> [N, C_out, L_out]
  LOOM_CHECK(x.defined() && x.dim() == 3 && x.size(1) == in_channels,
             "Conv1d({}, {}, kernel_size={}): expected input [N, {}, L], got {}", in_channels,
             out_channels, kernel_size, in_channels, input_shape(x));
  LOOM_CHECK(x.size(2) + 2 * padding >= dilation * (kernel_size - 1) + 1,
             "Conv1d({}, {}, kernel_size={}): input {} with padding {} is smaller than the kernel",
             in_channels, out_channels, kernel_size, shape_str(x.shape()), padding);
  return functional::conv1d(x, weight, bias, stride, padding, dilation, groups);
}

// ---------------------------------------------------------------------------- ConvTranspose2d
ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, ExpandingArray<2> kernel,
                                 ExpandingArray<2> stride_, ExpandingArray<2> padding_,
                                 ExpandingArray<2> output_padding_, int64_t groups_, bool bias_,
                                 ExpandingArray<2> dilation_)
    : ConvNd("ConvTranspose2d", true, in, out, kernel, stride_, padding_, output_padding_,
             dilation_, groups_, bias_) {}

Tensor ConvTranspose2d::forward(const Tensor& x) const {
  // x [N, C_in, H, W] -> [N, C_out, H_out, W_out]
  LOOM_CHECK(x.defined() && x.dim() == 4 && x.size(1) == in_channels,
             "ConvTranspose2d({}, {}, kernel_size={}): expected input [N, {}, H, W], got {}",
             in_channels, out_channels, kernel_size.str(), in_channels, input_shape(x));
  return functional::conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups,
                                      dilation);
}

}  // namespace loom::nn
