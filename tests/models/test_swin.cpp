// Swin Transformer: presets and parameter counts, the official checkpoint layout (with and
// without its derived buffers), logits and every parameter gradient against PyTorch
// (tests/golden/gen_swin.py), gradchecks of its layers, errors, metadata, and a short overfit.
#include <unistd.h>

#include <filesystem>

#include "models/swin.h"
#include "io/checkpoint.h"
#include "nn/functional.h"
#include "io/safetensors.h"
#include "models/swin_window.h"
#include "optim/adam.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
using models::Swin;
using models::SwinConfig;
namespace fs = std::filesystem;

namespace {

const std::string kOfficial = std::string(LOOM_TEST_DATA) + "/swin_official.safetensors";

Tensor swin_golden(const std::string& name) {
  static const std::map<std::string, Tensor> tensors =
      nn::read_safetensors(std::string(LOOM_TEST_DATA) + "/swin.safetensors");
  auto it = tensors.find(name);
  REQUIRE_MESSAGE(it != tensors.end(), "swin.safetensors has no tensor " << name);
  return it->second;
}

// CONFIG in gen_swin.py: stage 0 is 8x8 with window 4 (block 1 shifted by 2), stage 1 is 4x4
// (<= window: one window, no shift), PatchMerging between them.
SwinConfig tiny_config() {
  SwinConfig c;
  c.image_size = 16;
  c.patch_size = 2;
  c.in_channels = 2;
  c.num_classes = 3;
  c.embed_dim = 8;
  c.depths = {2, 2};
  c.num_heads = {2, 4};
  c.window_size = 4;
  c.drop_path = 0.1f;
  return c;
}

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("loom_test_swin_" + std::to_string(getpid()) + "_" + name))
      .string();
}

Tensor weighted_sum(const Tensor& out) {
  manual_seed(7);
  return sum(out * randn(out.shape(), out.device()));
}

}  // namespace

TEST_CASE("Swin presets have the benchmark's and Swin-T's parameter counts") {
  const SwinConfig fm = SwinConfig::preset("swin-fmnist");
  CHECK(fm.image_size == 28);
  CHECK(fm.depths == std::vector<int64_t>{2, 4});
  CHECK(Swin(fm).num_parameters() == 931710);
  CHECK(fm.num_parameters() == 931710);
  CHECK(Swin(tiny_config()).num_parameters() == tiny_config().num_parameters());
  CHECK(931710 == static_cast<int64_t>(swin_golden("count.swin-fmnist").item()));
  const SwinConfig t = SwinConfig::preset("swin-t");
  CHECK(t.num_heads == std::vector<int64_t>{3, 6, 12, 24});
  CHECK(t.num_parameters() == 28288354);  // building one takes long: the formula stands in
  CHECK(28288354 == static_cast<int64_t>(swin_golden("count.swin-t").item()));
  expect_error([] { SwinConfig::preset("swin-xxl"); }, {"swin-xxl", "swin-fmnist"});
}

