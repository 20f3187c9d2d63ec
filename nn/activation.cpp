// Activation modules.
#include "nn/activation.h"

#include "autograd/ops.h"

namespace loom::nn {

Tensor activate(const Tensor& x, Activation activation) {
  return activation == Activation::ReLU ? relu(x) : gelu(x);
}

Tensor ReLU::forward(const Tensor& x) const { return relu(x); }

Tensor GELU::forward(const Tensor& x) const { return approximate_tanh ? gelu_tanh(x) : gelu(x); }

std::string GELU::extra_repr() const {
  return approximate_tanh ? "approximate='tanh'" : "approximate='none'";
}

}  // namespace loom::nn
