// The tiny GPT of tests/golden/gen_gpt.py, rebuilt in loom with PyTorch's weights, and its golden
// values (gpt.safetensors: parameters, logits, loss, gradients, a greedy continuation).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "models/gpt.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace loom::testing {

inline const std::map<std::string, Tensor>& gpt_golden() {
  static const std::map<std::string, Tensor> tensors =
      nn::read_safetensors(std::string(LOOM_TEST_DATA) + "/gpt.safetensors");
  return tensors;
}

inline Tensor gpt_golden(const std::string& name) {
  auto it = gpt_golden().find(name);
  REQUIRE_MESSAGE(it != gpt_golden().end(), "gpt.safetensors has no tensor " << name);
  return it->second;
}

// CONFIG in gen_gpt.py.
inline models::GPTConfig tiny_gpt_config() {
  models::GPTConfig config;
  config.vocab_size = 13;
  config.context = 9;
  config.n_layer = 2;
  config.n_head = 2;
  config.d_model = 12;
  return config;
}

// The tiny GPT with the golden weights (param.<name>) copied in.
inline std::shared_ptr<models::GPT> golden_gpt() {
  auto model = std::make_shared<models::GPT>(tiny_gpt_config());
  NoGradGuard no_grad;
  for (auto& [name, param] : model->named_parameters()) param.copy_(gpt_golden("param." + name));
  return model;
}

}  // namespace loom::testing
