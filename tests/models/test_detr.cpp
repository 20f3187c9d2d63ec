// DETR: presets and parameter counts (the benchmark's detr-fmnist, the official DETR-R50), the
// facebookresearch/detr names, loading an official-layout state_dict (ResNet backbone with
// FrozenBatchNorm2d, and the small CNN) and matching PyTorch's outputs, aux outputs, position
// encoding and gradients (detr.safetensors, gen_detr.py), the pixel mask, and input errors.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include "models/detr.h"
#include "io/safetensors.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
using models::DETR;
using models::DETRConfig;

namespace {

const std::map<std::string, Tensor>& detr_golden() {
  static const std::map<std::string, Tensor> t =
      nn::read_safetensors(std::string(LOOM_TEST_DATA) + "/detr.safetensors");
  return t;
}

Tensor golden(const std::string& name) {
  auto it = detr_golden().find(name);
  REQUIRE_MESSAGE(it != detr_golden().end(), "detr.safetensors has no tensor " << name);
  return it->second;
}

// CONFIG_R and CONFIG_S of gen_detr.py.
DETRConfig tiny_resnet_config() {
  DETRConfig c;
  c.num_classes = 4;
  c.hidden = 16;
  c.n_head = 2;
  c.n_encoder_layers = 2;
  c.n_decoder_layers = 3;
  c.d_ff = 32;
  c.num_queries = 5;
  c.resnet_layers = {1, 1, 1, 1};
  c.resnet_width = 2;
  return c;
}

DETRConfig tiny_small_config() {
  DETRConfig c;
  c.num_classes = 3;
  c.backbone = "small";
  c.in_channels = 1;
  c.hidden = 8;
  c.n_head = 2;
  c.n_encoder_layers = 1;
  c.n_decoder_layers = 2;
  c.d_ff = 16;
  c.num_queries = 4;
  c.small_channels = {4, 8, 8};
  return c;
}

// The state_dict of model `prefix` ("r." or "s.") written alone, as torch.save(model.state_dict())
// converted to safetensors would be; with_model_prefix adds the official checkpoint's "model.".
std::string write_state_dict(const std::string& prefix, bool with_model_prefix = false) {
  nn::NamedTensors state;
  for (const auto& [name, t] : detr_golden()) {
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    if (rest.rfind("input.", 0) == 0 || rest.rfind("out.", 0) == 0 || rest.rfind("grad.", 0) == 0)
      continue;
    state.emplace_back((with_model_prefix ? "model." : "") + rest, t);
  }
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("loom_test_detr_" + std::to_string(getpid()) + prefix + "safetensors"))
                               .string();
  nn::write_safetensors(path, state);
  return path;
}

// Loads model `prefix`, runs it on the golden inputs and compares every output and gradient.
void check_against_pytorch(const std::string& prefix, const DETRConfig& config,
                           bool with_model_prefix) {
  DETR model(config);
  const std::string path = write_state_dict(prefix, with_model_prefix);
  models::load_detr(model, path);
  std::filesystem::remove(path);
  model.eval();
  const auto out = model.forward(golden(prefix + "input.images"), golden(prefix + "input.mask"));
  const Tensor logits_all = golden(prefix + "out.logits"), boxes_all = golden(prefix + "out.boxes");
  const int64_t L = logits_all.size(0);
  REQUIRE(static_cast<int64_t>(out.aux_logits.size()) == L - 1);
  REQUIRE(out.aux_boxes.size() == out.aux_logits.size());
  check_close(out.logits, logits_all.select(0, L - 1), 1e-4f, 1e-4f, prefix + "logits");
  check_close(out.boxes, boxes_all.select(0, L - 1), 1e-4f, 1e-5f, prefix + "boxes");
  for (int64_t i = 0; i + 1 < L; ++i) {
    check_close(out.aux_logits[i], logits_all.select(0, i), 1e-4f, 1e-4f,
                prefix + "aux logits " + std::to_string(i));
    check_close(out.aux_boxes[i], boxes_all.select(0, i), 1e-4f, 1e-5f,
                prefix + "aux boxes " + std::to_string(i));
  }
  // The same weighted sum as gen_detr.py, over every layer, backpropagated.
  const Tensor wl = golden(prefix + "input.wl"), wb = golden(prefix + "input.wb");
  Tensor objective = sum(out.logits * wl.select(0, L - 1)) + sum(out.boxes * wb.select(0, L - 1));
  for (int64_t i = 0; i + 1 < L; ++i)
    objective = objective + sum(out.aux_logits[i] * wl.select(0, i)) +
                sum(out.aux_boxes[i] * wb.select(0, i));
  objective.backward();
  for (const auto& [name, p] : model.named_parameters()) {
    REQUIRE_MESSAGE(p.grad().defined(), name << " got no gradient");
    check_close(p.grad(), golden(prefix + "grad." + name), 1e-3f, 1e-4f, "grad " + name);
  }
}

}  // namespace

