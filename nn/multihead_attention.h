// Multi-head attention (Vaswani et al. 2017, section 3.2.2), with PyTorch's parameter names
// and layout so nn.MultiheadAttention state_dicts load directly:
//   in_proj_weight [3E, E] (query, key, value projections stacked), in_proj_bias [3E],
//   out_proj.weight [E, E], out_proj.bias [E]
// Inputs are batch first: [batch, seq, embed_dim].
//
// Masks are accepted in both of PyTorch's forms (loom has no bool dtype):
//   float32: added to the attention scores (0 = attend, -inf = blocked), like PyTorch's float
//            masks; any other value biases the scores. This is loom's one mask convention.
//   int64:   boolean, nonzero = blocked, like PyTorch's bool masks; converted to the float form
//            by functional::additive_mask / padding_mask before attention
//   attn_mask        [T_q, T_k] (the same for every sequence and head) or [B*heads, T_q, T_k]
//   key_padding_mask [B, T_k]: marks padding keys of each sequence
// A query row whose every key is blocked gets NaN, as in PyTorch.
#pragma once

#include <memory>
#include <utility>

#include "nn/linear.h"
#include "nn/module.h"

namespace loom::nn {

class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, float dropout = 0.0f, bool bias = true);

  // query [B, T_q, E], key [B, T_k, E], value [B, T_k, E] -> [B, T_q, E]
  // Self-attention: pass the same tensor three times (one fused input projection is used).
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                 const Tensor& attn_mask = Tensor(),
                 const Tensor& key_padding_mask = Tensor()) const;
  // The output and the attention weights used (after dropout, as PyTorch): [B, T_q, T_k]
  // averaged over the heads, or [B, heads, T_q, T_k] when average_heads is false.
  std::pair<Tensor, Tensor> forward_with_weights(const Tensor& query, const Tensor& key,
                                                 const Tensor& value,
                                                 const Tensor& attn_mask = Tensor(),
                                                 const Tensor& key_padding_mask = Tensor(),
                                                 bool average_heads = true) const;
  // PyTorch's initialisation: in_proj_weight xavier_uniform_, biases zero, out_proj.weight as
  // Linear.
  void reset_parameters();

  int64_t embed_dim, num_heads, head_dim;
  float dropout;
  Tensor in_proj_weight;  // [3E, E]
  Tensor in_proj_bias;    // [3E], undefined when built with bias = false
  std::shared_ptr<Linear> out_proj;

 private:
  Tensor attend(const Tensor& query, const Tensor& key, const Tensor& value,
                const Tensor& attn_mask, const Tensor& key_padding_mask, Tensor* weights) const;
  void check_inputs(const Tensor& query, const Tensor& key, const Tensor& value) const;
  Tensor combined_mask(const Tensor& attn_mask, const Tensor& key_padding_mask, int64_t batch,
                       int64_t q_len, int64_t k_len, Device device) const;
  std::string label() const;
};

}  // namespace loom::nn
