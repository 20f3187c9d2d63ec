// BatchNorm2d layer.
#include "nn/batch_norm.h"

#include "autograd/node.h"
#include "autograd/ops.h"
#include "nn/functional.h"

namespace loom::nn {

BatchNorm2d::BatchNorm2d(int64_t c, float eps_, float momentum_, bool affine,
                         bool track_running_stats)
    : num_features(c), eps(eps_), momentum(momentum_) {
  LOOM_CHECK(c > 0 && eps_ > 0.0f && momentum_ >= 0.0f && momentum_ <= 1.0f,
             "BatchNorm2d: invalid num_features {}, eps {} or momentum {}", c, eps_, momentum_);
  if (affine) {
    weight = register_parameter("weight", ones({c}));
    bias = register_parameter("bias", zeros({c}));
  }
  if (track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({c}));
    running_var = register_buffer("running_var", ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", tensor_i64({0}, {}));
  }
}

Tensor BatchNorm2d::forward(const Tensor& x) const {
  // x [N, C, H, W] -> [N, C, H, W]
  LOOM_CHECK(x.defined() && x.dim() == 4 && x.size(1) == num_features,
             "BatchNorm2d({}): expected input [N, {}, H, W], got {}", num_features, num_features,
             x.defined() ? shape_str(x.shape()) : "undefined");
  const bool tracking = running_mean.defined();
  if (is_training() && tracking) {
    NoGradGuard guard;  // counted on the device, without a host round trip
    Tensor count = num_batches_tracked;
    count.copy_(count.to(DType::Float32) + 1.0f);
  }
  // Batch statistics in training, and always when no running statistics are kept (PyTorch);
  // the running statistics are updated only in training (functional::batch_norm).
  return functional::batch_norm(x, running_mean, running_var, weight, bias,
                                is_training() || !tracking, momentum, eps);
}

std::string BatchNorm2d::extra_repr() const {
  return fmt::format("{}, eps={}, momentum={}, affine={}, track_running_stats={}", num_features,
                     py_repr(eps), py_repr(momentum), py_repr(weight.defined()),
                     py_repr(running_mean.defined()));
}

}  // namespace loom::nn
