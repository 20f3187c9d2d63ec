// BERT: presets and parameter counts (the benchmark's bert-mini, bert-base), Hugging Face names,
// loading a BertForPreTraining state_dict (and an old gamma/beta one) and matching PyTorch's four
// outputs and the pre-training loss's gradients, padding invariance, save_bert_hf round trips,
// dropout, metadata, the classification head and input errors.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "models/bert.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "optim/adam.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
using models::Bert;
using models::BertConfig;

namespace {

const std::string kGolden = std::string(LOOM_TEST_DATA) + "/bert.safetensors";
const std::string kGoldenGamma = std::string(LOOM_TEST_DATA) + "/bert_hf_gamma.safetensors";

const std::map<std::string, Tensor>& bert_golden() {
  static const std::map<std::string, Tensor> tensors = nn::read_safetensors(kGolden);
  return tensors;
}

Tensor golden(const std::string& name) {
  auto it = bert_golden().find(name);
  REQUIRE_MESSAGE(it != bert_golden().end(), "bert.safetensors has no tensor " << name);
  return it->second;
}

bool is_golden_only(const std::string& name) {
  for (const char* prefix : {"input.", "out.", "grad.", "count."})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

// CONFIG in gen_bert.py.
BertConfig tiny_config() {
  BertConfig c{40, 16, 2, 2, 24, 12};
  c.dropout = 0.0f;
  return c;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("loom_test_bert_" + std::to_string(getpid()) + "_" + name))
      .string();
}

// The golden state_dict alone, as Hugging Face's save_pretrained would write it.
std::string write_golden_state() {
  nn::NamedTensors state;
  for (const auto& [name, t] : bert_golden())
    if (!is_golden_only(name)) state.emplace_back(name, t);
  const std::string path = temp_path("hf.safetensors");
  nn::write_safetensors(path, state);
  return path;
}

// Rows of `t` (B, T, ...) at the non-padding positions of the golden input, flattened.
Tensor tokens_only(const Tensor& t) {
  // Sequence 0 has 7 tokens, sequence 1 has 5 (then 2 padding positions).
  return cat({t.select(0, 0), t.select(0, 1).narrow(0, 0, 5)}, 0);
}

}  // namespace

TEST_CASE("Bert presets: the benchmark's bert-mini and bert-base have PyTorch's parameter counts") {
  const BertConfig mini = BertConfig::preset("bert-mini");
  CHECK(mini.vocab_size == 8192);
  CHECK(mini.hidden == 256);
  CHECK(mini.max_position == 128);
  CHECK(mini.num_parameters() == 5430786);  // bench/reference/models.py's bert-mini
  CHECK(BertConfig::preset("bert-base").num_parameters() == 110106428);
  for (const auto& name : BertConfig::preset_names())
    CHECK_MESSAGE(
        BertConfig::preset(name).num_parameters() == golden("count." + name).to_vector_i64()[0],
        name);
  CHECK(Bert(mini).num_parameters() == 5430786);
  CHECK(Bert(tiny_config()).num_parameters() == tiny_config().num_parameters());
  expect_error([] { BertConfig::preset("bert-large"); }, {"BertConfig::preset", "bert-large"});
  BertConfig bad = tiny_config();
  bad.n_head = 3;
  expect_error([&] { Bert{bad}; }, {"BertConfig", "hidden 16", "n_head 3"});
}

TEST_CASE("Bert parameter names are Hugging Face BertForPreTraining's, the decoder tied") {
  Bert model(tiny_config());
  std::set<std::string> golden_state;
  for (const auto& [name, t] : bert_golden())
    if (!is_golden_only(name) && name != "bert.embeddings.position_ids") golden_state.insert(name);
  // state_dict(): every key of PyTorch's state_dict (the tied decoder under its own names).
  std::set<std::string> state;
  for (const auto& [name, t] : model.state_dict()) state.insert(name);
  CHECK(state == golden_state);
  // named_parameters(): the gradients PyTorch reports, tied tensors once.
  std::set<std::string> params, grads;
  for (const auto& [name, p] : model.named_parameters()) params.insert(name);
  for (const auto& [name, t] : bert_golden())
    if (name.rfind("grad.", 0) == 0) grads.insert(name.substr(5));
  CHECK(params == grads);
  CHECK(params.count("cls.predictions.decoder.weight") == 0);
  CHECK(model.decoder->weight.impl() == model.bert->embeddings->word_embeddings->weight.impl());
  CHECK(model.decoder->bias.impl() == model.decoder_bias.impl());
}

