// GPT: a decoder-only transformer language model in the layout of GPT-2 (Radford et al. 2019,
// "Language Models are Unsupervised Multitask Learners"), after nanoGPT's model.py.
//
//   ids (B, T) -> token embedding wte + learned position embedding wpe
//              -> n_layer pre-norm blocks: x + attn(ln_1(x)), then x + mlp(ln_2(x))
//              -> final LayerNorm ln_f -> logits = x @ wte^T  (B, T, vocab)
//
// Parameter names are those of Hugging Face's GPT2Model (wte, wpe, h.N.ln_1, h.N.attn.c_attn,
// h.N.attn.c_proj, h.N.ln_2, h.N.mlp.c_fc, h.N.mlp.c_proj, ln_f), so checkpoints map
// name-for-name; the only difference is that loom's Linear stores weights [out, in] where
// GPT-2's Conv1D stores them [in, out], which load_gpt2_hf transposes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace loom::models {

// ---------------------------------------------------------------------------- configuration
struct GPTConfig {
  int64_t vocab_size = 256;  // number of token ids
  int64_t context = 128;     // longest sequence (rows of the position embedding wpe)
  int64_t n_layer = 4;       // transformer blocks
  int64_t n_head = 4;        // attention heads; d_model must be a multiple of it
  int64_t d_model = 256;     // embedding width; the MLP is 4 * d_model wide
  float dropout = 0.0f;      // on embeddings, attention probabilities and residual branches

  // "gpt-mini" (byte-level: vocab 256, context 128, 4 layers, 4 heads, d_model 256 — the
  // gpt-mini of ../shared/bench/torch_ref.py), and OpenAI's GPT-2 sizes "gpt2" (124M),
  // "gpt2-medium" (350M), "gpt2-large" (774M), "gpt2-xl" (1558M). Throws for other names.
  static GPTConfig preset(const std::string& name);
  // The names preset() accepts.
  static std::vector<std::string> preset_names();

  // Throws loom::Error naming the first invalid field.
  void validate() const;
  // Parameters of a GPT built from this config, the tied LM head counted once:
  //   (vocab + context) * d  +  n_layer * (12 d^2 + 13 d)  +  2 d
  int64_t num_parameters() const;
  // "vocab_size=256, context=128, n_layer=4, n_head=4, d_model=256, dropout=0"
  std::string to_string() const;

  // As checkpoint metadata (nn::save_checkpoint), so a program rebuilds the model from the file:
  // {"model_type": "gpt", "vocab_size": "256", "context": "128", "n_layer": "4", "n_head": "4",
  //  "d_model": "256", "dropout": "0"}. from_metadata reads them back (other keys are ignored;
  // "model_type" may be absent, as in older train_gpt files); a missing or garbled key, another
  // model_type or an invalid config is a loom::Error naming the key and `source` (the file).
  std::map<std::string, std::string> to_metadata() const;
  static GPTConfig from_metadata(const std::map<std::string, std::string>& metadata,
                                 const std::string& source = "metadata");
};

// ---------------------------------------------------------------------------- KV cache
// The keys and values every attention layer has computed for the positions seen so far, so
// that generating one more token costs one position's work instead of re-running the prefix
// (the "KV cache" of autoregressive decoding, e.g. Pope et al. 2022, "Efficiently Scaling
// Transformer Inference"). Storage is allocated once for `context` positions.
class KVCache {
 public:
  KVCache(const GPTConfig& config, int64_t batch, Device device = Device::CPU);

  int64_t length() const { return length_; }  // positions filled, 0..context
  int64_t batch() const { return batch_; }
  int64_t capacity() const { return capacity_; }  // = config.context
  void clear() { length_ = 0; }

  // Layer `layer`'s keys and values, (B, nh, context, hs); positions [0, length()) are valid.
  Tensor& keys(int64_t layer) { return keys_.at(static_cast<size_t>(layer)); }
  Tensor& values(int64_t layer) { return values_.at(static_cast<size_t>(layer)); }
  // Marks `count` more positions as filled (GPT::forward calls this after every layer wrote).
  void advance(int64_t count);

 private:
  std::vector<Tensor> keys_, values_;
  int64_t length_ = 0, batch_, capacity_;
};

// ---------------------------------------------------------------------------- generation
struct GenerateOptions {
  int64_t max_new_tokens = 64;
  float temperature = 0.0f;  // 0 = greedy (argmax); else sample from softmax(logits / T)
  int64_t top_k = 0;         // > 0: sample only among the k most likely tokens
  float top_p = 1.0f;        // < 1: nucleus sampling (Holtzman et al. 2020)
  int64_t stop_token = -1;   // >= 0: stop right after generating this token (it is kept)
  bool use_cache = true;     // false re-runs the whole (cropped) context for every token
  // Called with each new token as soon as it is chosen (e.g. to print text as it appears).
  std::function<void(int64_t)> on_token;
};

