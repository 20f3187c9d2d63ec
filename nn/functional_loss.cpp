// Losses: cross-entropy (fused op), regression losses and binary cross-entropy with logits.
#include "autograd/ops.h"
#include "core/error.h"
#include "nn/functional.h"

namespace loom::nn::functional {

namespace {

// input and target: defined float32 tensors of the same shape.
void check_pair(const Tensor& input, const Tensor& target, const char* op) {
  LOOM_CHECK(input.defined() && target.defined(), "{}: undefined input or target", op);
  LOOM_CHECK(input.dtype() == DType::Float32 && target.dtype() == DType::Float32,
             "{}: expected float32 input and target, got {} and {}", op, dtype_name(input.dtype()),
             dtype_name(target.dtype()));
  LOOM_CHECK(input.shape() == target.shape(), "{}: input of shape {} and target of shape {} differ",
             op, shape_str(input.shape()), shape_str(target.shape()));
}

}  // namespace

Tensor reduce(const Tensor& losses, Reduction reduction) {
  switch (reduction) {
    case Reduction::Mean:
      return mean(losses);
    case Reduction::Sum:
      return sum(losses);
    case Reduction::None:
      break;
  }
  return losses;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                     float label_smoothing) {
  // logits [N, C] or [B, T, C] (any [..., C]); target int64 [N] or [B, T] -> scalar
  LOOM_CHECK(logits.defined() && target.defined(), "cross_entropy: undefined logits or target");
  return loom::cross_entropy(logits, target, ignore_index, label_smoothing);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_pair(input, target, "mse_loss");
  const Tensor diff = input - target;
  return reduce(diff * diff, reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_pair(input, target, "l1_loss");
  return reduce(abs(input - target), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, float beta) {
  check_pair(input, target, "smooth_l1_loss");
  LOOM_CHECK(beta >= 0.0f, "smooth_l1_loss: beta {} is negative", beta);
  if (beta == 0.0f) return l1_loss(input, target, reduction);  // PyTorch's special case
  const Tensor diff = input - target;
  const Tensor abs_diff = abs(diff);
  const Tensor quadratic = diff * diff * (0.5f / beta), linear = abs_diff - 0.5f * beta;
  return reduce(where(lt(abs_diff, beta), quadratic, linear), reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction) {
  check_pair(logits, target, "binary_cross_entropy_with_logits");
  // log_softmax over the pair (0, x) is (log sigmoid(-x), log sigmoid(x)), computed stably
  // with an exact gradient everywhere (no kink from max(x, 0) or |x|).
  const Tensor pair = stack({zeros_like(logits), logits}, -1);  // [..., 2]
  const Tensor log_probs = log_softmax(pair, -1);               // [..., 2]
  const Tensor log_p = log_probs.select(-1, 1), log_not_p = log_probs.select(-1, 0);
  return reduce(-(target * log_p + (1.0f - target) * log_not_p), reduction);
}

}  // namespace loom::nn::functional
