// Losses: cross-entropy (fused op), regression losses, binary cross-entropy with logits,
// negative log-likelihood and KL divergence; and the cosine similarity and normalize, which the
// contrastive losses are built from.
#include "autograd/internal.h"
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

// A comparison's mask as float32 1/0, whatever dtype the comparison gives.
Tensor as_float(const Tensor& mask) {
  return mask.dtype() == DType::Float32 ? mask : mask.to(DType::Float32);
}

using detail::shape_of;  // autograd/internal.h

}  // namespace

Tensor reduce(const Tensor& losses, Reduction reduction) {
  switch (reduction) {
    case Reduction::Mean:
      return mean(losses);
    case Reduction::Sum:
      return sum(losses);
    case Reduction::BatchMean:
      return sum(losses) / static_cast<float>(losses.dim() == 0 ? 1 : losses.size(0));
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

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        const Tensor& weight, const Tensor& pos_weight,
                                        Reduction reduction) {
  check_pair(logits, target, "binary_cross_entropy_with_logits");
  for (const auto& [t, what] : {std::pair{&weight, "weight"}, std::pair{&pos_weight, "pos_weight"}})
    LOOM_CHECK(!t->defined() || broadcasts_to(t->shape(), logits.shape()),
               "binary_cross_entropy_with_logits: {} of shape {} does not broadcast to the "
               "logits {}", what, shape_str(t->shape()), shape_str(logits.shape()));
  // As above; pos_weight p scales the positive term: -[p y log sigmoid(x) + (1 - y) log
  // sigmoid(-x)] (PyTorch's BCEWithLogitsLoss), then weight scales the whole loss.
  const Tensor log_probs = log_softmax(stack({zeros_like(logits), logits}, -1), -1);  // [..., 2]
  const Tensor log_p = log_probs.select(-1, 1), log_not_p = log_probs.select(-1, 0);
  const Tensor positive = pos_weight.defined() ? pos_weight * target : target;
  Tensor losses = -(positive * log_p + (1.0f - target) * log_not_p);
  if (weight.defined()) losses = losses * weight;
  return reduce(losses, reduction);
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                int64_t ignore_index, Reduction reduction) {
  // input [N, C, d...] log-probabilities, target int64 [N, d...] -> per element [N, d...], reduced
  LOOM_CHECK(input.defined() && target.defined() && input.dim() >= 2 &&
                 input.dtype() == DType::Float32 && target.dtype() == DType::Int64,
             "nll_loss: expected float32 input [N, C, ...] and int64 target [N, ...], got {} {} "
             "and {} {}", shape_of(input), input.defined() ? dtype_name(input.dtype()) : "",
             shape_of(target), target.defined() ? dtype_name(target.dtype()) : "");
  Shape expected = input.shape();
  expected.erase(expected.begin() + 1);
  const int64_t classes = input.size(1);
  LOOM_CHECK(target.shape() == expected,
             "nll_loss: target of shape {} does not match input {} (expected {})",
             shape_str(target.shape()), shape_str(input.shape()), shape_str(expected));
  LOOM_CHECK(!weight.defined() || weight.shape() == Shape{classes},
             "nll_loss: weight of shape {} does not match the {} classes of input {}",
             shape_of(weight), classes, shape_str(input.shape()));
  // The target as a one-hot mask over the class dim, [N, C, d...]: picking input[n, t] is then a
  // masked sum, composed from ops that run and differentiate on every device. A target that is
  // neither a class nor ignore_index matches nothing: counted and refused, as PyTorch does.
  Shape class_shape(input.dim(), 1);
  class_shape[1] = classes;  // [1, C, 1, ...]
  const Tensor one_hot =
      as_float(eq(target.unsqueeze(1), arange(classes, input.device()).reshape(class_shape)));
  const Tensor ignore = tensor_i64({ignore_index}, {}).to(target.device());
  const Tensor valid = as_float(ne(target, ignore));  // [N, d...]
  const int64_t stray = static_cast<int64_t>(sum(valid * (1.0f - sum(one_hot, 1))).item());
  LOOM_CHECK(stray == 0, "nll_loss: {} targets lie outside [0, {}) and are not ignore_index {}",
             stray, classes, ignore_index);
  // where, not a product: a log-probability of -inf at an unpicked class must not make NaN.
  const Tensor picked = sum(where(one_hot, input, zeros_like(input)), 1);  // [N, d...]
  Tensor weights = valid;                                                // weight[t], 0 if ignored
  if (weight.defined()) weights = sum(one_hot * weight.reshape(class_shape), 1) * valid;
  const Tensor losses = -picked * weights;
  // PyTorch's mean is weighted: the sum over the weights of the targets it counts.
  if (reduction == Reduction::Mean) return sum(losses) / sum(weights);
  return reduce(losses, reduction);
}

Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction, bool log_target) {
  // input (log q), target (p, or log p) of one shape -> p (log p - log q), reduced
  check_pair(input, target, "kl_div");
  Tensor losses;
  if (log_target) {
    losses = exp(target) * (target - input);
  } else {
    // p log p is 0 at p = 0 (torch.xlogy); log sees 1 there, so neither the value nor the
    // gradient meets log(0).
    const Tensor positive = gt(target, 0.0f);
    const Tensor safe = where(positive, target, ones_like(target));
    losses = target * log(safe) - target * input;
  }
  return reduce(losses, reduction);
}

Tensor cosine_similarity(const Tensor& a, const Tensor& b, int64_t dim, float eps) {
  // a, b broadcast to [..., D at dim, ...] -> [...] without dim
  LOOM_CHECK(a.defined() && b.defined(), "cosine_similarity: undefined input");
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "cosine_similarity");
  const int64_t rank = static_cast<int64_t>(shape.size());
  LOOM_CHECK(dim >= -rank && dim < rank,
             "cosine_similarity: dim {} is out of range for inputs {} and {}", dim,
             shape_str(a.shape()), shape_str(b.shape()));
  const Tensor x = a.expand(shape), y = b.expand(shape);
  // Each side divided by its norm (clamped at eps) before the product, as PyTorch 1.13, which
  // keeps the product of two small norms from underflowing.
  const Tensor x_unit = x / clamp_min(norm(x, 2.0f, dim, true), eps);
  const Tensor y_unit = y / clamp_min(norm(y, 2.0f, dim, true), eps);
  return sum(x_unit * y_unit, dim);
}

Tensor normalize(const Tensor& x, float p, int64_t dim, float eps) {
  // x [..., D at dim, ...] -> same shape, unit p-norm along dim
  LOOM_CHECK(x.defined() && x.dim() > 0, "normalize: expected a tensor with dims, got {}",
             shape_of(x));
  LOOM_CHECK(dim >= -x.dim() && dim < x.dim(), "normalize: dim {} is out of range for input {}",
             dim, shape_str(x.shape()));
  return x / clamp_min(norm(x, p, dim, true), eps);
}

}  // namespace loom::nn::functional
