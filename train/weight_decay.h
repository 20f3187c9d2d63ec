// Which parameters AdamW decays, with one rule for every model: timm's and the official Swin's
// (timm optim_factory's param_groups_weight_decay, Swin's set_weight_decay). A parameter of
// one dimension (a bias, a norm's weight or bias) is never decayed, and neither is one the
// model names in no_weight_decay() (ViT's position embedding and class token, Swin's relative
// position bias tables); every other parameter (matrices, embeddings, convolution kernels) is.
// For a model that names none (GPT, BERT) this is nanoGPT's rule: decay what has 2+ dimensions.
//
//   optim::AdamW opt(nn::weight_decay_groups(model, lr, weight_decay), 0.9f, 0.95f);
#pragma once

#include <set>
#include <string>
#include <vector>

#include "nn/module.h"
#include "optim/param_group.h"

namespace loom::nn {

// {decayed group, undecayed group}, both with learning rate `lr`, each in the order of
// model.named_parameters(); either may be empty. A name in `no_weight_decay` that is no
// parameter of the model is a loom::Error naming it (a misspelt name would decay silently).
std::vector<optim::ParamGroup> weight_decay_groups(const Module& model,
                                                   const std::set<std::string>& no_weight_decay,
                                                   float lr, float weight_decay);

// The same with the model's own list.
template <class Model>
std::vector<optim::ParamGroup> weight_decay_groups(const Model& model, float lr,
                                                   float weight_decay) {
  return weight_decay_groups(model, model.no_weight_decay(), lr, weight_decay);
}

}  // namespace loom::nn
