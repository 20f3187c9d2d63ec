// GPT: a decoder-only transformer language model in the layout of GPT-2 (Radford et al. 2019,
// "Language Models are Unsupervised Multitask Learners"), after nanoGPT's model.py.
//
//   ids (B, T) -> token embedding wte + learned position embedding wpe
//              -> n_layer pre-norm blocks: x + attn(ln_1(x)), then x + mlp(ln_2(x))
//              -> final LayerNorm ln_f -> logits = x @ wte^T  (B, T, vocab)
//
//   attn = causal multi-head self-attention, q, k and v split from one projection c_attn, through
//          nn::causal_attention (nn/kv_cache.h: with a KV cache, over the cached positions too);
//   mlp  = nn::FeedForward (Vaswani et al. 2017, eq. 2) with GPT-2's names and GELU (tanh).
//   Generation (sample_token, GenerateOptions, the decoding loop): generation/sampling.h.
//
// Parameter names are those of Hugging Face's GPT2Model (wte, wpe, h.N.ln_1, h.N.attn.c_attn,
// h.N.attn.c_proj, h.N.ln_2, h.N.mlp.c_fc, h.N.mlp.c_proj, ln_f), so checkpoints map
// name-for-name; the only difference is that loom's Linear stores weights [out, in] where
// GPT-2's Conv1D stores them [in, out], which load_gpt2_hf transposes.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/fields.h"
#include "core/tensor.h"
#include "generation/sampling.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/feed_forward.h"
#include "nn/kv_cache.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace loom::models {

// The decoding every generating model shares (generation/sampling.h), under its old names.
using generation::check_generate_options, generation::generate_tokens,
    generation::GenerateOptions, generation::NextTokenLogits, generation::sample_next,
    generation::sample_token;

// ---------------------------------------------------------------------------- configuration
// GPTConfig's fields (core/fields.h): type, name, default, check, meaning.
#define LOOM_GPT_CONFIG_FIELDS(F)                                                             \
  F(int64_t, vocab_size, 256, positive, "number of token ids")                                \
  F(int64_t, context, 128, positive, "longest sequence (rows of the position embedding wpe)") \
  F(int64_t, n_layer, 4, positive, "transformer blocks")                                      \
  F(int64_t, n_head, 4, positive, "attention heads; d_model must be a multiple of it")        \
  F(int64_t, d_model, 256, positive, "embedding width; the MLP is 4 * d_model wide")          \
  F(float, dropout, 0.0f, probability,                                                        \
    "on embeddings, attention probabilities and residual branches")

struct GPTConfig {
  // The fields, and from them (core/fields.h): visit_fields, ==, to_string(),
  // to_metadata(), from_metadata(metadata, source), and preset(name) and preset_names()
  // over the table gpt.cpp defines as presets().
  LOOM_MODEL_CONFIG(GPTConfig, LOOM_GPT_CONFIG_FIELDS, "gpt")

  // Presets: "gpt-mini" (byte-level: vocab 256, context 128, 4 layers, 4 heads, d_model 256 — the
  // gpt-mini of bench/reference/models.py), and OpenAI's GPT-2 sizes "gpt2" (124M), "gpt2-medium"
  // (350M), "gpt2-large" (774M), "gpt2-xl" (1558M). Throws for other names.
  // to_string() reads "vocab_size=256, context=128, n_layer=4, n_head=4, d_model=256, dropout=0"
  // to_metadata() is the checkpoint metadata (nn::save_checkpoint), so a program rebuilds the model
  // from the file: {"model_type": "gpt", "vocab_size": "256", "context": "128", "n_layer": "4",
  // "n_head": "4", "d_model": "256", "dropout": "0"}. from_metadata reads them back (other keys are
  // ignored; "model_type" may be absent, as in older train_gpt files); a missing or garbled key,
  // another model_type or an invalid config is a loom::Error naming the key and `source` (the
  // file).