TEST_CASE("Swin's names, shapes and window rules are the official ones") {
  Swin model(tiny_config());
  std::map<std::string, Shape> shapes;
  for (const auto& [name, t] : model.state_dict()) shapes[name] = t.shape();
  // The official file minus its buffers is exactly loom's state dict.
  size_t official_params = 0;
  for (const auto& [name, t] : nn::read_safetensors(kOfficial)) {
    if (name.find("relative_position_index") != std::string::npos ||
        name.find("attn_mask") != std::string::npos)
      continue;
    ++official_params;
    REQUIRE_MESSAGE(shapes.count(name), name);
    CHECK_MESSAGE(shapes[name] == t.shape(), name);
  }
  CHECK(official_params == shapes.size());
  CHECK(shapes["layers.0.blocks.0.attn.relative_position_bias_table"] == Shape{49, 2});
  CHECK(shapes["layers.1.blocks.0.attn.relative_position_bias_table"] == Shape{49, 4});
  CHECK(shapes["layers.0.downsample.reduction.weight"] == Shape{16, 32});
  CHECK(!shapes.count("layers.0.downsample.reduction.bias"));
  const auto& stage0 = *model.stages()[0]->blocks;
  const auto& stage1 = *model.stages()[1]->blocks;
  CHECK(stage0[0]->shift == 0);
  CHECK(stage0[1]->shift == 2);
  CHECK(stage0[1]->attn_mask.shape() == Shape{4, 16, 16});
  CHECK(stage1[1]->shift == 0);  // 4x4 <= window 4: one window, never shifted
  CHECK(!stage1[1]->attn_mask.defined());
  // A stage smaller than the window: one window of the stage's size, its own table size.
  SwinConfig big_window = tiny_config();
  big_window.window_size = 8;  // stage 0 is 8x8 (= window), stage 1 is 4x4 (< window)
  Swin wide(big_window);
  CHECK((*wide.stages()[0]->blocks)[1]->shift == 0);
  CHECK((*wide.stages()[1]->blocks)[0]->window == 4);
  CHECK((*wide.stages()[1]->blocks)[0]->attn->relative_position_bias_table.shape() ==
        Shape{49, 4});
  CHECK(wide.num_parameters() == big_window.num_parameters());
  // Drop-path rates linspace(0, 0.1, 4).
  CHECK(stage0[0]->drop_path->p == 0.0f);
  CHECK(stage1[1]->drop_path->p == doctest::Approx(0.1));
  CHECK(stage0[1]->drop_path->p == doctest::Approx(0.1 / 3));
}

TEST_CASE("Swin loads the official state_dict (with its buffers) and matches PyTorch's logits") {
  Swin model(tiny_config());
  nn::load(model, kOfficial);
  model.eval();
  const Tensor logits = model.forward(swin_golden("images"));
  check_close(logits, swin_golden("logits"), 1e-4f, 1e-4f, "logits");

  // Loss and the gradient of every parameter.
  const Tensor loss = nn::functional::cross_entropy(logits, swin_golden("targets"));
  check_close(loss, swin_golden("loss"), 1e-4f, 1e-5f, "loss");
  loss.backward();
  for (const auto& [name, p] : model.named_parameters()) {
    REQUIRE_MESSAGE(p.grad().defined(), name);
    check_close(p.grad(), swin_golden("grad." + name), 1e-3f, 1e-5f, "grad." + name);
  }
}

TEST_CASE("Swin loads without the buffers too, and still rejects unknown names") {
  std::map<std::string, Tensor> state;
  for (const auto& [name, t] : nn::read_safetensors(kOfficial))
    if (name.find("relative_position_index") == std::string::npos &&
        name.find("attn_mask") == std::string::npos)
      state[name] = t;
  Swin model(tiny_config());
  nn::load_state_dict(model, state, "without buffers");
  model.eval();
  check_close(model.forward(swin_golden("images")), swin_golden("logits"), 1e-4f, 1e-4f,
              "logits");
  // The buffers are never read: a garbled relative_position_index changes nothing.
  state["layers.0.blocks.0.attn.relative_position_index"] = zeros({3});
  CHECK_NOTHROW(nn::load_state_dict(model, state, "garbled buffer"));
  // An attn_mask where the model has none (unshifted block), or a stray name, is unexpected.
  state["layers.1.blocks.1.attn_mask"] = zeros({1});
  expect_error([&] { nn::load_state_dict(model, state, "extra"); },
               {"unexpected", "layers.1.blocks.1.attn_mask"});
  state.erase("layers.1.blocks.1.attn_mask");
  state.erase("head.bias");
  expect_error([&] { nn::load_state_dict(model, state, "missing"); }, {"missing", "head.bias"});

  // loom's own files hold no buffers and load back.
  const std::string path = temp_path("roundtrip.safetensors");
  nn::save(model, path, tiny_config().to_metadata());
  for (const auto& [name, t] : nn::read_safetensors(path))
    CHECK_MESSAGE(name.find("relative_position_index") == std::string::npos, name);
  const SwinConfig back = SwinConfig::from_metadata(nn::read_metadata(path), path);
  Swin reloaded(back);
  nn::load(reloaded, path);
  reloaded.eval();
  check_close(reloaded.forward(swin_golden("images")), swin_golden("logits"), 1e-4f, 1e-4f,
              "reloaded");
  fs::remove(path);
}

