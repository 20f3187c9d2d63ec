// Transformer encoder and decoder layers, with PyTorch's structure and parameter names
// (torch.nn.TransformerEncoderLayer / TransformerDecoderLayer, batch_first=True), so their
// state_dicts load directly. Inputs are [batch, seq, d_model].
//
// norm_first selects where LayerNorm sits:
//   false: post-norm, as Vaswani et al. 2017:  x = LayerNorm(x + Sublayer(x))
//   true:  pre-norm, as Wang et al. 2019:      x = x + Sublayer(LayerNorm(x))
// Pre-norm keeps an identity path through the residual stream and trains deep stacks without
// warmup tricks; post-norm is the original paper.
//
// Masks follow MultiheadAttention (float: added to the scores; int64: nonzero = blocked).
// The feed-forward sub-layer is nn::feed_forward (Vaswani et al. 2017, eq. 2) on the layer's own
// linear1 and linear2, which PyTorch keeps at the layer's top level.
#pragma once

#include <memory>

#include "nn/activation.h"
#include "nn/dropout.h"
#include "nn/feed_forward.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/multihead_attention.h"

namespace loom::nn {

class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048,
                          float dropout = 0.1f, Activation activation = Activation::ReLU,
                          bool norm_first = false, float layer_norm_eps = 1e-5f);

  // src [B, S, d_model] -> [B, S, d_model]
  // src_mask [S, S] or [B*nhead, S, S]; src_key_padding_mask [B, S]
  Tensor forward(const Tensor& src, const Tensor& src_mask = Tensor(),
                 const Tensor& src_key_padding_mask = Tensor()) const;

  Activation activation;
  bool norm_first;
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<Linear> linear2;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> dropout1, dropout2;

 private:
  Tensor self_attention_block(const Tensor& x, const Tensor& mask,
                              const Tensor& key_padding_mask) const;
  Tensor feed_forward_block(const Tensor& x) const;
};

class TransformerDecoderLayer : public Module {
 public:
  TransformerDecoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048,
                          float dropout = 0.1f, Activation activation = Activation::ReLU,
                          bool norm_first = false, float layer_norm_eps = 1e-5f);

  // tgt [B, T, d_model], memory [B, S, d_model] (the encoder output) -> [B, T, d_model]
  // tgt_mask [T, T] (usually causal_mask(T)), memory_mask [T, S], key padding masks [B, T] and
  // [B, S]; each may be undefined.
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = Tensor(),
                 const Tensor& memory_mask = Tensor(),
                 const Tensor& tgt_key_padding_mask = Tensor(),
                 const Tensor& memory_key_padding_mask = Tensor()) const;

  Activation activation;
  bool norm_first;
  std::shared_ptr<MultiheadAttention> self_attn;       // masked self-attention
  std::shared_ptr<MultiheadAttention> multihead_attn;  // attention over the encoder output
  std::shared_ptr<Linear> linear1;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<Linear> linear2;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
  std::shared_ptr<Dropout> dropout1, dropout2, dropout3;

 private:
  Tensor feed_forward_block(const Tensor& x) const;
};

}  // namespace loom::nn
