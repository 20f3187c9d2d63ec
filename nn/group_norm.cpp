// GroupNorm and RMSNorm layers (functional::group_norm, functional::rms_norm).
#include "nn/group_norm.h"

#include "autograd/ops.h"
#include "nn/functional.h"

namespace loom::nn {

GroupNorm::GroupNorm(int64_t groups, int64_t channels, float eps_, bool affine)
    : num_groups(groups), num_channels(channels), eps(eps_) {
  LOOM_CHECK(groups > 0 && channels > 0 && channels % groups == 0 && eps_ > 0.0f,
             "GroupNorm: num_channels {} must split into num_groups {} (and eps {} be positive)",
             channels, groups, eps_);
  if (affine) {
    weight = register_parameter("weight", ones({channels}));
    bias = register_parameter("bias", zeros({channels}));
  }
}

Tensor GroupNorm::forward(const Tensor& x) const {
  // x [N, C, ...] -> [N, C, ...]
  LOOM_CHECK(x.defined() && x.dim() >= 2 && x.size(1) == num_channels,
             "GroupNorm({}, {}): expected input [N, {}, ...], got {}", num_groups, num_channels,
             num_channels, x.defined() ? shape_str(x.shape()) : "undefined");
  return functional::group_norm(x, num_groups, weight, bias, eps);
}

std::string GroupNorm::extra_repr() const {
  return fmt::format("{}, {}, eps={}, affine={}", num_groups, num_channels, py_repr(eps),
                     py_repr(weight.defined()));
}

RMSNorm::RMSNorm(int64_t dim_, float eps_, bool elementwise_affine) : dim(dim_), eps(eps_) {
  LOOM_CHECK(dim_ > 0 && eps_ >= 0.0f, "RMSNorm: invalid dim {} or eps {}", dim_, eps_);
  if (elementwise_affine) weight = register_parameter("weight", ones({dim_}));
}

Tensor RMSNorm::forward(const Tensor& x) const {
  // x [..., dim] -> [..., dim]
  LOOM_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == dim,
             "RMSNorm({}): expected input [..., {}], got {}", dim, dim,
             x.defined() ? shape_str(x.shape()) : "undefined");
  return functional::rms_norm(x, {dim}, weight, eps);
}

std::string RMSNorm::extra_repr() const {
  return fmt::format("({},), eps={}, elementwise_affine={}", dim, py_repr(eps),
                     py_repr(weight.defined()));
}

}  // namespace loom::nn