TEST_CASE("DETR presets: the benchmark's detr-fmnist and the official DETR-R50 parameter counts") {
  const DETRConfig fmnist = DETRConfig::preset("detr-fmnist");
  CHECK(fmnist.backbone == "small");
  CHECK(fmnist.num_queries == 10);
  CHECK(fmnist.num_parameters() == 1682159);  // bench/reference/models.py's DETR
  CHECK(DETR(fmnist).num_parameters() == 1682159);
  const DETRConfig r50 = DETRConfig::preset("detr-r50");
  CHECK(r50.num_classes == 91);
  CHECK(r50.num_queries == 100);
  // 41,524,768 = the official main.py's 41,302,368 trainable + conv1 and layer1 (222,400),
  // which the official training freezes.
  CHECK(r50.num_parameters() == 41524768);
  for (const auto& name : DETRConfig::preset_names())
    CHECK_MESSAGE(DETRConfig::preset(name).num_parameters() ==
                      static_cast<int64_t>(golden("count." + name).item()),
                  name);
  CHECK(DETR(tiny_resnet_config()).num_parameters() == tiny_resnet_config().num_parameters());
  CHECK(DETR(tiny_small_config()).num_parameters() == tiny_small_config().num_parameters());
  expect_error([] { DETRConfig::preset("detr-r101"); }, {"DETRConfig::preset", "detr-r101"});
}

TEST_CASE("DETR parameter and buffer names are facebookresearch/detr's") {
  DETR model(tiny_resnet_config());
  std::map<std::string, Shape> names;
  for (const auto& [name, t] : model.state_dict()) names[name] = t.shape();
  for (const char* name :
       {"backbone.0.body.conv1.weight", "backbone.0.body.bn1.running_var",
        "backbone.0.body.layer1.0.downsample.0.weight", "backbone.0.body.layer4.0.bn3.weight",
        "input_proj.weight", "query_embed.weight",
        "transformer.encoder.layers.1.self_attn.in_proj_weight",
        "transformer.encoder.layers.0.linear2.bias", "transformer.encoder.layers.0.norm2.weight",
        "transformer.decoder.layers.2.multihead_attn.out_proj.weight",
        "transformer.decoder.layers.0.norm3.bias", "transformer.decoder.norm.weight",
        "class_embed.weight", "bbox_embed.layers.2.bias"})
    CHECK_MESSAGE(names.count(name) == 1, name);
  CHECK(names["backbone.0.body.conv1.weight"] == Shape{2, 3, 7, 7});
  CHECK(names["class_embed.weight"] == Shape{5, 16});
  CHECK(names["input_proj.weight"] == Shape{16, 64, 1, 1});
  // Frozen BN statistics and affine terms are buffers, never trained.
  for (const auto& [name, p] : model.named_parameters())
    CHECK_MESSAGE(name.find(".bn") == std::string::npos, name);
  DETR small(tiny_small_config());
  std::map<std::string, Shape> small_names;
  for (const auto& [name, t] : small.state_dict()) small_names[name] = t.shape();
  CHECK(small_names["backbone.0.weight"] == Shape{4, 1, 3, 3});
  CHECK(small_names["backbone.1.running_mean"] == Shape{4});
  CHECK(small_names["backbone.6.weight"] == Shape{8, 8, 3, 3});
  CHECK(small_names.count("backbone.7.num_batches_tracked") == 1);
}

TEST_CASE("DETR with a ResNet backbone matches PyTorch: outputs, aux outputs, gradients") {
  check_against_pytorch("r.", tiny_resnet_config(), /*with_model_prefix=*/false);
}

TEST_CASE("DETR with the small CNN matches PyTorch; an official {'model': ...} file loads") {
  check_against_pytorch("s.", tiny_small_config(), /*with_model_prefix=*/true);
}

TEST_CASE("DETR sine position encoding of a padded mask matches PositionEmbeddingSine") {
  for (const std::string prefix : {"r.", "s."}) {
    const Tensor expected = golden(prefix + "out.pos");  // (B, d, h, w)
    // The golden mask at feature resolution, resized as DETR::forward does (nearest).
    const Tensor mask = golden(prefix + "input.mask").to(DType::Float32);  // (B, H, W)
    const int64_t h = expected.size(2), w = expected.size(3);
    std::vector<int64_t> rows, cols;
    for (int64_t i = 0; i < h; ++i) rows.push_back(i * mask.size(1) / h);
    for (int64_t j = 0; j < w; ++j) cols.push_back(j * mask.size(2) / w);
    const Tensor small = index_select(index_select(mask, 1, tensor_i64(rows, {h})), 2,
                                      tensor_i64(cols, {w}));  // (B, h, w)
    const Tensor pos = models::sine_position_embedding(small, expected.size(1) / 2);
    check_close(pos.permute({0, 3, 1, 2}), expected, 1e-5f, 1e-5f, prefix + "pos");
  }
  expect_error(
      [] {
        models::sine_position_embedding(zeros({2, 3}), 4);
      },
      {"sine_position_embedding", "[2,3]"});
}

