// The tiny MLP problem of tests/golden/gen_optim.py, rebuilt with loom autograd, and a driver
// that trains it step by step against PyTorch's trajectory stored in optim.safetensors.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "test_util.h"

namespace loom::testing {

inline constexpr int64_t kGoldenSteps = 10;  // STEPS in gen_optim.py

inline const std::map<std::string, Tensor>& optim_golden() {
  static const std::map<std::string, Tensor> tensors =
      nn::read_safetensors(std::string(LOOM_TEST_DATA) + "/optim.safetensors");
  return tensors;
}

inline Tensor golden(const std::string& name) {
  auto it = optim_golden().find(name);
  REQUIRE_MESSAGE(it != optim_golden().end(), "optim.safetensors has no tensor " << name);
  return it->second;
}

// loss = mean((tanh(x @ w1^T + b1) @ w2^T + b2 - y)^2), parameters fresh leaves from init.<p>,
// everything on `device`.
struct Mlp {
  explicit Mlp(Device device = Device::CPU)
      : x(golden("x").to(device)),
        y(golden("y").to(device)),
        w1(leaf("w1", device)),
        b1(leaf("b1", device)),
        w2(leaf("w2", device)),
        b2(leaf("b2", device)) {}

  static const std::vector<std::string>& names() {
    static const std::vector<std::string> n = {"w1", "b1", "w2", "b2"};
    return n;
  }
  std::vector<Tensor> params() const { return {w1, b1, w2, b2}; }
  std::vector<Tensor> weights() const { return {w1, w2}; }
  std::vector<Tensor> biases() const { return {b1, b2}; }

  // x [6,3], y [6,2] -> scalar loss
  Tensor loss() const {
    const Tensor hidden = tanh(matmul(x, w1.t()) + b1);  // [6,4]
    const Tensor out = matmul(hidden, w2.t()) + b2;      // [6,2]
    return mean(pow(out - y, 2.0f));
  }

  Tensor x, y;
  Tensor w1, b1, w2, b2;

 private:
  static Tensor leaf(const std::string& name, Device device) {
    Tensor t = golden("init." + name).to(device).clone();
    t.requires_grad_(true);
    return t;
  }
};

// One training iteration as gen_optim.py runs it: schedule, zero_grad, backward, optional
// clipping, step. Returns the loss and (when clipping) the norm clip_grad_norm returned.
struct Iteration {
  float loss;
  float norm;
};
inline Iteration train_step(Mlp& mlp, optim::Optimizer& opt, int64_t k,
                            const std::function<float(int64_t)>& schedule = nullptr,
                            float max_norm = 0.0f) {
  if (schedule) opt.set_lr(schedule(k));
  opt.zero_grad();
  Tensor loss = mlp.loss();
  loss.backward();
  const float norm = max_norm > 0.0f ? optim::clip_grad_norm(mlp.params(), max_norm) : 0.0f;
  opt.step();
  return {loss.item(), norm};
}

// Trains kGoldenSteps iterations and checks loss, clip norm and every parameter after every
// step against PyTorch's values for `case_name`, to rtol 1e-5 (CUDA: 1e-4, since its
// reductions add in another order).
inline void check_trajectory(const std::string& case_name, Mlp& mlp, optim::Optimizer& opt,
                             const std::function<float(int64_t)>& schedule = nullptr,
                             float max_norm = 0.0f) {
  const bool cpu = mlp.w1.device() == Device::CPU;
  const float rtol = cpu ? 1e-5f : 1e-4f, atol = cpu ? 1e-7f : 1e-6f;
  for (int64_t k = 0; k < kGoldenSteps; ++k) {
    const std::string step = std::to_string(k + 1);
    const Iteration it = train_step(mlp, opt, k, schedule, max_norm);
    check_close(scalar_tensor(it.loss), golden(case_name + ".loss" + step), rtol, atol,
                case_name + " loss of iteration " + step);
    if (max_norm > 0.0f)
      check_close(scalar_tensor(it.norm), golden(case_name + ".norm" + step), rtol, atol,
                  case_name + " clip norm of iteration " + step);
    const std::vector<Tensor> params = mlp.params();
    for (size_t i = 0; i < params.size(); ++i)
      check_close(params[i], golden(case_name + ".step" + step + "." + Mlp::names()[i]), rtol, atol,
                  case_name + " " + Mlp::names()[i] + " after step " + step);
  }
  CHECK(opt.step_count() == kGoldenSteps);
}

}  // namespace loom::testing
