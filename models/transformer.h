// Transformer: the encoder-decoder of Vaswani et al. 2017, "Attention Is All You Need", laid out
// to read beside the Annotated Transformer (Rush 2018, updated 2022).
//
//   src (B, S) -> emb(src) * sqrt(d_model) + PE(0..S)          (sec. 3.4, 3.5)   (B, S, D)
//              -> n_encoder_layers EncoderLayers:                (sec. 3.1)
//                   x = LN(x + SelfAttn(x, pad mask of src))
//                   x = LN(x + FF(x))                             = memory (B, S, D)
//   tgt (B, T) -> emb(tgt) * sqrt(d_model) + PE(0..T)                              (B, T, D)
//              -> n_decoder_layers DecoderLayers:
//                   x = LN(x + SelfAttn(x, causal mask + pad mask of tgt))
//                   x = LN(x + CrossAttn(x, memory, pad mask of src))
//                   x = LN(x + FF(x))
//              -> x @ emb^T (the tied output projection, sec. 3.4)  = logits (B, T, V)
//
//   Post-norm as the paper by default; norm_first moves each LayerNorm to the sub-layer's input,
//   x = x + Sublayer(LN(x)), and adds a final LayerNorm after each stack (the Annotated
//   Transformer's layout). Dropout (config.dropout) sits where the paper puts it (sec. 5.4): on
//   the sum of embeddings and positions, on each sub-layer's output before the residual add,
//   and on the attention probabilities (as the Annotated Transformer).
//
// Parameter names are those of the Seq2Seq of bench/reference/models.py, so its state_dict
// (saved as safetensors) loads with nn::load:
//   emb.weight                          shared source / target / output matrix [V, D]
//   enc.N.attn.{q,k,v,o}.{weight,bias}  enc.N.ln1, enc.N.ff.0, enc.N.ff.2, enc.N.ln2
//   dec.N.self_attn.{q,k,v,o}, dec.N.ln1, dec.N.cross_attn.{q,k,v,o}, dec.N.ln2,
//   dec.N.ff.0, dec.N.ff.2, dec.N.ln3
// The reference's "pe" buffer (the sinusoid table) is derived from the config and ignored on
// load. Unshared embeddings add tgt_emb.weight [V_tgt, D] and out.weight [V_tgt, D] (no bias);
// norm_first adds enc_norm and dec_norm.
//
// The attention sub-layers are written here rather than taken from nn::TransformerEncoderLayer /
// nn::MultiheadAttention because those keep PyTorch's fused in_proj_weight, and the reference's
// four separate q, k, v, o projections must load name for name; the arithmetic is the same one
// attention function, nn::functional::scaled_dot_product_attention.
//
// Decoding (greedy, beam search, the incremental decoder's loop) lives in models/beam_search.h;
// this file provides the per-step pieces it needs: the encoder once, then one token per step
// with cached self-attention keys/values (nn::KVCache, as GPT's) and the cross-attention
// keys/values of the memory projected once (DecoderCache).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/fields.h"
#include "core/tensor.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/feed_forward.h"
#include "nn/kv_cache.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/positional_encoding.h"

namespace loom::models {

// ---------------------------------------------------------------------------- configuration
// TransformerConfig's fields (core/fields.h): type, name, default, check, meaning.
#define LOOM_TRANSFORMER_CONFIG_FIELDS(F)                                                     \
  F(int64_t, src_vocab_size, 1000, positive, "source token ids")                              \
  F(int64_t, tgt_vocab_size, 1000, positive, "target token ids")                              \
  F(int64_t, d_model, 256, positive, "model width D, a multiple of n_head (and even)")        \
  F(int64_t, n_head, 4, positive, "attention heads")                                          \
  F(int64_t, n_encoder_layers, 3, positive, "encoder layers")                                 \
  F(int64_t, n_decoder_layers, 3, positive, "decoder layers")                                 \
  F(int64_t, d_ff, 1024, positive, "hidden width of the feed-forward sub-layers")             \
  F(int64_t, max_len, 512, positive, "longest source or target (rows of the sinusoid table)") \
  F(int64_t, pad_id, 0, non_negative, "padding id: masked wherever it is a key")              \
  F(float, dropout, 0.1f, probability, "P_drop of sec. 5.4")                                  \
  F(bool, norm_first, false, any, "pre-norm instead of the paper's post-norm")                \
  F(bool, share_embeddings, true, any,                                                        \
    "one matrix for source and target embeddings and the output projection (Vaswani et al. "  \
    "2017, 3.4; the seq2seq-mini of bench/reference/models.py); needs src_vocab_size == "     \
    "tgt_vocab_size")

struct TransformerConfig {
  // The fields, and from them (core/fields.h): visit_fields, ==, to_string(),
  // to_metadata(), from_metadata(metadata, source), and preset(name) and preset_names()
  // over the table transformer.cpp defines as presets().
  LOOM_MODEL_CONFIG(TransformerConfig, LOOM_TRANSFORMER_CONFIG_FIELDS, "transformer")

