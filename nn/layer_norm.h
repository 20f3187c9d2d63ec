// LayerNorm (Ba et al. 2016) over the last dim, with a learned gain and bias.
#pragma once

#include <utility>

#include "nn/module.h"

namespace loom::nn {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t normalized_shape, float eps = 1e-5f, bool elementwise_affine = true);

  // x [..., normalized_shape] -> same shape
  Tensor forward(const Tensor& x) const;
  // {h, forward(h)} with h = x + residual, from one kernel (functional::add_layer_norm): for a
  // pre-norm block, `auto [h, normed] = ln_2->add_and_forward(x, branch)`.
  std::pair<Tensor, Tensor> add_and_forward(const Tensor& x, const Tensor& residual) const;
  std::string extra_repr() const override;

  int64_t normalized_shape;
  float eps;
  Tensor weight;  // [normalized_shape], ones; undefined without elementwise_affine
  Tensor bias;    // [normalized_shape], zeros; undefined without elementwise_affine
};

}  // namespace loom::nn
