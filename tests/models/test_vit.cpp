// ViT: presets and parameter counts (the benchmark's and timm's), loading a timm state_dict and
// matching PyTorch's logits, attention probabilities and gradients, finite-difference gradients,
// dropout in training and evaluation, metadata, input errors, and a tiny ViT that overfits.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include "models/vit.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
using models::ViT;
using models::ViTConfig;

namespace {

const std::string kGolden = std::string(LOOM_TEST_DATA) + "/vit.safetensors";

const std::map<std::string, Tensor>& vit_golden() {
  static const std::map<std::string, Tensor> tensors = nn::read_safetensors(kGolden);
  return tensors;
}

Tensor vit_golden(const std::string& name) {
  auto it = vit_golden().find(name);
  REQUIRE_MESSAGE(it != vit_golden().end(), "vit.safetensors has no tensor " << name);
  return it->second;
}

// CONFIG in gen_vit.py.
ViTConfig tiny_vit_config() {
  ViTConfig c;
  c.image_size = 8;
  c.patch_size = 4;
  c.in_channels = 2;
  c.num_classes = 3;
  c.d_model = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_ff = 32;
  return c;
}

}  // namespace

TEST_CASE("ViT presets: sizes and parameter counts of the benchmark's ViT and timm's ViT-B/16") {
  const ViTConfig tiny = ViTConfig::preset("vit-tiny-fmnist");
  CHECK(tiny.image_size == 28);
  CHECK(tiny.patch_size == 7);
  CHECK(tiny.d_model == 64);
  CHECK(tiny.d_ff == 128);
  const ViTConfig fmnist = ViTConfig::preset("vit-fmnist");
  CHECK(fmnist.patch_size == 4);
  CHECK(fmnist.num_patches() == 49);
  // The benchmark's ViT has 1,199,882 parameters; timm counts 86,567,656 for ViT-B/16.
  CHECK(fmnist.num_parameters() == 1199882);
  CHECK(ViTConfig::preset("vit-b16").num_parameters() == 86567656);
  for (const auto& name : ViTConfig::preset_names()) {
    CHECK_NOTHROW(ViTConfig::preset(name).validate());
    // count.<preset>: sum of numel over gen_vit.py's PyTorch ViT of that size.
    CHECK_MESSAGE(ViTConfig::preset(name).num_parameters() ==
                      static_cast<int64_t>(vit_golden("count." + name).item()),
                  name);
  }
  // The built models agree with the formula (ViT-B/16 takes too long to initialise here).
  CHECK(ViT(fmnist).num_parameters() == 1199882);
  CHECK(ViT(tiny).num_parameters() == tiny.num_parameters());
  expect_error([] { ViTConfig::preset("vit-h14"); }, {"ViTConfig::preset", "vit-h14"});
}

TEST_CASE("ViTConfig::validate names the invalid field") {
  ViTConfig c = tiny_vit_config();
  c.image_size = 10;
  expect_error([&] { c.validate(); }, {"ViTConfig", "image_size 10", "patch_size 4"});
  c = tiny_vit_config();
  c.n_head = 3;
  expect_error([&] { ViT{c}; }, {"ViTConfig", "d_model 16", "n_head 3"});
  c = tiny_vit_config();
  c.dropout = 1.0f;
  expect_error([&] { c.validate(); }, {"ViTConfig", "dropout"});
  c = tiny_vit_config();
  c.d_ff = 0;
  expect_error([&] { c.validate(); }, {"ViTConfig", "positive", "d_ff=0"});
}

TEST_CASE("ViT parameter names are timm's and a timm state_dict loads with nn::load") {
  ViT model(tiny_vit_config());
  std::vector<std::string> names;
  for (const auto& [name, p] : model.named_parameters()) names.push_back(name);
  std::vector<std::string> expected = {"cls_token", "pos_embed", "patch_embed.proj.weight",
                                       "patch_embed.proj.bias"};
  for (int i = 0; i < 2; ++i)
    for (const char* s : {"norm1.weight", "norm1.bias", "attn.qkv.weight", "attn.qkv.bias",
                          "attn.proj.weight", "attn.proj.bias", "norm2.weight", "norm2.bias",
                          "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias"})
      expected.push_back("blocks." + std::to_string(i) + "." + s);
  for (const char* s : {"norm.weight", "norm.bias", "head.weight", "head.bias"})
    expected.push_back(s);
  CHECK(names == expected);
  CHECK(model.buffers().empty());
  CHECK(model.state_dict().size() == expected.size());
  CHECK(model.pos_embed.shape() == Shape{1, 5, 16});
  CHECK(model.cls_token.shape() == Shape{1, 1, 16});
}

TEST_CASE("ViT logits, attention probabilities, loss and gradients match PyTorch") {
  ViT model(tiny_vit_config());
  // The golden file holds the timm-named state_dict next to inputs and outputs: saved alone, as
  // torch.save(model.state_dict()) would be in safetensors, it loads with nn::load's strict
  // name and shape check.
  nn::NamedTensors state;
  for (const auto& [name, t] : vit_golden()) {
    bool golden_only = false;
    for (const char* prefix : {"input.", "out.", "grad.", "count."})
      golden_only = golden_only || name.rfind(prefix, 0) == 0;
    if (!golden_only) state.emplace_back(name, t);
  }
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("loom_test_vit_" + std::to_string(getpid()) + ".safetensors"))
                               .string();
  nn::write_safetensors(path, state);
  nn::load(model, path);
  std::filesystem::remove(path);
  model.eval();
  std::vector<Tensor> attentions;
  const Tensor logits = model.forward(vit_golden("input.images"), &attentions);  // (2, 3)
  check_close(logits, vit_golden("out.logits"), 1e-4f, 1e-4f, "logits");
  REQUIRE(attentions.size() == 2);
  CHECK(attentions[1].shape() == Shape{2, 2, 5, 5});
  check_close(attentions[0], vit_golden("out.attn0"), 1e-4f, 1e-5f, "block 0 attention");
  // The plain forward gives the same logits.
  check_close(model.forward(vit_golden("input.images")), logits, 0.0f, 0.0f, "forward");

  const Tensor loss = cross_entropy(logits, vit_golden("input.targets"));
  check_close(loss, vit_golden("out.loss"), 1e-5f, 1e-5f, "loss");
  loss.backward();
  for (const auto& [name, p] : model.named_parameters()) {
    REQUIRE_MESSAGE(p.grad().defined(), name << " got no gradient");
    check_close(p.grad(), vit_golden("grad." + name), 1e-3f, 1e-5f, "grad " + name);
  }
}

