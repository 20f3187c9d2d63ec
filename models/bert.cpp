// BERT (Devlin et al. 2018) in one file, in the order of Hugging Face's modeling_bert.py:
// configuration and presets, the blocks (embeddings, self-attention, add & norm, layer), the
// encoder with its pooler, the pre-training and classification models, and the checkpoints.
#include "models/bert.h"

#include "autograd/node.h"
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
std::span<const fields::Preset<BertConfig>> BertConfig::presets() {
  // {vocab_size, hidden, n_layer, n_head, intermediate, max_position}
  static const fields::Preset<BertConfig> table[] = {
      // bert-mini is the benchmark's (bench/reference/models.py).
      {"bert-mini", {8192, 256, 4, 4, 1024, 128}},
      {"bert-base", {30522, 768, 12, 12, 3072, 512}},  // Devlin et al., sec. 3
  };
  return table;
}

// num_parameters()'s formula, counted in double (models/model_size.h).
static double count_parameters(const BertConfig& c) {
  const double h = c.hidden, i = c.intermediate, v = c.vocab_size;
  const double embeddings = (v + c.max_position + c.type_vocab_size) * h + 2 * h;
  // Per layer: query, key, value, attention.output.dense (4 h^2 + 4h), two LayerNorms (4h),
  // intermediate.dense (h i + i), output.dense (i h + h).
  const double layer = 4 * h * h + 2 * h * i + 9 * h + i;
  const double heads = (h * h + 3 * h) + v + (2 * h + 2);  // transform, bias, seq_relationship
  return embeddings + c.n_layer * layer + (h * h + h) + heads;
}

int64_t BertConfig::num_parameters() const { return parameter_count(count_parameters(*this)); }

void BertConfig::validate() const {
  fields::check_fields(*this, "BertConfig");
  LOOM_CHECK(hidden % n_head == 0, "BertConfig: hidden {} is not a multiple of n_head {}", hidden,
             n_head);
  check_model_size("BertConfig", count_parameters(*this), n_layer, to_string());
}

// ============================================================================ blocks

BertEmbeddings::BertEmbeddings(const BertConfig& c) {
  word_embeddings =
      register_module("word_embeddings", std::make_shared<nn::Embedding>(c.vocab_size, c.hidden));
  position_embeddings = register_module("position_embeddings",
                                        std::make_shared<nn::Embedding>(c.max_position, c.hidden));
  token_type_embeddings = register_module(
      "token_type_embeddings", std::make_shared<nn::Embedding>(c.type_vocab_size, c.hidden));
  LayerNorm =
      register_module("LayerNorm", std::make_shared<nn::LayerNorm>(c.hidden, c.layer_norm_eps));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(c.dropout));
  ignore_on_load("position_ids");  // Hugging Face's arange buffer, persistent before 4.31
}

Tensor BertEmbeddings::forward(const Tensor& ids, const Tensor& token_type_ids) const {
  // ids, token_type_ids (B, T) -> (B, T, H); positions 0..T-1 broadcast over the batch.
  const Tensor positions = arange(ids.size(1), ids.device());        // (T)
  const Tensor x = word_embeddings->forward(ids) +                   // (B, T, H)
                   token_type_embeddings->forward(token_type_ids) +  // (B, T, H)
                   position_embeddings->forward(positions);          // (T, H)
  return dropout->forward(LayerNorm->forward(x));                    // (B, T, H)
}

BertAddNorm::BertAddNorm(const BertConfig& c, int64_t in_features) {
  dense = register_module("dense", std::make_shared<nn::Linear>(in_features, c.hidden));
  LayerNorm =
      register_module("LayerNorm", std::make_shared<nn::LayerNorm>(c.hidden, c.layer_norm_eps));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(c.dropout));
}

Tensor BertAddNorm::forward(const Tensor& x, const Tensor& residual) const {
  // Post-norm (Vaswani et al. 2017, sec. 5.4 and fig. 1): LayerNorm(x + Sublayer(x)), the sum
  // formed in the LayerNorm's kernel (nn::Residual) -> (B, T, H).
  return LayerNorm->forward(nn::Residual(residual) + dropout->forward(dense->forward(x)));
}

