// Dropout (Srivastava et al. 2014), inverted: in training each element is zeroed with
// probability p and survivors are scaled by 1/(1-p); in evaluation it is the identity.
// The mask comes from loom's global generator, so manual_seed makes it repeatable.
#pragma once

#include "nn/module.h"

namespace loom::nn {

class Dropout : public Module {
 public:
  explicit Dropout(float p = 0.5f);

  // x [...] -> same shape
  Tensor forward(const Tensor& x) const;
  std::string extra_repr() const override;

  float p;
};

}  // namespace loom::nn
