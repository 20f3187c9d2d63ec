// The encoder-decoder Transformer: presets and parameter counts (the benchmark's Seq2Seq and the
// paper's base), loading a state_dict of bench/reference/models.py's layout and matching
// PyTorch's logits and gradients with padding, finite-difference gradients of a whole tiny
// model, masks (padding and causal), pre-norm and untied variants, metadata and input errors.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include "models/transformer.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
using models::Transformer;
using models::TransformerConfig;

namespace {

const std::string kGolden = std::string(LOOM_TEST_DATA) + "/transformer.safetensors";

const std::map<std::string, Tensor>& golden() {
  static const std::map<std::string, Tensor> tensors = nn::read_safetensors(kGolden);
  return tensors;
}

Tensor golden(const std::string& name) {
  auto it = golden().find(name);
  REQUIRE_MESSAGE(it != golden().end(), "transformer.safetensors has no tensor " << name);
  return it->second;
}

// CONFIG in gen_transformer.py.
TransformerConfig tiny_config() {
  TransformerConfig c;
  c.src_vocab_size = c.tgt_vocab_size = 11;
  c.d_model = 16;
  c.n_head = 2;
  c.d_ff = 32;
  c.n_encoder_layers = c.n_decoder_layers = 2;
  c.max_len = 16;
  c.dropout = 0.0f;
  return c;
}

std::string temp_path(const std::string& stem) {
  return (std::filesystem::temp_directory_path() /
          (stem + "_" + std::to_string(getpid()) + ".safetensors"))
      .string();
}

// The golden file's state_dict part ("pe" included), saved alone as torch.save would.
void load_golden_weights(Transformer& model) {
  nn::NamedTensors state;
  for (const auto& [name, t] : golden()) {
    bool golden_only = false;
    for (const char* prefix : {"input.", "out.", "grad.", "count."})
      golden_only = golden_only || name.rfind(prefix, 0) == 0;
    if (!golden_only) state.emplace_back(name, t);
  }
  const std::string path = temp_path("loom_test_transformer");
  nn::write_safetensors(path, state);
  nn::load(model, path);
  std::filesystem::remove(path);
}

}  // namespace

TEST_CASE("Transformer presets: the benchmark's Seq2Seq and the paper's base parameter counts") {
  for (const std::string name : {"seq2seq-mini", "transformer-base"}) {
    const TransformerConfig c = TransformerConfig::preset(name);
    CHECK_MESSAGE(c.num_parameters() == golden("count." + name).to_vector_i64()[0], name);
  }
  const TransformerConfig mini = TransformerConfig::preset("seq2seq-mini");
  CHECK(mini.d_model == 256);
  CHECK(mini.n_head == 4);
  CHECK(mini.share_embeddings);
  CHECK_FALSE(mini.norm_first);
  Transformer model(mini);  // the count the formula gives is the module's
  int64_t total = 0;
  for (const auto& [name, p] : model.named_parameters()) total += p.numel();
  CHECK(total == 5785600);
  expect_error([] { TransformerConfig::preset("transformer-huge"); },
               {"transformer-huge", "seq2seq-mini", "transformer-base"});
}

TEST_CASE("Transformer parameter names are the benchmark's Seq2Seq's") {
  Transformer model(tiny_config());
  std::vector<std::string> names;
  for (const auto& [name, p] : model.named_parameters()) names.push_back(name);
  std::vector<std::string> expected = {"emb.weight"};
  auto linear = [&](const std::string& prefix) {
    expected.push_back(prefix + ".weight");
    expected.push_back(prefix + ".bias");
  };
  for (int i = 0; i < 2; ++i) {
    const std::string p = "enc." + std::to_string(i) + ".";
    for (const char* s : {"attn.q", "attn.k", "attn.v", "attn.o", "ln1", "ff.0", "ff.2", "ln2"})
      linear(p + s);
  }
  for (int i = 0; i < 2; ++i) {
    const std::string p = "dec." + std::to_string(i) + ".";
    for (const char* s :
         {"self_attn.q", "self_attn.k", "self_attn.v", "self_attn.o", "ln1", "cross_attn.q",
          "cross_attn.k", "cross_attn.v", "cross_attn.o", "ln2", "ff.0", "ff.2", "ln3"})
      linear(p + s);
  }
  CHECK(names == expected);
  CHECK(model.state_dict().size() == expected.size());  // the sinusoid table is not saved
}