TEST_CASE("Bert hidden, pooled, MLM and NSP logits, loss and gradients match PyTorch") {
  Bert model(tiny_config());
  const std::string path = write_golden_state();
  models::load_bert_hf(model, path);
  std::filesystem::remove(path);
  model.eval();
  const models::BertOutput out = model.forward(golden("input.ids"), golden("input.token_type_ids"),
                                               golden("input.attention_mask"));
  CHECK(out.hidden.shape() == Shape{2, 7, 16});
  CHECK(out.mlm_logits.shape() == Shape{2, 7, 40});
  // Outputs at padding positions are unspecified: compare the tokens.
  check_close(tokens_only(out.hidden), tokens_only(golden("out.hidden")), 1e-4f, 1e-4f, "hidden");
  check_close(tokens_only(out.mlm_logits), tokens_only(golden("out.mlm_logits")), 1e-4f, 1e-4f,
              "mlm_logits");
  check_close(out.pooled, golden("out.pooled"), 1e-4f, 1e-4f, "pooled");
  check_close(out.nsp_logits, golden("out.nsp_logits"), 1e-4f, 1e-4f, "nsp_logits");
  const Tensor loss =
      models::bert_pretraining_loss(out, golden("input.mlm_labels"), golden("input.nsp_labels"));
  check_close(loss, golden("out.loss"), 1e-5f, 1e-5f, "loss");
  loss.backward();
  for (const auto& [name, p] : model.named_parameters()) {
    REQUIRE_MESSAGE(p.grad().defined(), name << " got no gradient");
    check_close(p.grad(), golden("grad." + name), 1e-3f, 1e-5f, "grad " + name);
  }
}

TEST_CASE("Bert::pretraining_loss (MLM head at the labelled positions only) equals the full one") {
  Bert a(tiny_config()), b(tiny_config());
  const std::string path = write_golden_state();
  models::load_bert_hf(a, path);
  models::load_bert_hf(b, path);
  std::filesystem::remove(path);
  a.eval();
  b.eval();
  const Tensor ids = golden("input.ids"), types = golden("input.token_type_ids"),
               mask = golden("input.attention_mask"), mlm_labels = golden("input.mlm_labels"),
               nsp_labels = golden("input.nsp_labels");
  const Tensor full =
      models::bert_pretraining_loss(a.forward(ids, types, mask), mlm_labels, nsp_labels);
  const Tensor gathered = b.pretraining_loss(ids, types, mask, mlm_labels, nsp_labels);
  check_close(gathered, golden("out.loss"), 1e-5f, 1e-5f, "gathered loss vs PyTorch");
  check_close(gathered, full, 1e-5f, 1e-6f, "gathered vs full");
  full.backward();
  gathered.backward();
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    check_close(pb[i].second.grad(), pa[i].second.grad(), 1e-4f, 1e-6f, "grad " + pa[i].first);
  // No label at all: the NSP term and the full head's (empty) MLM mean, as bert_pretraining_loss.
  const Tensor none = tensor_i64(std::vector<int64_t>(14, -100), {2, 7});
  NoGradGuard no_grad;
  const float f =
      models::bert_pretraining_loss(a.forward(ids, types, mask), none, nsp_labels).item();
  const float g = b.pretraining_loss(ids, types, mask, none, nsp_labels).item();
  CHECK((f == g || (std::isnan(f) && std::isnan(g))));
  expect_error([&] { b.pretraining_loss(ids, types, mask, nsp_labels, nsp_labels); },
               {"forward_masked", "mlm_labels [2,7]", "[2]"});
  expect_error([&] { b.pretraining_loss(ids, types, mask, mlm_labels, mlm_labels); },
               {"pretraining_loss", "nsp_labels [2]", "[2,7]"});
  // forward_masked: the logits of the 5 labelled positions, with their labels.
  const models::BertMaskedOutput masked = b.forward_masked(ids, types, mask, mlm_labels);
  CHECK(masked.mlm_logits.shape() == Shape{5, 40});
  CHECK(masked.mlm_targets.to_vector_i64().size() == 5);
}

