// Adagrad (Duchi, Hazan & Singer 2011), as torch.optim.Adagrad computes it. For each parameter,
// at its step t (1 on its first update):
//
//   g = grad + weight_decay * param                    (L2 penalty folded into the gradient)
//   clr = lr / (1 + (t - 1) * lr_decay)
//   sum = sum + g^2                                    (starts at initial_accumulator_value)
//   param -= clr * g / (sqrt(sum) + eps)
//
// Each coordinate's step shrinks with the squared gradients it has seen: large for rare
// features, small for frequent ones. Composed of tensor ops, so it runs on every device.
#pragma once

#include "optim/optimizer.h"

namespace loom::optim {

class Adagrad : public Optimizer {
 public:
  explicit Adagrad(std::vector<Tensor> params, float lr = 1e-2f, float lr_decay = 0.0f,
                   float weight_decay = 0.0f, float eps = 1e-10f,
                   float initial_accumulator_value = 0.0f);
  // Each group brings its own lr and weight_decay.
  explicit Adagrad(std::vector<ParamGroup> groups, float lr_decay = 0.0f, float eps = 1e-10f,
                   float initial_accumulator_value = 0.0f);

  float lr_decay() const { return lr_decay_; }
  float eps() const { return eps_; }
  float initial_accumulator_value() const { return initial_accumulator_value_; }

 private:
  LOOM_OPTIMIZER_OVERRIDES;
  float lr_decay_, eps_, initial_accumulator_value_;
};

}  // namespace loom::optim
