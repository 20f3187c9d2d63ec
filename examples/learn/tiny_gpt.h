// Chapter 05b (docs/learn/05b-build-gpt.md): the models of learn_05b_tiny_gpt, a GPT built up
// in six stages in the order of Karpathy's lecture "Let's build GPT: from scratch, in code,
// spelled out" (nanoGPT's gpt.py), in loom's ops and nn layers only:
//
//   1 Bigram              ids -> a table row of next-token logits; no context at all
//   2 Averaging           token + position embeddings, each position the mean of its past (the
//                         "mathematical trick": tril, masked_fill with -inf, softmax), tied head
//   3 Head                the mean replaced by one head of causal self-attention
//   4 MultiHeadAttention  n_head smaller heads side by side, then a projection
//   5 Block               a transformer block: pre-norm, residual sums, the MLP
//   6 GPT                 n_layer blocks and a final LayerNorm: GPT-2's model (models/gpt.h)
// Stages 3-5 are OneLayer<Head>, OneLayer<MultiHeadAttention> and OneLayer<Block>.
//
// Names follow GPT-2 (wte, wpe, h.N.ln_1, ...) so that stage 6 reads weight for weight as
// models::GPT; the one difference of layout is that models::GPT computes every head's query,
// key and value with one Linear, c_attn, where Head keeps three small ones per head (the test
// tests/models/test_tiny_gpt.cpp stacks them into c_attn and gets the same logits).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "loom.h"

namespace tiny_gpt {

using namespace loom;

struct Config {
  int64_t vocab_size = 256;  // bytes
  int64_t block_size = 32;   // T, the longest context (models::GPTConfig calls it context)
  int64_t n_embd = 64;       // C, the width of every position's vector
  int64_t n_head = 4;        // heads of C / n_head each
  int64_t n_layer = 2;       // blocks of stage 6
};

// What the training loop needs of every stage: ids (B, T) int64 -> logits (B, T, vocab).
class LanguageModel : public nn::Module {
 public:
  virtual Tensor forward(const Tensor& idx) = 0;
};

// ---------------------------------------------------------------------------- stage 1
// Each token looks up the logits of the next one in its row of a vocab x vocab table: what
// follows 'q' is learned, but nothing before the current token is seen.
class Bigram : public LanguageModel {
 public:
  explicit Bigram(const Config& c) {
    token_embedding_table = register_module(
        "token_embedding_table", std::make_shared<nn::Embedding>(c.vocab_size, c.vocab_size));
  }
  Tensor forward(const Tensor& idx) override {
    return token_embedding_table->forward(idx);  // (B, T) -> (B, T, vocab)
  }

  std::shared_ptr<nn::Embedding> token_embedding_table;
};

// ---------------------------------------------------------------------------- the trick
// scores (..., T, T) -> weights (..., T, T) whose row t is a softmax over positions 0..t only.
// Position t must not read a later one: that is the token it is trained to predict. Setting
// the future to -inf before the softmax gives it weight exactly 0 (exp(-inf) = 0), and the row
// still sums to 1. With all scores 0, row t is 1 / (t + 1) on 0..t: the mean of the past.
inline Tensor causal_softmax(const Tensor& scores) {
  const int64_t T = scores.size(-1);
  const Tensor tril = ones({T, T}, scores.device()).tril();    // (T, T): 1 on and below
  return scores.masked_fill(tril == 0, -INFINITY).softmax(-1);  // (..., T, T)
}

// Stages 2-6 share their two ends: a token and a position embedding in, and out the token
// embedding read backwards (GPT-2's tied LM head, Press & Wolf 2017). A stage is its middle.
class Embedded : public LanguageModel {
 public:
  explicit Embedded(const Config& c) {
    wte = register_module("wte", std::make_shared<nn::Embedding>(c.vocab_size, c.n_embd));
    wpe = register_module("wpe", std::make_shared<nn::Embedding>(c.block_size, c.n_embd));
  }
  Tensor forward(const Tensor& idx) override {
    const int64_t T = idx.size(1);
    const Tensor tok_emb = wte->forward(idx);        // (B, T, C)
    const Tensor pos_emb = wpe->forward(arange(T));  // (T, C), broadcast over B
    const Tensor x = middle(tok_emb + pos_emb);      // (B, T, C)
    return matmul(x, wte->weight.t());               // (B, T, C) @ (C, vocab) -> (B, T, vocab)
  }
  // (B, T, C) -> (B, T, C): what the stage does between the embeddings and the head.
  virtual Tensor middle(const Tensor& x) = 0;

