// Gradient clipping by global norm (Pascanu et al. 2013) and by value, like
// torch.nn.utils.clip_grad_norm_ and clip_grad_value_.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace loom::optim {

// Scales every gradient of `params` in place by max_norm / (norm + 1e-6) when the total L2 norm
// of all gradients together, norm = sqrt(sum over params of sum(grad^2)), exceeds max_norm;
// parameters without a gradient are ignored. Returns the norm before clipping (0 when no
// parameter has a gradient; NaN or inf gradients are returned as such and left unscaled).
// The norm and the scaling run in the multi-tensor kernels of the gradients' device
// (Backend::sum_of_squares_multi, scale_multi: on CUDA a couple of launches for all gradients,
// not several per gradient); the sum of squares is accumulated in double, and one value per
// device comes back to the host.
float clip_grad_norm_(const std::vector<Tensor>& params, float max_norm);
// The same function under its older loom name.
float clip_grad_norm(const std::vector<Tensor>& params, float max_norm);

// Clamps every element of every gradient of `params` into [-clip_value, clip_value], in place
// (parameters without a gradient are ignored); clip_value must be positive.
void clip_grad_value_(const std::vector<Tensor>& params, float clip_value);

}  // namespace loom::optim
