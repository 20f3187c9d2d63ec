// Scaled dot-product attention and the masks it takes: the one attention function of loom.
#include <atomic>
#include <cmath>
#include <limits>
#include <optional>

#include "autograd/autocast.h"
#include "autograd/internal.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "backends/backend.h"
#include "backends/gemm/tiled_gemm.h"
#include "core/error.h"
#include "core/rng.h"
#include "nn/functional.h"

namespace loom::nn::functional {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Whether the matrices of t [..., rows, cols] along its batch dims before `last` lie one fixed
// stride apart, so a GEMM over all of them is one strided-batched call: true for contiguous
// tensors and for a KV cache's (B, nh, S, hs) window, false for heads split out of a
// (B, T, nh, hs) projection, (B, nh, T, hs) -- unless `last` leaves out the heads' dim.
bool matrices_evenly_spaced(const Tensor& t, int64_t last) {
  int64_t expected = -1;  // the stride the next outer batch dim must have
  for (int64_t d = last; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (expected >= 0 && t.stride(d) != expected) return false;
    expected = t.stride(d) * t.size(d);
  }
  return true;
}

// Whether the rows of t [..., rows, d] are contiguous and follow each other (strides d, 1), and
// its matrices do not overlap (no leading dim is a broadcast: each stride >= rows * d).
bool rows_in_place(const Tensor& t) {
  for (int64_t i = 0; i + 2 < t.dim(); ++i)
    if (t.size(i) != 1 && t.stride(i) < t.size(-2) * t.size(-1)) return false;
  return (t.size(-1) == 1 || t.stride(-1) == 1) && (t.size(-2) == 1 || t.stride(-2) == t.size(-1));
}

// t itself when matmul can read it in one call; else one contiguous copy, made here once instead
// of inside each of the three products (forward and backward) that read it. The CPU's kernel
// reads split heads in place, in groups of the heads' dim (GemmArgs::group), when it computes
// float32 products in its register tiles.
Tensor for_batched_gemm(const Tensor& t) {
  if (matrices_evenly_spaced(t, t.dim() - 3)) return t;
  const bool in_groups = t.device() == Device::CPU && t.dtype() == DType::Float32 &&
                         !autocast::is_enabled() && cpu::use_tiled_gemm(t.size(-2), t.size(-1)) &&
                         t.dim() > 3 && matrices_evenly_spaced(t, t.dim() - 4);
  return in_groups ? t : t.contiguous();
}

// Where the unfused attention's products write the gradients of q, k and v (read where they lie,
// keys and values as for_batched_gemm gives them): side by side in one buffer laid out as the
// projection they were split from, (B, T, 3E), when they are views of it
// (detail::SharedGradient; split's backward then finds its gradient whole); else each its own.
struct GradientPlaces {
  detail::GradientInto scores, output;  // of q k^T (q and k^T), of P V (v)
};
// (Under autocast the products take bfloat16 casts and detail::scaled_matmul leaves the places.)
GradientPlaces gradient_places(const Tensor& q, const Tensor& keys, const Tensor& values) {
  const std::shared_ptr<detail::SharedGradient> shared =
      detail::SharedGradient::of({q, keys, values});
  if (!shared) return {};
  return {.scores = {[shared] { return shared->take(0); },
                     [shared] {  // k's place, seen as the operand k^T
                       const Tensor place = shared->take(1);
                       return place.defined() ? place.transpose(-2, -1) : place;
                     }},
          .output = {nullptr, [shared] { return shared->take(2); }}};
}

// Which path each device takes, as measured (docs/guide/performance.md, "On a GPU"):
// set_fused_attention forces one; by default (kDefault) the GPU fuses bfloat16 attention
// (autocast's included), where its tensor-core kernel beats cuBLAS + the softmax kernels
// (GPT-2 124M on an H200: 100k against 88k tokens/s), and leaves float32 to the unfused
// path, which is faster there, except for
// KV-cache decoding (at most kAttentionDecodeQueries queries), where the GPU's split-key
// decoding kernel is 1 launch instead of the unfused path's 5 and skips the blocked keys.
// On the CPU the tiled fused kernels (backends/attention/attention_tiled.cpp) only tie the
// unfused path's BLAS-batched products (2 cores, 2026-11-29, a step fused against unfused:
// vit-fmnist 282.6-283.6 ms against 284.6-284.7, bert-mini 684-703 against 698-702,
// seq2seq-mini 173.8-173.9 against 171.9-172.3), so the CPU stays unfused by default, except
// for decoding (a few queries, no gradients): there its decoding kernel reads the KV cache in
// place in one call, where the unfused path makes five (2 cores, 2026-11-30:
// seq2seq-mini-translate's greedy decoding 53.2 -> 49.3-51.4 ms, beam-4 156.8-164.8 ->
// 151.8-158.6 before its prefetch). Training keeps the unfused path's numbers.
constexpr int kDefault = -1, kOff = 0, kOn = 1;
std::atomic<int> fused_on_cpu{kDefault}, fused_on_cuda{kDefault};

std::atomic<int>& fused_flag(Device device) {
  return device == Device::CUDA ? fused_on_cuda : fused_on_cpu;
}

// Whether the fused kernel is used on `device` for attention of q_len queries computed in
// `compute`, whose inputs need gradients or not.
bool fused_for(Device device, DType compute, int64_t q_len, bool grad) {
  const int state = fused_flag(device);
  if (state != kDefault) return state == kOn;
  if (device == Device::CPU)
    return compute == DType::Float32 && q_len <= kAttentionDecodeQueries && !grad;
  return device == Device::CUDA && (compute == DType::BFloat16 || q_len <= kAttentionDecodeQueries);
}

// Whether the fused kernel computes this call, in `compute` (q's dtype, or bfloat16 under
// autocast; see set_fused_attention in functional.h).
bool use_fused(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o,
               DType compute) {
  const bool grad = autograd::any_requires_grad({q, k, v});
  if (o.attn_weights != nullptr || !fused_for(q.device(), compute, q.size(-2), grad)) return false;
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype()) return false;
  if (q.dtype() != DType::Float32 && q.dtype() != DType::BFloat16) return false;
  if (k.device() != q.device() || v.device() != q.device()) return false;
  const int64_t d = q.size(-1);
  if (v.size(-1) != d || d < 1 || (q.device() == Device::CUDA && d > 128)) return false;
  // Up to kAttentionDecodeQueries queries (KV-cache decoding) the GPU runs its decoding
  // kernels; a few more would leave the 16-64-row query tiles of the others nearly empty and
  // their blocks few, where cuBLAS's batched products do better.
  if (q.device() == Device::CUDA && q.size(-2) > kAttentionDecodeQueries && q.size(-2) < 16)
    return false;
  // The decoding kernel takes no dropout: training with so few queries stays unfused.
  if (q.device() == Device::CUDA && q.size(-2) <= kAttentionDecodeQueries && o.training &&
      o.dropout_p > 0.0f)
    return false;
  for (int64_t i = 0; i + 2 < q.dim(); ++i)
    if (k.size(i) != q.size(i) || v.size(i) != q.size(i)) return false;
  if (q.numel() == 0 || k.size(-2) == 0) return false;
  if (o.mask.defined() && (o.mask.requires_grad() || o.mask.device() != q.device() ||
                           o.mask.dtype() != DType::Float32))
    return false;
  return !(o.training && o.dropout_p >= 1.0f);
}