TEST_CASE("Transformer logits, loss and gradients match PyTorch with source and target padding") {
  Transformer model(tiny_config());
  load_golden_weights(model);
  const Tensor logits = model.forward(golden("input.src"), golden("input.tgt_in"));  // (2, 4, 11)
  check_close(logits, golden("out.logits"), 1e-4f, 1e-4f, "logits");
  const Tensor loss = cross_entropy(logits, golden("input.tgt_out"), /*ignore_index=*/0, 0.1f);
  check_close(loss, golden("out.loss"), 1e-5f, 1e-5f, "loss");
  loss.backward();
  for (const auto& [name, p] : model.named_parameters()) {
    REQUIRE_MESSAGE(p.grad().defined(), name << " got no gradient");
    check_close(p.grad(), golden("grad." + name), 1e-3f, 1e-5f, "grad " + name);
  }
}

TEST_CASE("Transformer gradients of a whole tiny model match finite differences") {
  TransformerConfig c = tiny_config();
  c.n_encoder_layers = c.n_decoder_layers = 1;
  c.d_model = 8;
  c.d_ff = 12;
  c.src_vocab_size = c.tgt_vocab_size = 7;
  manual_seed(3);
  Transformer model(c);
  {
    NoGradGuard no_grad;
    for (auto& p : model.parameters()) p.copy_(randn(p.shape()) * 0.4f);
  }
  const Tensor src = tensor_i64({3, 4, 5, 6, 2, 0}, {2, 3});
  const Tensor tgt_in = tensor_i64({1, 5, 6, 1, 3, 0}, {2, 3});
  const Tensor tgt_out = tensor_i64({5, 6, 2, 3, 2, 0}, {2, 3});
  auto loss = [&](const std::vector<Tensor>&) {
    return cross_entropy(model.forward(src, tgt_in), tgt_out, 0, 0.1f);
  };
  const auto& e = *model.encoder_layers()[0];
  const auto& d = *model.decoder_layers()[0];
  // One tensor from every kind of parameter, encoder to output.
  // The shared embedding gets gradient from the source, the target and the output projection.
  gradcheck(loss, {model.emb->weight}, 1e-2f, 3e-2f, 3e-3f);
  for (const Tensor& p : {e.attn->q->bias, e.attn->v->weight, e.ln1->weight, e.ff->linear1->bias,
                          e.ln2->bias, d.self_attn->k->bias, d.self_attn->o->bias, d.ln1->bias,
                          d.cross_attn->q->bias, d.cross_attn->k->weight, d.cross_attn->v->bias,
                          d.ln2->weight, d.ff->linear2->bias, d.ln3->weight}) {
    gradcheck(loss, {p}, 1e-2f, 3e-2f, 3e-3f);
  }
}

TEST_CASE("Transformer masks: padding keys and future target tokens do not change the outputs") {
  manual_seed(5);
  Transformer model(tiny_config());
  model.eval();
  NoGradGuard no_grad;
  const Tensor src = tensor_i64({3, 7, 2, 0, 0}, {1, 5});
  const Tensor tgt = tensor_i64({1, 6, 3, 10}, {1, 4});
  const Tensor full = model.forward(src, tgt);
  // Padding at the end of the source is as if it were absent.
  check_close(model.forward(tensor_i64({3, 7, 2}, {1, 3}), tgt), full, 1e-5f, 1e-5f,
              "source padding");
  // Changing a later target token leaves earlier positions unchanged (causal mask).
  const Tensor changed = model.forward(src, tensor_i64({1, 6, 3, 4}, {1, 4}));
  check_close(changed.narrow(1, 0, 3), full.narrow(1, 0, 3), 1e-6f, 1e-6f, "causal");
  CHECK(max(abs(changed.narrow(1, 3, 1) - full.narrow(1, 3, 1))).item() > 1e-4f);
}

