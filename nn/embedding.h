// Embedding: a lookup table of num_embeddings vectors of size embedding_dim.
#pragma once

#include "nn/module.h"

namespace loom::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);

  // int64 ids of any shape, each in [0, num_embeddings) -> ids.shape + [embedding_dim]
  Tensor forward(const Tensor& ids) const;
  std::string extra_repr() const override;
  // PyTorch's default: N(0, 1).
  void reset_parameters();

  int64_t num_embeddings, embedding_dim;
  Tensor weight;  // [num_embeddings, embedding_dim]
};

}  // namespace loom::nn
