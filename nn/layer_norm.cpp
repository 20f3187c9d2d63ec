// LayerNorm layer: the fused layer_norm op with the layer's weight and bias; the residual
// stream whose sums it forms in its kernel.
#include "nn/layer_norm.h"

#include <utility>

#include "autograd/ops.h"
#include "nn/functional.h"

namespace loom::nn {

LayerNorm::LayerNorm(int64_t dim, float eps_, bool elementwise_affine)
    : normalized_shape(dim), eps(eps_) {
  LOOM_CHECK(dim > 0, "LayerNorm: normalized_shape {} must be positive", dim);
  LOOM_CHECK(eps_ > 0.0f, "LayerNorm: eps {} must be positive", eps_);
  if (elementwise_affine) {
    weight = register_parameter("weight", ones({dim}));
    bias = register_parameter("bias", zeros({dim}));
  }
}

Tensor LayerNorm::forward(const Tensor& x) const {
  // x [..., D] -> [..., D]
  LOOM_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == normalized_shape,
             "LayerNorm({}): expected input [..., {}], got {}", normalized_shape, normalized_shape,
             x.defined() ? shape_str(x.shape()) : "undefined");
  return functional::layer_norm(x, weight, bias, eps);
}

std::pair<Tensor, Tensor> LayerNorm::add_and_forward(const Tensor& x,
                                                     const Tensor& residual) const {
  // x, residual [..., D] -> {x + residual, LayerNorm(x + residual)}
  LOOM_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == normalized_shape,
             "LayerNorm({}): expected input [..., {}], got {}", normalized_shape, normalized_shape,
             x.defined() ? shape_str(x.shape()) : "undefined");
  return functional::add_layer_norm(x, residual, weight, bias, eps);
}

Tensor LayerNorm::forward(const Residual& x) const {
  Residual::Sum& sum = *x.sum_;
  if (sum.value.defined()) return forward(sum.value);
  auto [value, normed] = add_and_forward(sum.x, sum.branch);  // x + branch and its LayerNorm
  sum.value = value;
  sum.x = sum.branch = Tensor();
  return normed;
}

std::string LayerNorm::extra_repr() const {
  return fmt::format("({},), eps={}, elementwise_affine={}", normalized_shape, py_repr(eps),
                     py_repr(weight.defined()));
}

// ---------------------------------------------------------------------------- Residual
Residual::Residual(Tensor x) : sum_(std::make_shared<Sum>()) {
  LOOM_CHECK(x.defined(), "Residual: undefined tensor");
  sum_->value = std::move(x);
}

const Tensor& Residual::tensor() const {
  if (!sum_->value.defined()) {
    sum_->value = sum_->x + sum_->branch;
    sum_->x = sum_->branch = Tensor();
  }
  return sum_->value;
}

Residual operator+(const Residual& x, const Tensor& branch) {
  Tensor stream = x.tensor();  // [..., T, C]
  // The branch covers the stream, or its last positions: every dim but -2 the same.
  bool fits = branch.defined() && branch.dim() == stream.dim();
  for (int64_t d = 0; fits && d < stream.dim(); ++d)
    fits = branch.size(d) == stream.size(d) ||
           (d == stream.dim() - 2 && branch.size(d) < stream.size(d));
  LOOM_CHECK(fits,
             "Residual: a branch of shape {} does not continue a stream of shape {} (expected "
             "the same shape, or fewer positions in dim -2)",
             branch.defined() ? shape_str(branch.shape()) : "undefined", shape_str(stream.shape()));
  if (branch.shape() != stream.shape())  // the positions the branch computed
    stream = stream.narrow(-2, stream.size(-2) - branch.size(-2), branch.size(-2));
  Residual out(stream);
  out.sum_->x = std::exchange(out.sum_->value, Tensor());  // pending: stream + branch
  out.sum_->branch = branch;
  return out;
}

}  // namespace loom::nn
