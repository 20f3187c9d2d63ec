// LayerNorm layer: the fused layer_norm op with the layer's weight and bias.
#include "nn/layer_norm.h"

#include "autograd/ops.h"
#include "nn/functional.h"

namespace loom::nn {

LayerNorm::LayerNorm(int64_t dim, float eps_, bool elementwise_affine)
    : normalized_shape(dim), eps(eps_) {
  LOOM_CHECK(dim > 0, "LayerNorm: normalized_shape {} must be positive", dim);
  LOOM_CHECK(eps_ > 0.0f, "LayerNorm: eps {} must be positive", eps_);
  if (elementwise_affine) {
    weight = register_parameter("weight", ones({dim}));
    bias = register_parameter("bias", zeros({dim}));
  }
}

Tensor LayerNorm::forward(const Tensor& x) const {
  // x [..., D] -> [..., D]
  LOOM_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == normalized_shape,
             "LayerNorm({}): expected input [..., {}], got {}", normalized_shape, normalized_shape,
             x.defined() ? shape_str(x.shape()) : "undefined");
  return functional::layer_norm(x, weight, bias, eps);
}

std::pair<Tensor, Tensor> LayerNorm::add_and_forward(const Tensor& x,
                                                     const Tensor& residual) const {
  // x, residual [..., D] -> {x + residual, LayerNorm(x + residual)}
  LOOM_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == normalized_shape,
             "LayerNorm({}): expected input [..., {}], got {}", normalized_shape, normalized_shape,
             x.defined() ? shape_str(x.shape()) : "undefined");
  return functional::add_layer_norm(x, residual, weight, bias, eps);
}

std::string LayerNorm::extra_repr() const {
  return fmt::format("({},), eps={}, elementwise_affine={}", normalized_shape, py_repr(eps),
                     py_repr(weight.defined()));
}

}  // namespace loom::nn