BertSelfAttention::BertSelfAttention(const BertConfig& c) : n_head(c.n_head), hidden(c.hidden) {
  query = register_module("query", std::make_shared<nn::Linear>(c.hidden, c.hidden));
  key = register_module("key", std::make_shared<nn::Linear>(c.hidden, c.hidden));
  value = register_module("value", std::make_shared<nn::Linear>(c.hidden, c.hidden));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(c.dropout));
}

Tensor BertSelfAttention::forward(const Tensor& x, const Tensor& mask, Tensor* probs) const {
  // x (B, T, H) -> (B, T, H); nh heads of size hd = H / nh.
  const int64_t B = x.size(0), T = x.size(1), hd = hidden / n_head;
  auto heads = [&](const nn::Linear& projection) {
    return projection
        .forward(x)                // (B, T, H)
        .view({B, T, n_head, hd})  // (B, T, nh, hd)
        .transpose(1, 2);          // (B, nh, T, hd), a view
  };
  const Tensor q = heads(*query), k = heads(*key), v = heads(*value);  // (B, nh, T, hd)
  // Vaswani et al. 2017, eq. 1: softmax(q k^T / sqrt(hd) + mask) v; every token attends to every
  // token of its sequence (the "bidirectional" of BERT), padding keys excepted.
  const Tensor y = nn::functional::scaled_dot_product_attention(  // (B, nh, T, hd)
      q, k, v,
      {.mask = mask,
       .dropout_p = dropout->p,
       .training = dropout->is_training(),
       .attn_weights = probs});
  return y.transpose(1, 2).reshape({B, T, hidden});  // heads side by side: (B, T, H)
}

BertLayer::BertLayer(const BertConfig& c) {
  // Hugging Face's nesting: attention.self, attention.output, intermediate.dense, output.
  self_attention = register_module("attention.self", std::make_shared<BertSelfAttention>(c));
  attention_output =
      register_module("attention.output", std::make_shared<BertAddNorm>(c, c.hidden));
  intermediate_dense = register_module("intermediate.dense",
                                       std::make_shared<nn::Linear>(c.hidden, c.intermediate));
  output = register_module("output", std::make_shared<BertAddNorm>(c, c.intermediate));
}

Tensor BertLayer::forward(const Tensor& x, const Tensor& mask, Tensor* probs) const {
  // x (B, T, H) -> (B, T, H): attention sub-layer, then the position-wise feed-forward network
  // (Vaswani et al. 2017, eq. 2, with GELU as BERT: "we use a gelu activation", sec. A.2).
  // gelu(intermediate_dense(a)) as one op (nn::Linear::forward_activation): the product
  // applies the bias and GELU as it writes (cpu), and the backward takes them in one pass.
  const Tensor a = attention_output->forward(self_attention->forward(x, mask, probs), x);
  const Tensor intermediate = intermediate_dense->forward_activation(a, nn::Activation::GELU);
  return output->forward(intermediate, a);  // (B, T, I) -> (B, T, H)
}

// ============================================================================ encoder

namespace {

// attention_mask (B, T) of 0/1 (1 = token) -> the additive key mask (B, 1, 1, T) of
// nn::functional::padding_mask, or undefined when every position is a token.
Tensor key_padding_mask(const Tensor& attention_mask, const Tensor& ids) {
  if (!attention_mask.defined()) return Tensor();
  LOOM_CHECK(attention_mask.shape() == ids.shape() && (attention_mask.dtype() == DType::Int64 ||
                                                       attention_mask.dtype() == DType::Float32),
             "Bert: attention_mask must be int64 or float32 of the shape of ids {}, got {} {}",
             shape_str(ids.shape()), dtype_name(attention_mask.dtype()),
             shape_str(attention_mask.shape()));
  // Hugging Face's polarity (1 = token) flipped into the boolean form padding_mask takes
  // (nonzero = padding); the mask is small (B x T), read once on the host to validate it.
  const std::vector<float> values = attention_mask.to_vector();
  std::vector<int64_t> padding(values.size());
  bool any = false;
  for (size_t i = 0; i < values.size(); ++i) {
    LOOM_CHECK(values[i] == 0.0f || values[i] == 1.0f,
               "Bert: attention_mask holds {} at flat index {}; expected 1 (token) or 0 (padding)",
               values[i], i);
    padding[i] = values[i] == 0.0f ? 1 : 0;
    any = any || padding[i] != 0;
  }
  if (!any) return Tensor();
  return nn::functional::padding_mask(tensor_i64(padding, ids.shape()).to(ids.device()));
}

}  // namespace

