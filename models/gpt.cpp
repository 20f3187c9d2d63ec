// GPT-2 (Radford et al. 2019) in the order of nanoGPT's model.py: configuration and presets, the
// KV cache, the blocks (attention, MLP, Block), the model, and the loader for Hugging Face GPT-2
// checkpoints. Generation (GPT's side of generation/sampling.h's loop, and its GPU decoding with
// recorded steps) is in models/gpt_generate.cpp.
#include "models/gpt.h"

#include <cmath>
#include <map>

#include "autograd/ops.h"
#include "core/error.h"
#include "models/model_size.h"
#include "io/checkpoint.h"
#include "nn/functional.h"
#include "nn/init.h"
#include "io/safetensors.h"

namespace loom::models {

// ============================================================================ configuration

// The presets, each written once: preset() and preset_names() read this table.
std::span<const fields::Preset<GPTConfig>> GPTConfig::presets() {
  // {vocab_size, context, n_layer, n_head, d_model}
  static const fields::Preset<GPTConfig> table[] = {
      // gpt-mini: the benchmark's byte-level GPT (bench/reference/models.py).
      {"gpt-mini", {256, 128, 4, 4, 256}},
      {"gpt2", {50257, 1024, 12, 12, 768}},  // 124M (Radford et al. 2019, table 2)
      {"gpt2-medium", {50257, 1024, 24, 16, 1024}},  // 350M
      {"gpt2-large", {50257, 1024, 36, 20, 1280}},   // 774M
      {"gpt2-xl", {50257, 1024, 48, 25, 1600}},      // 1558M
  };
  return table;
}

// num_parameters()'s formula, counted in double (models/model_size.h).
static double count_parameters(const GPTConfig& c) {
  const double d = c.d_model, vocab = c.vocab_size, context = c.context;
  // Per block: ln_1 + ln_2 (4d), c_attn (3d^2 + 3d), attn.c_proj (d^2 + d),
  // mlp.c_fc (4d^2 + 4d), mlp.c_proj (4d^2 + d).
  const double block = 12 * d * d + 13 * d;
  return (vocab + context) * d + c.n_layer * block + 2 * d;  // + ln_f
}

int64_t GPTConfig::num_parameters() const { return parameter_count(count_parameters(*this)); }

void GPTConfig::validate() const {
  fields::check_fields(*this, "GPTConfig");
  LOOM_CHECK(d_model % n_head == 0, "GPTConfig: d_model {} is not a multiple of n_head {}", d_model,
             n_head);
  check_model_size("GPTConfig", count_parameters(*this), n_layer, to_string());
}

// ============================================================================ KV cache

KVCache::KVCache(const GPTConfig& config, int64_t batch, Device device)
    : nn::KVCache((config.validate(), config.n_layer),  // a valid config, checked first
                  batch, config.n_head, config.context, config.d_model / config.n_head, device) {}

// ============================================================================ blocks

CausalSelfAttention::CausalSelfAttention(const GPTConfig& config)
    : n_head(config.n_head), d_model(config.d_model) {
  c_attn = register_module("c_attn", std::make_shared<nn::Linear>(d_model, 3 * d_model));
  c_proj = register_module("c_proj", std::make_shared<nn::Linear>(d_model, d_model));
  attn_dropout = register_module("attn_dropout", std::make_shared<nn::Dropout>(config.dropout));
  resid_dropout = register_module("resid_dropout", std::make_shared<nn::Dropout>(config.dropout));
}

Tensor CausalSelfAttention::forward(const Tensor& x, const nn::LayerCache& cache,
                                    bool last_only) const {
  // x (B, T, C) at positions [past, past + T), past = cache.length (0 without a cache)
  //   -> (B, Tq, C), Tq = T, or 1 when last_only; nh heads of size hs = C / nh.
  const int64_t B = x.size(0), T = x.size(1), C = d_model, hs = C / n_head;
  auto heads = [&](const Tensor& t) {  // (B, T, C) -> (B, T, nh, hs) -> (B, nh, T, hs)
    return t.view({B, T, n_head, hs}).transpose(1, 2);
  };
  // Queries, keys and values from one projection, split in three as nanoGPT's: c_attn stacks
  // W_q, W_k and W_v ([3C, C], GPT-2's layout).
  const std::vector<Tensor> qkv = c_attn->forward(x).split(C, 2);        // (B, T, C) each
  const Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);  // (B, nh, T, hs)
  // Vaswani et al. 2017, eq. 1 with sec. 3.2.3's mask ("masking out (setting to -inf) all
  // values in the input of the softmax which correspond to illegal connections"), over the
  // cached positions too.
  const Tensor y = nn::causal_attention(last_only ? q.narrow(2, T - 1, 1) : q, k, v, cache,
                                        attn_dropout->p, attn_dropout->is_training());
  // Heads side by side again: (B, nh, Tq, hs) -> (B, Tq, nh, hs) -> (B, Tq, C).
  const Tensor merged = y.transpose(1, 2).reshape({B, y.size(2), C});
  return resid_dropout->forward(c_proj->forward(merged));  // (B, Tq, C)
}

