// DropPath, "stochastic depth" per sample (Huang et al. 2016, "Deep Networks with Stochastic
// Depth"; in the per-sample form of timm's drop_path, which the Swin Transformer uses): in
// training, each sample's whole residual branch is zeroed with probability p and the kept ones
// are scaled by 1/(1-p), so the expectation is unchanged; in evaluation (or with p = 0) it is
// the identity.
//
//   x + drop_path(branch(x)):  x [B, ...] -> [B, ...], one Bernoulli(1-p) draw per sample b
#pragma once

#include <string>

#include "core/tensor.h"
#include "nn/module.h"

namespace loom::nn {

namespace functional {
// x [B, ...] -> x * keep[b] / (1 - p), keep[b] ~ Bernoulli(1 - p) per sample (from loom's global
// generator); x itself when !training or p == 0. p in [0, 1).
Tensor drop_path(const Tensor& x, float p, bool training);
}  // namespace functional

class DropPath : public Module {
 public:
  explicit DropPath(float p = 0.0f);
  // x [B, ...] -> [B, ...]
  Tensor forward(const Tensor& x) const;
  std::string extra_repr() const override;  // "drop_prob=0.100" (timm's)

  float p;
};

}  // namespace loom::nn