  std::shared_ptr<nn::Embedding> wte, wpe;
};

// ---------------------------------------------------------------------------- stage 2
// Position t gets the mean of the vectors at 0..t: a fixed, uniform look at the past.
class Averaging : public Embedded {
 public:
  using Embedded::Embedded;
  Tensor middle(const Tensor& x) override {
    const int64_t T = x.size(1);
    const Tensor wei = causal_softmax(zeros({T, T}));  // (T, T), row t: 1 / (t + 1) on 0..t
    return matmul(wei, x);                             // (T, T) @ (B, T, C) -> (B, T, C)
  }
};

// ---------------------------------------------------------------------------- stage 3
// One head of self-attention (Vaswani et al. 2017, eq. 1, with the decoder's mask of
// sec. 3.2.3): the weights are no longer uniform but softmax(q k^T / sqrt(hs)), each position's
// query against every earlier position's key; what is averaged is each position's value.
class Head : public nn::Module {
 public:
  Head(int64_t n_embd, int64_t head_size) : head_size(head_size) {
    query = register_module("query", std::make_shared<nn::Linear>(n_embd, head_size));
    key = register_module("key", std::make_shared<nn::Linear>(n_embd, head_size));
    value = register_module("value", std::make_shared<nn::Linear>(n_embd, head_size));
  }
  Tensor forward(const Tensor& x) const {
    // x (B, T, C) -> (B, T, hs)
    const Tensor q = query->forward(x), k = key->forward(x), v = value->forward(x);  // (B, T, hs)
    // Dividing by sqrt(hs) keeps the scores' variance near 1 whatever the head size, so the
    // softmax does not saturate into one-hot rows at initialisation (sec. 3.2.1).
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_size));
    const Tensor scores = matmul(q, k.transpose(-2, -1)) * scale;  // (B, T, hs) @ (B, hs, T)
    return matmul(causal_softmax(scores), v);  // (B, T, T) @ (B, T, hs) -> (B, T, hs)
  }

  int64_t head_size;
  std::shared_ptr<nn::Linear> query, key, value;
};

// Stages 3-5: the embeddings, one layer in the middle (a Head, a MultiHeadAttention or a
// Block, registered as `name`), the tied head.
template <class Layer>
class OneLayer : public Embedded {
 public:
  OneLayer(const Config& c, const std::string& name, std::shared_ptr<Layer> layer)
      : Embedded(c), layer(register_module(name, std::move(layer))) {}
  Tensor middle(const Tensor& x) override { return layer->forward(x); }  // (B, T, C)

  std::shared_ptr<Layer> layer;
};

// ---------------------------------------------------------------------------- stage 4
// n_head heads of C / n_head side by side (sec. 3.2.2): each can attend to something else
// (the previous letter, the start of the word) for the cost of one wide head. c_proj mixes
// their outputs.
class MultiHeadAttention : public nn::Module {
 public:
  MultiHeadAttention(int64_t n_embd, int64_t n_head) {
    heads = register_module("heads", std::make_shared<nn::ModuleList<Head>>());
    for (int64_t i = 0; i < n_head; ++i)
      heads->push_back(std::make_shared<Head>(n_embd, n_embd / n_head));
    c_proj = register_module("c_proj", std::make_shared<nn::Linear>(n_embd, n_embd));
  }
  Tensor forward(const Tensor& x) const {
    // x (B, T, C) -> (B, T, C)
    std::vector<Tensor> outs;
    for (const auto& head : *heads) outs.push_back(head->forward(x));  // (B, T, hs) each
    return c_proj->forward(cat(outs, -1));                              // (B, T, C)
  }

  std::shared_ptr<nn::ModuleList<Head>> heads;
  std::shared_ptr<nn::Linear> c_proj;
};

