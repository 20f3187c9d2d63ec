// LayerNorm (Ba et al. 2016) over the last dim, with a learned gain and bias.
#pragma once

#include "nn/module.h"

namespace loom::nn {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t normalized_shape, float eps = 1e-5f, bool elementwise_affine = true);

  // x [..., normalized_shape] -> same shape
  Tensor forward(const Tensor& x) const;
  std::string extra_repr() const override;

  int64_t normalized_shape;
  float eps;
  Tensor weight;  // [normalized_shape], ones; undefined without elementwise_affine
  Tensor bias;    // [normalized_shape], zeros; undefined without elementwise_affine
};

}  // namespace loom::nn
