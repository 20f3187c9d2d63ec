// Fused scaled-dot-product attention (FlashAttention-2, Dao 2023), forward and backward,
// described by AttentionArgs. The checks, the public methods and the CPU reference (written for
// clarity) are in attention.cpp, the CPU's fast float32 kernels in attention_tiled.cpp, the
// CUDA kernels (tiled, on tensor cores for bfloat16) in attention.cu.
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "core/tensor.h"

namespace loom {

struct AttentionArgs {
  // Fused scaled-dot-product attention (FlashAttention-2, Dao 2023) over n = batch * heads
  // independent problems: out[b] = dropout(softmax(scale * q[b] k[b]^T + mask[b] + causal)) v[b].
  // q/out [n, q_len, head_dim], k/v [n, kv_len, head_dim] (d_k = d_v = head_dim).
  int64_t n = 0, q_len = 0, kv_len = 0, head_dim = 0;
  // Elements from one problem's K (and V) matrix to the next's. 0 (the caller's usual value):
  // kv_len * head_dim, contiguous K and V. The forward also reads K and V whose rows are
  // contiguous and whose matrices lie kv_stride >= kv_len * head_dim apart (a KV cache's window
  // in place), as k's and v's strides must then say; the backward takes them contiguous.
  int64_t kv_stride = 0;
  float scale = 1.0f;
  bool causal = false;       // key j is visible to query i iff j <= query_offset + i
  int64_t query_offset = 0;  // as AttentionOptions::query_offset
  // Dropout on the probabilities: element (b, i, j) is kept iff
  // philox_uniform(offset + (b * q_len + i) * kv_len + j, seed) >= dropout_p (core/rng.h), the
  // same draw as loom::dropout on the [n, q_len, kv_len] probabilities; kept ones are scaled by
  // 1 / (1 - dropout_p). 0 = no dropout.
  float dropout_p = 0.0f;
  uint64_t seed = 0, offset = 0;
};

// Problems of at most this many queries and no dropout (KV-cache decoding: one query per step)
// run on CUDA in the split-key decoding kernel (attention.cu), which
// scaled_dot_product_attention then takes by default in float32 too.
constexpr int64_t kAttentionDecodeQueries = 8;

// Where a fused attention kernel reads mask element (b, i, j): at
// batch_offset(b) + i * row_stride + j * col_stride from the mask's data pointer, b split into
// its coordinates over the mask's leading dims (size-1 dims dropped; stride 0 = broadcast).
struct AttentionMaskLayout {
  static constexpr int kMaxLead = 6;
  int nlead = 0;
  int64_t lead_size[kMaxLead] = {}, lead_stride[kMaxLead] = {};
  int64_t row_stride = 0, col_stride = 0;

  LOOM_HOST_DEVICE int64_t batch_offset(int64_t b) const {
    int64_t offset = 0;
    for (int d = nlead - 1; d >= 0; --d) {
      offset += (b % lead_size[d]) * lead_stride[d];
      b /= lead_size[d];
    }
    return offset;
  }
};
// The layout of a mask that passed attention_forward's checks (an empty one if undefined).
AttentionMaskLayout attention_mask_layout(const Tensor& mask);

// Backend::attention_forward's arguments, after its checks: n, q_len, kv_len, head_dim > 0,
// args.kv_stride filled in.
using AttentionForwardKernel = void(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, const AttentionArgs& args, Tensor& out,
                                    Tensor& lse);
// Backend::attention_backward's, the same way (args.kv_stride = kv_len * head_dim).
using AttentionBackwardKernel = void(const Tensor& dout, const Tensor& q, const Tensor& k,
                                     const Tensor& v, const Tensor& mask, const Tensor& out,
                                     const Tensor& lse, const AttentionArgs& args, Tensor& dq,
                                     Tensor& dk, Tensor& dv);

namespace cpu {
// What Backend runs on the CPU: for float32 problems whose scores fit a few MB the tiled kernels
// (the forward of a few queries: the decoding kernel), the reference otherwise (bfloat16, long
// sequences).
AttentionForwardKernel attention_forward;
AttentionBackwardKernel attention_backward;
// The reference (attention.cpp): one query row at a time, written to be read.
AttentionForwardKernel attention_forward_reference;
AttentionBackwardKernel attention_backward_reference;
// The same arithmetic as a few small matrix products per problem (attention_tiled.cpp);
// float32 only.
AttentionForwardKernel attention_forward_tiled;
AttentionBackwardKernel attention_backward_tiled;
// The forward for at most kAttentionDecodeQueries queries a problem (attention_tiled.cpp), K
// and V read where they lie, row by row; float32 only.
AttentionForwardKernel attention_forward_decoding;
}  // namespace cpu

namespace cuda {
AttentionForwardKernel attention_forward;
AttentionBackwardKernel attention_backward;
}  // namespace cuda

}  // namespace loom