  // Throws loom::Error naming the first invalid field (each field's check, then d_model a
  // multiple of n_head, then loom's size budget).
  void validate() const;
  // Parameters of a GPT built from this config, the tied LM head counted once:
  //   (vocab + context) * d  +  n_layer * (12 d^2 + 13 d)  +  2 d
  int64_t num_parameters() const;
};

// ---------------------------------------------------------------------------- KV cache
// GPT's KV cache: an nn::KVCache (nn/kv_cache.h) sized from the config, n_layer layers of n_head
// heads of d_model / n_head, for `context` positions.
class KVCache : public nn::KVCache {
 public:
  KVCache(const GPTConfig& config, int64_t batch, Device device = Device::CPU);
};
using LayerCache = nn::LayerCache;  // one layer's part of it

// ---------------------------------------------------------------------------- blocks
// Masked multi-head self-attention (Vaswani et al. 2017, sec. 3.2.2-3.2.3) with the query,
// key and value projections fused into one Linear c_attn: d -> 3d, as GPT-2.
class CausalSelfAttention : public nn::Module {
 public:
  explicit CausalSelfAttention(const GPTConfig& config);
  // x (B, T, C) -> (B, T, C); each position attends to itself and the positions before it.
  // With a cache, x holds positions [past, past + T) (past = cache.length) and attends to the
  // cached positions as well; its keys and values are written to the cache.
  // last_only: only the last position's output is wanted -> (B, 1, C) (keys and values are
  // still computed, and cached, for all T positions).
  Tensor forward(const Tensor& x, const nn::LayerCache& cache = {}, bool last_only = false) const;

  int64_t n_head, d_model;
  std::shared_ptr<nn::Linear> c_attn, c_proj;
  std::shared_ptr<nn::Dropout> attn_dropout, resid_dropout;
};

// GPT-2's MLP: the position-wise feed-forward network (Vaswani et al. 2017, eq. 2), 4 d wide,
// with GELU (Hendrycks & Gimpel 2016) in its tanh approximation and dropout on its output:
// dropout(c_proj(gelu_tanh(c_fc(x)))). An nn::FeedForward with Hugging Face's names.
class MLP : public nn::FeedForward {
 public:
  explicit MLP(const GPTConfig& config);

  // linear1 and linear2 under GPT-2's names (the same layers).
  std::shared_ptr<nn::Linear> c_fc, c_proj;
};

// GPT-2's pre-norm block (Radford et al. 2019, sec. 2.3: "Layer normalization was moved to
// the input of each sub-block"): x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class Block : public nn::Module {
 public:
  explicit Block(const GPTConfig& config);
  // x (B, T, C) -> (B, T, C), or (B, 1, C) for the last position only (see CausalSelfAttention).
  // x is the residual stream: each sum is formed by the LayerNorm that reads it next, in its
  // kernel (nn::Residual); .tensor() gives the output's value.
  nn::Residual forward(nn::Residual x, const nn::LayerCache& cache = {},
                       bool last_only = false) const;

  std::shared_ptr<nn::LayerNorm> ln_1, ln_2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<MLP> mlp;
};

// ---------------------------------------------------------------------------- model
class GPT : public nn::Module {
 public:
  // Weights ~ N(0, 0.02), biases 0, LayerNorm (1, 0); the residual output projections
  // (attn.c_proj, mlp.c_proj) ~ N(0, 0.02 / sqrt(2 n_layer)) (Radford et al. 2019, sec. 2.3).
  explicit GPT(const GPTConfig& config);

  // int64 ids (B, T), T <= context -> logits (B, T, vocab).
  Tensor forward(const Tensor& ids);
  // The next T positions after the cache's: ids (B, T) at positions [past, past + T), with
  // past + T <= context -> logits (B, T, vocab); appends their keys and values to the cache.
  Tensor forward(const Tensor& ids, nn::KVCache& cache);
  // The final hidden states ln_f(x) (B, T, d_model), before the LM head; with last_only,
  // those of the last position (B, 1, d_model), skipping the work no other output needs.
  Tensor forward_hidden(const Tensor& ids, nn::KVCache* cache = nullptr, bool last_only = false);
  // The tied LM head: hidden (..., d_model) -> logits (..., vocab).
  Tensor lm_head(const Tensor& hidden) const;

