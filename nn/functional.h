// nn::functional: the stateless forms of the layers and the losses, as torch.nn.functional.
// Every function is differentiable with respect to its float32 tensor arguments; the fused ops
// (layer_norm, cross_entropy, dropout, softmax) come from autograd/ops.h, the rest is composed
// from loom's ops, so each runs on any device.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "nn/expanding_array.h"

namespace loom::nn::functional {

// How a loss reduces its per-element values (PyTorch's reduction='none'|'mean'|'sum', and
// kl_div's 'batchmean': the sum divided by the batch size, the size of dim 0).
enum class Reduction { None, Mean, Sum, BatchMean };

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
// x [N, C, ...] ([N, C], [N, C, L], [N, C, H, W]); batch statistics over every dim but C when
// training (then running_mean/var, if given, are updated in place with `momentum` and the
// unbiased variance, as PyTorch), running statistics otherwise (Ioffe & Szegedy 2015).
// weight/bias [C] optional.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, float momentum = 0.1f,
                  float eps = 1e-5f);
// GroupNorm (Wu & He 2018): x [N, C, ...] normalised per sample over each of num_groups groups
// of channels (and the spatial dims), then weight/bias [C] (optional) per channel.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), float eps = 1e-5f);
// RMSNorm (Zhang & Sennrich 2019): x / sqrt(mean(x^2) + eps) * weight over the trailing dims
// normalized_shape (torch.nn.functional.rms_norm); weight of that shape, optional.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                float eps = 1e-6f);

// --- convolution and pooling (functional_conv.cpp; the adaptive pools functional_resample.cpp) -
// Sizes per spatial dim (stride, padding, dilation, kernel_size) take one number for every dim
// or {h, w}. Cross-correlation, as PyTorch; groups splits the channels into groups convolved
// separately (in_channels and out_channels both divisible by groups).
// x [N, C_in, H, W], weight [C_out, C_in / groups, kh, kw], bias [C_out] (optional) ->
// [N, C_out, H_out, W_out], H_out = (H + 2 padding - dilation (kh - 1) - 1) / stride + 1.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              ExpandingArray<2> stride = 1, ExpandingArray<2> padding = 0,
              ExpandingArray<2> dilation = 1, int64_t groups = 1);
// x [N, C_in, L], weight [C_out, C_in / groups, k], bias [C_out] -> [N, C_out, L_out]: conv2d
// on a height-1 image.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              int64_t stride = 1, int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
// The adjoint of conv2d in its input: x [N, C_in, H, W], weight [C_in, C_out / groups, kh, kw],
// bias [C_out] -> [N, C_out, H_out, W_out], H_out = (H - 1) stride - 2 padding +
// dilation (kh - 1) + output_padding + 1 (output_padding < stride or < dilation). Computed as
// col2im: one GEMM gives every input pixel's kernel-sized contribution, index_add sums them.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        ExpandingArray<2> stride = 1, ExpandingArray<2> padding = 0,
                        ExpandingArray<2> output_padding = 0, int64_t groups = 1,
                        ExpandingArray<2> dilation = 1);
// x [N, C, H, W] -> [N, C, H_out, W_out], maximum over each kernel_size window;
// stride 0 means stride = kernel_size (PyTorch's default); padding counts as -inf and is at
// most half the kernel.
Tensor max_pool2d(const Tensor& x, ExpandingArray<2> kernel_size, ExpandingArray<2> stride = 0,
                  ExpandingArray<2> padding = 0);
// The same shapes, the mean over each window; padding counts as 0 and the divisor is always
// kh * kw (PyTorch's count_include_pad = True, ceil_mode = False).
Tensor avg_pool2d(const Tensor& x, ExpandingArray<2> kernel_size, ExpandingArray<2> stride = 0,
                  ExpandingArray<2> padding = 0);
