// GPTConfig <-> checkpoint metadata: a round trip through a training checkpoint rebuilds the
// same model from the file alone, and every missing or garbled key is an error naming it.
#include <unistd.h>

#include <filesystem>

#include "models/gpt.h"
#include "io/checkpoint.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
using models::GPT;
using models::GPTConfig;

TEST_CASE("GPTConfig round-trips through metadata, dropout exactly") {
  GPTConfig c{300, 32, 2, 2, 16};
  c.dropout = 0.1f;
  const auto meta = c.to_metadata();
  CHECK(meta.at("model_type") == "gpt");
  CHECK(meta.at("n_layer") == "2");
  const GPTConfig back = GPTConfig::from_metadata(meta);
  CHECK(back.to_string() == c.to_string());
  CHECK(back.dropout == c.dropout);
  // Other keys (the trainer's step, the tokenizer...) are ignored; model_type may be absent.
  auto extended = meta;
  extended["step"] = "12";
  extended.erase("model_type");
  CHECK(GPTConfig::from_metadata(extended).to_string() == c.to_string());
}

TEST_CASE("GPTConfig::from_metadata names the missing or garbled key and the source") {
  const auto good = GPTConfig::preset("gpt-mini").to_metadata();
  for (const char* key : {"vocab_size", "context", "n_layer", "n_head", "d_model", "dropout"}) {
    auto missing = good;
    missing.erase(key);
    expect_error([&] { GPTConfig::from_metadata(missing, "checkpoint 'x.safetensors'"); },
                 {"x.safetensors", std::string("no \"") + key + "\""});
    for (const char* garbled : {"", "12abc", "abc", " 4", "1e999"}) {
      auto bad = good;
      bad[key] = garbled;
      expect_error([&] { GPTConfig::from_metadata(bad, "checkpoint 'x.safetensors'"); },
                   {"x.safetensors", std::string("\"") + key + "\" is '" + garbled + "'"});
    }
  }
  auto other = good;
  other["model_type"] = "bert";
  expect_error([&] { GPTConfig::from_metadata(other, "f"); }, {"f", "model_type", "bert"});
  auto invalid = good;
  invalid["n_head"] = "3";  // 256 is not a multiple of 3
  expect_error([&] { GPTConfig::from_metadata(invalid, "f"); }, {"f", "not a multiple of n_head"});
}

TEST_CASE("a GPT is rebuilt from its training checkpoint alone") {
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("loom_test_gpt_metadata_" + std::to_string(::getpid()) + ".safetensors"))
          .string();
  manual_seed(3);
  GPT model(GPTConfig{64, 16, 1, 2, 16});
  nn::save_checkpoint(path, {{"model", &model}}, nullptr, model.config().to_metadata());

  const GPTConfig config = GPTConfig::from_metadata(nn::read_metadata(path), path);
  GPT rebuilt(config);
  nn::load_checkpoint(path, {{"model", &rebuilt}});
  std::filesystem::remove(path);
  const Tensor ids = tensor_i64({1, 2, 3, 4, 5, 6}, {1, 6});
  check_close(rebuilt.forward(ids), model.forward(ids), 0.0f, 0.0f, "same logits");
}
