// DropPath (stochastic depth per sample), see nn/drop_path.h.
#include "nn/drop_path.h"

#include "autograd/ops.h"
#include "core/error.h"

namespace loom::nn {

namespace functional {

Tensor drop_path(const Tensor& x, float p, bool training) {
  LOOM_CHECK(p >= 0.0f && p < 1.0f, "drop_path: probability {} outside [0, 1)", p);
  if (!training || p == 0.0f) return x;
  LOOM_CHECK(x.defined() && x.dim() >= 1, "drop_path: expected x [B, ...], got {}",
             x.defined() ? shape_str(x.shape()) : "undefined");
  Shape per_sample(static_cast<size_t>(x.dim()), 1);  // (B, 1, ..., 1): broadcasts over a sample
  per_sample[0] = x.size(0);
  const float keep = 1.0f - p;
  const Tensor scale = lt(rand(per_sample, x.device()), keep) * (1.0f / keep);  // 0 or 1/keep
  return x * scale;                                                             // (B, ...)
}

}  // namespace functional

DropPath::DropPath(float p_) : p(p_) {
  LOOM_CHECK(p_ >= 0.0f && p_ < 1.0f, "DropPath: probability {} outside [0, 1)", p_);
}

Tensor DropPath::forward(const Tensor& x) const {
  return functional::drop_path(x, p, is_training());
}

std::string DropPath::extra_repr() const { return fmt::format("drop_prob={:.3f}", p); }

}  // namespace loom::nn
