// Issue 40, item 6: every config's validate() checks the model's size against one budget
// (models/model_size.h) before anything is allocated, so a size from a flag or from checkpoint
// metadata ("n_layer": "100000000") is a loom::Error naming the config (and the file), not
// std::bad_alloc after gigabytes; a count that would overflow int64 is refused, not wrapped.
#include <chrono>
#include <cmath>
#include <string>

#include "models/model_size.h"
#include "models/models.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
using namespace loom::models;

TEST_CASE("every preset, GPT-2 XL included, is within the budget") {
  for (const auto& name : GPTConfig::preset_names()) GPTConfig::preset(name).validate();
  for (const auto& name : BertConfig::preset_names()) BertConfig::preset(name).validate();
  for (const auto& name : ViTConfig::preset_names()) ViTConfig::preset(name).validate();
  for (const auto& name : SwinConfig::preset_names()) SwinConfig::preset(name).validate();
  for (const auto& name : DETRConfig::preset_names()) DETRConfig::preset(name).validate();
  for (const auto& name : TransformerConfig::preset_names())
    TransformerConfig::preset(name).validate();
  CHECK(static_cast<double>(GPTConfig::preset("gpt2-xl").num_parameters()) < kMaxParameters);
}

TEST_CASE("sizes over the budget are refused by validate, naming the config and its fields") {
  GPTConfig gpt = GPTConfig::preset("gpt-mini");
  gpt.n_layer = 100000000;  // train_gpt --n-layer 100000000 was std::bad_alloc
  expect_error([&] { gpt.validate(); }, {"GPTConfig", "over loom's budget", "n_layer=100000000"});
  gpt = GPTConfig::preset("gpt-mini");
  gpt.d_model = gpt.n_head = int64_t{1} << 40;  // 12 d^2 overflows int64: must not wrap
  expect_error([&] { gpt.validate(); }, {"GPTConfig", "over loom's budget"});
  gpt = GPTConfig{256, 8, 100000, 1, 1};  // few parameters, too many layers of modules
  expect_error([&] { gpt.validate(); }, {"GPTConfig", "1e+05 layers"});

  BertConfig bert = BertConfig::preset("bert-mini");
  bert.n_layer = INT64_MAX;  // train_bert --layers 99999999999999999999, clamped by CLI11
  expect_error([&] { bert.validate(); }, {"BertConfig", "over loom's budget"});

  ViTConfig vit = ViTConfig::preset("vit-tiny-fmnist");
  vit.d_ff = int64_t{1} << 40;
  expect_error([&] { vit.validate(); }, {"ViTConfig", "over loom's budget"});

  SwinConfig swin = SwinConfig::preset("swin-fmnist");
  swin.depths.back() = int64_t{1} << 50;
  expect_error([&] { swin.validate(); }, {"SwinConfig", "over loom's budget"});
  swin = SwinConfig::preset("swin-t");  // patch 4, window 7: stage 0 of 7 x 2^17 patches a side
  swin.image_size = 4 * 7 * (int64_t{1} << 17);  // few parameters, attention masks of 4e13
  expect_error([&] { swin.validate(); }, {"SwinConfig", "over loom's budget"});

  TransformerConfig seq = TransformerConfig::preset("seq2seq-mini");
  seq.max_len = int64_t{1} << 40;  // the sinusoid table is counted too
  expect_error([&] { seq.validate(); }, {"TransformerConfig", "over loom's budget"});

  DETRConfig detr = DETRConfig::preset("detr-r50");
  detr.resnet_layers = {3, 4, int64_t{1} << 60, 3};  // counted, not looped over
  const auto t0 = std::chrono::steady_clock::now();
  expect_error([&] { detr.validate(); }, {"DETRConfig", "over loom's budget"});
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 1.0);
}

TEST_CASE("checkpoint metadata over the budget is an error naming the file, before any model") {
  auto meta = GPTConfig::preset("gpt-mini").to_metadata();
  // generate_gpt held 3.5 GB before "cpu: out of memory". (std::to_string rather than a literal:
  // GCC 12 warns wrongly (-Wrestrict) about a map value assigned a literal here.)
  meta["n_layer"] = std::to_string(100000000);
  expect_error([&] { GPTConfig::from_metadata(meta, "out/ckpt.safetensors"); },
               {"out/ckpt.safetensors", "over loom's budget", "n_layer=100000000"});
  auto bert = BertConfig::preset("bert-mini").to_metadata();
  bert["hidden"] = std::to_string(4000000);
  bert["n_head"] = std::to_string(1);
  expect_error([&] { BertConfig::from_metadata(bert, "bert/ckpt.safetensors"); },
               {"bert/ckpt.safetensors", "over loom's budget"});
}

TEST_CASE("num_parameters is the same count it was (the formula is shared with the budget)") {
  CHECK(GPTConfig::preset("gpt2").num_parameters() == 124439808);
  CHECK(BertConfig::preset("bert-base").num_parameters() == 110106428);
  CHECK(DETRConfig::preset("detr-r50").num_parameters() == 41524768);
  CHECK(DETRConfig::preset("detr-fmnist").num_parameters() == 1682159);
}

TEST_CASE("num_parameters of a config beyond int64_t is an error, not a wrapped count") {
  GPTConfig gpt = GPTConfig::preset("gpt-mini");
  gpt.n_layer = int64_t{1} << 50;  // 2^50 blocks of 787,712 parameters: about 8.9e20
  expect_error([&] { (void)gpt.num_parameters(); }, {"num_parameters", "do not fit int64_t"});
  CHECK(parameter_count(0x1p53) == int64_t{1} << 53);  // exact where a count can be exact
  expect_error([] { (void)parameter_count(0x1p63); }, {"num_parameters", "9.22e+18"});
  expect_error([] { (void)parameter_count(std::nan("")); }, {"num_parameters", "nan"});
}
