// nn::functional: the stateless forms of the layers and the losses, as torch.nn.functional.
// Every function is differentiable with respect to its float32 tensor arguments; the fused ops
// (layer_norm, cross_entropy, dropout, softmax) come from autograd/ops.h, the rest is composed
// from loom's ops, so each runs on any device.
#pragma once

#include <cstdint>
#include <utility>

#include "core/tensor.h"

namespace loom::nn::functional {

// How a loss reduces its per-element values (PyTorch's reduction='none'|'mean'|'sum').
enum class Reduction { None, Mean, Sum };

// --- layers (functional.cpp, functional_norm.cpp, functional_conv.cpp) ---------------------
// x [..., in], weight [out, in], bias [out] (optional) -> x @ weight^T + bias  [..., out]
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// Normalises over the last dim; weight/bias [D] optional (Ba et al. 2016).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = 1e-5f);
// {h, layer_norm(h, weight, bias)} with h = x + residual, added and normalised in one pass: a
// pre-norm block's residual add and the LayerNorm that follows (autograd/ops.h).
std::pair<Tensor, Tensor> add_layer_norm(const Tensor& x, const Tensor& residual,
                                         const Tensor& weight, const Tensor& bias,
                                         float eps = 1e-5f);
// Inverted dropout: active only when training; survivors scaled by 1/(1-p).
Tensor dropout(const Tensor& x, float p, bool training);
// x [N, C, H, W]; batch statistics over (N, H, W) when training (then running_mean/var, if
// given, are updated in place with `momentum` and the unbiased variance, as PyTorch), running
// statistics otherwise (Ioffe & Szegedy 2015). weight/bias [C] optional.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, float momentum = 0.1f,
                  float eps = 1e-5f);
// x [N, C_in, H, W], weight [C_out, C_in, k, k], bias [C_out] -> [N, C_out, H_out, W_out],
// H_out = (H + 2 padding - k) / stride + 1 (cross-correlation, as PyTorch).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              int64_t stride = 1, int64_t padding = 0);
// x [N, C, H, W] -> [N, C, H_out, W_out], maximum over each kernel_size^2 window;
// stride 0 means stride = kernel_size (PyTorch's default); padding counts as -inf.
Tensor max_pool2d(const Tensor& x, int64_t kernel_size, int64_t stride = 0, int64_t padding = 0);
// The sliding windows of x [N, C, H, W] as [N, C, k*k, H_out*W_out] (kernel offsets before
// positions), `pad_value` outside the image: im2col, with index_add (col2im) as its backward.
Tensor unfold2d(const Tensor& x, int64_t kernel_size, int64_t stride, int64_t padding,
                float pad_value = 0.0f);

// --- attention (functional_attention.cpp) -----------------------------------------------------
// Every attention layer in loom (MultiheadAttention, the transformer layers, GPT, and the models
// built on them) attends through scaled_dot_product_attention, with ONE mask convention:
//
//   a mask is float32 and additive: it is added to the scores, 0 = attend, -inf = blocked
//   (other values bias a score, e.g. a relative position bias), and it broadcasts to the
//   scores [..., T_q, T_k].
//
// Masks that arrive in another form are converted once, by the helpers below: boolean masks
// (int64, nonzero = blocked, like PyTorch's bool masks) by additive_mask, key padding by
// padding_mask, causal structure by causal_mask or simply by the `causal` option. (BERT's
// attention_mask has the opposite polarity, 1 = token: flip it into the int64 boolean form,
// nonzero = padding, before padding_mask. A float 0/1 mask is not boolean: floats are additive.)

// The options of scaled_dot_product_attention, in the order of PyTorch's
// F.scaled_dot_product_attention(attn_mask, dropout_p, is_causal); with C++20 designated
// initializers a call reads like its keyword arguments:
//   scaled_dot_product_attention(q, k, v, {.causal = true, .query_offset = past});
struct AttentionOptions {
  Tensor mask{};           // additive float, broadcastable to [..., T_q, T_k]; undefined = none
  float dropout_p = 0.0f;  // dropout on the attention probabilities, only when training
  bool training = false;
  // Causal attention (PyTorch's is_causal): query i attends to keys 0..query_offset + i.
  // query_offset is the position of the first query among the keys: with a KV cache holding
  // `past` positions, the T_q new queries are positions [past, past + T_q) of the T_k = past +
  // T_q keys, so query_offset = past. 0 (the default) aligns the first query with the first key,
  // as PyTorch's is_causal. Combines with `mask` (both apply).
  bool causal = false;
  int64_t query_offset = 0;
  Tensor* attn_weights = nullptr;  // if non-null, receives the probabilities [..., T_q, T_k]
                                   // (after dropout), as MultiheadAttention's need_weights
};