BertModel::BertModel(const BertConfig& c) : config_(c) {
  c.validate();
  embeddings = register_module("embeddings", std::make_shared<BertEmbeddings>(c));
  layers = register_module("encoder.layer", std::make_shared<nn::ModuleList<BertLayer>>());
  for (int64_t i = 0; i < c.n_layer; ++i) layers->push_back(std::make_shared<BertLayer>(c));
  pooler_dense = register_module("pooler.dense", std::make_shared<nn::Linear>(c.hidden, c.hidden));
}

std::pair<Tensor, Tensor> BertModel::forward(const Tensor& ids, const Tensor& token_type_ids,
                                             const Tensor& attention_mask,
                                             std::vector<Tensor>* attentions) const {
  // ids (B, T) -> hidden (B, T, H), pooled (B, H)
  LOOM_CHECK(ids.defined() && ids.dtype() == DType::Int64 && ids.dim() == 2 && ids.size(1) > 0,
             "Bert: expected int64 ids [B, T], got {} {}",
             ids.defined() ? dtype_name(ids.dtype()) : "undefined",
             ids.defined() ? shape_str(ids.shape()) : "[]");
  LOOM_CHECK(ids.size(1) <= config_.max_position, "Bert: ids {} are longer than max_position {}",
             shape_str(ids.shape()), config_.max_position);
  Tensor types = token_type_ids;
  if (!types.defined()) {
    types = tensor_i64(std::vector<int64_t>(static_cast<size_t>(ids.numel()), 0), ids.shape())
                .to(ids.device());
  }
  LOOM_CHECK(types.dtype() == DType::Int64 && types.shape() == ids.shape(),
             "Bert: token_type_ids must be int64 of the shape of ids {}, got {} {}",
             shape_str(ids.shape()), dtype_name(types.dtype()), shape_str(types.shape()));
  const Tensor mask = key_padding_mask(attention_mask, ids);  // (B, 1, 1, T) or undefined

  Tensor x = embeddings->forward(ids, types);  // (B, T, H)
  if (attentions != nullptr) attentions->assign(static_cast<size_t>(layers->size()), Tensor());
  for (int64_t i = 0; i < layers->size(); ++i)
    x = (*layers)[i]->forward(x, mask, attentions != nullptr ? &(*attentions)[i] : nullptr);
  // The pooler (sec. 3, "the final hidden state corresponding to [CLS] is used as the aggregate
  // sequence representation"; Hugging Face's BertPooler adds a dense layer and tanh).
  const Tensor pooled = pooler_dense->forward(x.select(1, 0)).tanh();  // (B, H)
  return {x, pooled};
}

// ============================================================================ models

namespace {

// Hugging Face's BertPreTrainedModel._init_weights (initializer_range 0.02) on every module of
// `model`: Linear and Embedding weights N(0, 0.02), Linear biases 0, the padding_idx 0 row of
// the word embeddings 0; LayerNorms keep (1, 0) and other bare parameters their zeros.
void init_bert_weights(nn::Module& model, const BertModel& bert) {
  NoGradGuard guard;
  model.apply([](nn::Module& m) {
    if (auto* linear = dynamic_cast<nn::Linear*>(&m)) {
      nn::init::normal_(linear->weight, 0.0, 0.02);
      if (linear->bias.defined()) nn::init::zeros_(linear->bias);
    } else if (auto* embedding = dynamic_cast<nn::Embedding*>(&m)) {
      nn::init::normal_(embedding->weight, 0.0, 0.02);
    }
  });
  bert.embeddings->word_embeddings->weight.select(0, 0).zero_();
}

}  // namespace