TEST_CASE("load_bert_hf reads an old gamma/beta checkpoint without decoder or position_ids") {
  Bert a(tiny_config()), b(tiny_config());
  const std::string path = write_golden_state();
  models::load_bert_hf(a, path);
  std::filesystem::remove(path);
  models::load_bert_hf(b, kGoldenGamma);
  a.eval();
  b.eval();
  NoGradGuard no_grad;
  const Tensor ids = golden("input.ids");
  check_close(b.forward(ids).mlm_logits, a.forward(ids).mlm_logits, 0.0f, 0.0f, "gamma/beta");
}

TEST_CASE("save_bert_hf writes Hugging Face's keys and loads back exactly") {
  manual_seed(1);
  Bert model(tiny_config());
  const std::string path = temp_path("saved.safetensors");
  models::save_bert_hf(model, path);
  const auto file = nn::read_safetensors(path);
  CHECK(file.count("cls.predictions.decoder.weight") == 1);
  CHECK(file.count("cls.predictions.decoder.bias") == 1);
  CHECK(file.count("bert.encoder.layer.1.attention.self.query.weight") == 1);
  CHECK(file.size() == model.state_dict().size());
  manual_seed(2);
  Bert back(tiny_config());
  models::load_bert_hf(back, path);
  for (const auto& [name, p] : back.named_parameters())
    CHECK_MESSAGE(file.at(name).to_vector() == p.to_vector(), name);

  // A decoder copy that differs from the word embeddings is refused, naming the file.
  auto tampered = nn::NamedTensors(file.begin(), file.end());
  for (auto& [name, t] : tampered)
    if (name == "cls.predictions.decoder.weight") t = t + 1.0f;
  nn::write_safetensors(path, tampered);
  expect_error([&] { models::load_bert_hf(back, path); },
               {"load_bert_hf", "saved.safetensors", "decoder"});
  // A missing tensor is named.
  nn::NamedTensors missing;
  for (const auto& [name, t] : file)
    if (name != "cls.seq_relationship.bias") missing.emplace_back(name, t);
  nn::write_safetensors(path, missing);
  expect_error([&] { models::load_bert_hf(back, path); }, {"missing", "cls.seq_relationship.bias"});
  std::filesystem::remove(path);
}

TEST_CASE("Bert: padding changes nothing at the tokens, an all-ones mask equals no mask") {
  manual_seed(4);
  Bert model(tiny_config());
  model.eval();
  NoGradGuard no_grad;
  const Tensor ids = tensor_i64({2, 5, 9, 3, 7, 11}, {1, 6});
  const Tensor types = tensor_i64({0, 0, 0, 1, 1, 1}, {1, 6});
  const auto plain = model.forward(ids, types);
  const auto ones = model.forward(ids, types, tensor_i64({1, 1, 1, 1, 1, 1}, {1, 6}));
  check_close(ones.hidden, plain.hidden, 0.0f, 0.0f, "all-ones mask");
  // The same sequence with three padding positions appended (float mask this time).
  const Tensor padded = tensor_i64({2, 5, 9, 3, 7, 11, 0, 0, 0}, {1, 9});
  const Tensor padded_types = tensor_i64({0, 0, 0, 1, 1, 1, 0, 0, 0}, {1, 9});
  const Tensor mask = tensor({1, 1, 1, 1, 1, 1, 0, 0, 0}, {1, 9});
  const auto out = model.forward(padded, padded_types, mask);
  check_close(out.hidden.narrow(1, 0, 6), plain.hidden, 1e-5f, 1e-5f, "padded hidden");
  check_close(out.nsp_logits, plain.nsp_logits, 1e-5f, 1e-5f, "padded nsp");
  // Token types matter, and default to 0.
  const auto zero_types = model.forward(ids, tensor_i64({0, 0, 0, 0, 0, 0}, {1, 6}));
  check_close(model.forward(ids).hidden, zero_types.hidden, 0.0f, 0.0f, "default types");
  CHECK(max(abs(zero_types.hidden - plain.hidden)).item() > 1e-3f);
}

