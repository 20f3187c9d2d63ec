// Batch normalisation (Ioffe & Szegedy 2015), group normalisation (Wu & He 2018) and RMSNorm
// (Zhang & Sennrich 2019), composed from reductions, elementwise ops and the fused layer_norm
// (batch normalisation of float32 tensors runs as the fused loom::batch_norm).
// (layer_norm itself is a fused op in autograd/ops.h; functional.cpp forwards to it.)
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "nn/functional.h"

namespace loom::nn::functional {

namespace {

// Mean over every dim but the channel dim 1, kept as size-1 dims: [N, C, ...] -> [1, C, 1, ...].
Tensor channel_mean(const Tensor& x) {
  Tensor m = x;
  for (int64_t d = x.dim() - 1; d >= 0; --d)
    if (d != 1) m = mean(m, d, /*keepdim=*/true);
  return m;
}

void check_channel_vector(const Tensor& t, int64_t channels, const char* what, const Tensor& x) {
  if (!t.defined()) return;
  LOOM_CHECK(t.shape() == Shape{channels},
             "batch_norm: {} of shape {} does not match the {} channels of input {}", what,
             shape_str(t.shape()), channels, shape_str(x.shape()));
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, float momentum,
                  float eps) {
  // x [N, C, ...] -> same shape; statistics per channel over N and the spatial dims.
  // Float32 tensors take the fused op (one kernel each way, backends/batch_norm), which checks
  // its arguments and computes what the ops below write out; bfloat16 ones run these ops.
  const auto f32 = [](const Tensor& t) { return !t.defined() || t.dtype() == DType::Float32; };
  if (f32(x) && f32(running_mean) && f32(running_var) && f32(weight) && f32(bias))
    return loom::batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps);
  LOOM_CHECK(x.defined() && x.dim() >= 2, "batch_norm: expected input [N, C, ...], got {}",
             x.defined() ? shape_str(x.shape()) : "undefined");
  const int64_t channels = x.size(1);
  check_channel_vector(running_mean, channels, "running_mean", x);
  check_channel_vector(running_var, channels, "running_var", x);
  check_channel_vector(weight, channels, "weight", x);
  check_channel_vector(bias, channels, "bias", x);
  LOOM_CHECK(running_mean.defined() == running_var.defined(),
             "batch_norm: running_mean and running_var must be given together");
  Shape stat_shape(x.dim(), 1);
  stat_shape[1] = channels;  // [1, C, 1, 1]

  Tensor centered, var;
  if (training) {
    const int64_t count = x.numel() / channels;
    LOOM_CHECK(count > 1,
               "batch_norm: expected more than 1 value per channel when training, got input {}",
               shape_str(x.shape()));
    const Tensor mu = channel_mean(x);  // [1, C, 1, 1]
    centered = x - mu;
    var = channel_mean(centered * centered);  // biased, used for normalising (as the paper)
    if (running_mean.defined()) {
      // PyTorch's update: the running variance uses the unbiased estimate.
      NoGradGuard guard;
      const float unbias = static_cast<float>(count) / static_cast<float>(count - 1);
      Tensor mean_stat = running_mean, var_stat = running_var;  // handles to the same storage
      mean_stat.copy_(mean_stat * (1.0f - momentum) + mu.detach().reshape({channels}) * momentum);
      var_stat.copy_(var_stat * (1.0f - momentum) +
                     var.detach().reshape({channels}) * (unbias * momentum));
    }
  } else {
    LOOM_CHECK(running_mean.defined(),
               "batch_norm: evaluation mode needs running statistics (input {})",
               shape_str(x.shape()));
    centered = x - running_mean.reshape(stat_shape);
    var = running_var.reshape(stat_shape);
  }
  Tensor y = centered * rsqrt(var + eps);
  if (weight.defined()) y = y * weight.reshape(stat_shape);
  if (bias.defined()) y = y + bias.reshape(stat_shape);
  return y;
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  float eps) {
  // x [N, C, ...] -> same shape
  LOOM_CHECK(x.defined() && x.dim() >= 2, "group_norm: expected input [N, C, ...], got {}",
             x.defined() ? shape_str(x.shape()) : "undefined");
  const int64_t n = x.size(0), channels = x.size(1);
  LOOM_CHECK(num_groups > 0 && channels % num_groups == 0,
             "group_norm: {} channels of input {} do not split into {} groups", channels,
             shape_str(x.shape()), num_groups);
  for (const auto& [t, what] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}})
    LOOM_CHECK(!t->defined() || t->shape() == Shape{channels},
               "group_norm: {} of shape {} does not match the {} channels of input {}", what,
               shape_str(t->shape()), channels, shape_str(x.shape()));
  // Each (sample, group) is one row normalised over its channels and positions: the fused
  // layer_norm's job, without its affine part (that one is per channel, not per row).
  const Tensor rows = x.reshape({n, num_groups, -1});  // [N, G, C/G * spatial]
  Tensor y = loom::layer_norm(rows, Tensor(), Tensor(), eps).reshape(x.shape());
  Shape channel_shape(x.dim(), 1);
  channel_shape[1] = channels;  // [1, C, 1, ...]
  if (weight.defined()) y = y * weight.reshape(channel_shape);
  if (bias.defined()) y = y + bias.reshape(channel_shape);
  return y;
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, float eps) {
  // x [..., *normalized_shape] -> same shape
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  const bool fits = x.defined() && k > 0 && x.dim() >= k &&
                    Shape(x.shape().end() - k, x.shape().end()) == normalized_shape;
  LOOM_CHECK(fits, "rms_norm: input {} does not end in normalized_shape {}",
             x.defined() ? shape_str(x.shape()) : "undefined", shape_str(normalized_shape));
  LOOM_CHECK(!weight.defined() || weight.shape() == normalized_shape,
             "rms_norm: weight of shape {} does not match normalized_shape {}",
             shape_str(weight.shape()), shape_str(normalized_shape));
  Shape rows_shape(x.shape().begin(), x.shape().end() - k);
  rows_shape.push_back(-1);
  const Tensor rows = x.reshape(rows_shape);                   // [..., D]
  const Tensor mean_square = mean(rows * rows, -1, true);       // [..., 1]
  Tensor y = (rows * rsqrt(mean_square + eps)).reshape(x.shape());
  return weight.defined() ? y * weight : y;
}

}  // namespace loom::nn::functional