// The fused path: q, k, v [..., T, d] as the kernels take them, [n, T, d] contiguous (recorded,
// so their gradients flow back through the reshapes), then the fused_attention op.
Tensor attend_fused(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  const int64_t q_len = q.size(-2), kv_len = k.size(-2), d = q.size(-1);
  const int64_t n = q.numel() / (q_len * d);
  AttentionArgs args{.n = n, .q_len = q_len, .kv_len = kv_len, .head_dim = d,
                     .scale = 1.0f / std::sqrt(static_cast<float>(d)), .causal = o.causal,
                     .query_offset = o.query_offset};
  if (o.training && o.dropout_p > 0.0f) {
    // The same counters loom::dropout would reserve for the probabilities [..., T_q, T_k].
    Generator& g = default_generator();
    args.dropout_p = o.dropout_p;
    args.seed = g.seed();
    args.offset = g.reserve(static_cast<uint64_t>(n * q_len * kv_len));
  }
  // Without gradients, K and V whose rows are whole and whose matrices lie evenly and alike
  // apart (a KV cache's window) are read in place: no copy of the cache at every step.
  const bool kv_in_place = !autograd::any_requires_grad({q, k, v}) && rows_in_place(k) &&
                           rows_in_place(v) && k.strides() == v.strides() &&
                           matrices_evenly_spaced(k, k.dim() - 3);
  // [n, T_k, d]: views of k and v in place, else contiguous copies (none when they already are)
  const Tensor k3 = (kv_in_place ? k : k.contiguous()).reshape({n, kv_len, d});
  const Tensor v3 = (kv_in_place ? v : v.contiguous()).reshape({n, kv_len, d});
  if (kv_in_place && n > 1) args.kv_stride = k3.stride(0);  // (0: contiguous)
  Tensor mask;  // a broadcast view [..., T_q, T_k]: the kernel reads it through its strides
  if (o.mask.defined()) {
    Shape scores_shape = q.shape();
    scores_shape.back() = kv_len;
    mask = o.mask.detach().expand(scores_shape);
  }
  const Tensor q3 = q.contiguous().reshape({n, q_len, d});  // [n, T_q, d]
  return fused_attention(q3, k3, v3, mask, args).reshape(q.shape());  // [..., T_q, d]
}

}  // namespace

