// The PyTorch fixtures of tests/golden/gen_nn.py, gen_modules.py and gen_rnn.py and the harness
// that runs one case: load the module state PyTorch used, feed the same inputs, back-propagate
// the same cotangent, and compare output, input gradients and parameter gradients.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "nn/nn.h"
#include "test_util.h"

namespace loom::testing {

struct NnFixture {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

// nn.safetensors (tests/golden/gen_nn.py), modules.safetensors (gen_modules.py) and
// rnn.safetensors (gen_rnn.py) as one set of cases: a case name may appear in only one of them.
inline const NnFixture& nn_fixture() {
  static const NnFixture fixture = [] {
    NnFixture f;
    f.tensors = nn::read_safetensors(std::string(LOOM_TEST_DATA) + "/nn.safetensors", &f.metadata);
    for (const char* file : {"/modules.safetensors", "/rnn.safetensors"})
      for (auto& [name, t] : nn::read_safetensors(std::string(LOOM_TEST_DATA) + file))
        REQUIRE_MESSAGE(f.tensors.emplace(name, t).second, "two golden files hold " << name);
    return f;
  }();
  return fixture;
}

inline bool has_fixture(const std::string& name) { return nn_fixture().tensors.count(name) > 0; }

inline Tensor fixture(const std::string& name) {
  auto it = nn_fixture().tensors.find(name);
  REQUIRE_MESSAGE(it != nn_fixture().tensors.end(), "nn.safetensors has no tensor " << name);
  return it->second;
}

inline std::string fixture_metadata(const std::string& key) {
  auto it = nn_fixture().metadata.find(key);
  REQUIRE_MESSAGE(it != nn_fixture().metadata.end(), "nn.safetensors has no metadata " << key);
  return it->second;
}

// Every "<prefix>.<part>.<name>" tensor, keyed by <name>.
inline std::map<std::string, Tensor> fixture_group(const std::string& prefix,
                                                   const std::string& part) {
  const std::string head = prefix + "." + part + ".";
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : nn_fixture().tensors)
    if (name.rfind(head, 0) == 0) out.emplace(name.substr(head.size()), t);
  return out;
}

// Copies the case's PyTorch state_dict into `module`. load_state_dict is strict, so this also
// checks that loom's parameter and buffer names are exactly PyTorch's.
inline void load_case_state(nn::Module& module, const std::string& prefix) {
  nn::load_state_dict(module, fixture_group(prefix, "state"), prefix + " fixture");
}

// The case's inputs in0, in1, ... as fresh leaves; float inputs require grad.
inline std::vector<Tensor> case_inputs(const std::string& prefix) {
  std::vector<Tensor> inputs;
  for (int i = 0; has_fixture(prefix + ".in" + std::to_string(i)); ++i) {
    Tensor x = fixture(prefix + ".in" + std::to_string(i)).clone();
    if (x.dtype() == DType::Float32) x.requires_grad_(true);
    inputs.push_back(x);
  }
  REQUIRE_MESSAGE(!inputs.empty(), "nn.safetensors has no inputs for " << prefix);
  return inputs;
}

// Compares `out` with <prefix>.out, back-propagates <prefix>.dout and compares the gradients of
// the inputs and (if given) of every parameter of `module` with PyTorch's.
inline void check_case(const std::string& prefix, const Tensor& out,
                       const std::vector<Tensor>& inputs, const nn::Module* module = nullptr,
                       float rtol = 1e-4f, float atol = 1e-5f) {
  check_close(out, fixture(prefix + ".out"), rtol, atol, prefix + " output");
  out.backward(fixture(prefix + ".dout"));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = prefix + ".grad.in" + std::to_string(i);
    if (!has_fixture(name)) continue;
    REQUIRE_MESSAGE(inputs[i].grad().defined(), prefix << ": input " << i << " got no gradient");
    check_close(inputs[i].grad(), fixture(name), rtol, atol, name);
  }
  if (module == nullptr) return;
  for (const auto& [name, p] : module->named_parameters()) {
    const std::string key = prefix + ".grad." + name;
    REQUIRE_MESSAGE(has_fixture(key), "nn.safetensors has no gradient " << key);
    REQUIRE_MESSAGE(p.grad().defined(), prefix << ": parameter " << name << " got no gradient");
    check_close(p.grad(), fixture(key), rtol, atol, key);
  }
}

// A scalar that depends on every element of `out` with distinct weights, for gradcheck.
inline Tensor weighted_sum(const Tensor& out, uint64_t seed = 7) {
  manual_seed(seed);
  const Tensor weights = randn(out.shape(), out.device());
  return sum(out * weights);
}

// Expects `body` to throw loom::Error whose message contains every string of `parts`.
template <typename Body>
void check_error(Body&& body, const std::vector<std::string>& parts) {
  try {
    body();
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& part : parts)
      CHECK_MESSAGE(message.find(part) != std::string::npos,
                    "message \"" << message << "\" does not mention \"" << part << "\"");
    return;
  }
  FAIL("expected a loom::Error mentioning " << (parts.empty() ? "" : parts.front()));
}

}  // namespace loom::testing