  // Presets: "seq2seq-mini": the Seq2Seq of bench/reference/models.py (vocab 1000 shared, D 256, 4
  // heads, 3 + 3 layers, FF 1024, max_len 512, no dropout: 5,785,600 parameters);
  // "transformer-base": the paper's base model (table 3: D 512, 8 heads, 6 + 6 layers, FF 2048,
  // dropout 0.1) on a 37,000-token shared vocabulary, 63,082,496 parameters. Throws for other
  // names.
  // to_metadata() is the checkpoint metadata {"model_type": "transformer", "d_model": "256", ...};
  // from_metadata reads it back, a missing/garbled key or invalid config a loom::Error naming key
  // and source.

  // Throws loom::Error naming the first invalid field (each field's check, then d_model even
  // and a multiple of n_head, pad_id inside both vocabularies, share_embeddings' equal
  // vocabularies, loom's size budget).
  void validate() const;
  // Parameters of a Transformer of this config (shared matrices counted once):
  //   embeddings V D (shared) or (V_src + 2 V_tgt) D
  //   + n_enc (4 D^2 + 2 D F + 9 D + F) + n_dec (8 D^2 + 2 D F + 15 D + F) (+ 4 D pre-norm)
  int64_t num_parameters() const;
};

// ---------------------------------------------------------------------------- blocks
// Multi-head attention (Vaswani et al. 2017, sec. 3.2.2) with four separate projections q, k,
// v, o, as models.py's MultiHeadAttention (and the Annotated Transformer's 4 linears).
class Seq2SeqAttention : public nn::Module {
 public:
  Seq2SeqAttention(int64_t d_model, int64_t n_head, float dropout);
  // x (B, T, D) attends to mem (B, S, D) (x itself for self-attention) -> (B, T, D).
  // mask: additive, broadcastable to (B, heads, T, S); causal: query i sees keys 0..i.
  // probs, when given, receives the attention probabilities (B, heads, T, S).
  Tensor forward(const Tensor& x, const Tensor& mem, const Tensor& mask, bool causal = false,
                 Tensor* probs = nullptr) const;
  // x (B, T, D) through one of q, k, v -> heads (B, heads, T, D / heads).
  Tensor heads(const Tensor& x, const nn::Linear& projection) const;
  // A projection y (B, T, D) viewed as heads (B, heads, T, D / heads): no copy.
  Tensor split_heads(const Tensor& y) const;
  // Scaled dot-product attention of heads q (B, h, T, hd) over k, v (B, h, S, hd), then o:
  // -> (B, T, D).
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal,
                Tensor* probs = nullptr) const;

  int64_t d_model, n_head;
  std::shared_ptr<nn::Linear> q, k, v, o;
  std::shared_ptr<nn::Dropout> attn_drop;  // on the probabilities (no parameters)
};

// Encoder layer (sec. 3.1): self-attention, then the position-wise FFN (eq. 2), each wrapped
// in a residual connection and LayerNorm: LN(x + Dropout(Sublayer(x))).
class EncoderLayer : public nn::Module {
 public:
  EncoderLayer(const TransformerConfig& config);
  // x (B, S, D), src_mask additive (B, 1, 1, S) -> (B, S, D)
  Tensor forward(const Tensor& x, const Tensor& src_mask) const;

