// Activation modules, so activations can sit in a Sequential, and the Activation switch taken
// by FeedForward and the transformer layers.
#pragma once

#include "backends/unary_math.h"
#include "nn/module.h"

namespace loom::nn {

// ReLU (Nair & Hinton 2010), GELU (Hendrycks & Gimpel 2016, exact erf form), or GELU in its
// tanh approximation (GPT-2's "gelu_new", PyTorch's approximate='tanh').
enum class Activation { ReLU, GELU, GELUTanh };

// Applies the activation function elementwise.
Tensor activate(const Tensor& x, Activation activation);
// The unary op that computes it: UnaryOp::Relu, Gelu or GeluTanh.
UnaryOp unary_op(Activation activation);
// activate(x + bias) for a bias [C] along x's last dim, the add fused into the activation's
// kernel (bias_relu, bias_gelu, bias_gelu_tanh in autograd/ops.h); the result has x's dtype.
Tensor activate(const Tensor& x, Activation activation, const Tensor& bias);

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) const;  // [...] -> same shape
};

class GELU : public Module {
 public:
  // approximate_tanh selects GPT-2's tanh approximation instead of the exact erf form.
  explicit GELU(bool approximate_tanh = false) : approximate_tanh(approximate_tanh) {}
  Tensor forward(const Tensor& x) const;  // [...] -> same shape
  std::string extra_repr() const override;

  bool approximate_tanh;
};

// x * sigmoid(x) (Elfwing et al. 2018; Ramachandran et al. 2017's Swish).
class SiLU : public Module {
 public:
  Tensor forward(const Tensor& x) const;  // [...] -> same shape
};

class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) const;  // [...] -> same shape
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) const;  // [...] -> same shape
};

// softmax over `dim` (negative counts from the end). torch.nn.Softmax's dim=None (a dim guessed
// from the rank, deprecated) has no counterpart: the dim is always given.
class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) const;  // [...] -> same shape
  std::string extra_repr() const override;

  int64_t dim;
};

// x where x >= 0, negative_slope * x elsewhere (Maas et al. 2013).
class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(float negative_slope = 0.01f) : negative_slope(negative_slope) {}
  Tensor forward(const Tensor& x) const;  // [...] -> same shape
  std::string extra_repr() const override;

  float negative_slope;
};

}  // namespace loom::nn
