#include "optim/clip_grad.h"

#include <cmath>
#include <map>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "backends/backend.h"
#include "core/error.h"

namespace loom::optim {

float clip_grad_norm_(const std::vector<Tensor>& params, float max_norm) {
  LOOM_CHECK(std::isfinite(max_norm) && max_norm > 0.0f,
             "clip_grad_norm_: max_norm {} must be positive", max_norm);
  NoGradGuard no_grad;
  // The float32 gradients of each device go through its multi-tensor kernels (on CUDA a couple
  // of launches for all of them); any other gradient (bfloat16) through tensor ops.
  std::map<Device, std::vector<Tensor>> by_device;
  std::vector<Tensor> others;
  for (const Tensor& p : params) {
    if (!p.defined() || !p.grad().defined()) continue;
    const Tensor g = p.grad();
    (g.dtype() == DType::Float32 ? by_device[g.device()] : others).push_back(g);
  }
  if (by_device.empty() && others.empty()) return 0.0f;

  // The sum of squares of each device, added on the host: one wait per device.
  double squares = 0.0;
  for (const auto& [device, grads] : by_device) {
    Tensor out = Tensor::empty({}, DType::Float32, device);
    backend(device).sum_of_squares_multi(grads, out);
    squares += out.item();
  }
  if (!others.empty()) {  // summed on the first one's device: one more wait, not one each
    const Device device = others.front().device();
    Tensor total = zeros({}, device);
    for (const Tensor& g : others) {
      const Tensor g32 = g.to(DType::Float32);
      total = total + sum(g32 * g32).to(device);
    }
    squares += total.item();
  }
  const float norm = static_cast<float>(std::sqrt(squares));

  // As torch.nn.utils.clip_grad_norm_: the 1e-6 keeps the scale finite for a zero norm.
  const float scale = max_norm / (norm + 1e-6f);
  if (scale < 1.0f) {
    for (auto& [device, grads] : by_device) {
      std::vector<Tensor> contiguous;
      for (Tensor& g : grads) {
        if (g.is_contiguous()) {
          contiguous.push_back(g);
        } else {
          g.mul_(scale);
        }
      }
      backend(device).scale_multi(contiguous, scale);
      for (Tensor& g : contiguous) g.impl()->bump_version();  // in place, like Tensor::mul_
    }
    for (Tensor& g : others) g.mul_(scale);
  }
  return norm;
}

float clip_grad_norm(const std::vector<Tensor>& params, float max_norm) {
  return clip_grad_norm_(params, max_norm);
}

void clip_grad_value_(const std::vector<Tensor>& params, float clip_value) {
  LOOM_CHECK(std::isfinite(clip_value) && clip_value > 0.0f,
             "clip_grad_value_: clip_value {} must be positive", clip_value);
  NoGradGuard no_grad;
  // copy_ writes through a non-contiguous gradient too, and keeps each gradient's storage (an
  // optimizer or a gradient hook may hold it), as PyTorch's clamp_ does.
  for (const Tensor& p : params) {
    if (!p.defined() || !p.grad().defined()) continue;
    Tensor g = p.grad();
    g.copy_(clamp(g, -clip_value, clip_value));
  }
}

}  // namespace loom::optim