  // Autoregressive decoding of one sequence (models::generate_tokens with this model's next-
  // token logits); returns prompt + new tokens. temperature 0 = greedy. Sampling draws from
  // loom's global generator, so manual_seed makes it repeatable. Once the sequence is longer
  // than the context, each step sees the last `context` tokens. On a GPU the tokens stay on
  // the device (sampled by sample_next, which draws the same numbers as the CPU loop) and come
  // to the host every 16 tokens: on_token is called in bursts, and with a stop_token up to 15
  // positions after it may have been computed and dropped (the tokens returned, and the
  // global generator's state afterwards, are those of the CPU loop).
  std::vector<int64_t> generate(std::vector<int64_t> prompt, int64_t max_new_tokens,
                                float temperature = 0.0f, int64_t top_k = 0, float top_p = 1.0f);
  std::vector<int64_t> generate(std::vector<int64_t> prompt, const GenerateOptions& options);

  const GPTConfig& config() const { return config_; }
  // Parameters kept out of weight decay beside the one-dimensional ones (timm's name; see
  // train/weight_decay.h): none, nanoGPT's rule.
  std::set<std::string> no_weight_decay() const { return {}; }
  // The blocks, h.
  const nn::ModuleList<Block>& blocks() const { return *h; }

  std::shared_ptr<nn::Embedding> wte, wpe;
  std::shared_ptr<nn::Dropout> drop;
  std::shared_ptr<nn::ModuleList<Block>> h;
  std::shared_ptr<nn::LayerNorm> ln_f;

 private:
  // Logits [vocab] of the last position of `window` (at most context tokens), using and
  // extending `cache` when given (the cache must hold a prefix of `window`).
  std::vector<float> next_token_logits(const std::vector<int64_t>& window, nn::KVCache* cache);
  // generate's loop for a model on a GPU: no host round-trip per token (see generate).
  std::vector<int64_t> generate_on_device(std::vector<int64_t> prompt,
                                          const GenerateOptions& options);
  // One decoding step whose positions live in device memory, so that a CUDA graph can record
  // it once and replay it for every token: the token seq[0, position] (position (1) int64)
  // -> ln_f of its hidden state (1, 1, C), its keys and values written to `cache` at position.
  Tensor decode_step_hidden(const Tensor& seq, const Tensor& position, const Tensor& mask,
                            const nn::KVCache& cache);
  // The blocks then ln_f over the embedded tokens, tok_emb (B, T, C) + pos_emb (T, C), with
  // the embedding dropout, through `cache` (layer l for block l) when given.
  Tensor blocks_and_ln_f(const Tensor& tok_emb, const Tensor& pos_emb, const nn::KVCache* cache,
                         bool last_only);
  void init_weights();

  GPTConfig config_;
};

// ---------------------------------------------------------------------------- GPT-2 weights
// Loads a GPT-2 checkpoint in Hugging Face's safetensors layout (model.safetensors of
// "gpt2", "gpt2-medium", ...): names wte.weight, wpe.weight, h.N.ln_1.weight, ...,
// h.N.attn.c_attn.weight, with or without a "transformer." prefix. Conv1D weights (c_attn,
// c_proj, c_fc), stored [in, out], are transposed into loom's Linear layout [out, in]. The
// buffers h.N.attn.bias / h.N.attn.masked_bias are ignored, and lm_head.weight, if present,
// must equal wte.weight (the head is tied). Throws loom::Error naming the file and tensor for a
// missing or unexpected tensor or a shape that does not match `model`'s config.
void load_gpt2_hf(GPT& model, const std::string& path);

}  // namespace loom::models
