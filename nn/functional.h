// nn::functional: the stateless forms of the layers and the losses, as torch.nn.functional.
// Every function is differentiable with respect to its float32 tensor arguments; the fused ops
// (layer_norm, cross_entropy, dropout, softmax) come from autograd/ops.h, the rest is composed
// from loom's ops, so each runs on any device.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace loom::nn::functional {

// How a loss reduces its per-element values (PyTorch's reduction='none'|'mean'|'sum').
enum class Reduction { None, Mean, Sum };

// --- layers (functional.cpp, functional_norm.cpp, functional_conv.cpp) ---------------------
// x [..., in], weight [out, in], bias [out] (optional) -> x @ weight^T + bias  [..., out]
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// Normalises over the last dim; weight/bias [D] optional (Ba et al. 2016).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = 1e-5f);
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
// Vaswani et al. 2017, eq. 1: Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V.
//   q [..., T_q, d_k], k [..., T_k, d_k], v [..., T_k, d_v] (usually [B, heads, T, head_dim])
//   mask: float, broadcastable to [..., T_q, T_k], added to the scores (0 = attend,
//         -inf = blocked); undefined for none
//   dropout_p: dropout on the attention probabilities, when training
//   attn_weights: if non-null, receives the probabilities [..., T_q, T_k] (after dropout)
// -> [..., T_q, d_v]
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask = Tensor(), float dropout_p = 0.0f,
                                    bool training = false, Tensor* attn_weights = nullptr);
// The additive causal mask [size, size]: 0 on and below the diagonal, -inf above, so position
// i attends to positions <= i (PyTorch's Transformer.generate_square_subsequent_mask).
Tensor causal_mask(int64_t size, Device device = Device::CPU);
// A mask in loom's two conventions turned into the additive one: int64 masks are boolean
// (nonzero = blocked, like PyTorch's bool masks) and become 0/-inf; float masks are returned
// as they are.
Tensor additive_mask(const Tensor& mask);

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

// --- boxes (functional_boxes.cpp), as DETR's util/box_ops.py ------------------------------------
// Boxes are [..., 4]: (x0, y0, x1, y1) corners or (cx, cy, w, h) centre and size.
Tensor box_cxcywh_to_xyxy(const Tensor& boxes);
Tensor box_xyxy_to_cxcywh(const Tensor& boxes);
// Pairwise IoU and generalized IoU (Rezatofighi et al. 2019) of xyxy boxes [N, 4] and [M, 4]
// -> [N, M]. Throws if a box has x1 < x0 or y1 < y0.
Tensor box_iou(const Tensor& boxes1, const Tensor& boxes2);
Tensor generalized_box_iou(const Tensor& boxes1, const Tensor& boxes2);
// 1 - GIoU of matching boxes [N, 4] and [N, 4] (torchvision.ops.generalized_box_iou_loss).
Tensor generalized_box_iou_loss(const Tensor& boxes1, const Tensor& boxes2,
                                Reduction reduction = Reduction::Mean);

}  // namespace loom::nn::functional
