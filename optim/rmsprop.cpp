#include "optim/rmsprop.h"

#include <cmath>

#include "autograd/ops.h"
#include "core/error.h"

namespace loom::optim {

RMSprop::RMSprop(std::vector<Tensor> params, float lr, float alpha, float eps, float weight_decay,
                 float momentum, bool centered)
    : RMSprop(std::vector<ParamGroup>{{std::move(params), lr, weight_decay}}, alpha, eps, momentum,
              centered) {}

RMSprop::RMSprop(std::vector<ParamGroup> groups, float alpha, float eps, float momentum,
                 bool centered)
    : Optimizer("RMSprop", std::move(groups)),
      alpha_(alpha),
      eps_(eps),
      momentum_(momentum),
      centered_(centered) {
  // PyTorch asks only alpha >= 0; above 1 the average would weigh g^2 negatively and go NaN.
  LOOM_CHECK(alpha >= 0.0f && alpha <= 1.0f, "RMSprop: alpha {} must be in [0, 1]", alpha);
  LOOM_CHECK(std::isfinite(eps) && eps >= 0.0f, "RMSprop: eps {} must be non-negative", eps);
  LOOM_CHECK(std::isfinite(momentum) && momentum >= 0.0f,
             "RMSprop: momentum {} must be non-negative", momentum);
}

void RMSprop::update(const ParamGroup& group, Tensor& param, const Tensor& grad,
                     ParamState& state) {
  if (state.buffers.empty())
    for (const std::string& name : buffer_names()) state.buffers.emplace(name, zeros_like(param));
  const Tensor g = group.weight_decay != 0.0f ? grad + param * group.weight_decay : grad;
  // The products in the order of PyTorch's addcmul_ (value * t1 * t2), so that the float32
  // roundings are the same.
  Tensor& square_avg = state.buffers.at("square_avg");
  square_avg.mul_(alpha_);
  square_avg.add_(g * (1.0f - alpha_) * g);
  Tensor avg;
  if (centered_) {
    Tensor& grad_avg = state.buffers.at("grad_avg");
    grad_avg.mul_(alpha_);
    grad_avg.add_(g, 1.0f - alpha_);
    avg = sqrt(square_avg - grad_avg * grad_avg) + eps_;
  } else {
    avg = sqrt(square_avg) + eps_;
  }
  if (momentum_ > 0.0f) {
    Tensor& buf = state.buffers.at("momentum_buffer");
    buf.mul_(momentum_);
    buf.add_(g / avg);
    param.add_(buf, -group.lr);
  } else {
    param.add_(g / avg, -group.lr);
  }
}

std::vector<std::string> RMSprop::buffer_names() const {
  std::vector<std::string> names = {"square_avg"};
  if (momentum_ > 0.0f) names.push_back("momentum_buffer");
  if (centered_) names.push_back("grad_avg");
  return names;
}

std::vector<std::pair<std::string, float>> RMSprop::hyperparameters() const {
  return {{"alpha", alpha_},
          {"eps", eps_},
          {"momentum", momentum_},
          {"centered", centered_ ? 1.0f : 0.0f}};
}

}  // namespace loom::optim