MLP::MLP(const GPTConfig& config)
    : nn::FeedForward(config.d_model, 4 * config.d_model,
                      {.activation = nn::Activation::GELUTanh,
                       .output_dropout = config.dropout,
                       .linear1_name = "c_fc",
                       .linear2_name = "c_proj"}),
      c_fc(linear1),
      c_proj(linear2) {}

Block::Block(const GPTConfig& config) {
  ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(config.d_model));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(config));
  ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(config.d_model));
  mlp = register_module("mlp", std::make_shared<MLP>(config));
}

nn::Residual Block::forward(nn::Residual x, const nn::LayerCache& cache, bool last_only) const {
  // x (B, T, C) -> (B, Tq, C), Tq = T or 1; each sub-block adds to the residual stream.
  x = x + attn->forward(ln_1->forward(x), cache, last_only);
  x = x + mlp->forward(ln_2->forward(x));
  return x;
}

// ============================================================================ model

GPT::GPT(const GPTConfig& config) : config_(config) {
  config.validate();
  wte = register_module("wte", std::make_shared<nn::Embedding>(config.vocab_size, config.d_model));
  wpe = register_module("wpe", std::make_shared<nn::Embedding>(config.context, config.d_model));
  drop = register_module("drop", std::make_shared<nn::Dropout>(config.dropout));
  h = register_module("h", std::make_shared<nn::ModuleList<Block>>());
  for (int64_t i = 0; i < config.n_layer; ++i) h->push_back(std::make_shared<Block>(config));
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(config.d_model));
  init_weights();
}

void GPT::init_weights() {
  // GPT-2 (Radford et al. 2019, sec. 2.3) and nanoGPT: N(0, 0.02) for every matrix, zero
  // biases, LayerNorm gains 1 (their default); "we scale the weights of residual layers at
  // initialization by a factor of 1/sqrt(N) where N is the number of residual layers" —
  // two per block (attention and MLP), hence 0.02 / sqrt(2 n_layer) on both c_proj.
  const double std_resid = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.n_layer));
  nn::init::normal_(wte->weight, 0.0, 0.02);
  nn::init::normal_(wpe->weight, 0.0, 0.02);
  for (const auto& block : *h) {
    for (const auto& linear :
         {block->attn->c_attn, block->attn->c_proj, block->mlp->c_fc, block->mlp->c_proj}) {
      const bool residual = linear == block->attn->c_proj || linear == block->mlp->c_proj;
      nn::init::normal_(linear->weight, 0.0, residual ? std_resid : 0.02);
      nn::init::zeros_(linear->bias);
    }
  }
}

Tensor GPT::forward(const Tensor& ids) { return lm_head(forward_hidden(ids)); }

Tensor GPT::forward(const Tensor& ids, nn::KVCache& cache) {
  return lm_head(forward_hidden(ids, &cache));
}

Tensor GPT::forward_hidden(const Tensor& ids, nn::KVCache* cache, bool last_only) {
  // ids (B, T) int64 at positions [past, past + T) -> ln_f(x) (B, T, C), or (B, 1, C)
  LOOM_CHECK(ids.defined() && ids.dtype() == DType::Int64 && ids.dim() == 2 && ids.size(1) > 0,
             "GPT: expected int64 ids of shape [B, T] with T > 0, got {} of shape {}",
             ids.defined() ? dtype_name(ids.dtype()) : "undefined",
             ids.defined() ? shape_str(ids.shape()) : "[]");
  const int64_t B = ids.size(0), T = ids.size(1);
  const int64_t past = cache != nullptr ? cache->length() : 0;
  LOOM_CHECK(past + T <= config_.context,
             "GPT: {} positions ({} cached + {} new) exceed the context length {}", past + T, past,
             T, config_.context);
  LOOM_CHECK(cache == nullptr || cache->batch() == B,
             "GPT: ids of shape {} do not match the KV cache's batch {}", shape_str(ids.shape()),
             cache != nullptr ? cache->batch() : 0);
  // The learned position embeddings of positions past .. past + T - 1 are rows of wpe: a view,
  // so nothing is looked up (or copied from the host) per step.
  const Tensor pos_emb = wpe->weight.narrow(0, past, T);  // (T, C)
  const Tensor hidden = blocks_and_ln_f(wte->forward(ids), pos_emb, cache, last_only);
  if (cache != nullptr) cache->advance(T);
  return hidden;  // (B, T, C)
}

