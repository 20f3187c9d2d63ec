// BERT: Bidirectional Encoder Representations from Transformers (Devlin et al. 2018, "BERT:
// Pre-training of Deep Bidirectional Transformers for Language Understanding"), in the layout of
// Hugging Face's BertForPreTraining.
//
//   ids, token_type_ids, positions (B, T)
//     -> word + token type (segment A/B) + learned position embeddings -> LayerNorm -> dropout
//                                                                   (sec. 3, fig. 2)  (B, T, H)
//     -> n_layer post-norm encoder layers (Vaswani et al. 2017, sec. 3.1):
//          x = LayerNorm(x + dropout(dense(attention(x))))        attention.{self, output}
//          x = LayerNorm(x + dropout(dense(gelu(dense(x)))))      intermediate, output
//     -> hidden (B, T, H) -> pooled = tanh(dense(hidden[:, 0]))   the [CLS] token  (B, H)
//   heads (sec. 3.1, "Task #1: Masked LM", "Task #2: Next Sentence Prediction"):
//     mlm_logits = LayerNorm(gelu(dense(hidden))) @ word_embeddings^T + bias     (B, T, vocab)
//     nsp_logits = seq_relationship(pooled)                                      (B, 2)
//
//   attention = multi-head self-attention through nn::functional::scaled_dot_product_attention,
//               query, key, value from three Linear H -> H; padding keys blocked by the additive
//               mask built from attention_mask (1 = token, 0 = padding).
//   Exact (erf) GELU, LayerNorm eps 1e-12, dropout where Hugging Face puts it: after the
//   embeddings' LayerNorm, on the attention probabilities, and on both residual branches.
//
// Parameter names are Hugging Face's (bert.embeddings.word_embeddings.weight, ...,
// bert.encoder.layer.N.attention.self.query.weight, ..., cls.predictions.transform.dense.weight,
// cls.predictions.bias, cls.seq_relationship.weight), so load_bert_hf / save_bert_hf map
// checkpoints name for name. The MLM decoder's weight IS the word-embedding matrix (tied, listed
// once, under bert.embeddings.word_embeddings.weight) and its bias is cls.predictions.bias.
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
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace loom::models {

// ---------------------------------------------------------------------------- configuration
// BertConfig's fields (core/fields.h): type, name, default, check, meaning.
#define LOOM_BERT_CONFIG_FIELDS(F)                                                                \
  F(int64_t, vocab_size, 8192, positive, "token ids (WordPiece vocabulary)")                      \
  F(int64_t, hidden, 256, positive, "H; a multiple of n_head")                                    \
  F(int64_t, n_layer, 4, positive, "encoder layers L")                                            \
  F(int64_t, n_head, 4, positive, "attention heads A")                                            \
  F(int64_t, intermediate, 1024, positive, "width of each layer's feed-forward, 4H in the paper") \
  F(int64_t, max_position, 128, positive, "longest sequence (rows of position_embeddings)")       \
  F(int64_t, type_vocab_size, 2, positive, "segments (sentence A / B)")                           \
  F(float, dropout, 0.1f, probability, "hidden_dropout_prob = attention_probs_dropout_prob")      \
  F(float, layer_norm_eps, 1e-12f, positive, "every LayerNorm's epsilon, as Hugging Face's")

struct BertConfig {
  // The fields, and from them (core/fields.h): visit_fields, ==, to_string(),
  // to_metadata(), from_metadata(metadata, source), and preset(name) and preset_names()
  // over the table bert.cpp defines as presets().
  LOOM_MODEL_CONFIG(BertConfig, LOOM_BERT_CONFIG_FIELDS, "bert")

  // Presets: "bert-mini" (vocab 8192, H 256, 4 layers, 4 heads, intermediate 1024, 128 positions:
  // bench/reference/models.py's bert-mini, 5,430,786 parameters) and "bert-base" (Devlin et al.
  // 2018: vocab 30522, H 768, 12 layers, 12 heads, 3072, 512 positions: 110,106,428).
  // to_metadata() is the checkpoint metadata {"model_type": "bert", "vocab_size": ..., ...} and
  // back; a missing or garbled key, another model_type or an invalid config is a loom::Error naming
  // `source`.

  // Throws loom::Error naming the first invalid field (each field's check, then hidden a
  // multiple of n_head, then loom's size budget).
  void validate() const;
  // Parameters of a Bert (both heads, the tied decoder counted once; V vocab, P positions,
  // S types, I intermediate):
  //   (V + P + S) H + 2H  +  L (4 H^2 + 2 H I + 9 H + I)  +  pooler (H^2 + H)
  //   + transform (H^2 + 3H) + bias V + seq_relationship (2H + 2)
  int64_t num_parameters() const;
};

struct BertOutput {
  Tensor hidden;      // [B, T, hidden], the last encoder layer
  Tensor pooled;      // [B, hidden], tanh(dense([CLS]))
  Tensor mlm_logits;  // [B, T, vocab_size]
  Tensor nsp_logits;  // [B, 2]
};

// Bert::forward_masked: MLM logits at the n labelled positions only.
struct BertMaskedOutput {
  Tensor mlm_logits;   // [n, vocab_size], the labelled positions in row-major (b, t) order
  Tensor mlm_targets;  // int64 [n], their labels (no label at all: every position, all -100)
  Tensor nsp_logits;   // [B, 2]
};

// ---------------------------------------------------------------------------- blocks
// Input representation (sec. 3.2, fig. 2): the sum of token, segment and position embeddings.
class BertEmbeddings : public nn::Module {
 public:
  explicit BertEmbeddings(const BertConfig& config);
  // ids, token_type_ids (B, T) int64 -> (B, T, H)
  Tensor forward(const Tensor& ids, const Tensor& token_type_ids) const;

  std::shared_ptr<nn::Embedding> word_embeddings, position_embeddings, token_type_embeddings;
  std::shared_ptr<nn::LayerNorm> LayerNorm;
  std::shared_ptr<nn::Dropout> dropout;
};

// A Linear, then dropout, then LayerNorm of the residual sum: Hugging Face's BertSelfOutput and
// BertOutput (the "Add & Norm" of Vaswani et al. 2017, fig. 1, post-norm).
class BertAddNorm : public nn::Module {
 public:
  BertAddNorm(const BertConfig& config, int64_t in_features);
  // x (B, T, in_features), residual (B, T, H) -> LayerNorm(residual + dropout(dense(x)))
  Tensor forward(const Tensor& x, const Tensor& residual) const;

  std::shared_ptr<nn::Linear> dense;
  std::shared_ptr<nn::LayerNorm> LayerNorm;
  std::shared_ptr<nn::Dropout> dropout;
};

// Multi-head self-attention (Vaswani et al. 2017, sec. 3.2.2): Hugging Face's BertSelfAttention.
class BertSelfAttention : public nn::Module {
 public:
  explicit BertSelfAttention(const BertConfig& config);
  // x (B, T, H), mask additive (B, 1, 1, T) or undefined -> (B, T, H); `probs`, when given,
  // receives the attention probabilities (B, heads, T, T).
  Tensor forward(const Tensor& x, const Tensor& mask, Tensor* probs = nullptr) const;

  int64_t n_head, hidden;
  std::shared_ptr<nn::Linear> query, key, value;
  std::shared_ptr<nn::Dropout> dropout;
};

// One encoder layer: attention.{self, output}, intermediate.dense, output.{dense, LayerNorm}.
class BertLayer : public nn::Module {
 public:
  explicit BertLayer(const BertConfig& config);
  // x (B, T, H), mask as BertSelfAttention -> (B, T, H)
  Tensor forward(const Tensor& x, const Tensor& mask, Tensor* probs = nullptr) const;

  std::shared_ptr<BertSelfAttention> self_attention;  // attention.self
  std::shared_ptr<BertAddNorm> attention_output;      // attention.output
  std::shared_ptr<nn::Linear> intermediate_dense;     // intermediate.dense
  std::shared_ptr<BertAddNorm> output;                // output
};

// ---------------------------------------------------------------------------- models
// The encoder without heads (Hugging Face's BertModel, with its pooler): shared by Bert and
// BertForSequenceClassification, registered in both as "bert".
class BertModel : public nn::Module {
 public:
  explicit BertModel(const BertConfig& config);
  // ids (B, T) int64; token_type_ids (B, T) int64 or undefined (all 0); attention_mask (B, T)
  // int64 or float32 of 0/1, 1 = token, 0 = padding, or undefined (all tokens)
  // -> {hidden (B, T, H), pooled (B, H)}. `attentions`, when given, receives each layer's
  // attention probabilities (B, heads, T, T).
  std::pair<Tensor, Tensor> forward(const Tensor& ids, const Tensor& token_type_ids,
                                    const Tensor& attention_mask,
                                    std::vector<Tensor>* attentions = nullptr) const;

  const BertConfig& config() const { return config_; }
  std::shared_ptr<BertEmbeddings> embeddings;
  std::shared_ptr<nn::ModuleList<BertLayer>> layers;  // encoder.layer.N
  std::shared_ptr<nn::Linear> pooler_dense;           // pooler.dense

 private:
  BertConfig config_;
};

// BERT with both pre-training heads (Hugging Face's BertForPreTraining).
class Bert : public nn::Module {
 public:
  // Hugging Face's initialisation: Linear and Embedding weights N(0, 0.02), biases 0, the
  // word embedding of id 0 ([PAD]) zero, LayerNorm (1, 0), cls.predictions.bias 0.
  explicit Bert(const BertConfig& config);

  // ids int64 [B, T]; token_type_ids int64 [B, T] (undefined = all 0); attention_mask [B, T],
  // int64 or float, 1 = token and 0 = padding (undefined = all tokens). Outputs at padding
  // positions are unspecified.
  BertOutput forward(const Tensor& ids, const Tensor& token_type_ids = Tensor(),
                     const Tensor& attention_mask = Tensor());
  // The same, and every layer's attention probabilities (B, heads, T, T), for attention maps.
  BertOutput forward(const Tensor& ids, const Tensor& token_type_ids, const Tensor& attention_mask,
                     std::vector<Tensor>* attentions);

  // The masked-LM head on any hidden states [..., H] -> logits [..., vocab_size].
  Tensor mlm_head(const Tensor& hidden) const;
  // The outputs the pre-training loss needs, the MLM head only at the positions with a label
  // (mlm_labels int64 [B, T], -100 = none), in row-major order; see BertMaskedOutput.
  BertMaskedOutput forward_masked(const Tensor& ids, const Tensor& token_type_ids,
                                  const Tensor& attention_mask, const Tensor& mlm_labels);
  // bert_pretraining_loss(forward(ids, token_type_ids, attention_mask), mlm_labels, nsp_labels),
  // the same value and gradients, computed as google-research/bert's run_pretraining.py does:
  // the MLM head only at the positions that have a label (gather_indexes), which skips ~85% of
  // the [*, H] x [H, vocab] product at 15% masking. mlm_labels int64 [B, T] (-100 = none),
  // nsp_labels int64 [B].
  Tensor pretraining_loss(const Tensor& ids, const Tensor& token_type_ids,
                          const Tensor& attention_mask, const Tensor& mlm_labels,
                          const Tensor& nsp_labels);

  const BertConfig& config() const { return config_; }
  // Parameters kept out of weight decay beside the one-dimensional ones (timm's name; see
  // train/weight_decay.h): none. Hugging Face's no_decay = ["bias", "LayerNorm.weight"] names
  // only one-dimensional parameters.
  std::set<std::string> no_weight_decay() const { return {}; }
  std::shared_ptr<BertModel> bert;
  std::shared_ptr<nn::Linear> transform_dense;     // cls.predictions.transform.dense
  std::shared_ptr<nn::LayerNorm> transform_norm;   // cls.predictions.transform.LayerNorm
  std::shared_ptr<nn::Linear> seq_relationship;    // cls.seq_relationship
  Tensor decoder_bias;                             // cls.predictions.bias (vocab)
  // cls.predictions.decoder: weight tied to the word embeddings, bias to decoder_bias, so
  // state_dict() holds Hugging Face's keys cls.predictions.decoder.{weight, bias} too.
  std::shared_ptr<nn::Linear> decoder;

 private:
  BertConfig config_;
};

// The pre-training loss (sec. 3.1 and A.2): mean cross-entropy of the MLM logits over the
// positions whose label is not -100, plus the NSP cross-entropy. mlm_labels int64 [B, T],
// nsp_labels int64 [B].
Tensor bert_pretraining_loss(const BertOutput& output, const Tensor& mlm_labels,
                             const Tensor& nsp_labels);

// Fine-tuning for classification (sec. 4.1): dropout and a Linear on the pooled [CLS] output,
// Hugging Face's BertForSequenceClassification (bert.*, classifier.{weight, bias}).
class BertForSequenceClassification : public nn::Module {
 public:
  BertForSequenceClassification(const BertConfig& config, int64_t num_labels);
  // ids, token_type_ids, attention_mask as Bert::forward -> logits (B, num_labels)
  Tensor forward(const Tensor& ids, const Tensor& token_type_ids = Tensor(),
                 const Tensor& attention_mask = Tensor());

  std::shared_ptr<BertModel> bert;
  std::shared_ptr<nn::Dropout> dropout;
  std::shared_ptr<nn::Linear> classifier;
};

// ---------------------------------------------------------------------------- checkpoints
// Hugging Face BertForPreTraining layout (see the top of this file). LayerNorm gamma/beta (older
// files) are read as weight/bias; bert.embeddings.position_ids and the tied
// cls.predictions.decoder.{weight, bias} may be present and are ignored (decoder.weight must then
// equal the word embeddings: loom ties them). Everything else must match by name and shape; one
// loom::Error lists what is missing, unexpected or misshapen, and the model is left untouched.
void load_bert_hf(Bert& model, const std::string& path);
// Writes the model as Hugging Face's BertForPreTraining.state_dict() (transformers >= 4.31,
// position_ids not persistent): state_dict(), i.e. every parameter plus the tied
// cls.predictions.decoder.weight (= the word embeddings) and cls.predictions.decoder.bias
// (= cls.predictions.bias) under their own names, so that
// model.load_state_dict(...) of a Hugging Face BertForPreTraining accepts the file strictly, and
// load_bert_hf reads it back. Atomic (a temporary file, then renamed).
void save_bert_hf(const Bert& model, const std::string& path);

}  // namespace loom::models