TEST_CASE("PatchMerging equals the official concatenation order and has gradients") {
  Swin model(tiny_config());
  nn::load(model, kOfficial);
  const auto& merge = model.stages()[0]->downsample;
  check_close(merge->forward(swin_golden("merge.x")), swin_golden("merge.out"), 1e-4f, 1e-5f,
              "merge");
  // Gradients wrt the input and the reduction weight (a parameter is a leaf: gradcheck
  // perturbs it in place).
  models::SwinPatchMerging small(2, 3);
  manual_seed(4);
  const Tensor x = randn({2, 4, 3});
  gradcheck([&](const std::vector<Tensor>& in) { return weighted_sum(small.forward(in[0])); },
            {x}, 1e-2f, 2e-2f, 2e-3f, "PatchMerging x");
  gradcheck([&](const std::vector<Tensor>&) { return weighted_sum(small.forward(x)); },
            {small.reduction->weight, small.norm->weight}, 1e-2f, 2e-2f, 2e-3f,
            "PatchMerging weights");
}

TEST_CASE("Window attention with relative bias and shift mask: gradcheck") {
  manual_seed(5);
  models::SwinWindowAttention attn(4, 2, 2);  // 2x2 windows, 2 heads of 2
  nn::init::normal_(attn.relative_position_bias_table, 0.0, 0.5);
  const Tensor mask = models::shifted_window_mask(4, 4, 2, 1);  // (4, 4, 4)
  const Tensor x = randn({8, 4, 4});                                    // 2 images x 4 windows
  for (const bool masked : {false, true}) {
    gradcheck(
        [&](const std::vector<Tensor>& in) {
          return weighted_sum(attn.forward(in[0], masked ? mask : Tensor()));
        },
        {x}, 1e-2f, 2e-2f, 2e-3f, masked ? "x, masked" : "x");
    gradcheck(
        [&](const std::vector<Tensor>&) {
          return weighted_sum(attn.forward(x, masked ? mask : Tensor()));
        },
        {attn.relative_position_bias_table, attn.qkv->weight}, 1e-2f, 2e-2f, 2e-3f,
        masked ? "table, qkv, masked" : "table, qkv");
  }
}

TEST_CASE("A whole tiny Swin: the loss's gradient wrt a few parameters (gradcheck)") {
  SwinConfig c = tiny_config();
  c.image_size = 8;  // 4x4 map, window 2 -> stage 0 shifted; stage 1 2x2 = one window
  c.window_size = 2;
  c.embed_dim = 4;
  c.num_heads = {1, 2};
  Swin model(c);
  model.eval();
  manual_seed(6);
  const Tensor images = randn({2, 2, 8, 8});
  const Tensor targets = tensor_i64({1, 2}, {2});
  const auto params = model.named_parameters();
  std::map<std::string, Tensor> by_name(params.begin(), params.end());
  for (const char* name : {"layers.0.blocks.1.attn.relative_position_bias_table",
                           "layers.0.downsample.norm.bias", "patch_embed.proj.bias",
                           "layers.1.blocks.0.mlp.fc1.bias"})
    gradcheck(
        [&](const std::vector<Tensor>&) {
          return nn::functional::cross_entropy(model.forward(images), targets);
        },
        {by_name.at(name)}, 1e-2f, 3e-2f, 3e-3f, name);
}

