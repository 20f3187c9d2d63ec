#include "optim/adam.h"

#include <cmath>
#include <map>
#include <vector>

#include "autograd/ops.h"
#include "backends/backend.h"
#include "core/error.h"

namespace loom::optim {

Adam::Adam(std::vector<Tensor> params, float lr, float beta1, float beta2, float eps,
           float weight_decay)
    : Adam("Adam", {{std::move(params), lr, weight_decay}}, beta1, beta2, eps, false) {}

Adam::Adam(std::vector<ParamGroup> groups, float beta1, float beta2, float eps)
    : Adam("Adam", std::move(groups), beta1, beta2, eps, false) {}

Adam::Adam(const char* name, std::vector<ParamGroup> groups, float beta1, float beta2, float eps,
           bool decoupled)
    : Optimizer(name, std::move(groups)),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      decoupled_(decoupled) {
  LOOM_CHECK(beta1 >= 0.0f && beta1 < 1.0f, "{}: beta1 {} must be in [0, 1)", name, beta1);
  LOOM_CHECK(beta2 >= 0.0f && beta2 < 1.0f, "{}: beta2 {} must be in [0, 1)", name, beta2);
  LOOM_CHECK(std::isfinite(eps) && eps >= 0.0f, "{}: eps {} must be non-negative", name, eps);
}

AdamW::AdamW(std::vector<Tensor> params, float lr, float beta1, float beta2, float eps,
             float weight_decay)
    : Adam("AdamW", {{std::move(params), lr, weight_decay}}, beta1, beta2, eps, true) {}

AdamW::AdamW(std::vector<ParamGroup> groups, float beta1, float beta2, float eps)
    : Adam("AdamW", std::move(groups), beta1, beta2, eps, true) {}

void Adam::init_state(const Tensor& param, ParamState& state) {
  if (!state.buffers.empty()) return;
  state.buffers.emplace("exp_avg", zeros_like(param));
  state.buffers.emplace("exp_avg_sq", zeros_like(param));
}

AdamArgs Adam::args(const ParamGroup& group, int64_t step) const {
  AdamArgs a;
  a.lr = group.lr;
  a.beta1 = beta1_;
  a.beta2 = beta2_;
  a.eps = eps_;
  a.weight_decay = group.weight_decay;
  a.decoupled = decoupled_;
  // Bias corrections for the zero initialisation of m and v (Kingma & Ba, section 3), in
  // double as PyTorch computes them in Python.
  const double t = static_cast<double>(step);
  a.bias1 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta1_), t));
  a.bias2 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta2_), t));
  return a;
}

void Adam::update(const ParamGroup& group, Tensor& param, const Tensor& grad, ParamState& state) {
  init_state(param, state);
  Tensor& m = state.buffers.at("exp_avg");
  Tensor& v = state.buffers.at("exp_avg_sq");
  LOOM_CHECK(param.is_contiguous() && m.device() == param.device(),
             "{}: parameter {} must be contiguous and on the device of its state ({} vs {})",
             name(), shape_str(param.shape()), device_name(param.device()),
             device_name(m.device()));
  backend(param.device()).adam_step(args(group, state.step), param, grad.contiguous(), m, v);
  param.impl()->bump_version();  // an in-place update, like Tensor::add_
}

void Adam::update_group(const ParamGroup& group, std::span<Tensor> params,
                        std::span<const Tensor> grads, std::span<ParamState*> states) {
  const Device device = params.front().device();
  bool together = true;  // one device, contiguous parameters and state: one multi-tensor call
  for (size_t k = 0; k < params.size(); ++k) {
    init_state(params[k], *states[k]);
    together = together && params[k].device() == device && params[k].is_contiguous() &&
               states[k]->buffers.at("exp_avg").device() == device;
  }
  if (!together) {
    Optimizer::update_group(group, params, grads, states);  // update() reports what is wrong
    return;
  }
  // Parameters at different step counts (some skipped steps without a gradient) have different
  // bias corrections: one call per step count, almost always a single one.
  struct Lists {
    std::vector<Tensor> params, grads, ms, vs;
  };
  std::map<int64_t, Lists> by_step;
  for (size_t k = 0; k < params.size(); ++k) {
    Lists& lists = by_step[states[k]->step];
    lists.params.push_back(params[k]);
    lists.grads.push_back(grads[k]);
    lists.ms.push_back(states[k]->buffers.at("exp_avg"));
    lists.vs.push_back(states[k]->buffers.at("exp_avg_sq"));
  }
  for (auto& [step, lists] : by_step)
    backend(device).adam_step_multi(args(group, step), lists.params, lists.grads, lists.ms,
                                    lists.vs);
  for (Tensor& param : params) param.impl()->bump_version();  // in place, like Tensor::add_
}

std::vector<std::string> Adam::buffer_names() const { return {"exp_avg", "exp_avg_sq"}; }

std::vector<std::pair<std::string, float>> Adam::hyperparameters() const {
  return {{"beta1", beta1_},
          {"beta2", beta2_},
          {"eps", eps_},
          {"decoupled_weight_decay", decoupled_ ? 1.0f : 0.0f}};
}

}  // namespace loom::optim
