// Position information added to token embeddings [batch, seq, d_model]:
//   SinusoidalPositionalEncoding: the fixed table of Vaswani et al. 2017, section 3.5
//     PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))
//   LearnedPositionalEmbedding: a trained table (BERT, GPT-2, ViT), named "weight" like the
//     nn.Embedding those models use.
// Both take the position of the first token (`start`), for decoding with a KV cache.
#pragma once

#include "nn/module.h"

namespace loom::nn {

class SinusoidalPositionalEncoding : public Module {
 public:
  // d_model must be even.
  explicit SinusoidalPositionalEncoding(int64_t d_model, int64_t max_len = 5000);

  // x [B, T, d_model] -> x + PE[start : start + T]
  Tensor forward(const Tensor& x, int64_t start = 0) const;
  std::string extra_repr() const override;

  int64_t d_model, max_len;
  // [max_len, d_model]; a non-persistent buffer (recomputed, never saved in checkpoints).
  Tensor pe;
};

class LearnedPositionalEmbedding : public Module {
 public:
  // weight initialised N(0, 0.02^2), as BERT and GPT-2.
  LearnedPositionalEmbedding(int64_t max_len, int64_t d_model);

  // x [B, T, d_model] -> x + weight[start : start + T]
  Tensor forward(const Tensor& x, int64_t start = 0) const;
  std::string extra_repr() const override;

  int64_t max_len, d_model;
  Tensor weight;  // [max_len, d_model]
};

}  // namespace loom::nn