Bert::Bert(const BertConfig& c) : config_(c) {
  bert = register_module("bert", std::make_shared<BertModel>(c));
  transform_dense = register_module("cls.predictions.transform.dense",
                                    std::make_shared<nn::Linear>(c.hidden, c.hidden));
  transform_norm = register_module("cls.predictions.transform.LayerNorm",
                                   std::make_shared<nn::LayerNorm>(c.hidden, c.layer_norm_eps));
  // cls.predictions' own parameter (listed before its modules, as in Hugging Face's).
  decoder_bias =
      get_submodule("cls.predictions")->register_parameter("bias", zeros({c.vocab_size}));
  // The output embedding is the input embedding (tied, as Hugging Face's BertForPreTraining).
  decoder = register_module("cls.predictions.decoder",
                            std::make_shared<nn::Linear>(c.hidden, c.vocab_size, /*bias=*/false));
  decoder->weight = decoder->replace_parameter("weight", bert->embeddings->word_embeddings->weight);
  decoder->bias = decoder->register_parameter("bias", decoder_bias);
  seq_relationship =
      register_module("cls.seq_relationship", std::make_shared<nn::Linear>(c.hidden, 2));

  // Hugging Face's BertPreTrainedModel._init_weights (initializer_range 0.02).
  init_bert_weights(*this, *bert);
}

BertOutput Bert::forward(const Tensor& ids, const Tensor& token_type_ids,
                         const Tensor& attention_mask) {
  return forward(ids, token_type_ids, attention_mask, nullptr);
}

BertOutput Bert::forward(const Tensor& ids, const Tensor& token_type_ids,
                         const Tensor& attention_mask, std::vector<Tensor>* attentions) {
  auto [hidden, pooled] = bert->forward(ids, token_type_ids, attention_mask, attentions);
  return {hidden, pooled, mlm_head(hidden), seq_relationship->forward(pooled)};  // nsp (B, 2)
}

Tensor Bert::mlm_head(const Tensor& hidden) const {
  // Masked LM head (BertLMPredictionHead): transform, then the tied decoder with its own bias.
  const Tensor h = transform_norm->forward(
      transform_dense->forward_activation(hidden, nn::Activation::GELU));  // gelu(dense) (..., H)
  return decoder->forward(h);  // (..., H) @ (V, H)^T -> (..., V)
}

BertMaskedOutput Bert::forward_masked(const Tensor& ids, const Tensor& token_type_ids,
                                      const Tensor& attention_mask, const Tensor& mlm_labels) {
  LOOM_CHECK(mlm_labels.defined() && mlm_labels.dtype() == DType::Int64 &&
                 mlm_labels.shape() == ids.shape(),
             "Bert::forward_masked: expected int64 mlm_labels {}, got {}", shape_str(ids.shape()),
             mlm_labels.defined() ? shape_str(mlm_labels.shape()) : "undefined");
  auto [hidden, pooled] = bert->forward(ids, token_type_ids, attention_mask);  // (B, T, H)
  // The flat positions b * T + t that carry a label, and those labels (read on the host: the
  // labels are small, and the count decides the shapes).
  const std::vector<int64_t> labels = mlm_labels.to_vector_i64();
  std::vector<int64_t> positions, targets;
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] != -100)
      positions.push_back(static_cast<int64_t>(i)), targets.push_back(labels[i]);
  const Tensor nsp = seq_relationship->forward(pooled);  // (B, 2)
  if (positions.empty())  // nothing to gather: every position, every target -100
    return {mlm_head(hidden).reshape({-1, config_.vocab_size}), mlm_labels.reshape({-1}), nsp};
  const auto n = static_cast<int64_t>(positions.size());
  const Tensor picked = index_select(hidden.reshape({-1, config_.hidden}), 0,       // (B*T, H)
                                     tensor_i64(positions, {n}).to(ids.device()));  // -> (n, H)
  return {mlm_head(picked), tensor_i64(targets, {n}).to(ids.device()), nsp};        // (n, V), (n)
}

Tensor Bert::pretraining_loss(const Tensor& ids, const Tensor& token_type_ids,
                              const Tensor& attention_mask, const Tensor& mlm_labels,
                              const Tensor& nsp_labels) {
  LOOM_CHECK(nsp_labels.defined() && nsp_labels.dtype() == DType::Int64 &&
                 nsp_labels.shape() == Shape({ids.size(0)}),
             "Bert::pretraining_loss: expected int64 nsp_labels [{}], got {}", ids.size(0),
             nsp_labels.defined() ? shape_str(nsp_labels.shape()) : "undefined");
  const BertMaskedOutput out = forward_masked(ids, token_type_ids, attention_mask, mlm_labels);
  return nn::functional::cross_entropy(out.mlm_logits, out.mlm_targets, -100) +
         nn::functional::cross_entropy(out.nsp_logits, nsp_labels);
}

