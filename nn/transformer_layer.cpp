// Transformer encoder and decoder layers (Vaswani et al. 2017, section 3.1 and figure 1).
#include "nn/transformer_layer.h"

#include "autograd/ops.h"

namespace loom::nn {

// ---------------------------------------------------------------------------- encoder
TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead,
                                                 int64_t dim_feedforward, float p,
                                                 Activation activation_, bool norm_first_,
                                                 float eps)
    : activation(activation_), norm_first(norm_first_) {
  // Registration order = PyTorch's, so named_parameters() lists the same names in the same order.
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(d_model, nhead, p));
  linear1 = register_module("linear1", std::make_shared<Linear>(d_model, dim_feedforward));
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
  linear2 = register_module("linear2", std::make_shared<Linear>(dim_feedforward, d_model));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(d_model, eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(d_model, eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(p));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(p));
}

Tensor TransformerEncoderLayer::self_attention_block(const Tensor& x, const Tensor& mask,
                                                     const Tensor& key_padding_mask) const {
  return dropout1->forward(self_attn->forward(x, x, x, mask, key_padding_mask));
}

Tensor TransformerEncoderLayer::feed_forward_block(const Tensor& x) const {
  // Vaswani et al. 2017, eq. 2, then dropout on the sub-layer's output (sec. 5.4):
  // [B, S, d_model] -> [B, S, dim_feedforward] -> [B, S, d_model]
  return dropout2->forward(feed_forward(x, *linear1, *linear2, activation, *dropout));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask,
                                        const Tensor& src_key_padding_mask) const {
  // src [B, S, d_model] -> [B, S, d_model]; each sum of the residual stream x is formed by the
  // LayerNorm that reads it next, in its kernel (Residual).
  Residual x = src;
  if (norm_first) {
    x = x + self_attention_block(norm1->forward(x), src_mask, src_key_padding_mask);
    x = x + feed_forward_block(norm2->forward(x));
  } else {
    x = norm1->forward(x + self_attention_block(x.tensor(), src_mask, src_key_padding_mask));
    x = norm2->forward(x + feed_forward_block(x.tensor()));
  }
  return x.tensor();
}

// ---------------------------------------------------------------------------- decoder
TransformerDecoderLayer::TransformerDecoderLayer(int64_t d_model, int64_t nhead,
                                                 int64_t dim_feedforward, float p,
                                                 Activation activation_, bool norm_first_,
                                                 float eps)
    : activation(activation_), norm_first(norm_first_) {
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(d_model, nhead, p));
  multihead_attn =
      register_module("multihead_attn", std::make_shared<MultiheadAttention>(d_model, nhead, p));
  linear1 = register_module("linear1", std::make_shared<Linear>(d_model, dim_feedforward));
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
  linear2 = register_module("linear2", std::make_shared<Linear>(dim_feedforward, d_model));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(d_model, eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(d_model, eps));
  norm3 = register_module("norm3", std::make_shared<LayerNorm>(d_model, eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(p));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(p));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(p));
}

Tensor TransformerDecoderLayer::feed_forward_block(const Tensor& x) const {
  // Vaswani et al. 2017, eq. 2: [B, T, d_model] -> [B, T, dim_feedforward] -> [B, T, d_model]
  return dropout3->forward(feed_forward(x, *linear1, *linear2, activation, *dropout));
}

Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory,
                                        const Tensor& tgt_mask, const Tensor& memory_mask,
                                        const Tensor& tgt_key_padding_mask,
                                        const Tensor& memory_key_padding_mask) const {
  // tgt [B, T, d_model], memory [B, S, d_model] -> [B, T, d_model]
  auto self_block = [&](const Tensor& x) {
    return dropout1->forward(self_attn->forward(x, x, x, tgt_mask, tgt_key_padding_mask));
  };
  auto cross_block = [&](const Tensor& x) {  // queries from the decoder, keys/values from memory
    return dropout2->forward(
        multihead_attn->forward(x, memory, memory, memory_mask, memory_key_padding_mask));
  };
  Residual x = tgt;  // the residual stream, as the encoder layer's
  if (norm_first) {
    x = x + self_block(norm1->forward(x));
    x = x + cross_block(norm2->forward(x));
    x = x + feed_forward_block(norm3->forward(x));
  } else {
    x = norm1->forward(x + self_block(x.tensor()));
    x = norm2->forward(x + cross_block(x.tensor()));
    x = norm3->forward(x + feed_forward_block(x.tensor()));
  }
  return x.tensor();
}

}  // namespace loom::nn
