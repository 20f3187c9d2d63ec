// Scaled dot-product attention and the masks it takes: the one attention function of loom.
#include <cmath>
#include <limits>

#include "autograd/ops.h"
#include "core/error.h"
#include "nn/functional.h"

namespace loom::nn::functional {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Whether `from` stretches to `to` by broadcasting alone (trailing dims equal or 1).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

// Whether the matrices of t [..., rows, cols] lie one fixed stride apart, so a GEMM over all of
// them is one strided-batched call: true for contiguous tensors and for a KV cache's
// (B, nh, S, hs) window, false for heads split out of a (B, T, nh, hs) projection.
bool matrices_evenly_spaced(const Tensor& t) {
  int64_t expected = -1;  // the stride the next outer batch dim must have
  for (int64_t d = t.dim() - 3; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (expected >= 0 && t.stride(d) != expected) return false;
    expected = t.stride(d) * t.size(d);
  }
  return true;
}

// t itself when matmul can read it in one call; else one contiguous copy, made here once instead
// of inside each of the three products (forward and backward) that read it.
Tensor for_batched_gemm(const Tensor& t) { return matrices_evenly_spaced(t) ? t : t.contiguous(); }

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options) {
  // q [..., T_q, d_k], k [..., T_k, d_k], v [..., T_k, d_v] -> [..., T_q, d_v]
  // (in MultiheadAttention and GPT: [B, heads, T, head_dim]). Mask: additive, 0 = attend,
  // -inf = blocked; causal: query i attends to keys 0..query_offset + i.
  LOOM_CHECK(q.defined() && k.defined() && v.defined(),
             "scaled_dot_product_attention: undefined query, key or value");
  LOOM_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim() && q.size(-1) == k.size(-1) &&
                 k.size(-2) == v.size(-2),
             "scaled_dot_product_attention: query {}, key {} and value {} do not fit (expected "
             "[..., T_q, d_k], [..., T_k, d_k], [..., T_k, d_v])",
             shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
  LOOM_CHECK(options.query_offset >= 0 && (options.causal || options.query_offset == 0),
             "scaled_dot_product_attention: query_offset {} needs causal = true and must not be "
             "negative",
             options.query_offset);
  const int64_t q_len = q.size(-2), k_len = k.size(-2);
  // Vaswani et al. 2017, eq. 1. Scaling q before the product (as PyTorch) touches T_q*d_k
  // values instead of T_q*T_k.
  const float scale = 1.0f / std::sqrt(static_cast<float>(q.size(-1)));
  const Tensor keys = for_batched_gemm(k), values = for_batched_gemm(v);
  // k^T is a transposed view: the GEMM reads it with a transpose flag, no copy.
  Tensor scores = matmul(q * scale, keys.transpose(-2, -1));  // [..., T_q, T_k]

  Tensor mask = options.mask;
  if (mask.defined()) {
    LOOM_CHECK(mask.dtype() == DType::Float32,
               "scaled_dot_product_attention: mask must be float32 (additive), got {}; use "
               "additive_mask() for boolean masks",
               dtype_name(mask.dtype()));
    LOOM_CHECK(broadcasts_to(mask.shape(), scores.shape()),
               "scaled_dot_product_attention: mask of shape {} does not broadcast to the "
               "attention scores {}",
               shape_str(mask.shape()), shape_str(scores.shape()));
  }
  // Sec. 3.2.3: "masking out (setting to -inf) all values in the input of the softmax which
  // correspond to illegal connections", keys after the query's own position. When even the
  // first query sees the last key (one decoding step; the last query only), nothing is masked.
  const bool every_key_visible = options.query_offset >= k_len - 1;
  if (options.causal && !every_key_visible) {
    const Tensor causal =
        causal_mask(q_len, k_len, options.query_offset, q.device());  // [T_q, T_k]
    mask = mask.defined() ? mask + causal : causal;  // combined before touching the scores
  }
  if (mask.defined()) scores = scores + mask;  // -inf removes a key from the softmax

  Tensor probs = softmax(scores, -1);  // [..., T_q, T_k]
  if (options.training && options.dropout_p > 0.0f)
    probs = loom::dropout(probs, options.dropout_p, true);
  if (options.attn_weights != nullptr) *options.attn_weights = probs;
  return matmul(probs, values);  // [..., T_q, d_v]
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, float dropout_p, bool training,
                                    Tensor* attn_weights) {
  return scaled_dot_product_attention(
      q, k, v,
      {.mask = mask, .dropout_p = dropout_p, .training = training, .attn_weights = attn_weights});
}

Tensor causal_mask(int64_t size, Device device) {
  LOOM_CHECK(size >= 0, "causal_mask: negative size {}", size);
  return causal_mask(size, size, 0, device);
}

Tensor causal_mask(int64_t q_len, int64_t k_len, int64_t query_offset, Device device) {
  // [T_q, T_k]: -inf where key j > query_offset + i (a later position), 0 elsewhere.
  LOOM_CHECK(q_len >= 0 && k_len >= 0 && query_offset >= 0,
             "causal_mask: negative size or offset (q_len {}, k_len {}, query_offset {})", q_len,
             k_len, query_offset);
  return triu(full({q_len, k_len}, -kInf, device), query_offset + 1);
}

Tensor additive_mask(const Tensor& mask) {
  LOOM_CHECK(mask.defined(), "additive_mask: undefined mask");
  if (mask.dtype() == DType::Float32) return mask;
  if (mask.dtype() == DType::BFloat16) return mask.to(DType::Float32);  // already additive
  // Boolean convention (int64): nonzero = blocked, as a PyTorch bool mask's True.
  const Tensor blocked = mask.to(DType::Float32);
  return masked_fill(zeros(mask.shape(), mask.device()), blocked, -kInf);
}

Tensor padding_mask(const Tensor& key_padding_mask) {
  LOOM_CHECK(key_padding_mask.defined() && key_padding_mask.dim() == 2,
             "padding_mask: expected a key padding mask [B, T_k], got {}",
             key_padding_mask.defined() ? shape_str(key_padding_mask.shape()) : "undefined");
  const int64_t batch = key_padding_mask.size(0), k_len = key_padding_mask.size(1);
  return additive_mask(key_padding_mask).reshape({batch, 1, 1, k_len});  // [B, 1, 1, T_k]
}

}  // namespace loom::nn::functional
