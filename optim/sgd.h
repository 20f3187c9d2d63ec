// Stochastic gradient descent with momentum (Polyak 1964; Sutskever et al. 2013 for the
// Nesterov form), exactly as torch.optim.SGD computes it:
//
//   g = grad + weight_decay * param                  (L2 penalty folded into the gradient)
//   buf = g                                          on the first step,
//   buf = momentum * buf + (1 - dampening) * g       afterwards
//   g = g + momentum * buf  (nesterov)   or   g = buf   (momentum > 0)
//   param -= lr * g
#pragma once

#include "optim/optimizer.h"

namespace loom::optim {

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, float lr, float momentum = 0.0f, float dampening = 0.0f,
      float weight_decay = 0.0f, bool nesterov = false);
  // Each group brings its own lr and weight_decay.
  explicit SGD(std::vector<ParamGroup> groups, float momentum = 0.0f, float dampening = 0.0f,
               bool nesterov = false);

  float momentum() const { return momentum_; }
  float dampening() const { return dampening_; }
  bool nesterov() const { return nesterov_; }

 private:
  LOOM_OPTIMIZER_OVERRIDES;
  float momentum_, dampening_;
  bool nesterov_;
};

}  // namespace loom::optim
