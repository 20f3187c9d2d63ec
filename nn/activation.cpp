// Activation modules.
#include "nn/activation.h"

#include "autograd/ops.h"

namespace loom::nn {

namespace {

// What an Activation stands for, in its three forms: the unary op, the function, and the
// function of x + bias with the add fused into its kernel. `caller` names the error.
struct ActivationForms {
  UnaryOp op;
  Tensor (*function)(const Tensor& x);
  Tensor (*with_bias)(const Tensor& x, const Tensor& bias);
};

ActivationForms forms(Activation activation, const char* caller) {
  switch (activation) {
    case Activation::ReLU:
      return {UnaryOp::Relu, relu, bias_relu};
    case Activation::GELU:
      return {UnaryOp::Gelu, gelu, bias_gelu};
    case Activation::GELUTanh:
      return {UnaryOp::GeluTanh, gelu_tanh, bias_gelu_tanh};
  }
  LOOM_FAIL("{}: unknown activation {}", caller, static_cast<int>(activation));
}

}  // namespace

Tensor activate(const Tensor& x, Activation activation) {
  return forms(activation, "activate").function(x);
}

Tensor activate(const Tensor& x, Activation activation, const Tensor& bias) {
  return forms(activation, "activate").with_bias(x, bias);
}

UnaryOp unary_op(Activation activation) { return forms(activation, "unary_op").op; }

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
