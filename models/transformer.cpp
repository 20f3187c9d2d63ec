// The encoder-decoder Transformer (Vaswani et al. 2017) in one file, in the order of the
// Annotated Transformer: configuration, attention, encoder and decoder layers, the model, and
// the pieces of incremental decoding (the decoding loops are in beam_search.cpp).
#include "models/transformer.h"

#include <cmath>
#include <limits>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/packed_weights.h"
#include "core/error.h"
#include "models/model_size.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace loom::models {

// ============================================================================ configuration

// The presets, each written once: preset() and preset_names() read this table.
std::span<const fields::Preset<TransformerConfig>> TransformerConfig::presets() {
  static const fields::Preset<TransformerConfig> table[] = {
      // the defaults are seq2seq-mini's sizes; bench/reference/models.py's Seq2Seq has no dropout
      {"seq2seq-mini", {.dropout = 0.0f}},
      // table 3, "base"; a shared 37k BPE vocabulary (sec. 5.1)
      {"transformer-base",
       {.src_vocab_size = 37000,
        .tgt_vocab_size = 37000,
        .d_model = 512,
        .n_head = 8,
        .n_encoder_layers = 6,
        .n_decoder_layers = 6,
        .d_ff = 2048,
        .dropout = 0.1f}},
  };
  return table;
}

// num_parameters()'s formula, counted in double (models/model_size.h).
static double count_parameters(const TransformerConfig& c) {
  const double d = c.d_model, f = c.d_ff, src = c.src_vocab_size, tgt = c.tgt_vocab_size;
  const double embeddings = c.share_embeddings ? src * d : (src + 2 * tgt) * d;
  // Encoder layer: q, k, v, o (4 d^2 + 4 d), two LayerNorms (4 d), the FFN (2 d f + f + d).
  const double encoder = 4 * d * d + 2 * d * f + 9 * d + f;
  // Decoder layer: two attentions (8 d^2 + 8 d), three LayerNorms (6 d), the FFN.
  const double decoder = 8 * d * d + 2 * d * f + 15 * d + f;
  return embeddings + c.n_encoder_layers * encoder + c.n_decoder_layers * decoder +
         (c.norm_first ? 4 * d : 0);
}

int64_t TransformerConfig::num_parameters() const {
  return parameter_count(count_parameters(*this));
}

void TransformerConfig::validate() const {
  fields::check_fields(*this, "TransformerConfig");
  LOOM_CHECK(d_model % n_head == 0, "TransformerConfig: d_model {} is not a multiple of n_head {}",
             d_model, n_head);
  LOOM_CHECK(d_model % 2 == 0, "TransformerConfig: d_model {} must be even (sinusoid pairs)",
             d_model);
  LOOM_CHECK(pad_id < src_vocab_size && pad_id < tgt_vocab_size,
             "TransformerConfig: pad_id {} outside the vocabularies ({}, {})", pad_id,
             src_vocab_size, tgt_vocab_size);
  LOOM_CHECK(!share_embeddings || src_vocab_size == tgt_vocab_size,
             "TransformerConfig: share_embeddings needs src_vocab_size {} == tgt_vocab_size {}",
             src_vocab_size, tgt_vocab_size);
  // The sinusoid table (max_len, d_model) is a buffer, not a parameter, but as large.
  const double table = static_cast<double>(max_len) * static_cast<double>(d_model);
  check_model_size("TransformerConfig", count_parameters(*this) + table,
                   static_cast<double>(n_encoder_layers) + static_cast<double>(n_decoder_layers),
                   to_string());
}

// ============================================================================ attention

// Sec. 3.2.2: MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q,
// K W_i^K, V W_i^V); the h projections of each kind are one d x d Linear split into heads.
Seq2SeqAttention::Seq2SeqAttention(int64_t d_model_, int64_t n_head_, float dropout)
    : d_model(d_model_), n_head(n_head_) {
  q = register_module("q", std::make_shared<nn::Linear>(d_model, d_model));
  k = register_module("k", std::make_shared<nn::Linear>(d_model, d_model));
  v = register_module("v", std::make_shared<nn::Linear>(d_model, d_model));
  o = register_module("o", std::make_shared<nn::Linear>(d_model, d_model));
  attn_drop = register_module("attn_drop", std::make_shared<nn::Dropout>(dropout));
}

