// RMSprop (Hinton, Coursera lecture 6e, 2012; the centered form of Graves 2013, eq. 38-45), as
// torch.optim.RMSprop computes it. For each parameter:
//
//   g = grad + weight_decay * param                    (L2 penalty folded into the gradient)
//   square_avg = alpha * square_avg + (1 - alpha) * g^2
//   avg = sqrt(square_avg) + eps, or (centered) with grad_avg = alpha * grad_avg + (1-alpha) g,
//   avg = sqrt(square_avg - grad_avg^2) + eps           (an estimate of the variance instead)
//   momentum > 0:  buf = momentum * buf + g / avg,  param -= lr * buf
//   otherwise:     param -= lr * g / avg
//
// The buffers start at zero. eps is added outside the square root, as in PyTorch (Keras and
// TensorFlow add it inside). The update is composed of tensor ops, so it runs on every device.
#pragma once

#include "optim/optimizer.h"

namespace loom::optim {

class RMSprop : public Optimizer {
 public:
  explicit RMSprop(std::vector<Tensor> params, float lr = 1e-2f, float alpha = 0.99f,
                   float eps = 1e-8f, float weight_decay = 0.0f, float momentum = 0.0f,
                   bool centered = false);
  // Each group brings its own lr and weight_decay.
  explicit RMSprop(std::vector<ParamGroup> groups, float alpha = 0.99f, float eps = 1e-8f,
                   float momentum = 0.0f, bool centered = false);

  float alpha() const { return alpha_; }
  float eps() const { return eps_; }
  float momentum() const { return momentum_; }
  bool centered() const { return centered_; }

 private:
  LOOM_OPTIMIZER_OVERRIDES;
  float alpha_, eps_, momentum_;
  bool centered_;
};

}  // namespace loom::optim