TEST_CASE("Swin rejects bad configs and images with errors naming the values") {
  SwinConfig c = tiny_config();
  c.image_size = 15;  // not a whole number of 2x2 patches
  expect_error([&] { Swin m(c); }, {"Swin", "image_size 15", "patch_size 2"});
  c = tiny_config();
  c.image_size = 20;  // 10x10 map > window 4 but not a multiple of it
  expect_error([&] { Swin m(c); }, {"Swin", "resolution 10", "window_size 4"});
  c = tiny_config();
  c.num_heads = {3, 4};  // 8 channels in 3 heads
  expect_error([&] { Swin m(c); }, {"Swin", "width 8", "3 heads"});
  c = tiny_config();
  c.num_heads = {2};
  expect_error([&] { Swin m(c); }, {"Swin", "depths [2, 2]", "num_heads [2]"});
  c = tiny_config();
  c.depths = {2, 0};  // each field's check covers every stage of a list
  expect_error([&] { Swin m(c); }, {"SwinConfig", "depths=[2, 0] must be positive"});
  c = tiny_config();
  c.drop_path = 1.0f;
  expect_error([&] { c.validate(); }, {"SwinConfig", "drop_path=1 must be in [0, 1)"});
  c = tiny_config();
  c.image_size = 12;  // 6x6 -> 3x3 -> PatchMerging of an odd map
  c.window_size = 3;
  c.depths = {1, 1, 1};
  c.num_heads = {1, 1, 1};
  expect_error([&] { Swin m(c); }, {"Swin", "stage 1", "resolution 3", "odd"});

  Swin model(tiny_config());
  expect_error([&] { model.forward(zeros({2, 2, 16, 12})); },
               {"Swin", "[B, 2, 16, 16]", "[2,2,16,12]"});
  expect_error([&] { model.forward(zeros({2, 3, 16, 16})); }, {"Swin", "[2,3,16,16]"});
}

TEST_CASE("SwinConfig round-trips through checkpoint metadata") {
  SwinConfig c = SwinConfig::preset("swin-t");
  c.dropout = 0.1f;
  const auto meta = c.to_metadata();
  CHECK(meta.at("model_type") == "swin");
  CHECK(meta.at("depths") == "2,2,6,2");
  const SwinConfig back = SwinConfig::from_metadata(meta, "m");
  CHECK(back.to_string() == c.to_string());
  auto bad = meta;
  bad["num_heads"] = "3,x,12,24";
  expect_error([&] { SwinConfig::from_metadata(bad, "file.st"); }, {"file.st", "num_heads"});
  bad = meta;
  bad["model_type"] = "gpt";
  expect_error([&] { SwinConfig::from_metadata(bad, "file.st"); }, {"file.st", "gpt"});
  bad = meta;
  bad.erase("window_size");
  expect_error([&] { SwinConfig::from_metadata(bad, "file.st"); }, {"file.st", "window_size"});
  bad = meta;
  bad["window_size"] = "5";  // 56 is not a multiple of 5
  expect_error([&] { SwinConfig::from_metadata(bad, "file.st"); }, {"file.st", "window_size 5"});
}

TEST_CASE("A tiny Swin overfits 8 random images") {
  SwinConfig c = tiny_config();
  c.drop_path = 0.0f;
  c.num_classes = 4;
  manual_seed(8);
  Swin model(c);
  const Tensor images = randn({8, 2, 16, 16});
  const Tensor labels = tensor_i64({0, 1, 2, 3, 0, 1, 2, 3}, {8});
  optim::AdamW opt(model.parameters(), 3e-3f);
  float first = 0.0f, last = 0.0f;
  for (int step = 0; step < 50; ++step) {
    opt.zero_grad();
    const Tensor loss = nn::functional::cross_entropy(model.forward(images), labels);
    loss.backward();
    opt.step();
    last = loss.item();
    if (step == 0) first = last;
  }
  CHECK(first > 1.0f);
  CHECK(last < 0.2f);
  model.eval();
  CHECK(argmax(model.forward(images), 1).to_vector() == labels.to_vector());
}