Tensor Seq2SeqAttention::heads(const Tensor& x, const nn::Linear& projection) const {
  return split_heads(projection.forward(x));  // (B, T, D) -> (B, h, T, hd)
}

Tensor Seq2SeqAttention::split_heads(const Tensor& y) const {
  const int64_t B = y.size(0), T = y.size(1);
  return y.view({B, T, n_head, d_model / n_head})  // (B, T, h, hd)
      .transpose(1, 2);                            // (B, h, T, hd)
}

Tensor Seq2SeqAttention::attend(const Tensor& qh, const Tensor& kh, const Tensor& vh,
                                const Tensor& mask, bool causal, Tensor* probs) const {
  const int64_t B = qh.size(0), T = qh.size(2);
  // Eq. 1: softmax(Q K^T / sqrt(d_k) + mask) V, (B, h, T, S) scores -> (B, h, T, hd)
  const Tensor y =
      nn::functional::scaled_dot_product_attention(qh, kh, vh,
                                                   {.mask = mask,
                                                    .dropout_p = attn_drop->p,
                                                    .training = attn_drop->is_training(),
                                                    .causal = causal,
                                                    .attn_weights = probs});
  return o->forward(y.transpose(1, 2).reshape({B, T, d_model}));  // (B, T, h, hd) -> (B, T, D)
}

Tensor Seq2SeqAttention::forward(const Tensor& x, const Tensor& mem, const Tensor& mask,
                                 bool causal, Tensor* probs) const {
  return attend(heads(x, *q), heads(mem, *k), heads(mem, *v), mask, causal, probs);
}

// ============================================================================ layers

namespace {

nn::FeedForwardOptions ffn_options(float dropout) {
  // Eq. 2, FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, under the benchmark twin's names ff.0 and ff.2
  // (an nn.Sequential(Linear, ReLU, Linear)); dropout on the hidden activations as the
  // Annotated Transformer's PositionwiseFeedForward.
  return {.activation = nn::Activation::ReLU,
          .dropout = dropout,
          .linear1_name = "0",
          .linear2_name = "2"};
}

}  // namespace

EncoderLayer::EncoderLayer(const TransformerConfig& c) : norm_first(c.norm_first) {
  attn =
      register_module("attn", std::make_shared<Seq2SeqAttention>(c.d_model, c.n_head, c.dropout));
  ln1 = register_module("ln1", std::make_shared<nn::LayerNorm>(c.d_model));
  ff = register_module(
      "ff", std::make_shared<nn::FeedForward>(c.d_model, c.d_ff, ffn_options(c.dropout)));
  ln2 = register_module("ln2", std::make_shared<nn::LayerNorm>(c.d_model));
  drop = register_module("drop", std::make_shared<nn::Dropout>(c.dropout));
}

Tensor EncoderLayer::forward(const Tensor& x, const Tensor& src_mask) const {
  // Sec. 3.1 / 5.4: "the output of each sub-layer is LayerNorm(x + Sublayer(x))", with
  // dropout "to the output of each sub-layer, before it is added to the sub-layer input".
  if (norm_first) {
    const Tensor h = ln1->forward(x);
    const Tensor y = x + drop->forward(attn->forward(h, h, src_mask));  // (B, S, D)
    return y + drop->forward(ff->forward(ln2->forward(y)));
  }
  // (Each sum formed in its LayerNorm's kernel: nn::Residual.)
  const Tensor y = ln1->forward(nn::Residual(x) + drop->forward(attn->forward(x, x, src_mask)));
  return ln2->forward(nn::Residual(y) + drop->forward(ff->forward(y)));
}

DecoderLayer::DecoderLayer(const TransformerConfig& c) : norm_first(c.norm_first) {
  self_attn = register_module("self_attn",
                              std::make_shared<Seq2SeqAttention>(c.d_model, c.n_head, c.dropout));
  ln1 = register_module("ln1", std::make_shared<nn::LayerNorm>(c.d_model));
  cross_attn = register_module("cross_attn",
                               std::make_shared<Seq2SeqAttention>(c.d_model, c.n_head, c.dropout));
  ln2 = register_module("ln2", std::make_shared<nn::LayerNorm>(c.d_model));
  ff = register_module(
      "ff", std::make_shared<nn::FeedForward>(c.d_model, c.d_ff, ffn_options(c.dropout)));
  ln3 = register_module("ln3", std::make_shared<nn::LayerNorm>(c.d_model));
  drop = register_module("drop", std::make_shared<nn::Dropout>(c.dropout));
}

