#include "train/weight_decay.h"

#include "core/error.h"

namespace loom::nn {

std::vector<optim::ParamGroup> weight_decay_groups(const Module& model,
                                                   const std::set<std::string>& no_weight_decay,
                                                   float lr, float weight_decay) {
  optim::ParamGroup decay{{}, lr, weight_decay};
  optim::ParamGroup no_decay{{}, lr, 0.0f};
  std::set<std::string> unmatched = no_weight_decay;
  for (const auto& [name, p] : model.named_parameters()) {
    const bool listed = unmatched.erase(name) > 0;
    (p.dim() < 2 || listed ? no_decay : decay).params.push_back(p);
  }
  LOOM_CHECK(unmatched.empty(),
             "weight_decay_groups: no_weight_decay names '{}', which is no parameter of the model",
             *unmatched.begin());
  return {decay, no_decay};
}

}  // namespace loom::nn