Tensor GPT::blocks_and_ln_f(const Tensor& tok_emb, const Tensor& pos_emb,
                            const nn::KVCache* cache, bool last_only) {
  // x = drop(tok_emb + pos_emb) (B, T, C) -> ln_f(block_n(... block_1(x))) (B, T, C), or
  // (B, 1, C) with last_only: the last block alone may skip the other positions (earlier
  // blocks must produce every position, since later blocks attend to all of them). Each sum
  // on the residual stream is formed by the LayerNorm that reads it (nn::Residual): the
  // embeddings' sum by the first ln_1 (unless dropout sits between them), each block's last
  // by the next block's ln_1 or by ln_f.
  const bool dropping = drop->is_training() && drop->p > 0.0f;
  nn::Residual x = dropping ? nn::Residual(drop->forward(tok_emb + pos_emb))
                            : nn::Residual(tok_emb) + pos_emb.expand(tok_emb.shape());
  for (int64_t layer = 0; layer < h->size(); ++layer)
    x = (*h)[layer]->forward(x, cache != nullptr ? cache->layer(layer) : nn::LayerCache{},
                             last_only && layer == h->size() - 1);
  return ln_f->forward(x);
}

Tensor GPT::decode_step_hidden(const Tensor& seq, const Tensor& position, const Tensor& mask,
                               const nn::KVCache& cache) {
  // The same arithmetic as forward_hidden for one new token, with every position read from
  // device memory: the token is seq[0, position], its position embedding the row `position`
  // of wpe, and each layer writes its keys and values at `position` (nn::LayerCache::append).
  const Tensor ids = index_select(seq, 1, position);              // (1, 1)
  const Tensor pos_emb = index_select(wpe->weight, 0, position);  // (1, C)
  const nn::KVCache at_position = cache.at_position(position, mask);
  return blocks_and_ln_f(wte->forward(ids), pos_emb, &at_position, false);  // (1, 1, C)
}

Tensor GPT::lm_head(const Tensor& hidden) const {
  // (..., C) -> (..., vocab). The output projection is the token embedding itself (weight
  // tying, Press & Wolf 2017, as GPT-2), read through a transposed view.
  return nn::functional::linear(hidden, wte->weight);
}

// ============================================================================ GPT-2 weights

namespace {

// Whether `name` (without prefix) is a Conv1D weight that GPT-2 stores [in, out].
bool is_conv1d_weight(const std::string& name) {
  for (const char* suffix :
       {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0)
      return true;
  }
  return false;
}

// Buffers of GPT2Attention that hold no learned values (the causal mask and its fill value).
bool is_ignored_buffer(const std::string& name) {
  for (const std::string s : {".attn.bias", ".attn.masked_bias"})
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0)
      return true;
  return false;
}

}  // namespace

void load_gpt2_hf(GPT& model, const std::string& path) {
  // GPT2LMHeadModel saves its body under "transformer."; GPT2Model saves it without prefix.
  std::map<std::string, Tensor> state;
  Tensor lm_head;
  for (auto& [name, t] : nn::read_safetensors(path)) {
    const std::string prefix = "transformer.";
    const std::string key = name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
    if (key == "lm_head.weight")
      lm_head = t;
    else if (is_conv1d_weight(key) && t.dim() == 2)
      state[key] = t.t();  // [in, out] -> [out, in]
    else if (!is_ignored_buffer(key))
      state[key] = t;
  }
  if (lm_head.defined()) {
    auto wte = state.find("wte.weight");
    LOOM_CHECK(wte != state.end() && lm_head.shape() == wte->second.shape() &&
                   max(abs(lm_head - wte->second)).item() == 0.0f,
               "load_gpt2_hf: lm_head.weight in '{}' differs from wte.weight; loom's GPT ties "
               "the LM head to the token embedding",
               path);
  }
  // Checks every name and shape (one error lists each missing, unexpected or misshapen
  // tensor) before copying anything.
  nn::load_state_dict(model, state, path);
}

}  // namespace loom::models