// x [N, C, H, W] (or [C, H, W]) -> [..., out_h, out_w]: output (i, j) is the mean of input rows
// [floor(i H / out_h), ceil((i + 1) H / out_h)) and the columns likewise (PyTorch's windows,
// which overlap when the sizes do not divide).
Tensor adaptive_avg_pool2d(const Tensor& x, ExpandingArray<2> output_size);
// x [N, C, L] (or [C, L]) -> [..., output_size], the same windows along L.
Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size);
// The sliding windows of x [N, C, H, W] as [N, C, kh*kw, H_out*W_out] (kernel offsets before
// positions), `pad_value` outside the image: im2col, with index_add (col2im) as its backward.
Tensor unfold2d(const Tensor& x, ExpandingArray<2> kernel_size, ExpandingArray<2> stride,
                ExpandingArray<2> padding, float pad_value = 0.0f, ExpandingArray<2> dilation = 1);

// --- padding and resampling (functional_resample.cpp) ----------------------------------------
// torch.nn.functional.pad: pads = {left, right} for the last dim, then {top, bottom} for the one
// before it, and so on (last dim first); negative amounts crop. mode:
//   "constant"   `value` outside (any number of dims)
//   "reflect"    mirrored without repeating the edge (pad < size): 1 2 3 -> 3 2 | 1 2 3 | 2 1
//   "replicate"  the edge repeated:                                1 2 3 -> 1 1 | 1 2 3 | 3 3
//   "circular"   wrapped around (pad <= size):                     1 2 3 -> 2 3 | 1 2 3 | 1 2
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, const std::string& mode = "constant",
           float value = 0.0f);
// torch.nn.functional.interpolate on x [N, C, L] or [N, C, H, W]. Give the output `size` (one
// per spatial dim) or `scale_factor` (then out = floor(in * scale), and the source coordinates
// use 1 / scale, as PyTorch without recompute_scale_factor). mode "nearest" (source index
// floor(dst * in / out)), "linear" (3-D) or "bilinear" (4-D); align_corners (linear modes only)
// maps the corner pixels' centres onto each other instead of their outer edges.
struct InterpolateOptions {
  std::vector<int64_t> size{};
  std::vector<double> scale_factor{};
  std::string mode = "nearest";
  bool align_corners = false;
};
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);
Tensor interpolate(const Tensor& x, const std::vector<int64_t>& size,
                   const std::string& mode = "nearest", bool align_corners = false);

// --- similarity (functional_loss.cpp) ---------------------------------------------------------
// sum(a * b) / max(||a|| ||b||, eps) over `dim` (a, b broadcast): the cosine of the angle
// between the vectors along dim, -> the broadcast shape without dim.
Tensor cosine_similarity(const Tensor& a, const Tensor& b, int64_t dim = 1, float eps = 1e-8f);
// x / max(||x||_p, eps) with the p-norm over `dim`: unit vectors along dim (same shape).
Tensor normalize(const Tensor& x, float p = 2.0f, int64_t dim = 1, float eps = 1e-12f);

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
// float32 only when decoding (the split-key decoding kernel); the CPU fuses float32 decoding
// (at most kAttentionDecodeQueries queries and no gradients: its decoding kernel reads the KV
// cache in place) and nothing else.
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
// The same with PyTorch's weight (broadcast to the losses, each loss scaled) and pos_weight
// (broadcast along the last dim, the classes: the positive term p y log sigmoid(x) weighted, to
// trade recall against precision); either may be undefined.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        const Tensor& weight, const Tensor& pos_weight = Tensor(),
                                        Reduction reduction = Reduction::Mean);
// Negative log-likelihood of log-probabilities: input [N, C] with int64 target [N], or
// [N, C, d1, ...] with target [N, d1, ...]; the loss of an element is -weight[t] input[n, t].
// Targets equal to ignore_index count for nothing; Mean divides by the sum of the weights of
// the other targets (so it is a weighted mean), as PyTorch. weight [C] optional.
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                int64_t ignore_index = -100, Reduction reduction = Reduction::Mean);
// Kullback-Leibler divergence KL(target || exp(input)) pointwise: target (log target - input),
// 0 where target is 0; input holds log-probabilities, target probabilities (log-probabilities
// with log_target). Reduction::BatchMean gives the true KL divergence per sample; Mean (the
// default, as PyTorch's) divides by every element instead.
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
              bool log_target = false);

}  // namespace loom::nn::functional
