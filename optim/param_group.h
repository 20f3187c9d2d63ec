// Parameter groups: sets of parameters that share a learning rate and a weight decay, like the
// dicts in PyTorch's `optimizer.param_groups`. The usual use is to exclude biases and
// LayerNorm/embedding-norm gains from weight decay, as GPT-2/nanoGPT and BERT do.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace loom::optim {

struct ParamGroup {
  std::vector<Tensor> params;
  float lr;                   // must be non-negative when the optimizer is built
  float weight_decay = 0.0f;  // L2 penalty (SGD, Adam) or decoupled decay (AdamW)
};

// nanoGPT's rule (Karpathy, model.py configure_optimizers): every parameter with two or more
// dimensions (matmul weights, embeddings) is decayed; one-dimensional ones (biases, LayerNorm
// weight and bias) are not. Returns {decayed group, undecayed group}, both with learning rate
// `lr`; either may be empty.
std::vector<ParamGroup> weight_decay_groups(const std::vector<Tensor>& params, float lr,
                                            float weight_decay);

}  // namespace loom::optim
