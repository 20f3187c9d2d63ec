// FrozenBatchNorm2d layer: a per-channel affine map, composed from loom's ops.
#include "nn/frozen_batch_norm.h"

#include "autograd/ops.h"

namespace loom::nn {

FrozenBatchNorm2d::FrozenBatchNorm2d(int64_t c, float eps_) : num_features(c), eps(eps_) {
  LOOM_CHECK(c > 0 && eps_ > 0.0f, "FrozenBatchNorm2d: invalid num_features {} or eps {}", c, eps_);
  weight = register_buffer("weight", ones({c}));
  bias = register_buffer("bias", zeros({c}));
  running_mean = register_buffer("running_mean", zeros({c}));
  running_var = register_buffer("running_var", ones({c}));
  ignore_on_load("num_batches_tracked");
}

Tensor FrozenBatchNorm2d::forward(const Tensor& x) const {
  // x [N, C, H, W] -> [N, C, H, W]
  LOOM_CHECK(x.defined() && x.dim() == 4 && x.size(1) == num_features,
             "FrozenBatchNorm2d({}): expected input [N, {}, H, W], got {}", num_features,
             num_features, x.defined() ? shape_str(x.shape()) : "undefined");
  // Folded as torchvision does: scale = w / sqrt(var + eps), shift = b - mean * scale.
  const Tensor scale = weight * rsqrt(running_var + eps);  // [C]
  const Tensor shift = bias - running_mean * scale;        // [C]
  return x * scale.view({1, num_features, 1, 1}) + shift.view({1, num_features, 1, 1});
}

std::string FrozenBatchNorm2d::extra_repr() const {
  return fmt::format("{}, eps={}", num_features, py_repr(eps));
}

}  // namespace loom::nn
