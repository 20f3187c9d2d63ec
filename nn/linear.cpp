// Linear layer.
#include "nn/linear.h"

#include <cmath>

#include "autograd/ops.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace loom::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias) : in_features(in), out_features(out) {
  LOOM_CHECK(in > 0 && out > 0, "Linear: in_features {} and out_features {} must be positive", in,
             out);
  weight = register_parameter("weight", Tensor::empty({out, in}));
  if (with_bias) bias = register_parameter("bias", Tensor::empty({out}));
  reset_parameters();
}

void Linear::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) const {
  // x [..., in_features] -> [..., out_features]
  check_input(x);
  return functional::linear(x, weight, bias);
}

Tensor Linear::forward_activation(const Tensor& x, Activation activation) const {
  check_input(x);
  return linear_activation(x, weight, bias, unary_op(activation));
}

void Linear::check_input(const Tensor& x) const {
  LOOM_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == in_features,
             "Linear({}, {}): expected input [..., {}], got {}", in_features, out_features,
             in_features, x.defined() ? shape_str(x.shape()) : "undefined");
}

std::string Linear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}", in_features, out_features,
                     py_repr(bias.defined()));
}

}  // namespace loom::nn
