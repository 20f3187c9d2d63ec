#include "optim/adagrad.h"

#include <cmath>

#include "autograd/ops.h"
#include "core/error.h"

namespace loom::optim {

Adagrad::Adagrad(std::vector<Tensor> params, float lr, float lr_decay, float weight_decay,
                 float eps, float initial_accumulator_value)
    : Adagrad(std::vector<ParamGroup>{{std::move(params), lr, weight_decay}}, lr_decay, eps,
              initial_accumulator_value) {}

Adagrad::Adagrad(std::vector<ParamGroup> groups, float lr_decay, float eps,
                 float initial_accumulator_value)
    : Optimizer("Adagrad", std::move(groups)),
      lr_decay_(lr_decay),
      eps_(eps),
      initial_accumulator_value_(initial_accumulator_value) {
  LOOM_CHECK(std::isfinite(lr_decay) && lr_decay >= 0.0f,
             "Adagrad: lr_decay {} must be non-negative", lr_decay);
  LOOM_CHECK(std::isfinite(eps) && eps >= 0.0f, "Adagrad: eps {} must be non-negative", eps);
  LOOM_CHECK(std::isfinite(initial_accumulator_value) && initial_accumulator_value >= 0.0f,
             "Adagrad: initial_accumulator_value {} must be non-negative",
             initial_accumulator_value);
}

void Adagrad::update(const ParamGroup& group, Tensor& param, const Tensor& grad,
                     ParamState& state) {
  if (state.buffers.empty())
    state.buffers.emplace("sum", full(param.shape(), initial_accumulator_value_, param.device()));
  const Tensor g = group.weight_decay != 0.0f ? grad + param * group.weight_decay : grad;
  // The decayed rate in double, as PyTorch computes it in Python.
  const double clr = static_cast<double>(group.lr) /
                     (1.0 + static_cast<double>(state.step - 1) * static_cast<double>(lr_decay_));
  Tensor& sum = state.buffers.at("sum");
  sum.add_(g * g);
  param.add_(g / (sqrt(sum) + eps_), static_cast<float>(-clr));
}

std::vector<std::string> Adagrad::buffer_names() const { return {"sum"}; }

std::vector<std::pair<std::string, float>> Adagrad::hyperparameters() const {
  return {{"lr_decay", lr_decay_},
          {"eps", eps_},
          {"initial_accumulator_value", initial_accumulator_value_}};
}

}  // namespace loom::optim
