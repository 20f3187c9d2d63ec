// Multi-head attention: input projections, heads, scaled dot-product attention, output
// projection (Vaswani et al. 2017, section 3.2.2):
//   MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
//   head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)
#include "nn/multihead_attention.h"

#include "autograd/ops.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace loom::nn {

namespace F = functional;

MultiheadAttention::MultiheadAttention(int64_t embed_dim_, int64_t num_heads_, float dropout_,
                                       bool bias)
    : embed_dim(embed_dim_), num_heads(num_heads_), dropout(dropout_) {
  LOOM_CHECK(embed_dim_ > 0 && num_heads_ > 0 && embed_dim_ % num_heads_ == 0,
             "MultiheadAttention: embed_dim {} must be a positive multiple of num_heads {}",
             embed_dim_, num_heads_);
  LOOM_CHECK(dropout_ >= 0.0f && dropout_ <= 1.0f, "MultiheadAttention: dropout {} outside [0, 1]",
             dropout_);
  head_dim = embed_dim / num_heads;
  in_proj_weight = register_parameter("in_proj_weight", Tensor::empty({3 * embed_dim, embed_dim}));
  if (bias) in_proj_bias = register_parameter("in_proj_bias", Tensor::empty({3 * embed_dim}));
  out_proj = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, bias));
  reset_parameters();
}

void MultiheadAttention::reset_parameters() {
  init::xavier_uniform_(in_proj_weight);
  if (in_proj_bias.defined()) init::zeros_(in_proj_bias);
  out_proj->reset_parameters();
  if (out_proj->bias.defined()) init::zeros_(out_proj->bias);
}

std::string MultiheadAttention::label() const {
  return fmt::format("MultiheadAttention(embed_dim={}, num_heads={})", embed_dim, num_heads);
}

void MultiheadAttention::check_inputs(const Tensor& query, const Tensor& key,
                                      const Tensor& value) const {
  LOOM_CHECK(query.defined() && key.defined() && value.defined(),
             "{}: undefined query, key or value", label());
  const bool ok = query.dim() == 3 && key.dim() == 3 && value.dim() == 3 &&
                  query.size(2) == embed_dim && key.size(2) == embed_dim &&
                  value.size(2) == embed_dim && key.size(0) == query.size(0) &&
                  value.size(0) == query.size(0) && key.size(1) == value.size(1);
  LOOM_CHECK(ok,
             "{}: expected query [B, T_q, {}], key and value [B, T_k, {}], got query {}, key {}, "
             "value {}",
             label(), embed_dim, embed_dim, shape_str(query.shape()), shape_str(key.shape()),
             shape_str(value.shape()));
}

Tensor MultiheadAttention::combined_mask(const Tensor& attn_mask, const Tensor& key_padding_mask,
                                         int64_t batch, int64_t q_len, int64_t k_len,
                                         Device device) const {
  // -> one additive mask (0 = attend, -inf = blocked) broadcastable to the scores
  //    [B, heads, T_q, T_k], or undefined: boolean masks are converted by F::additive_mask and
  //    F::padding_mask, so scaled_dot_product_attention sees loom's one convention.
  Tensor mask;
  if (attn_mask.defined()) {
    const Shape& s = attn_mask.shape();
    const bool shared = s == Shape{q_len, k_len};
    LOOM_CHECK(shared || s == (Shape{batch * num_heads, q_len, k_len}),
               "{}: attn_mask of shape {} should be [{}, {}] or [{}, {}, {}] (batch*heads, T_q, "
               "T_k)",
               label(), shape_str(s), q_len, k_len, batch * num_heads, q_len, k_len);
    LOOM_CHECK(attn_mask.device() == device, "{}: attn_mask is on {}, the inputs on {}", label(),
               device_name(attn_mask.device()), device_name(device));
    mask = F::additive_mask(attn_mask);
    if (!shared) mask = mask.reshape({batch, num_heads, q_len, k_len});  // [B, h, T_q, T_k]
  }
  if (key_padding_mask.defined()) {
    LOOM_CHECK(key_padding_mask.shape() == (Shape{batch, k_len}),
               "{}: key_padding_mask of shape {} should be [{}, {}] (batch, T_k)", label(),
               shape_str(key_padding_mask.shape()), batch, k_len);
    LOOM_CHECK(key_padding_mask.device() == device,
               "{}: key_padding_mask is on {}, the inputs on {}", label(),
               device_name(key_padding_mask.device()), device_name(device));
    const Tensor padding = F::padding_mask(key_padding_mask);  // [B, 1, 1, T_k]
    mask = mask.defined() ? mask + padding : padding;
  }
  return mask;
}