Tensor DecoderLayer::residual(const Tensor& x, const Tensor& y, const nn::LayerNorm& ln) const {
  // Post-norm's sum formed in the LayerNorm's kernel (nn::Residual).
  return norm_first ? x + drop->forward(y) : ln.forward(nn::Residual(x) + drop->forward(y));
}

Tensor DecoderLayer::feed_forward(const Tensor& x) const {
  return residual(x, ff->forward(norm_first ? ln3->forward(x) : x), *ln3);
}

Tensor DecoderLayer::forward(const Tensor& x, const Tensor& memory, const Tensor& tgt_mask,
                             const Tensor& src_mask, Tensor* cross_probs) const {
  // Sec. 3.2.3: masked self-attention ("prevent leftward information flow"), then queries from
  // the decoder over the encoder's keys and values, then the FFN.
  const Tensor h1 = norm_first ? ln1->forward(x) : x;
  const Tensor x1 = residual(x, self_attn->forward(h1, h1, tgt_mask, /*causal=*/true), *ln1);
  const Tensor h2 = norm_first ? ln2->forward(x1) : x1;
  const Tensor x2 =
      residual(x1, cross_attn->forward(h2, memory, src_mask, false, cross_probs), *ln2);
  return feed_forward(x2);  // (B, T, D)
}

Tensor DecoderLayer::step(const Tensor& x, const DecoderLayerCache& cache) const {
  // The newest position attends to every cached one and itself: no causal mask needed.
  const Tensor h1 = norm_first ? ln1->forward(x) : x;  // (R, 1, D)
  // q, k, v by one product with the stacked weights (R, 1, 3D), split into three (R, 1, D)
  // views; k and v, halves of one tensor, are appended to the cache with one copy.
  const std::vector<Tensor> qkv =
      nn::functional::linear(h1, cache.qkv_weight, cache.qkv_bias).chunk(3, -1);
  const auto [keys, values] = cache.self_attention.append(
      self_attn->split_heads(qkv[1]), self_attn->split_heads(qkv[2]));  // (R, h, t+1, hd)
  const Tensor x1 = residual(
      x, self_attn->attend(self_attn->split_heads(qkv[0]), keys, values, Tensor(), false), *ln1);
  // A sentence's R / B rows (its beams) are that many queries against its one memory.
  const int64_t R = x.size(0), B = cache.cross_keys.size(0), D = x.size(2);
  const Tensor h2 = (norm_first ? ln2->forward(x1) : x1).reshape({B, R / B, D});
  const Tensor cross = cross_attn->attend(cross_attn->heads(h2, *cross_attn->q), cache.cross_keys,
                                          cache.cross_values, cache.src_mask, false);
  const Tensor x2 = residual(x1, cross.view({R, 1, D}), *ln2);  // (B, R/B, D) -> (R, 1, D)
  return feed_forward(x2);  // (R, 1, D)
}

// ============================================================================ model

Transformer::Transformer(const TransformerConfig& config) : config_(config) {
  config.validate();
  const int64_t d = config.d_model;
  emb = register_module("emb", std::make_shared<nn::Embedding>(config.src_vocab_size, d));
  if (!config.share_embeddings) {
    tgt_emb = register_module("tgt_emb", std::make_shared<nn::Embedding>(config.tgt_vocab_size, d));
    out = register_module("out", std::make_shared<nn::Linear>(d, config.tgt_vocab_size, false));
  }
  pos =
      register_module("pos", std::make_shared<nn::SinusoidalPositionalEncoding>(d, config.max_len));
  ignore_on_load("pe");  // the twin's sinusoid buffer: derived here from the config
  emb_drop = register_module("emb_drop", std::make_shared<nn::Dropout>(config.dropout));
  enc = register_module("enc", std::make_shared<nn::ModuleList<EncoderLayer>>());
  for (int64_t i = 0; i < config.n_encoder_layers; ++i)
    enc->push_back(std::make_shared<EncoderLayer>(config));
  dec = register_module("dec", std::make_shared<nn::ModuleList<DecoderLayer>>());
  for (int64_t i = 0; i < config.n_decoder_layers; ++i)
    dec->push_back(std::make_shared<DecoderLayer>(config));
  if (config.norm_first) {  // pre-norm leaves the stacks' outputs unnormalised
    enc_norm = register_module("enc_norm", std::make_shared<nn::LayerNorm>(d));
    dec_norm = register_module("dec_norm", std::make_shared<nn::LayerNorm>(d));
  }
  init_weights();
}

