// Activation modules.
#include "nn/activation.h"

#include "autograd/ops.h"

namespace loom::nn {

Tensor activate(const Tensor& x, Activation activation) {
  switch (activation) {
    case Activation::ReLU:
      return relu(x);
    case Activation::GELU:
      return gelu(x);
    case Activation::GELUTanh:
      return gelu_tanh(x);
  }
  LOOM_FAIL("activate: unknown activation {}", static_cast<int>(activation));
}

Tensor activate(const Tensor& x, Activation activation, const Tensor& bias) {
  switch (activation) {
    case Activation::ReLU:
      return bias_relu(x, bias);
    case Activation::GELU:
      return bias_gelu(x, bias);
    case Activation::GELUTanh:
      return bias_gelu_tanh(x, bias);
  }
  LOOM_FAIL("activate: unknown activation {}", static_cast<int>(activation));
}

UnaryOp unary_op(Activation activation) {
  switch (activation) {
    case Activation::ReLU:
      return UnaryOp::Relu;
    case Activation::GELU:
      return UnaryOp::Gelu;
    case Activation::GELUTanh:
      return UnaryOp::GeluTanh;
  }
  LOOM_FAIL("unary_op: unknown activation {}", static_cast<int>(activation));
}

Tensor ReLU::forward(const Tensor& x) const { return relu(x); }

Tensor GELU::forward(const Tensor& x) const { return approximate_tanh ? gelu_tanh(x) : gelu(x); }

std::string GELU::extra_repr() const {
  return approximate_tanh ? "approximate='tanh'" : "approximate='none'";
}

Tensor SiLU::forward(const Tensor& x) const { return silu(x); }

Tensor Sigmoid::forward(const Tensor& x) const { return sigmoid(x); }

Tensor Tanh::forward(const Tensor& x) const { return tanh(x); }

Tensor Softmax::forward(const Tensor& x) const { return softmax(x, dim); }

std::string Softmax::extra_repr() const { return fmt::format("dim={}", dim); }

Tensor LeakyReLU::forward(const Tensor& x) const { return leaky_relu(x, negative_slope); }

std::string LeakyReLU::extra_repr() const {
  return "negative_slope=" + py_repr(negative_slope);
}

}  // namespace loom::nn
