// GroupNorm (Wu & He 2018) and RMSNorm (Zhang & Sennrich 2019), the normalisations that need no
// batch statistics, with torch.nn's names.
#pragma once

#include "nn/module.h"

namespace loom::nn {

// The channels split into num_groups groups; each sample's group is normalised over its
// channels and spatial positions, then scaled and shifted per channel.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, float eps = 1e-5f, bool affine = true);

  // x [N, C, ...] -> same shape
  Tensor forward(const Tensor& x) const;
  std::string extra_repr() const override;

  int64_t num_groups, num_channels;
  float eps;
  Tensor weight, bias;  // [C], ones and zeros; undefined without affine
};

// x / sqrt(mean(x^2) + eps) * weight over the last dim: LayerNorm without the centring and
// without a bias (torch.nn.RMSNorm with normalized_shape = [dim]; LLaMA's and T5's norm).
class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t dim, float eps = 1e-6f, bool elementwise_affine = true);

  // x [..., dim] -> same shape
  Tensor forward(const Tensor& x) const;
  std::string extra_repr() const override;

  int64_t dim;
  float eps;
  Tensor weight;  // [dim], ones; undefined without elementwise_affine
};

}  // namespace loom::nn
