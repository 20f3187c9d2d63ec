#include "optim/param_group.h"

namespace loom::optim {

std::vector<ParamGroup> weight_decay_groups(const std::vector<Tensor>& params, float lr,
                                            float weight_decay) {
  ParamGroup decay{{}, lr, weight_decay};
  ParamGroup no_decay{{}, lr, 0.0f};
  for (const Tensor& p : params) (p.dim() >= 2 ? decay : no_decay).params.push_back(p);
  return {decay, no_decay};
}

}  // namespace loom::optim
