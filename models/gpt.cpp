// GPT-2 (Radford et al. 2019) in the order of nanoGPT's model.py: configuration and presets, the
// KV cache, the blocks (attention, MLP, Block), the model, and the loader for Hugging Face GPT-2
// checkpoints. Generation (GPT's side of models/sampling.h's loop, and its GPU decoding with
// recorded steps) is in models/gpt_generate.cpp.
#include "models/gpt.h"

#include <cmath>
#include <map>
#include <tuple>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "models/model_size.h"
#include "nn/checkpoint.h"
#include "nn/functional.h"
#include "nn/init.h"
#include "nn/safetensors.h"

namespace loom::models {

// ============================================================================ configuration

GPTConfig GPTConfig::preset(const std::string& name) {
  // {vocab_size, context, n_layer, n_head, d_model}
  // gpt-mini: the benchmark's byte-level GPT (bench/reference/models.py).
  if (name == "gpt-mini") return {256, 128, 4, 4, 256};
  if (name == "gpt2") return {50257, 1024, 12, 12, 768};  // 124M (Radford et al. 2019, table 2)
  if (name == "gpt2-medium") return {50257, 1024, 24, 16, 1024};  // 350M
  if (name == "gpt2-large") return {50257, 1024, 36, 20, 1280};   // 774M
  if (name == "gpt2-xl") return {50257, 1024, 48, 25, 1600};      // 1558M
  std::string known;
  for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  LOOM_FAIL("GPTConfig::preset: unknown preset '{}' (known: {})", name, known);
}

std::vector<std::string> GPTConfig::preset_names() {
  return {"gpt-mini", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"};
}

namespace {

// num_parameters() in T: int64_t for the count, double for validate()'s budget check (a
// hostile config's count would overflow int64).
template <class T>
T count_parameters(const GPTConfig& c) {
  const auto d = static_cast<T>(c.d_model);
  // Per block: ln_1 + ln_2 (4d), c_attn (3d^2 + 3d), attn.c_proj (d^2 + d),
  // mlp.c_fc (4d^2 + 4d), mlp.c_proj (4d^2 + d).
  const T block = 12 * d * d + 13 * d;
  return (static_cast<T>(c.vocab_size) + static_cast<T>(c.context)) * d +
         static_cast<T>(c.n_layer) * block + 2 * d;  // + ln_f
}

}  // namespace

void GPTConfig::validate() const {
  LOOM_CHECK(vocab_size > 0 && context > 0 && n_layer > 0 && n_head > 0 && d_model > 0,
             "GPTConfig: every size must be positive, got {}", to_string());
  LOOM_CHECK(d_model % n_head == 0, "GPTConfig: d_model {} is not a multiple of n_head {}", d_model,
             n_head);
  LOOM_CHECK(dropout >= 0.0f && dropout < 1.0f, "GPTConfig: dropout {} outside [0, 1)", dropout);
  check_model_size("GPTConfig", count_parameters<double>(*this), static_cast<double>(n_layer),
                   to_string());
}

int64_t GPTConfig::num_parameters() const { return count_parameters<int64_t>(*this); }

std::string GPTConfig::to_string() const {
  return fmt::format("vocab_size={}, context={}, n_layer={}, n_head={}, d_model={}, dropout={}",
                     vocab_size, context, n_layer, n_head, d_model, dropout);
}

// ---------------------------------------------------------------------------- as metadata

std::map<std::string, std::string> GPTConfig::to_metadata() const {
  return {{"model_type", "gpt"},
          {"vocab_size", std::to_string(vocab_size)},
          {"context", std::to_string(context)},
          {"n_layer", std::to_string(n_layer)},
          {"n_head", std::to_string(n_head)},
          {"d_model", std::to_string(d_model)},
          {"dropout", fmt::format("{}", dropout)}};  // shortest text that reads back exactly
}

GPTConfig GPTConfig::from_metadata(const std::map<std::string, std::string>& metadata,
                                   const std::string& source) {
  const std::string where = "GPTConfig::from_metadata: " + source;
  auto field = [&](const char* key, auto& value) {
    value = nn::metadata_number<std::remove_reference_t<decltype(value)>>(metadata, key, where);
  };
  const auto type = metadata.find("model_type");
  LOOM_CHECK(type == metadata.end() || type->second == "gpt",
             "GPTConfig::from_metadata: {}: \"model_type\" is '{}', not 'gpt'", source,
             type->second);
  GPTConfig c;
  field("vocab_size", c.vocab_size);
  field("context", c.context);
  field("n_layer", c.n_layer);
  field("n_head", c.n_head);
  field("d_model", c.d_model);
  field("dropout", c.dropout);
  try {
    c.validate();
  } catch (const Error& e) {
    LOOM_FAIL("GPTConfig::from_metadata: {}: {}", source, e.what());
  }
  return c;
}

// ============================================================================ KV cache

KVCache::KVCache(const GPTConfig& config, int64_t batch, Device device)
    : batch_(batch), capacity_(config.context) {
  config.validate();
  LOOM_CHECK(batch > 0, "KVCache: batch {} must be positive", batch);
  const int64_t hs = config.d_model / config.n_head;
  for (int64_t i = 0; i < config.n_layer; ++i) {
    // Keys and values in one tensor (2, B, nh, ctx, hs), so a step writes both with one copy.
    keys_values_.push_back(zeros({2, batch, config.n_head, config.context, hs}, device));
    keys_.push_back(keys_values_.back().select(0, 0));  // (B, nh, ctx, hs)
    values_.push_back(keys_values_.back().select(0, 1));
  }
}

LayerCache KVCache::layer(int64_t layer) const {
  LOOM_CHECK(layer >= 0 && layer < static_cast<int64_t>(keys_.size()),
             "KVCache: layer {} outside [0, {})", layer, keys_.size());
  LayerCache cache;
  cache.keys = keys_[static_cast<size_t>(layer)];
  cache.values = values_[static_cast<size_t>(layer)];
  cache.keys_values = keys_values_[static_cast<size_t>(layer)];
  cache.length = length_;
  return cache;
}

namespace {

// The positions a LayerCache step writes: T new ones at [length, length + T), or at the device
// `position` (graph decoding, T = 1). Checks there is room for them.
void check_room(const LayerCache& cache, int64_t T) {
  if (cache.position.defined())
    LOOM_CHECK(T == 1, "KVCache: a step at a device position takes 1 new position, got {}", T);
  else
    LOOM_CHECK(cache.length + T <= cache.keys.size(2),
               "KVCache: cannot hold {} more positions after {} (capacity {})", T, cache.length,
               cache.keys.size(2));
}

// x's T positions (along `dim`) copied into `storage` (a handle to the cache's tensor) there.
void store(const LayerCache& cache, Tensor storage, int64_t dim, const Tensor& x) {
  if (cache.position.defined())  // to(): x itself when the dtypes are equal
    storage.index_copy_(dim, cache.position, x.to(storage.dtype()));
  else
    storage.narrow(dim, cache.length, x.size(dim)).copy_(x);
}

// What attention reads after a step of T positions: every key and value so far, (B, nh,
// length + T, hs) each, or at a device position the whole storage (B, nh, capacity, hs), whose
// positions after it the mask hides.
std::pair<Tensor, Tensor> cached(const LayerCache& cache, int64_t T) {
  if (cache.position.defined()) return {cache.keys, cache.values};
  return {cache.keys.narrow(2, 0, cache.length + T), cache.values.narrow(2, 0, cache.length + T)};
}

}  // namespace

std::pair<Tensor, Tensor> LayerCache::append(const Tensor& k, const Tensor& v) const {
  // k, v (B, nh, T, hs) -> every key and value so far (see cached()).
  // Inference only: the new keys and values are copied in (no gradient flows through the cache).
  check_room(*this, k.size(2));
  store(*this, keys, 2, k);
  store(*this, values, 2, v);
  return cached(*this, k.size(2));
}

std::pair<Tensor, Tensor> LayerCache::append(const Tensor& kv) const {
  // kv (2, B, nh, T, hs) -> as append(k, v), with one copy into keys_values for both halves.
  if (!keys_values.defined()) return append(kv.select(0, 0), kv.select(0, 1));
  check_room(*this, kv.size(3));
  store(*this, keys_values, 3, kv);
  return cached(*this, kv.size(3));
}

void KVCache::advance(int64_t count) {
  LOOM_CHECK(count >= 0 && length_ + count <= capacity_,
             "KVCache: cannot hold {} more positions after {} (capacity {})", count, length_,
             capacity_);
  length_ += count;
}

// ============================================================================ blocks

CausalSelfAttention::CausalSelfAttention(const GPTConfig& config)
    : n_head(config.n_head), d_model(config.d_model) {
  c_attn = register_module("c_attn", std::make_shared<nn::Linear>(d_model, 3 * d_model));
  c_proj = register_module("c_proj", std::make_shared<nn::Linear>(d_model, d_model));
  attn_dropout = register_module("attn_dropout", std::make_shared<nn::Dropout>(config.dropout));
  resid_dropout = register_module("resid_dropout", std::make_shared<nn::Dropout>(config.dropout));
}

Tensor CausalSelfAttention::forward(const Tensor& x, const LayerCache& cache,
                                    bool last_only) const {
  // x (B, T, C) at positions [past, past + T), past = cache.length (0 without a cache)
  //   -> (B, Tq, C), Tq = T, or 1 when last_only; nh heads of size hs = C / nh;
  //   S = past + T keys. Causal: the query at position p attends to the keys at 0..p.
  const int64_t B = x.size(0), T = x.size(1), C = d_model, hs = C / n_head;
  const int64_t Tq = last_only ? 1 : T;
  // c_attn stacks W_q, W_k and W_v ([3C, C], GPT-2's layout). Applying its three row blocks
  // one by one is the same arithmetic as one GEMM followed by a split, but the backward then
  // needs no scatter into a zero-filled (B, T, 3C) gradient, and the queries may be fewer.
  // Without a graph to record (inference), one GEMM over all of c_attn is one launch, not
  // three: q, k and v are then views of its output, and a KV cache copies k and v in one go.
  auto heads = [&](const Tensor& t) {  // (B, rows, C) -> (B, nh, rows, hs)
    return t.reshape({B, t.size(1), n_head, hs}).transpose(1, 2);
  };
  auto project = [&](const Tensor& input, int64_t i) {  // i = 0, 1, 2: query, key, value
    const Tensor w = c_attn->weight.narrow(0, i * C, C), b = c_attn->bias.narrow(0, i * C, C);
    return heads(nn::functional::linear(input, w, b));
  };
  Tensor q, k, v;  // (B, nh, Tq, hs), (B, nh, T, hs), (B, nh, T, hs)
  Tensor kv;       // (2, B, nh, T, hs): k and v side by side, as c_attn wrote them (no grad)
  if (!autograd::grad_mode_enabled()) {
    const Tensor qkv = c_attn->forward(x);  // (B, T, 3C)
    q = heads(qkv.narrow(2, 0, C));
    if (last_only) q = q.narrow(2, T - 1, 1);
    // (B, T, 2C) -> (B, T, 2, nh, hs) -> (2, B, nh, T, hs)
    kv = qkv.narrow(2, C, 2 * C).reshape({B, T, 2, n_head, hs}).permute({2, 0, 3, 1, 4});
    k = kv.select(0, 0), v = kv.select(0, 1);
  } else {
    q = project(last_only ? x.narrow(1, T - 1, 1) : x, 0);
    k = project(x, 1), v = project(x, 2);
  }
  const int64_t past = cache.defined() ? cache.length : 0;
  if (cache.defined())  // (B, nh, S, hs) each
    std::tie(k, v) = kv.defined() ? cache.append(kv) : cache.append(k, v);
  // Vaswani et al. 2017, eq. 1 with sec. 3.2.3's mask ("masking out (setting to -inf) all
  // values in the input of the softmax which correspond to illegal connections"): the first
  // query sits at position past + T - Tq among the S keys. A step at a device position
  // (graph decoding) sees all capacity keys, and the cache's mask hides those after it.
  const bool device_position = cache.position.defined();
  const Tensor y = nn::functional::scaled_dot_product_attention(  // (B, nh, Tq, hs)
      q, k, v,
      {.mask = device_position ? cache.mask : Tensor{},
       .dropout_p = attn_dropout->p,
       .training = attn_dropout->is_training(),
       .causal = !device_position,
       .query_offset = device_position ? 0 : past + T - Tq});
  // Heads side by side again: (B, Tq, nh, hs) -> (B, Tq, nh * hs).
  const Tensor merged = y.transpose(1, 2).reshape({B, Tq, C});  // (B, Tq, C)
  return resid_dropout->forward(c_proj->forward(merged));       // (B, Tq, C)
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

Tensor Block::forward(const Tensor& x, const LayerCache& cache, bool last_only) const {
  // x (B, T, C) -> (B, Tq, C), Tq = T or 1; each sub-block adds to the residual stream.
  const auto [h, m] = forward_unadded(x, ln_1->forward(x), cache, last_only);
  return h + m;
}

std::pair<Tensor, Tensor> Block::forward_unadded(const Tensor& x, const Tensor& normed,
                                                 const LayerCache& cache, bool last_only) const {
  // x, normed = ln_1(x) (B, T, C) -> h, m (B, Tq, C): the block's output is h + m.
  const Tensor residual = last_only ? x.narrow(1, x.size(1) - 1, 1) : x;  // (B, Tq, C)
  // h = residual + attention, and ln_2(h) from the same pass over h (add_layer_norm).
  const auto [h, h_normed] =
      ln_2->add_and_forward(residual, attn->forward(normed, cache, last_only));
  return {h, mlp->forward(h_normed)};
}

// ============================================================================ model

GPT::GPT(const GPTConfig& config) : config_(config) {
  config.validate();
  wte = register_module("wte", std::make_shared<nn::Embedding>(config.vocab_size, config.d_model));
  wpe = register_module("wpe", std::make_shared<nn::Embedding>(config.context, config.d_model));
  drop = register_module("drop", std::make_shared<nn::Dropout>(config.dropout));
  h = register_module("h", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < config.n_layer; ++i) {
    blocks_.push_back(std::make_shared<Block>(config));
    h->push_back(blocks_.back());
  }
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
  for (const auto& block : blocks_) {
    for (const auto& linear :
         {block->attn->c_attn, block->attn->c_proj, block->mlp->c_fc, block->mlp->c_proj}) {
      const bool residual = linear == block->attn->c_proj || linear == block->mlp->c_proj;
      nn::init::normal_(linear->weight, 0.0, residual ? std_resid : 0.02);
      nn::init::zeros_(linear->bias);
    }
  }
}

Tensor GPT::forward(const Tensor& ids) { return lm_head(forward_hidden(ids)); }

Tensor GPT::forward(const Tensor& ids, KVCache& cache) {
  return lm_head(forward_hidden(ids, &cache));
}

Tensor GPT::forward_hidden(const Tensor& ids, KVCache* cache, bool last_only) {
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
  const Tensor hidden = blocks_and_ln_f(
      wte->forward(ids), pos_emb,  // (B, T, C) + (T, C)
      [&](int64_t layer) { return cache != nullptr ? cache->layer(layer) : LayerCache{}; },
      last_only);
  if (cache != nullptr) cache->advance(T);
  return hidden;  // (B, T, C)
}

Tensor GPT::blocks_and_ln_f(const Tensor& tok_emb, const Tensor& pos_emb,
                            const std::function<LayerCache(int64_t)>& layer_cache, bool last_only) {
  // x = drop(tok_emb + pos_emb) (B, T, C) -> ln_f(block_n(... block_1(x))) (B, T, C), or
  // (B, 1, C) with last_only: the last block alone may skip the other positions (earlier
  // blocks must produce every position, since later blocks attend to all of them). Each sum
  // that feeds a LayerNorm is formed in that LayerNorm's kernel (add_and_forward, which returns
  // the sum, the residual stream, and its normalisation): the embeddings' sum in the first
  // ln_1's (unless dropout sits between them), each block's output h + m in the next block's
  // ln_1 or in ln_f.
  const nn::LayerNorm& ln_1 = *blocks_.front()->ln_1;
  Tensor x, normed;  // (B, T, C) each
  if (drop->is_training() && drop->p > 0.0f) {
    x = drop->forward(tok_emb + pos_emb);
    normed = ln_1.forward(x);
  } else {
    std::tie(x, normed) = ln_1.add_and_forward(tok_emb, pos_emb.expand(tok_emb.shape()));
  }
  for (int64_t layer = 0; layer < config_.n_layer; ++layer) {
    const bool last_block = layer == config_.n_layer - 1;
    const auto [h, m] = blocks_[static_cast<size_t>(layer)]->forward_unadded(
        x, normed, layer_cache(layer), last_only && last_block);
    const nn::LayerNorm& next = last_block ? *ln_f : *blocks_[static_cast<size_t>(layer + 1)]->ln_1;
    std::tie(x, normed) = next.add_and_forward(h, m);  // x = h + m, normed = next(x)
  }
  return normed;
}

Tensor GPT::decode_step_hidden(const Tensor& seq, const Tensor& position, const Tensor& mask,
                               const KVCache& cache) {
  // The same arithmetic as forward_hidden for one new token, with every position read from
  // device memory: the token is seq[0, position], its position embedding the row `position`
  // of wpe, and each layer writes its keys and values at `position` (LayerCache::append).
  const Tensor ids = index_select(seq, 1, position);              // (1, 1)
  const Tensor pos_emb = index_select(wpe->weight, 0, position);  // (1, C)
  return blocks_and_ln_f(                                         // (1, 1, C)
      wte->forward(ids), pos_emb,
      [&](int64_t layer) {
        LayerCache layer_cache = cache.layer(layer);
        layer_cache.position = position;
        layer_cache.mask = mask;
        return layer_cache;
      },
      /*last_only=*/false);
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
