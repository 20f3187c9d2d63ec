#include "optim/clip_grad.h"

#include <cmath>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"

namespace loom::optim {

float clip_grad_norm(const std::vector<Tensor>& params, float max_norm) {
  LOOM_CHECK(std::isfinite(max_norm) && max_norm > 0.0f,
             "clip_grad_norm: max_norm {} must be positive", max_norm);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return 0.0f;

  // Sum of squares on the first gradient's device, so the host waits only once.
  const Device device = grads.front().device();
  Tensor squares = sum(grads.front() * grads.front());
  for (size_t i = 1; i < grads.size(); ++i) {
    const Tensor g = grads[i];
    squares = squares + sum(g * g).to(device);
  }
  const float norm = std::sqrt(squares.item());

  // As torch.nn.utils.clip_grad_norm_: the 1e-6 keeps the scale finite for a zero norm.
  const float scale = max_norm / (norm + 1e-6f);
  if (scale < 1.0f) {
    for (Tensor& g : grads) g.mul_(scale);
  }
  return norm;
}

}  // namespace loom::optim
