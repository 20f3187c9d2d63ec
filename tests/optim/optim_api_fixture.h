// The problems of tests/golden/gen_optim_api.py rebuilt in loom: three parameters whose gradient
// each step is p * w + u, the optimizer configurations of its OPTIMIZERS, and readers of its
// float64 learning-rate sequences (stored as int64 bits).
#pragma once

#include <bit>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "test_util.h"

namespace loom::testing {

inline constexpr int64_t kApiSteps = 5;  // STEPS in gen_optim_api.py

inline Tensor api_golden(const std::string& name) {
  static const std::map<std::string, Tensor> tensors =
      nn::read_safetensors(std::string(LOOM_TEST_DATA) + "/optim_api.safetensors");
  auto it = tensors.find(name);
  REQUIRE_MESSAGE(it != tensors.end(), "optim_api.safetensors has no tensor " << name);
  return it->second;
}

// A float64 golden stored as int64 bits, row-major, with its shape.
struct Doubles {
  std::vector<double> values;
  Shape shape;
  double at(int64_t row, int64_t col) const { return values[row * shape.back() + col]; }
};
inline Doubles api_golden_doubles(const std::string& name) {
  const Tensor bits = api_golden(name);
  Doubles out{{}, bits.shape()};
  for (int64_t b : bits.to_vector_i64()) out.values.push_back(std::bit_cast<double>(b));
  return out;
}

// The parameters a [3,4], b [5], c [2,3,2] from init.<p>, on `device`, and their gradient rule.
struct Quadratic {
  explicit Quadratic(Device device = Device::CPU) : device(device) {
    for (const char* n : {"a", "b", "c"}) {
      params.push_back(api_golden(std::string("init.") + n).to(device).clone().requires_grad_());
      w.push_back(api_golden(std::string("w.") + n).to(device));
      u.push_back(api_golden(std::string("u.") + n).to(device));
    }
  }
  // p.grad = p * w + u for every parameter, then one optimizer step.
  void step(optim::Optimizer& opt) {
    {
      NoGradGuard no_grad;
      for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(params[i] * w[i] + u[i]);
    }
    opt.step();
  }
  // The parameters after step `k` of case `name` (k in 1..kApiSteps) against PyTorch's.
  void check(const std::string& name, int64_t k, float rtol = 1e-5f, float atol = 1e-6f) const {
    const char* names[] = {"a", "b", "c"};
    for (size_t i = 0; i < params.size(); ++i)
      check_close(params[i], api_golden(name + ".step" + std::to_string(k) + "." + names[i]), rtol,
                  atol, name + " " + names[i] + " after step " + std::to_string(k));
  }

  Device device;
  std::vector<Tensor> params, w, u;
};

// The configurations of OPTIMIZERS in gen_optim_api.py, case by case.
inline const std::vector<std::string>& api_optimizer_cases() {
  static const std::vector<std::string> cases = {
      "sgd_nesterov",   "sgd_dampening", "rmsprop",       "rmsprop_momentum", "rmsprop_centered",
      "rmsprop_groups", "adagrad",       "adagrad_decay", "adagrad_groups"};
  return cases;
}
inline std::unique_ptr<optim::Optimizer> make_api_optimizer(const std::string& name,
                                                            const std::vector<Tensor>& ps) {
  using namespace optim;
  // The two-group cases: a alone, then b and c.
  const auto two = [&](float lr_a, float wd_a, float lr_bc, float wd_bc) {
    return std::vector<ParamGroup>{{{ps[0]}, lr_a, wd_a}, {{ps[1], ps[2]}, lr_bc, wd_bc}};
  };
  if (name == "sgd_nesterov") return std::make_unique<SGD>(ps, 0.1f, 0.9f, 0.0f, 0.01f, true);
  if (name == "sgd_dampening") return std::make_unique<SGD>(ps, 0.05f, 0.8f, 0.3f, 0.1f);
  if (name == "rmsprop") return std::make_unique<RMSprop>(ps);
  if (name == "rmsprop_momentum")
    return std::make_unique<RMSprop>(ps, 0.005f, 0.9f, 1e-6f, 0.05f, 0.7f);
  if (name == "rmsprop_centered")
    return std::make_unique<RMSprop>(ps, 0.01f, 0.99f, 1e-8f, 0.0f, 0.5f, true);
  if (name == "rmsprop_groups")
    return std::make_unique<RMSprop>(two(0.02f, 0.1f, 0.01f, 0.0f), 0.95f, 1e-8f, 0.0f, true);
  if (name == "adagrad") return std::make_unique<Adagrad>(ps);
  if (name == "adagrad_decay") return std::make_unique<Adagrad>(ps, 0.1f, 0.05f, 0.1f, 1e-8f, 0.1f);
  if (name == "adagrad_groups")
    return std::make_unique<Adagrad>(two(0.05f, 0.0f, 0.2f, 0.01f), 0.01f);
  FAIL("no optimizer case " << name);
  return nullptr;
}

}  // namespace loom::testing