TEST_CASE("Transformer pre-norm and untied embeddings: extra parameters and working gradients") {
  TransformerConfig c = tiny_config();
  c.norm_first = true;
  c.share_embeddings = false;
  c.tgt_vocab_size = 13;
  manual_seed(7);
  Transformer model(c);
  int64_t total = 0;
  for (const auto& [name, p] : model.named_parameters()) total += p.numel();
  CHECK(total == c.num_parameters());
  CHECK(model.enc_norm != nullptr);
  CHECK(model.out != nullptr);
  const Tensor logits =
      model.forward(tensor_i64({3, 7, 2}, {1, 3}), tensor_i64({1, 12, 3}, {1, 3}));
  CHECK(logits.shape() == Shape{1, 3, 13});
  cross_entropy(logits, tensor_i64({12, 3, 2}, {1, 3})).backward();
  for (const auto& [name, p] : model.named_parameters())
    CHECK_MESSAGE(p.grad().defined(), name << " got no gradient");
  c.src_vocab_size = 11;
  c.share_embeddings = true;  // 11 != 13
  expect_error([&] { c.validate(); }, {"share_embeddings", "11", "13"});
}

TEST_CASE("Transformer dropout: random in training, the identity in evaluation") {
  TransformerConfig c = tiny_config();
  c.dropout = 0.3f;
  manual_seed(9);
  Transformer model(c);
  const Tensor src = tensor_i64({3, 7, 2}, {1, 3}), tgt = tensor_i64({1, 6, 3}, {1, 3});
  const Tensor a = model.forward(src, tgt), b = model.forward(src, tgt);
  CHECK(max(abs(a - b)).item() > 1e-4f);
  model.eval();
  NoGradGuard no_grad;
  check_close(model.forward(src, tgt), model.forward(src, tgt), 0.0f, 0.0f, "eval");
}

TEST_CASE("Transformer rejects bad ids and configs, naming the op and the values") {
  Transformer model(tiny_config());
  const Tensor tgt = tensor_i64({1, 2}, {1, 2});
  expect_error(
      [&] {
        model.forward(tensor({1.0f, 2.0f}, {1, 2}), tgt);
      },
      {"Transformer", "src", "float32", "[1,2]"});
  expect_error([&] { model.forward(tensor_i64({1, 2, 3}, {3}), tgt); }, {"src", "[3]"});
  expect_error(
      [&] {
        model.forward(tensor_i64(std::vector<int64_t>(17, 1), {1, 17}), tgt);
      },
      {"src", "[1,17]", "max_len 16"});
  expect_error(
      [&] {
        model.forward(tensor_i64({1, 2, 3, 4}, {2, 2}), tgt);
      },
      {"batch", "[2,2]", "[1,2]"});
  expect_error([&] { model.forward(tensor_i64({1, 11}, {1, 2}), tgt); }, {"11"});  // vocab 11
  TransformerConfig c = tiny_config();
  c.n_head = 3;
  expect_error([&] { Transformer bad(c); }, {"d_model 16", "n_head 3"});
  c = tiny_config();
  c.pad_id = 11;
  expect_error([&] { c.validate(); }, {"pad_id 11"});
}

TEST_CASE("TransformerConfig round-trips through metadata and names bad keys") {
  TransformerConfig c = TransformerConfig::preset("transformer-base");
  c.norm_first = true;
  c.pad_id = 3;
  const auto meta = c.to_metadata();
  CHECK(meta.at("model_type") == "transformer");
  const TransformerConfig back = TransformerConfig::from_metadata(meta);
  CHECK(back.to_string() == c.to_string());
  auto missing = meta;
  missing.erase("d_ff");
  expect_error([&] { TransformerConfig::from_metadata(missing, "file 't.safetensors'"); },
               {"t.safetensors", "d_ff"});
  auto other = meta;
  other["model_type"] = "gpt";
  expect_error([&] { TransformerConfig::from_metadata(other, "f"); }, {"model_type", "gpt"});
  auto flag = meta;
  flag["norm_first"] = "2";
  expect_error([&] { TransformerConfig::from_metadata(flag, "f"); }, {"norm_first", "2"});
}