namespace {

// t's rows in blocks of `sizes` (split: views whose gradients join in one cat), or as many
// undefined tensors when t is (a projection without bias).
std::vector<Tensor> row_blocks(const Tensor& t, std::vector<int64_t> sizes) {
  const size_t count = sizes.size();
  return t.defined() ? t.split(std::move(sizes), 0) : std::vector<Tensor>(count);
}

}  // namespace

Tensor MultiheadAttention::attend(const Tensor& query, const Tensor& key, const Tensor& value,
                                  const Tensor& attn_mask, const Tensor& key_padding_mask,
                                  Tensor* weights) const {
  // query [B, T_q, E], key/value [B, T_k, E] -> [B, T_q, E]
  check_inputs(query, key, value);
  const int64_t batch = query.size(0), q_len = query.size(1), k_len = key.size(1);
  const int64_t e = embed_dim;
  std::vector<Tensor> qkv;  // the projections q, k, v [B, T, E]
  if (query.impl() == key.impl() && key.impl() == value.impl()) {
    // Self-attention: one GEMM for all three projections -> [B, T, 3E], split in three.
    qkv = F::linear(query, in_proj_weight, in_proj_bias).split(e, -1);
  } else {
    // in_proj_weight's rows for the query [E], and for the key and the value [2E].
    const std::vector<Tensor> w = row_blocks(in_proj_weight, {e, 2 * e});
    const std::vector<Tensor> b = row_blocks(in_proj_bias, {e, 2 * e});
    qkv = {F::linear(query, w[0], b[0])};
    if (key.impl() == value.impl()) {  // e.g. a decoder attending to the encoder memory
      for (const Tensor& t : F::linear(key, w[1], b[1]).split(e, -1)) qkv.push_back(t);
    } else {
      const std::vector<Tensor> wkv = row_blocks(w[1], {e, e}), bkv = row_blocks(b[1], {e, e});
      qkv.push_back(F::linear(key, wkv[0], bkv[0]));
      qkv.push_back(F::linear(value, wkv[1], bkv[1]));
    }
  }
  // [B, T, E] -> [B, T, heads, head_dim] -> [B, heads, T, head_dim]: views, so the projections
  // are not copied (matmul reads the strided heads directly).
  auto split_heads = [&](const Tensor& x) {
    return x.view({batch, x.size(1), num_heads, head_dim}).transpose(1, 2);
  };
  const Tensor q = split_heads(qkv[0]), k = split_heads(qkv[1]), v = split_heads(qkv[2]);
  const Tensor mask =
      combined_mask(attn_mask, key_padding_mask, batch, q_len, k_len, query.device());
  const Tensor heads = F::scaled_dot_product_attention(  // [B, h, T_q, hd]
      q, k, v,
      {.mask = mask, .dropout_p = dropout, .training = is_training(), .attn_weights = weights});
  const Tensor merged = heads.transpose(1, 2).reshape({batch, q_len, e});  // [B, T_q, E]
  return out_proj->forward(merged);
}

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const Tensor& attn_mask, const Tensor& key_padding_mask) const {
  return attend(query, key, value, attn_mask, key_padding_mask, nullptr);
}

std::pair<Tensor, Tensor> MultiheadAttention::forward_with_weights(
    const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask,
    const Tensor& key_padding_mask, bool average_heads) const {
  Tensor weights;  // [B, h, T_q, T_k]
  Tensor out = attend(query, key, value, attn_mask, key_padding_mask, &weights);
  if (average_heads) weights = mean(weights, 1);  // [B, T_q, T_k]
  return {out, weights};
}

}  // namespace loom::nn
