// What a benchmark step achieves: its FLOPs, counted from the model's config and the batch's
// shapes (not measured), and the machine's limit they are measured against, an sgemm probe.
//
// The count is the one bench/reference/bench.py --flops makes at PyTorch's dispatcher: the
// matrix products and convolutions of one step (aten mm, addmm, bmm, baddbmm, convolution and
// their backward), 2 FLOPs per multiply-add. Embeddings, norms, softmax, activations, losses
// and the optimizer are not products and are not counted. In a training step each product's
// backward is two more products of the same size, one per operand that needs a gradient: a
// Linear's weight always, its input unless it is data (images; the gradient of the first
// product of a model on token embeddings is counted, as the embedding table needs it). So a
// training step is 3x its forward's products, a little less for layers on the images.
#pragma once

#include <algorithm>
#include <cstdint>

#include "bench_util.h"
#include "loom.h"

namespace loom::bench {

// The products of one step, added up as a model's forward makes them.
class FlopCount {
 public:
  // training: each product's backward is counted too.
  explicit FlopCount(bool training) : training_(training) {}

  // x (rows, in) @ W^T (in, out), a Linear. `input_grad`: whether x needs a gradient.
  FlopCount& linear(int64_t rows, int64_t in, int64_t out, bool input_grad = true) {
    return product(2.0 * f(rows) * f(in) * f(out), input_grad ? 2 : 1);
  }
  // Multi-head attention's two batched products over `batch` sequences, `width` = heads x
  // head size: the scores Q K^T (q_len x kv_len) and their weighted sum of V. Masked scores
  // are computed (and counted) like the others; both operands of both products get gradients.
  FlopCount& attention(int64_t batch, int64_t q_len, int64_t kv_len, int64_t width) {
    return product(2 * 2.0 * f(batch) * f(q_len) * f(kv_len) * f(width), 2);
  }
  // A convolution of `c_in` channels into `c_out` at `out_pixels` output positions per image,
  // with a kernel of `kernel_pixels`: 2 n c_out out_pixels c_in kernel_pixels.
  FlopCount& conv(int64_t n, int64_t c_in, int64_t c_out, int64_t out_pixels,
                  int64_t kernel_pixels, bool input_grad = true) {
    return product(2.0 * f(n) * f(c_out) * f(out_pixels) * f(c_in) * f(kernel_pixels),
                   input_grad ? 2 : 1);
  }
  double total() const { return total_; }

 private:
  static double f(int64_t v) { return static_cast<double>(v); }
  FlopCount& product(double forward, int gradients) {
    total_ += forward * (1 + (training_ ? gradients : 0));
    return *this;
  }
  bool training_;
  double total_ = 0;
};

// The position-wise feed-forward network's two Linears on `rows` tokens: d -> hidden -> d.
inline void feed_forward(FlopCount& count, int64_t rows, int64_t d, int64_t hidden) {
  count.linear(rows, d, hidden).linear(rows, hidden, d);
}

// One self-attention block with a separate Q, K, V and output projection (or their fused QKV
// Linear, the same products): `batch` sequences of `len` tokens.
inline void self_attention(FlopCount& count, int64_t batch, int64_t len, int64_t d) {
  count.linear(batch * len, d, 3 * d).attention(batch, len, len, d).linear(batch * len, d, d);
}

// gpt-mini / gpt2's training step: batch x seq tokens, the tied LM head on every position.
inline double gpt_training_flops(const models::GPTConfig& c, int64_t batch, int64_t seq) {
  FlopCount count(true);
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    self_attention(count, batch, seq, c.d_model);
    feed_forward(count, batch * seq, c.d_model, 4 * c.d_model);
  }
  return count.linear(batch * seq, c.d_model, c.vocab_size).total();
}

// One forward of the GPT over `fresh` new tokens whose keys reach back `keys` positions (the
// cached ones and the fresh), as GPT::generate runs it: only the last position's logits are
// needed, so the last block projects Q, K and V for every fresh token (the cache keeps K and
// V) but attends, projects and runs its MLP for the last one only (GPT::forward_hidden's
// last_only).
inline void gpt_next_token(FlopCount& count, const models::GPTConfig& c, int64_t fresh,
                           int64_t keys) {
  const int64_t d = c.d_model;
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    const int64_t rows = layer + 1 < c.n_layer ? fresh : 1;
    count.linear(fresh, d, 3 * d).attention(1, rows, keys, d).linear(rows, d, d);
    feed_forward(count, rows, d, 4 * d);
  }
  count.linear(1, d, c.vocab_size);
}