TEST_CASE("Bert dropout: random in training, the identity in evaluation") {
  BertConfig c = tiny_config();
  c.dropout = 0.3f;
  manual_seed(5);
  Bert model(c);
  const Tensor ids = tensor_i64({2, 5, 9, 3, 7, 11}, {1, 6});
  model.train();
  CHECK(max(abs(model.forward(ids).hidden - model.forward(ids).hidden)).item() > 1e-4f);
  model.eval();
  NoGradGuard no_grad;
  check_close(model.forward(ids).hidden, model.forward(ids).hidden, 0.0f, 0.0f, "eval");
}

TEST_CASE("Bert rejects bad inputs, naming Bert and the shapes or values") {
  Bert model(tiny_config());
  const Tensor ids = tensor_i64({2, 5, 9}, {1, 3});
  expect_error([&] { model.forward(tensor({1, 2, 3}, {1, 3})); }, {"Bert", "int64 ids", "float32"});
  expect_error([&] { model.forward(tensor_i64({1, 2, 3}, {3})); }, {"Bert", "[B, T]", "[3]"});
  expect_error(
      [&] {
        model.forward(tensor_i64(std::vector<int64_t>(13, 1), {1, 13}));
      },
      {"Bert", "[1,13]", "max_position 12"});
  expect_error(
      [&] {
        model.forward(ids, tensor_i64({0, 1}, {1, 2}));
      },
      {"Bert", "token_type_ids", "[1,2]"});
  expect_error(
      [&] {
        model.forward(ids, Tensor(), tensor_i64({1, 2, 1}, {1, 3}));
      },
      {"Bert", "attention_mask", "2"});
  expect_error(
      [&] {
        model.forward(ids, Tensor(), tensor({1, 1}, {1, 2}));
      },
      {"Bert", "attention_mask", "[1,2]"});
  const auto out = model.forward(ids);
  expect_error(
      [&] { models::bert_pretraining_loss(out, tensor_i64({1}, {1}), tensor_i64({0}, {1})); },
      {"bert_pretraining_loss", "[1,3,40]"});
}

TEST_CASE("BertConfig round-trips through metadata and names bad keys") {
  BertConfig c = BertConfig::preset("bert-mini");
  const auto meta = c.to_metadata();
  CHECK(meta.at("model_type") == "bert");
  const BertConfig back = BertConfig::from_metadata(meta);
  CHECK(back.to_string() == c.to_string());
  CHECK(back.layer_norm_eps == c.layer_norm_eps);
  auto missing = meta;
  missing.erase("hidden");
  expect_error([&] { BertConfig::from_metadata(missing, "b.safetensors"); },
               {"b.safetensors", "hidden"});
  auto other = meta;
  other["model_type"] = "gpt";
  expect_error([&] { BertConfig::from_metadata(other, "f"); }, {"model_type", "gpt"});
}

TEST_CASE("BertForSequenceClassification: HF names, shapes, and it learns 4 sequences") {
  BertConfig c = tiny_config();
  manual_seed(7);
  models::BertForSequenceClassification model(c, 2);
  std::set<std::string> names;
  for (const auto& [name, p] : model.named_parameters()) names.insert(name);
  CHECK(names.count("classifier.weight") == 1);
  CHECK(names.count("bert.pooler.dense.weight") == 1);
  CHECK(names.count("bert.encoder.layer.1.output.LayerNorm.bias") == 1);
  const Tensor ids = tensor_i64({2, 5, 9, 3, 2, 6, 6, 3, 2, 9, 5, 3, 2, 7, 7, 3}, {4, 4});
  const Tensor labels = tensor_i64({0, 1, 0, 1}, {4});
  optim::AdamW opt(model.parameters(), 3e-3f, 0.9f, 0.999f, 1e-8f, 0.0f);
  for (int step = 0; step < 40; ++step) {
    const Tensor loss = cross_entropy(model.forward(ids), labels);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  model.eval();
  NoGradGuard no_grad;
  const Tensor logits = model.forward(ids);
  CHECK(logits.shape() == Shape{4, 2});
  CHECK(argmax(logits, 1).to_vector() == labels.to_vector());
  expect_error([&] { models::BertForSequenceClassification(c, 0); }, {"num_labels 0"});
}