TEST_CASE("ViT gradients match finite differences") {
  ViTConfig c = tiny_vit_config();
  c.n_layer = 1;
  manual_seed(3);
  ViT model(c);
  {  // larger weights than the initialisation, so every path carries signal
    NoGradGuard no_grad;
    for (auto& p : model.parameters()) p.copy_(randn(p.shape()) * 0.3f);
  }
  const Tensor images = randn({2, 2, 8, 8});
  const Tensor targets = tensor_i64({2, 0}, {2});
  // gradcheck perturbs its inputs in place; the parameters are handles to the module's storage,
  // so the model sees every perturbation.
  auto loss = [&](const std::vector<Tensor>&) {
    return cross_entropy(model.forward(images), targets);
  };
  for (const Tensor& p : {model.cls_token, model.pos_embed, model.block_list()[0]->attn->qkv->bias,
                          model.patch_embed->proj->bias, model.head->bias}) {
    gradcheck(loss, {p}, 1e-2f, 3e-2f, 2e-3f);
  }
}

TEST_CASE("ViT dropout: random in training, the identity in evaluation") {
  ViTConfig c = tiny_vit_config();
  c.dropout = 0.3f;
  manual_seed(5);
  ViT model(c);
  const Tensor images = randn({2, 2, 8, 8});
  model.train();
  const Tensor a = model.forward(images), b = model.forward(images);
  CHECK(max(abs(a - b)).item() > 1e-4f);
  model.eval();
  NoGradGuard no_grad;
  const Tensor e1 = model.forward(images), e2 = model.forward(images);
  check_close(e1, e2, 0.0f, 0.0f, "eval is deterministic");
  // In evaluation the dropout model equals the same weights without dropout.
  ViTConfig plain = c;
  plain.dropout = 0.0f;
  ViT reference(plain);
  const nn::NamedTensors weights = model.state_dict();
  nn::load_state_dict(reference, {weights.begin(), weights.end()}, "model");
  check_close(reference.forward(images), e1, 0.0f, 0.0f, "eval = no dropout");
}

TEST_CASE("ViT rejects images of the wrong shape, naming ViT and the shapes") {
  ViT model(tiny_vit_config());
  expect_error([&] { model.forward(randn({2, 3, 8, 8})); }, {"ViT", "[2,3,8,8]", "channels"});
  expect_error([&] { model.forward(randn({2, 2, 10, 10})); },
               {"ViT", "[2,2,10,10]", "4x4 patches"});
  expect_error([&] { model.forward(randn({2, 2, 12, 12})); }, {"ViT", "[2,2,12,12]", "8x8"});
  expect_error([&] { model.forward(randn({2, 8, 8})); }, {"ViT", "[2,8,8]", "[B, C, H, W]"});
}

TEST_CASE("ViTConfig round-trips through metadata and names bad keys") {
  ViTConfig c = ViTConfig::preset("vit-fmnist");
  c.dropout = 0.1f;
  const auto meta = c.to_metadata();
  CHECK(meta.at("model_type") == "vit");
  const ViTConfig back = ViTConfig::from_metadata(meta);
  CHECK(back.to_string() == c.to_string());
  CHECK(back.dropout == c.dropout);
  auto missing = meta;
  missing.erase("patch_size");
  expect_error([&] { ViTConfig::from_metadata(missing, "file 'v.safetensors'"); },
               {"v.safetensors", "patch_size"});
  auto other = meta;
  other["model_type"] = "gpt";
  expect_error([&] { ViTConfig::from_metadata(other, "f"); }, {"model_type", "gpt"});
  auto invalid = meta;
  invalid["patch_size"] = "5";  // 28 is not a multiple of 5
  expect_error([&] { ViTConfig::from_metadata(invalid, "f"); }, {"f", "patch_size 5"});
}

TEST_CASE("A tiny ViT learns 8 random images to 100% accuracy") {
  ViTConfig c = tiny_vit_config();
  c.num_classes = 4;
  manual_seed(11);
  ViT model(c);
  const Tensor images = randn({8, 2, 8, 8});
  const Tensor labels = tensor_i64({0, 1, 2, 3, 0, 1, 2, 3}, {8});
  optim::AdamW opt(model.parameters(), 1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f);
  float loss_value = 0.0f;
  for (int step = 0; step < 60; ++step) {
    const Tensor loss = cross_entropy(model.forward(images), labels);
    opt.zero_grad();
    loss.backward();
    opt.step();
    loss_value = loss.item();
  }
  NoGradGuard no_grad;
  const Tensor predicted = argmax(model.forward(images), 1);
  CHECK(predicted.to_vector() == labels.to_vector());
  CHECK(loss_value < 0.05f);
}