  bool norm_first;
  std::shared_ptr<Seq2SeqAttention> attn;
  std::shared_ptr<nn::LayerNorm> ln1, ln2;
  std::shared_ptr<nn::FeedForward> ff;  // ff.0 -> ReLU -> ff.2
  std::shared_ptr<nn::Dropout> drop;    // residual dropout
};

struct DecoderLayerCache;  // below: what DecoderLayer::step keeps between steps

// Decoder layer (sec. 3.1): masked self-attention, attention over the encoder output, FFN.
class DecoderLayer : public nn::Module {
 public:
  DecoderLayer(const TransformerConfig& config);
  // x (B, T, D), memory (B, S, D); tgt_mask additive (B, 1, 1, T) key padding or undefined
  // (the causal mask is always applied); src_mask (B, 1, 1, S) -> (B, T, D).
  // cross_probs, when given, receives the cross-attention probabilities (B, heads, T, S).
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& tgt_mask,
                 const Tensor& src_mask, Tensor* cross_probs = nullptr) const;
  // One step of incremental decoding: x (R, 1, D) is the newest position (cache.length); its
  // self-attention keys/values are appended to the cache, for B sentences of R / B rows each
  // (sentence-major); see DecoderLayerCache. -> (R, 1, D)
  Tensor step(const Tensor& x, const DecoderLayerCache& cache) const;

  bool norm_first;
  std::shared_ptr<Seq2SeqAttention> self_attn, cross_attn;
  std::shared_ptr<nn::LayerNorm> ln1, ln2, ln3;
  std::shared_ptr<nn::FeedForward> ff;
  std::shared_ptr<nn::Dropout> drop;

 private:
  // x = LN(x + Dropout(y)) (post-norm) or x + Dropout(y) (pre-norm; y saw LN(x)).
  Tensor residual(const Tensor& x, const Tensor& y, const nn::LayerNorm& ln) const;
  Tensor feed_forward(const Tensor& x) const;
};

// ---------------------------------------------------------------------------- decoder cache
// What incremental decoding keeps between steps for R = B * beams rows (sentences, or
// sentence-major beams: row r belongs to sentence r / beams): per decoder layer the
// self-attention keys and values of the tokens so far (R, h, capacity, hd), and the
// cross-attention keys and values of the memory, projected once per sentence (B, h, S, hd): a
// sentence's beams attend to it as that many queries of one problem.
//
// Each layer's self-attention projections q, k, v are also stacked into one (3D, D) weight, so
// that a step computes them with one product instead of three (the products of a decoding step
// have only R rows, and each costs a call and a start of the threads). Like the memory's keys
// and values, they are made once per decoding from the weights as they are then.
struct DecoderCache {
  nn::KVCache self_attention;                    // layer l's keys and values (R, h, capacity, hd)
  std::vector<Tensor> self_qkv_weight;           // per layer, W^Q; W^K; W^V stacked (3D, D)
  std::vector<Tensor> self_qkv_bias;             // per layer, their biases (3D)
  std::vector<Tensor> cross_keys, cross_values;  // per layer, (B, h, S, hd)
  Tensor src_mask;                               // additive (B, 1, 1, S)
  int64_t length = 0;  // target positions decoded so far (= self_attention.length())
  int64_t rows() const { return self_attention.batch(); }
  // Layer l's part, as its DecoderLayer::step reads it.
  DecoderLayerCache layer(int64_t l) const;
  // Row i continues from row rows[i] (beam search): the self-attention caches are gathered.
  // rows[i] must belong to the same sentence as row i (beams are sentence-major), so the
  // cross-attention keys/values and the source mask stay as they are.
  void reorder(const std::vector<int64_t>& rows);
};

// One decoder layer's part of a DecoderCache: handles to its tensors (cheap to copy).
struct DecoderLayerCache {
  nn::LayerCache self_attention;    // keys and values so far (R, h, capacity, hd)
  Tensor qkv_weight, qkv_bias;      // the self-attention's stacked projections (3D, D), (3D)
  Tensor cross_keys, cross_values;  // the memory's projections (B, h, S, hd)
  Tensor src_mask;                  // the memory's padding, additive (B, 1, 1, S)
};