// ---------------------------------------------------------------------------- stage 5
// Attention lets positions talk; the MLP (Vaswani et al. 2017, eq. 2, 4 C wide, with GPT-2's
// GELU in its tanh form) then works on what each position gathered, on its own.
class MLP : public nn::Module {
 public:
  explicit MLP(int64_t n_embd) {
    c_fc = register_module("c_fc", std::make_shared<nn::Linear>(n_embd, 4 * n_embd));
    c_proj = register_module("c_proj", std::make_shared<nn::Linear>(4 * n_embd, n_embd));
  }
  Tensor forward(const Tensor& x) const {
    return c_proj->forward(gelu_tanh(c_fc->forward(x)));  // (B, T, C) -> (B, T, 4C) -> (B, T, C)
  }

  std::shared_ptr<nn::Linear> c_fc, c_proj;
};

// GPT-2's block (Radford et al. 2019, sec. 2.3): each sub-block reads a normalised copy of the
// residual stream x (pre-norm) and adds its output back to x, so the gradient reaches every
// block through the sums unchanged and a deep stack still trains (He et al. 2016).
class Block : public nn::Module {
 public:
  explicit Block(const Config& c) {
    ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(c.n_embd));
    attn = register_module("attn", std::make_shared<MultiHeadAttention>(c.n_embd, c.n_head));
    ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(c.n_embd));
    mlp = register_module("mlp", std::make_shared<MLP>(c.n_embd));
  }
  Tensor forward(Tensor x) const {
    x = x + attn->forward(ln_1->forward(x));  // (B, T, C): communication
    x = x + mlp->forward(ln_2->forward(x));   // (B, T, C): computation
    return x;
  }

  std::shared_ptr<nn::LayerNorm> ln_1, ln_2;
  std::shared_ptr<MultiHeadAttention> attn;
  std::shared_ptr<MLP> mlp;
};

// ---------------------------------------------------------------------------- stage 6
// n_layer blocks, then a final LayerNorm before the head (GPT-2 adds it because the pre-norm
// stream itself is never normalised): models::GPT with dropout 0.
class GPT : public Embedded {
 public:
  explicit GPT(const Config& c) : Embedded(c) {
    h = register_module("h", std::make_shared<nn::ModuleList<Block>>());
    for (int64_t i = 0; i < c.n_layer; ++i) h->push_back(std::make_shared<Block>(c));
    ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(c.n_embd));
  }
  Tensor middle(const Tensor& x) override {
    Tensor y = x;                                  // (B, T, C)
    for (const auto& block : *h) y = block->forward(y);
    return ln_f->forward(y);                       // (B, T, C)
  }

  std::shared_ptr<nn::ModuleList<Block>> h;
  std::shared_ptr<nn::LayerNorm> ln_f;
};

// GPT-2's initialisation (as gpt.py's _init_weights): every matrix ~ N(0, 0.02), biases 0,
// LayerNorm gains left at 1. Small embeddings keep the tied head's first logits near 0, so
// every stage starts at the loss of a uniform guess, ln(256) = 5.55 nats.
inline void init_weights(nn::Module& model) {
  for (auto& [name, p] : model.named_parameters()) {
    if (p.dim() == 2) nn::init::normal_(p, 0.0, 0.02);
    else if (name.ends_with("bias")) nn::init::zeros_(p);
  }
}

// Stage `stage` (1-6) with config `c`, initialised.
inline std::shared_ptr<LanguageModel> make_stage(int stage, const Config& c) {
  std::shared_ptr<LanguageModel> model;
  switch (stage) {
    case 1: model = std::make_shared<Bigram>(c); break;
    case 2: model = std::make_shared<Averaging>(c); break;
    case 3:  // one head as wide as the embedding
      model = std::make_shared<OneLayer<Head>>(c, "attn",
                                               std::make_shared<Head>(c.n_embd, c.n_embd));
      break;
    case 4:
      model = std::make_shared<OneLayer<MultiHeadAttention>>(
          c, "attn", std::make_shared<MultiHeadAttention>(c.n_embd, c.n_head));
      break;
    case 5:
      model = std::make_shared<OneLayer<Block>>(c, "block", std::make_shared<Block>(c));
      break;
    default: model = std::make_shared<GPT>(c); break;
  }
  init_weights(*model);
  return model;
}

}  // namespace tiny_gpt
