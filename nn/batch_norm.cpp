// BatchNorm1d and BatchNorm2d: one implementation (BatchNorm) that differs only in the input
// ranks it accepts.
#include "nn/batch_norm.h"

#include <algorithm>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "nn/functional.h"

namespace loom::nn {

BatchNorm::BatchNorm(int64_t c, float eps_, float momentum_, bool affine,
                     bool track_running_stats, const char* layer,
                     std::vector<int64_t> accepted_ranks, const char* layout)
    : num_features(c),
      eps(eps_),
      momentum(momentum_),
      accepted_ranks_(std::move(accepted_ranks)),
      layout_(layout) {
  LOOM_CHECK(c > 0 && eps_ > 0.0f && momentum_ >= 0.0f && momentum_ <= 1.0f,
             "{}: invalid num_features {}, eps {} or momentum {}", layer, c, eps_, momentum_);
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

BatchNorm1d::BatchNorm1d(int64_t c, float eps, float momentum, bool affine,
                         bool track_running_stats)
    : BatchNorm(c, eps, momentum, affine, track_running_stats, "BatchNorm1d", {2, 3},
                "[N, C] or [N, C, L]") {}

BatchNorm2d::BatchNorm2d(int64_t c, float eps, float momentum, bool affine,
                         bool track_running_stats)
    : BatchNorm(c, eps, momentum, affine, track_running_stats, "BatchNorm2d", {4},
                "[N, C, H, W]") {}

Tensor BatchNorm::forward(const Tensor& x) const {
  // x [N, C, ...] -> [N, C, ...]
  const bool rank_ok =
      x.defined() && std::find(accepted_ranks_.begin(), accepted_ranks_.end(), x.dim()) !=
                         accepted_ranks_.end();
  LOOM_CHECK(rank_ok && x.size(1) == num_features,
             "{}({}): expected input {} with C = {}, got {}", name(), num_features, layout_,
             num_features, x.defined() ? shape_str(x.shape()) : "undefined");
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

std::string BatchNorm::extra_repr() const {
  return fmt::format("{}, eps={}, momentum={}, affine={}, track_running_stats={}", num_features,
                     py_repr(eps), py_repr(momentum), py_repr(weight.defined()),
                     py_repr(running_mean.defined()));
}

}  // namespace loom::nn
