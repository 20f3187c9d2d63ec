// Scaled dot-product attention and the masks it takes.
#include <cmath>
#include <limits>

#include "autograd/ops.h"
#include "core/error.h"
#include "nn/functional.h"

namespace loom::nn::functional {

namespace {

// Whether `from` stretches to `to` by broadcasting alone (trailing dims equal or 1).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, float dropout_p, bool training,
                                    Tensor* attn_weights) {
  // q [..., T_q, d_k], k [..., T_k, d_k], v [..., T_k, d_v] -> [..., T_q, d_v]
  // (in MultiheadAttention: [B, heads, T, head_dim])
  LOOM_CHECK(q.defined() && k.defined() && v.defined(),
             "scaled_dot_product_attention: undefined query, key or value");
  LOOM_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim() && q.size(-1) == k.size(-1) &&
                 k.size(-2) == v.size(-2),
             "scaled_dot_product_attention: query {}, key {} and value {} do not fit (expected "
             "[..., T_q, d_k], [..., T_k, d_k], [..., T_k, d_v])",
             shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
  // Vaswani et al. 2017, eq. 1. Scaling q before the product (as PyTorch) touches T_q*d_k
  // values instead of T_q*T_k.
  const float scale = 1.0f / std::sqrt(static_cast<float>(q.size(-1)));
  Tensor scores = matmul(q * scale, k.transpose(-2, -1));  // [..., T_q, T_k]
  if (mask.defined()) {
    LOOM_CHECK(mask.dtype() == DType::Float32,
               "scaled_dot_product_attention: mask must be float32 (additive), got {}; use "
               "additive_mask() for boolean masks",
               dtype_name(mask.dtype()));
    LOOM_CHECK(broadcasts_to(mask.shape(), scores.shape()),
               "scaled_dot_product_attention: mask of shape {} does not broadcast to the "
               "attention scores {}",
               shape_str(mask.shape()), shape_str(scores.shape()));
    scores = scores + mask;  // -inf removes a key from the softmax
  }
  Tensor probs = softmax(scores, -1);  // [..., T_q, T_k]
  if (training && dropout_p > 0.0f) probs = loom::dropout(probs, dropout_p, true);
  if (attn_weights) *attn_weights = probs;
  return matmul(probs, v);  // [..., T_q, d_v]
}

Tensor causal_mask(int64_t size, Device device) {
  // [size, size]: -inf strictly above the diagonal (future positions), 0 elsewhere.
  LOOM_CHECK(size >= 0, "causal_mask: negative size {}", size);
  const Tensor above = triu(ones({size, size}, device), 1);
  return masked_fill(zeros({size, size}, device), above, -std::numeric_limits<float>::infinity());
}

Tensor additive_mask(const Tensor& mask) {
  LOOM_CHECK(mask.defined(), "additive_mask: undefined mask");
  if (mask.dtype() == DType::Float32) return mask;
  // Boolean convention (int64): nonzero = blocked, as a PyTorch bool mask's True.
  const Tensor blocked = mask.to(DType::Float32);
  return masked_fill(zeros(mask.shape(), mask.device()), blocked,
                     -std::numeric_limits<float>::infinity());
}

}  // namespace loom::nn::functional