// gpt-mini-generate: `new_tokens` greedy tokens after a prompt of `prompt` tokens, batch 1,
// with or without the KV cache. The model sees the newest `context` tokens; once the window
// slides every position changes and the cache starts over (GPT::generate), so those steps
// re-run the whole window either way.
inline double gpt_generate_flops(const models::GPTConfig& c, int64_t prompt, int64_t new_tokens,
                                 bool kv_cache) {
  FlopCount count(false);
  int64_t cached = 0;
  for (int64_t i = 0; i < new_tokens; ++i) {
    const int64_t length = prompt + i, window = std::min(length, c.context);
    if (!kv_cache || length > c.context) cached = 0;
    gpt_next_token(count, c, window - cached, window);
    cached = window;
  }
  return count.total();
}

// vit-fmnist's training step: the patch embedding (a Linear on the pixels of each patch: no
// input gradient), the class token and the patches through the blocks, the head on the class
// token.
inline double vit_training_flops(const models::ViTConfig& c, int64_t batch) {
  const int64_t patches = c.num_patches(), tokens = patches + 1;
  FlopCount count(true);
  count.linear(batch * patches, c.in_channels * c.patch_size * c.patch_size, c.d_model, false);
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    self_attention(count, batch, tokens, c.d_model);
    feed_forward(count, batch * tokens, c.d_model, c.d_ff);
  }
  return count.linear(batch, c.d_model, c.num_classes).total();
}

// swin-fmnist's training step: the patch embedding (a stride-patch convolution on the images),
// each stage's window attention over (resolution / window)^2 windows of window^2 tokens
// (shifted or not: the same products), the patch merging between stages (4C -> 2C), the head
// on the mean token.
inline double swin_training_flops(const models::SwinConfig& c, int64_t batch) {
  FlopCount count(true);
  const int64_t patch_pixels = c.patch_size * c.patch_size;
  count.conv(batch, c.in_channels, c.embed_dim, c.resolution(0) * c.resolution(0), patch_pixels,
             false);
  int64_t dim = c.embed_dim;
  for (size_t stage = 0; stage < c.depths.size(); ++stage) {
    const auto s = static_cast<int64_t>(stage);
    const int64_t res = c.resolution(s), window = c.stage_window(s);
    const int64_t tokens = batch * res * res, windows = tokens / (window * window);
    const auto hidden = static_cast<int64_t>(static_cast<float>(dim) * c.mlp_ratio);
    for (int64_t block = 0; block < c.depths[stage]; ++block) {
      self_attention(count, windows, window * window, dim);
      feed_forward(count, tokens, dim, hidden);
    }
    if (stage + 1 < c.depths.size()) {
      count.linear(tokens / 4, 4 * dim, 2 * dim);  // PatchMerging's reduction
      dim *= 2;
    }
  }
  return count.linear(batch, dim, c.num_classes).total();
}

// The encoder-decoder Transformer's encoder over batch x src_len tokens.
inline void transformer_encoder(FlopCount& count, const models::TransformerConfig& c,
                                int64_t batch, int64_t src_len) {
  for (int64_t layer = 0; layer < c.n_encoder_layers; ++layer) {
    self_attention(count, batch, src_len, c.d_model);
    feed_forward(count, batch * src_len, c.d_model, c.d_ff);
  }
}

// seq2seq-mini's training step: the encoder on the sources, the decoder (masked self-attention,
// cross-attention to the memory, feed-forward) on the target prefix, the tied output
// projection on every target position.
inline double seq2seq_training_flops(const models::TransformerConfig& c, int64_t batch,
                                     int64_t src_len, int64_t tgt_len) {
  FlopCount count(true);
  const int64_t d = c.d_model, targets = batch * tgt_len;
  transformer_encoder(count, c, batch, src_len);
  for (int64_t layer = 0; layer < c.n_decoder_layers; ++layer) {
    self_attention(count, batch, tgt_len, d);
    count.linear(targets, d, d)                // cross-attention's Q
        .linear(batch * src_len, d, 2 * d)     // its K and V of the memory
        .attention(batch, tgt_len, src_len, d)
        .linear(targets, d, d);                // its output projection
    feed_forward(count, targets, d, c.d_ff);
  }
  return count.linear(targets, d, c.tgt_vocab_size).total();
}