void Transformer::init_weights() {
  // The benchmark twin / the Annotated Transformer: xavier_uniform_ on every parameter with more
  // than one dimension, zeros elsewhere, but LayerNorm gains 1.
  for (auto& [name, p] : named_parameters()) {
    if (p.dim() > 1) {
      nn::init::xavier_uniform_(p);
    } else {
      const bool gain = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
      gain ? nn::init::ones_(p) : nn::init::zeros_(p);  // 1-d weights are LayerNorm gains
    }
  }
}

void Transformer::check_ids(const Tensor& ids, const char* what) const {
  LOOM_CHECK(ids.dtype() == DType::Int64 && ids.dim() == 2 && ids.size(0) > 0 && ids.size(1) > 0,
             "Transformer: {} must be int64 [B, L] with B, L > 0, got {} {}", what,
             dtype_name(ids.dtype()), shape_str(ids.shape()));
  LOOM_CHECK(ids.size(1) <= config_.max_len, "Transformer: {} {} is longer than max_len {}", what,
             shape_str(ids.shape()), config_.max_len);
}

Tensor Transformer::key_padding_mask(const Tensor& ids) const {
  // (B, L) -> additive (B, 1, 1, L): -inf on padding keys, for every head and query.
  const Tensor blocked = eq(ids, static_cast<float>(config_.pad_id));  // 1 at padding
  return nn::functional::padding_mask(masked_fill(zeros(ids.shape(), ids.device()), blocked,
                                                  -std::numeric_limits<float>::infinity()));
}

Tensor Transformer::embed(const Tensor& ids, const nn::Embedding& table, int64_t start) const {
  // Sec. 3.4: "In the embedding layers, we multiply those weights by sqrt(d_model)"; sec. 3.5
  // adds the sinusoids of positions start .. start + L - 1.
  const Tensor x = table.forward(ids) * std::sqrt(static_cast<float>(config_.d_model));  // (B,L,D)
  return emb_drop->forward(pos->forward(x, start));
}

Tensor Transformer::encode(const Tensor& src) {
  check_ids(src, "src");
  const Tensor src_mask = key_padding_mask(src);
  Tensor x = embed(src, *emb);  // (B, S, D)
  for (const auto& layer : *enc) x = layer->forward(x, src_mask);
  return enc_norm ? enc_norm->forward(x) : x;  // memory (B, S, D)
}

Tensor Transformer::decode(const Tensor& tgt, const Tensor& memory, const Tensor& src_mask,
                           std::vector<Tensor>* cross_attentions) {
  check_ids(tgt, "tgt");
  LOOM_CHECK(
      memory.dim() == 3 && memory.size(0) == tgt.size(0) && memory.size(2) == config_.d_model,
      "Transformer::decode: memory {} does not fit tgt {} and d_model {}",
      shape_str(memory.shape()), shape_str(tgt.shape()), config_.d_model);
  const Tensor tgt_mask = key_padding_mask(tgt);     // with the causal mask in each layer
  Tensor x = embed(tgt, tgt_emb ? *tgt_emb : *emb);  // (B, T, D)
  if (cross_attentions) cross_attentions->clear();
  for (const auto& layer : *dec) {
    Tensor probs;
    x = layer->forward(x, memory, tgt_mask, src_mask, cross_attentions ? &probs : nullptr);
    if (cross_attentions) cross_attentions->push_back(probs);
  }
  return dec_norm ? dec_norm->forward(x) : x;  // (B, T, D)
}

Tensor Transformer::generator(const Tensor& hidden) const {
  // Sec. 3.4: "we share the same weight matrix between the two embedding layers and the
  // pre-softmax linear transformation": logits = x E^T, (..., D) @ (D, V) -> (..., V).
  return out ? out->forward(hidden) : nn::functional::linear(hidden, emb->weight, Tensor());
}

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt) {
  return forward(src, tgt, nullptr);
}

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt,
                            std::vector<Tensor>* cross_attentions) {
  check_ids(src, "src");
  check_ids(tgt, "tgt");
  LOOM_CHECK(src.size(0) == tgt.size(0),
             "Transformer::forward: src {} and tgt {} batch sizes differ", shape_str(src.shape()),
             shape_str(tgt.shape()));
  const Tensor memory = encode(src);                                               // (B, S, D)
  return generator(decode(tgt, memory, key_padding_mask(src), cross_attentions));  // (B, T, V)
}