// Picks the next token from one row of logits [vocab]. temperature 0 takes the argmax (the
// first one on ties, as torch.argmax). Otherwise the logits are divided by the temperature,
// cut to the top_k largest (ties at the k-th value are kept) and to the smallest set of most
// likely tokens whose probability reaches top_p (the most likely token is always kept), and
// the token is drawn by inverting the cumulative distribution at `uniform` in [0, 1).
int64_t sample_token(const std::vector<float>& logits, float temperature, int64_t top_k,
                     float top_p, float uniform);

// ---------------------------------------------------------------------------- blocks
// Masked multi-head self-attention (Vaswani et al. 2017, sec. 3.2.2-3.2.3) with the query,
// key and value projections fused into one Linear c_attn: d -> 3d, as GPT-2.
class CausalSelfAttention : public nn::Module {
 public:
  explicit CausalSelfAttention(const GPTConfig& config);
  // x (B, T, C) -> (B, T, C). mask: float 1 where attention is blocked, broadcastable to
  // (B, nh, T, S), or undefined for none. With a cache, x holds positions [past, past + T)
  // (past = cache->length()) and attends to the cached positions as well (S = past + T).
  // last_only: only the last position's output is wanted -> (B, 1, C) (keys and values are
  // still computed, and cached, for all T positions).
  Tensor forward(const Tensor& x, const Tensor& mask, KVCache* cache = nullptr, int64_t layer = 0,
                 bool last_only = false) const;

  int64_t n_head, d_model;
  float dropout;
  std::shared_ptr<nn::Linear> c_attn, c_proj;
  std::shared_ptr<nn::Dropout> attn_dropout, resid_dropout;
};

// Position-wise feed-forward network (Vaswani et al. 2017, eq. 2) with GELU (Hendrycks &
// Gimpel 2016) in its tanh approximation, as GPT-2: c_proj(gelu_tanh(c_fc(x))).
class MLP : public nn::Module {
 public:
  explicit MLP(const GPTConfig& config);
  Tensor forward(const Tensor& x) const;  // (B, T, C) -> (B, T, C)

  std::shared_ptr<nn::Linear> c_fc, c_proj;
  std::shared_ptr<nn::Dropout> dropout;
};

// GPT-2's pre-norm block (Radford et al. 2019, sec. 2.3: "Layer normalization was moved to
// the input of each sub-block"): x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class Block : public nn::Module {
 public:
  explicit Block(const GPTConfig& config);
  // x (B, T, C) -> (B, T, C), or (B, 1, C) for the last position only (see CausalSelfAttention).
  Tensor forward(const Tensor& x, const Tensor& mask, KVCache* cache = nullptr, int64_t layer = 0,
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
  Tensor forward(const Tensor& ids, KVCache& cache);
  // The final hidden states ln_f(x) (B, T, d_model), before the LM head; with last_only,
  // those of the last position (B, 1, d_model), skipping the work no other output needs.
  Tensor forward_hidden(const Tensor& ids, KVCache* cache = nullptr, bool last_only = false);
  // The tied LM head: hidden (..., d_model) -> logits (..., vocab).
  Tensor lm_head(const Tensor& hidden) const;

  // Autoregressive decoding of one sequence; returns prompt + new tokens. temperature 0 =
  // greedy. Sampling draws from loom's global generator, so manual_seed makes it repeatable.
  // Once the sequence is longer than the context, each step sees the last `context` tokens.
  std::vector<int64_t> generate(std::vector<int64_t> prompt, int64_t max_new_tokens,
                                float temperature = 0.0f, int64_t top_k = 0, float top_p = 1.0f);
  std::vector<int64_t> generate(std::vector<int64_t> prompt, const GenerateOptions& options);

  const GPTConfig& config() const { return config_; }
  // The members of h as Blocks.
  const std::vector<std::shared_ptr<Block>>& blocks() const { return blocks_; }

  std::shared_ptr<nn::Embedding> wte, wpe;
  std::shared_ptr<nn::Dropout> drop;
  std::shared_ptr<nn::ModuleList> h;
  std::shared_ptr<nn::LayerNorm> ln_f;

 private:
  // Logits [vocab] of the last position of `window` (at most context tokens), using and
  // extending `cache` when given (the cache must hold a prefix of `window`).
  std::vector<float> next_token_logits(const std::vector<int64_t>& window, KVCache* cache);
  void init_weights();

  GPTConfig config_;
  std::vector<std::shared_ptr<Block>> blocks_;  // the members of h, typed
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