// seq2seq-mini-translate: `new_tokens` tokens decoded for `rows` = sentences x beam rows with
// the KV cache: the encoder once over the sentences, each decoder layer's cross-attention K and
// V of the memory once (shared by a sentence's beams), then per token one position through
// the decoder and the output projection. Greedy is beam 1.
inline double seq2seq_decode_flops(const models::TransformerConfig& c, int64_t sentences,
                                   int64_t src_len, int64_t new_tokens, int64_t beam) {
  FlopCount count(false);
  const int64_t d = c.d_model, rows = sentences * beam;
  transformer_encoder(count, c, sentences, src_len);
  for (int64_t layer = 0; layer < c.n_decoder_layers; ++layer)
    count.linear(sentences * src_len, d, 2 * d);
  for (int64_t t = 0; t < new_tokens; ++t) {
    for (int64_t layer = 0; layer < c.n_decoder_layers; ++layer) {
      count.linear(rows, d, 3 * d).attention(rows, 1, t + 1, d).linear(rows, d, d);
      count.linear(rows, d, d).attention(rows, 1, src_len, d).linear(rows, d, d);
      feed_forward(count, rows, d, c.d_ff);
    }
    count.linear(rows, d, c.tgt_vocab_size);
  }
  return count.total();
}

// bert-mini's pre-training step: the encoder, the MLM head (transform + tied decoder) on every
// position (models::Bert::forward, as Hugging Face's BertForPreTraining), the pooler and the
// NSP classifier on the [CLS] token.
inline double bert_training_flops(const models::BertConfig& c, int64_t batch, int64_t seq) {
  FlopCount count(true);
  const int64_t tokens = batch * seq, h = c.hidden;
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    self_attention(count, batch, seq, h);
    feed_forward(count, tokens, h, c.intermediate);
  }
  count.linear(tokens, h, h).linear(tokens, h, c.vocab_size);  // MLM transform and decoder
  return count.linear(batch, h, h).linear(batch, h, 2).total();  // pooler, NSP
}

// detr-fmnist's training step on batch x 1 x size x size scenes: the small backbone (3x3
// stride-2 convolutions, the first on the images: no input gradient), input_proj (1x1), the
// encoder over the feature map's tokens, the decoder over the queries (its first
// self-attention's values are the zero target: no gradient), and the class and box heads on
// every decoder layer's output (the auxiliary losses).
inline double detr_training_flops(const models::DETRConfig& c, int64_t batch, int64_t size) {
  LOOM_CHECK(c.backbone == "small", "detr_training_flops: counts the small backbone, not '{}'",
             c.backbone);
  FlopCount count(true);
  int64_t channels = c.in_channels, side = size;
  for (int64_t out : c.small_channels) {
    side = (side + 1) / 2;  // stride 2, padding 1
    count.conv(batch, channels, out, side * side, 9, channels != c.in_channels);
    channels = out;
  }
  const int64_t d = c.hidden, memory = side * side, queries = c.num_queries;
  count.conv(batch, channels, d, memory, 1);  // input_proj
  for (int64_t layer = 0; layer < c.n_encoder_layers; ++layer) {
    self_attention(count, batch, memory, d);
    feed_forward(count, batch * memory, d, c.d_ff);
  }
  const int64_t targets = batch * queries;
  for (int64_t layer = 0; layer < c.n_decoder_layers; ++layer) {
    count.linear(targets, d, 2 * d).linear(targets, d, d, layer > 0);  // Q, K; V of the target
    count.attention(batch, queries, queries, d).linear(targets, d, d);
    count.linear(targets, d, d).linear(batch * memory, d, 2 * d);      // cross-attention
    count.attention(batch, queries, memory, d).linear(targets, d, d);
    feed_forward(count, targets, d, c.d_ff);
  }
  const int64_t outputs = c.n_decoder_layers * targets;
  count.linear(outputs, d, c.num_classes + 1);                          // class_embed
  return count.linear(outputs, d, d).linear(outputs, d, d).linear(outputs, d, 4).total();
}

// The machine's limit, measured in this process before the case: the GFLOP/s of the fastest of
// 20 float32 1024 x 1024 x 1024 products (bench/ops sgemm's), after 3 untimed ones, by loom's
// matmul and by OpenBLAS's cblas_sgemm, whichever is faster: on some CPUs one is, on others the
// other (AMD EPYC: loom's, 2026-12-01; Intel Sapphire Rapids: OpenBLAS's, 280-290 against
// 230-240, 2026-12-02). The fastest, not the median: a limit is what the machine can do, and the
// probe's first products in a fresh process (thread pool, clock speed) can be slow enough to
// move a median of a short run.
inline double sgemm_gflops(int reps = 20) {
  constexpr int64_t n = 1024;
  manual_seed(0);
  const Tensor a = randn({n, n}), b = randn({n, n});
  Tensor c = Tensor::empty({n, n});
  const Timing loom_time = time_steps([&] { matmul(a, b); }, reps, 3);
  const Timing blas_time = time_steps([&] { blas_matmul(a, b, c); }, reps, 3);
  return 2.0 * n * n * n / std::min(loom_time.min_s, blas_time.min_s) / 1e9;
}

}  // namespace loom::bench
