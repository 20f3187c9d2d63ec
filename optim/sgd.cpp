#include "optim/sgd.h"

#include <cmath>

#include "autograd/ops.h"
#include "core/error.h"

namespace loom::optim {

SGD::SGD(std::vector<Tensor> params, float lr, float momentum, float dampening, float weight_decay,
         bool nesterov)
    : SGD(std::vector<ParamGroup>{{std::move(params), lr, weight_decay}}, momentum, dampening,
          nesterov) {}

SGD::SGD(std::vector<ParamGroup> groups, float momentum, float dampening, bool nesterov)
    : Optimizer("SGD", std::move(groups)),
      momentum_(momentum),
      dampening_(dampening),
      nesterov_(nesterov) {
  LOOM_CHECK(std::isfinite(momentum) && momentum >= 0.0f, "SGD: momentum {} must be non-negative",
             momentum);
  LOOM_CHECK(std::isfinite(dampening), "SGD: dampening {} must be finite", dampening);
  // Same rule as PyTorch: Nesterov's look-ahead is defined for undamped momentum only.
  LOOM_CHECK(!nesterov || (momentum > 0.0f && dampening == 0.0f),
             "SGD: nesterov requires a positive momentum and zero dampening (got momentum {}, "
             "dampening {})",
             momentum, dampening);
}

void SGD::update(const ParamGroup& group, Tensor& param, const Tensor& grad, ParamState& state) {
  Tensor g = group.weight_decay != 0.0f ? grad + param * group.weight_decay : grad;
  if (momentum_ != 0.0f) {
    auto buf = state.buffers.find("momentum_buffer");
    if (buf == state.buffers.end()) {
      // The buffer starts as the first gradient itself (no dampening), as in PyTorch.
      buf = state.buffers.emplace("momentum_buffer", g.clone()).first;
    } else {
      buf->second.mul_(momentum_);
      buf->second.add_(g, 1.0f - dampening_);
    }
    g = nesterov_ ? g + buf->second * momentum_ : buf->second;
  }
  param.add_(g, -group.lr);
}

std::vector<std::string> SGD::buffer_names() const {
  if (momentum_ == 0.0f) return {};
  return {"momentum_buffer"};
}

std::vector<std::pair<std::string, float>> SGD::hyperparameters() const {
  return {
      {"momentum", momentum_}, {"dampening", dampening_}, {"nesterov", nesterov_ ? 1.0f : 0.0f}};
}

}  // namespace loom::optim