// Vaswani et al. 2017, eq. 1: Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V.
//   q [..., T_q, d_k], k [..., T_k, d_k], v [..., T_k, d_v] (usually [B, heads, T, head_dim];
//   leading dims equal) -> [..., T_q, d_v]
// A query row whose every key is blocked gets NaN, as in PyTorch.
//
// The fast paths live here, so every model gets them (and a fused kernel replacing this body
// serves every model at once):
//   * q is scaled by 1/sqrt(d_k) before the product (T_q*d_k multiplications, not T_q*T_k);
//   * k and v whose heads cannot be walked with one stride (heads split out of a [B, T, E]
//     projection) are made contiguous once, so every product over (batch, head) pairs, forward
//     and backward, is one strided-batched GEMM; views that can (a KV cache's) are not copied;
//   * causal attention where every query sees every key (one decoding step, or only the last
//     query of a sequence) builds no mask at all.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options);
// The same with positional arguments (mask, dropout_p, training, attn_weights), as before the
// options existed.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask = Tensor(), float dropout_p = 0.0f,
                                    bool training = false, Tensor* attn_weights = nullptr);

// The fused kernel (FlashAttention-2, Backend::attention_forward/backward): used by
// scaled_dot_product_attention when it is enabled for the device and the call allows it (no
// attn_weights requested, q/k/v of one dtype with equal leading dims and d_k = d_v, on the GPU
// head_dim <= 128 and either at least 16 queries or at most kAttentionDecodeQueries = 8
// (KV-cache decoding, without dropout), a mask that needs no gradient, dropout_p < 1). It
// computes the same values without materialising the [..., T_q, T_k] scores; dropout draws the
// same Philox numbers, so the same seed gives the same result. Default, by measurement
// (functional_attention.cpp): on the GPU bfloat16 attention (autocast's too) is fused, and
// float32 only when decoding (the split-key decoding kernel); the CPU is not fused.
// set_fused_attention(device, true / false) fuses every dtype the kernel takes / none.
// fused_attention_enabled(device): whether bfloat16 attention on `device` is fused.
void set_fused_attention(Device device, bool enabled);
void reset_fused_attention(Device device);  // back to the default, after set_fused_attention
bool fused_attention_enabled(Device device);

// The additive causal mask [T_q, T_k]: 0 where key j <= query_offset + i, -inf above, so each
// query attends to its own position and earlier ones (see AttentionOptions::query_offset).
// causal_mask(size) is the square [size, size] one, PyTorch's
// Transformer.generate_square_subsequent_mask.
Tensor causal_mask(int64_t size, Device device = Device::CPU);
Tensor causal_mask(int64_t q_len, int64_t k_len, int64_t query_offset = 0,
                   Device device = Device::CPU);
// A boolean mask turned additive: int64, nonzero = blocked (PyTorch's bool True) -> 0/-inf of
// the same shape. A float32 mask is already additive and is returned as it is (a bfloat16 one
// as float32).
Tensor additive_mask(const Tensor& mask);
// A key padding mask [B, T_k] (int64 nonzero = padding, or float additive, like PyTorch's
// key_padding_mask) -> the additive mask [B, 1, 1, T_k], which blocks the padded keys of each
// sequence for every head and query of scores [B, heads, T_q, T_k].
Tensor padding_mask(const Tensor& key_padding_mask);

// --- losses (functional_loss.cpp) ---------------------------------------------------------------
// Applies a reduction to per-element losses: as they are, their mean, or their sum.
Tensor reduce(const Tensor& losses, Reduction reduction);
// Softmax cross-entropy, fused and numerically stable. logits [N, C] with int64 target [N], or
// logits [B, T, C] with target [B, T] (flattened). Targets equal to ignore_index are skipped;
// the mean runs over the others. label_smoothing mixes the one-hot target with the uniform
// distribution (Szegedy et al. 2016).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     float label_smoothing = 0.0f);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// Huber-like: 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (Girshick 2015).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      Reduction reduction = Reduction::Mean, float beta = 1.0f);
// -[y log sigmoid(x) + (1 - y) log sigmoid(-x)], stable for any x; target float in [0, 1].
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction = Reduction::Mean);

}  // namespace loom::nn::functional