Tensor bert_pretraining_loss(const BertOutput& output, const Tensor& mlm_labels,
                             const Tensor& nsp_labels) {
  const Tensor& mlm = output.mlm_logits;  // (B, T, V)
  LOOM_CHECK(mlm.defined() && mlm_labels.defined() && nsp_labels.defined() &&
                 mlm_labels.dtype() == DType::Int64 && nsp_labels.dtype() == DType::Int64 &&
                 mlm_labels.shape() == Shape({mlm.size(0), mlm.size(1)}) &&
                 nsp_labels.shape() == Shape({mlm.size(0)}),
             "bert_pretraining_loss: expected int64 mlm_labels [B, T] and nsp_labels [B] for "
             "mlm_logits {}, got {} and {}",
             mlm.defined() ? shape_str(mlm.shape()) : "undefined",
             mlm_labels.defined() ? shape_str(mlm_labels.shape()) : "undefined",
             nsp_labels.defined() ? shape_str(nsp_labels.shape()) : "undefined");
  const int64_t V = mlm.size(2);
  return nn::functional::cross_entropy(mlm.reshape({-1, V}), mlm_labels.reshape({-1}), -100) +
         nn::functional::cross_entropy(output.nsp_logits, nsp_labels);  // (B*T, V), (B, 2)
}

BertForSequenceClassification::BertForSequenceClassification(const BertConfig& c,
                                                             int64_t num_labels) {
  LOOM_CHECK(num_labels > 0, "BertForSequenceClassification: num_labels {} must be positive",
             num_labels);
  bert = register_module("bert", std::make_shared<BertModel>(c));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(c.dropout));
  classifier = register_module("classifier", std::make_shared<nn::Linear>(c.hidden, num_labels));
  init_bert_weights(*this, *bert);
}

Tensor BertForSequenceClassification::forward(const Tensor& ids, const Tensor& token_type_ids,
                                              const Tensor& attention_mask) {
  const Tensor pooled = bert->forward(ids, token_type_ids, attention_mask).second;  // (B, H)
  return classifier->forward(dropout->forward(pooled));                             // (B, labels)
}

// ============================================================================ checkpoints

void load_bert_hf(Bert& model, const std::string& path) {
  std::map<std::string, Tensor> state;
  for (auto& [name, t] : nn::read_safetensors(path)) {
    std::string key = name;
    // TensorFlow-era names: LayerNorm.gamma / LayerNorm.beta.
    for (const auto& [old_suffix, new_suffix] :
         {std::pair<std::string, std::string>{"LayerNorm.gamma", "LayerNorm.weight"},
          {"LayerNorm.beta", "LayerNorm.bias"}})
      if (key.ends_with(old_suffix))
        key = key.substr(0, key.size() - old_suffix.size()) + new_suffix;
    state[key] = t;
  }
  // The tied decoder: state_dict() knows cls.predictions.decoder.{weight, bias} as second names
  // of the word embeddings and of cls.predictions.bias; the first name wins on load, so a file
  // whose copy differs would load silently half-tied. Refuse it.
  const auto tied_copy_matches = [&](const std::string& copy, const std::string& original) {
    const auto c = state.find(copy), o = state.find(original);
    if (c == state.end() || o == state.end()) return true;
    return c->second.shape() == o->second.shape() && max(abs(c->second - o->second)).item() == 0.0f;
  };
  LOOM_CHECK(tied_copy_matches("cls.predictions.decoder.weight",
                               "bert.embeddings.word_embeddings.weight") &&
                 tied_copy_matches("cls.predictions.decoder.bias", "cls.predictions.bias"),
             "load_bert_hf: cls.predictions.decoder in '{}' differs from the word embeddings / "
             "cls.predictions.bias; loom's Bert ties them",
             path);
  nn::load_state_dict(model, state, path);  // every name and shape checked before copying
}

void save_bert_hf(const Bert& model, const std::string& path) {
  nn::write_safetensors(path, model.state_dict(), {{"format", "pt"}});
}

}  // namespace loom::models