// ============================================================================ incremental decoding

void DecoderCache::reorder(const std::vector<int64_t>& rows) {
  LOOM_CHECK(static_cast<int64_t>(rows.size()) == this->rows(),
             "DecoderCache::reorder: {} rows given for a cache of {}", rows.size(), this->rows());
  bool same = true;  // every beam continues itself: nothing moves
  for (size_t i = 0; i < rows.size(); ++i) same = same && rows[i] == static_cast<int64_t>(i);
  if (same) return;
  // Only the host's steps write this cache: the filled positions are all that move.
  self_attention.reorder(
      tensor_i64(rows, {static_cast<int64_t>(rows.size())}).to(src_mask.device()),
      self_attention.length());
}

DecoderLayerCache DecoderCache::layer(int64_t l) const {
  const auto i = static_cast<size_t>(l);
  LOOM_CHECK(l >= 0 && i < cross_keys.size(), "DecoderCache: layer {} outside [0, {})", l,
             cross_keys.size());
  return {.self_attention = self_attention.layer(l),
          .qkv_weight = self_qkv_weight[i],
          .qkv_bias = self_qkv_bias[i],
          .cross_keys = cross_keys[i],
          .cross_values = cross_values[i],
          .src_mask = src_mask};
}

DecoderCache Transformer::start_decoding(const Tensor& src, int64_t capacity, int64_t repeat) {
  LOOM_CHECK(capacity > 0 && capacity <= config_.max_len && repeat > 0,
             "Transformer::start_decoding: capacity {} must be in [1, max_len {}], repeat {} > 0",
             capacity, config_.max_len, repeat);
  NoGradGuard no_grad;
  const Tensor memory = encode(src);  // (B, S, D)
  const int64_t R = src.size(0) * repeat, h = config_.n_head, hd = config_.d_model / h;
  DecoderCache cache{.self_attention = nn::KVCache(dec->size(), R, h, capacity, hd, src.device()),
                     .self_qkv_weight = {},
                     .self_qkv_bias = {},
                     .cross_keys = {},
                     .cross_values = {},
                     .src_mask = key_padding_mask(src)};  // (B, 1, 1, S)
  for (const auto& layer : *dec) {
    const auto& sa = *layer->self_attn;
    cache.self_qkv_weight.push_back(cat({sa.q->weight, sa.k->weight, sa.v->weight}, 0));
    PackedWeightsGuard::keep(cache.self_qkv_weight.back());  // in a decode's guard: packed once
    cache.self_qkv_bias.push_back(cat({sa.q->bias, sa.k->bias, sa.v->bias}, 0));
    // The memory's keys and values, contiguous once, so no step copies them for its products.
    const auto& ca = *layer->cross_attn;
    cache.cross_keys.push_back(ca.heads(memory, *ca.k).contiguous());    // (B, h, S, hd)
    cache.cross_values.push_back(ca.heads(memory, *ca.v).contiguous());  // (B, h, S, hd)
  }
  return cache;
}

Tensor Transformer::decode_step(const Tensor& tokens, DecoderCache& cache) {
  LOOM_CHECK(tokens.dtype() == DType::Int64 && tokens.dim() == 1 && tokens.size(0) == cache.rows(),
             "Transformer::decode_step: tokens must be int64 [{}] (one per cache row), got {} {}",
             cache.rows(), dtype_name(tokens.dtype()), shape_str(tokens.shape()));
  const nn::KVCache& self_attention = cache.self_attention;
  LOOM_CHECK(self_attention.length() < self_attention.capacity(),
             "Transformer::decode_step: the cache holds {} of {} positions, no room for another",
             self_attention.length(), self_attention.capacity());
  NoGradGuard no_grad;
  const int64_t R = tokens.size(0);
  Tensor x = embed(tokens.view({R, 1}), tgt_emb ? *tgt_emb : *emb, cache.length);  // (R, 1, D)
  for (int64_t l = 0; l < dec->size(); ++l) x = (*dec)[l]->step(x, cache.layer(l));
  cache.self_attention.advance(1);
  cache.length = cache.self_attention.length();
  if (dec_norm) x = dec_norm->forward(x);
  return generator(x).view({R, -1});  // (R, V)
}

}  // namespace loom::models