TEST_CASE("DETR: padding changes nothing when the mask is all zeros; a mask moves outputs") {
  manual_seed(1);
  DETR model(tiny_small_config());
  model.eval();
  NoGradGuard no_grad;
  const Tensor images = randn({2, 1, 32, 24});
  const auto plain = model.forward(images);
  const auto zero_mask = model.forward(images, zeros({2, 32, 24}));
  check_close(zero_mask.logits, plain.logits, 0.0f, 1e-6f, "all-zero mask");
  // The right half of every image is padding.
  const Tensor columns = arange_f(0, 24).reshape({1, 1, 24}).expand({2, 32, 24});  // (B, H, W)
  const Tensor mask = ge(columns, full({1}, 12.0f)).to(DType::Int64);
  const auto masked = model.forward(images, mask);
  CHECK(max(abs(masked.logits - plain.logits)).item() > 1e-4f);
  CHECK(masked.boxes.shape() == Shape{2, 4, 4});
  CHECK(max(masked.boxes).item() <= 1.0f);
  CHECK(max(-masked.boxes).item() <= 0.0f);
}

TEST_CASE("DETR rejects bad images and masks, naming DETR and the shapes") {
  DETR model(tiny_small_config());
  expect_error([&] { model.forward(randn({2, 3, 32, 24})); }, {"DETR", "[2,3,32,24]", "[B, 1"});
  expect_error([&] { model.forward(randn({2, 32, 24})); }, {"DETR", "[2,32,24]"});
  expect_error(
      [&] {
        model.forward(randn({2, 1, 32, 24}), zeros({2, 32, 23}));
      },
      {"DETR", "pixel_mask", "[2,32,23]", "[2,32,24]"});
  Tensor all_padding = zeros({2, 32, 24});
  all_padding.narrow(0, 1, 1).fill_(1.0f);  // the second image is padding only
  expect_error(
      [&] {
        model.forward(randn({2, 1, 32, 24}), all_padding);
      },
      {"DETR", "all padding", "4x3"});
  DETRConfig bad = tiny_small_config();
  bad.backbone = "vgg";
  expect_error([&] { DETR{bad}; }, {"DETRConfig", "vgg"});
  bad = tiny_small_config();
  bad.n_head = 3;
  expect_error([&] { bad.validate(); }, {"DETRConfig", "hidden 8", "n_head 3"});
  const std::string path = write_state_dict("r.");
  expect_error([&] { models::load_detr(model, path); }, {"load_detr", path});
  std::filesystem::remove(path);
}

TEST_CASE("DETRConfig round-trips through checkpoint metadata; bad metadata names the key") {
  for (const DETRConfig& c : {DETRConfig::preset("detr-r50"), DETRConfig::preset("detr-fmnist"),
                              tiny_resnet_config(), tiny_small_config()}) {
    const DETRConfig back = DETRConfig::from_metadata(c.to_metadata(), "test");
    CHECK(back.to_string() == c.to_string());
    CHECK(back.small_channels == c.small_channels);
    CHECK(back.resnet_layers == c.resnet_layers);
    CHECK(back.resnet_width == c.resnet_width);
    CHECK(back.dropout == c.dropout);
    CHECK(back == c);
  }
  // The backbone not in use may have an empty list: it is written as "" and read back.
  DETRConfig small = tiny_small_config();
  small.resnet_layers.clear();
  CHECK(small.to_metadata().at("resnet_layers").empty());
  CHECK(DETRConfig::from_metadata(small.to_metadata(), "test") == small);
  auto meta = tiny_small_config().to_metadata();
  CHECK(meta.at("small_channels") == "4,8,8");
  meta.at("small_channels") = "4,x,8";
  expect_error([&] { DETRConfig::from_metadata(meta, "ckpt.safetensors"); },
               {"DETRConfig::from_metadata", "ckpt.safetensors", "small_channels"});
  meta = tiny_small_config().to_metadata();
  meta.erase("hidden");
  expect_error([&] { DETRConfig::from_metadata(meta, "ckpt.safetensors"); }, {"hidden"});
  meta = tiny_small_config().to_metadata();
  meta.at("model_type") = "vit";
  expect_error([&] { DETRConfig::from_metadata(meta, "f"); }, {"model_type", "vit", "detr"});
  meta = tiny_small_config().to_metadata();
  meta.at("n_head") = "3";
  expect_error([&] { DETRConfig::from_metadata(meta, "f"); }, {"DETRConfig", "n_head 3"});
}

TEST_CASE("DETR-R50 at full size runs on a small image: 100 queries, 92 classes, 5 aux outputs") {
  DETR model(DETRConfig::preset("detr-r50"));
  CHECK(model.num_parameters() == 41524768);
  model.eval();
  NoGradGuard no_grad;
  const auto out = model.forward(randn({1, 3, 64, 96}));  // C5 is 2 x 3
  CHECK(out.logits.shape() == Shape{1, 100, 92});
  CHECK(out.boxes.shape() == Shape{1, 100, 4});
  CHECK(out.aux_logits.size() == 5);
  CHECK(std::isfinite(sum(out.logits).item()));
}