// ---------------------------------------------------------------------------- model
class Transformer : public nn::Module {
 public:
  // models.py's initialisation (the Annotated Transformer's): Xavier-uniform for every
  // matrix, embeddings included, biases 0, LayerNorm (1, 0).
  explicit Transformer(const TransformerConfig& config);

  // src [B, S], tgt [B, T] int64 (pad_id = padding, masked as keys) -> logits [B, T, tgt_vocab]
  Tensor forward(const Tensor& src, const Tensor& tgt);
  // The same, also handing back every decoder layer's cross-attention probabilities
  // (B, heads, T, S), for attention maps.
  Tensor forward(const Tensor& src, const Tensor& tgt, std::vector<Tensor>* cross_attentions);

  // The pieces of forward: the encoder, src (B, S) -> memory (B, S, D);
  Tensor encode(const Tensor& src);
  // the decoder, tgt (B, T) with memory and src's padding mask -> hidden (B, T, D);
  Tensor decode(const Tensor& tgt, const Tensor& memory, const Tensor& src_mask,
                std::vector<Tensor>* cross_attentions = nullptr);
  // the output projection, hidden (..., D) -> logits (..., tgt_vocab).
  Tensor generator(const Tensor& hidden) const;
  // The additive key padding mask of ids (B, L): (B, 1, 1, L), -inf where ids == pad_id.
  Tensor key_padding_mask(const Tensor& ids) const;

  // Incremental decoding (no gradients): encodes src (B, S) and prepares a cache for
  // `repeat` rows per sentence (beams, sentence-major) and up to `capacity` target tokens.
  DecoderCache start_decoding(const Tensor& src, int64_t capacity, int64_t repeat = 1);
  // The next position for every row: tokens (R) int64 at position cache.length -> logits
  // (R, tgt_vocab); appends to the cache. Equals forward()'s last position on the same prefix.
  Tensor decode_step(const Tensor& tokens, DecoderCache& cache);

  // beam 1 = greedy; stops at eos_id or max_len; length_penalty alpha as in GNMT (0 = off).
  // Returns the generated tokens without bos_id and eos_id. (models/beam_search.h)
  std::vector<int64_t> translate(const std::vector<int64_t>& src, int64_t bos_id, int64_t eos_id,
                                 int64_t max_len, int64_t beam = 1, float length_penalty = 0.0f);
  // Many sentences decoded together in one batch (same rules per sentence); on the CPU with
  // several threads and enough rows, in one group of sentences per thread (beam_search.cpp).
  std::vector<std::vector<int64_t>> translate_batch(const std::vector<std::vector<int64_t>>& srcs,
                                                    int64_t bos_id, int64_t eos_id, int64_t max_len,
                                                    int64_t beam = 1, float length_penalty = 0.0f);

  const TransformerConfig& config() const { return config_; }
  // Parameters kept out of weight decay beside the one-dimensional ones (timm's name; see
  // train/weight_decay.h): none (the paper's Adam decays nothing at all).
  std::set<std::string> no_weight_decay() const { return {}; }
  const nn::ModuleList<EncoderLayer>& encoder_layers() const { return *enc; }
  const nn::ModuleList<DecoderLayer>& decoder_layers() const { return *dec; }

  std::shared_ptr<nn::Embedding> emb;      // source (and, shared, target and output)
  std::shared_ptr<nn::Embedding> tgt_emb;  // only when !share_embeddings
  std::shared_ptr<nn::Linear> out;         // only when !share_embeddings (no bias)
  std::shared_ptr<nn::SinusoidalPositionalEncoding> pos;
  std::shared_ptr<nn::Dropout> emb_drop;
  std::shared_ptr<nn::ModuleList<EncoderLayer>> enc;
  std::shared_ptr<nn::ModuleList<DecoderLayer>> dec;
  std::shared_ptr<nn::LayerNorm> enc_norm, dec_norm;  // only when norm_first

 private:
  // ids (B, L) starting at position `start` -> emb * sqrt(D) + PE, dropped out.
  Tensor embed(const Tensor& ids, const nn::Embedding& table, int64_t start = 0) const;
  // ids int64 [B, L], 0 < L <= max_len (each id is range-checked by the embedding lookup).
  void check_ids(const Tensor& ids, const char* what) const;
  void init_weights();

  TransformerConfig config_;
};

}  // namespace loom::models