void set_fused_attention(Device device, bool enabled) { fused_flag(device) = enabled ? kOn : kOff; }
void reset_fused_attention(Device device) { fused_flag(device) = kDefault; }
bool fused_attention_enabled(Device device) {
  return fused_for(device, DType::BFloat16, kAttentionDecodeQueries + 1, false);
}

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
  if (options.mask.defined()) {  // checked once, for the fused and the unfused path alike
    LOOM_CHECK(options.mask.dtype() == DType::Float32,
               "scaled_dot_product_attention: mask must be float32 (additive), got {}; use "
               "additive_mask() for boolean masks",
               dtype_name(options.mask.dtype()));
    // The scores [..., T_q, T_k]: q's and k's leading dims broadcast, as in their product.
    Shape scores_shape = broadcast_shapes(Shape(q.shape().begin(), q.shape().end() - 2),
                                          Shape(k.shape().begin(), k.shape().end() - 2),
                                          "scaled_dot_product_attention");
    scores_shape.insert(scores_shape.end(), {q.size(-2), k.size(-2)});
    LOOM_CHECK(broadcasts_to(options.mask.shape(), scores_shape),
               "scaled_dot_product_attention: mask of shape {} does not broadcast to the "
               "attention scores {}",
               shape_str(options.mask.shape()), shape_str(scores_shape));
  }
  // Under autocast (autograd/autocast.h) attention runs in bfloat16, as PyTorch's SDPA: the
  // casts are recorded, so float32 gradients reach float32 q, k, v.
  if (autocast::is_enabled() && q.dtype() == DType::Float32 && k.dtype() == DType::Float32 &&
      v.dtype() == DType::Float32 && use_fused(q, k, v, options, autocast::get_dtype())) {
    const DType low = autocast::get_dtype();
    return attend_fused(q.to(low), k.to(low), v.to(low), options);
  }
  if (use_fused(q, k, v, options, q.dtype())) return attend_fused(q, k, v, options);
  const int64_t q_len = q.size(-2), k_len = k.size(-2);
  // Vaswani et al. 2017, eq. 1. The scaling is the product's own (the GEMM's alpha): no pass
  // over q or the scores to apply it, forward or backward.
  const float scale = 1.0f / std::sqrt(static_cast<float>(q.size(-1)));
  const Tensor keys = for_batched_gemm(k), values = for_batched_gemm(v);
  // The gradients of q, k and v split from one projection are written side by side, as the
  // projection lies, so that the split hands them on whole instead of joining three copies.
  const GradientPlaces places = gradient_places(q, keys, values);
  // k^T is a transposed view: the GEMM reads it with a transpose flag, no copy. Under autocast
  // the product runs in bfloat16 and its float32 accumulators are kept: the mask and the softmax
  // work in float32 anyway, so rounding the scores would only cost two more passes over them.
  const std::optional<DType> scores_dtype =
      autocast::is_enabled() ? std::optional<DType>(DType::Float32) : std::nullopt;
  Tensor scores = detail::scaled_matmul(q, keys.transpose(-2, -1), scale, scores_dtype,
                                        places.scores);  // [..., T_q, T_k]

  Tensor mask = options.mask;
  // Sec. 3.2.3: "masking out (setting to -inf) all values in the input of the softmax which
  // correspond to illegal connections", keys after the query's own position. When even the
  // first query sees the last key (one decoding step; the last query only), nothing is masked.
  const bool every_key_visible = options.query_offset >= k_len - 1;
  if (options.causal && !every_key_visible) {
    const Tensor causal =
        causal_mask(q_len, k_len, options.query_offset, q.device());  // [T_q, T_k]
    mask = mask.defined() ? mask + causal : causal;  // combined before touching the scores
  }
  // -inf in the mask removes a key from the softmax. softmax(scores + mask) in one pass
  // (add_softmax): the sum is never written out whole.
  Tensor probs =
      mask.defined() ? add_softmax(scores, mask) : softmax(scores, -1);  // [..., T_q, T_k]
  if (options.training && options.dropout_p > 0.0f)
    probs = loom::dropout(probs, options.dropout_p, true);
  if (options.attn_weights != nullptr) *options.attn_weights = probs;
  return detail::scaled_matmul(probs, values, 1.0f, std::nullopt,
                               places.output);  // [..., T_q, d_v]
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
