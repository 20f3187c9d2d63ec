// Layers that only reshape or pass their input on: Identity, Flatten and Unflatten (as
// torch.nn's), so that a Sequential can hold the reshapes between its layers.
#pragma once

#include "nn/module.h"

namespace loom::nn {

// The input, unchanged (a placeholder, e.g. for a layer switched off by a config).
class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) const;  // [...] -> the same tensor
};

// Merges dims start_dim..end_dim (negative counts from the end) into one: [N, C, H, W] ->
// [N, C*H*W] with the defaults, which keep the batch dim (torch.nn.Flatten; torch.flatten's
// defaults are start_dim = 0). A view where the layout allows.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  Tensor forward(const Tensor& x) const;
  std::string extra_repr() const override;

  int64_t start_dim, end_dim;
};

// Splits dim `dim` into `sizes` (one of them may be -1, inferred): Flatten's inverse,
// [N, 12] -> [N, 3, 4] for Unflatten(1, {3, 4}).
class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, Shape sizes);
  Tensor forward(const Tensor& x) const;
  std::string extra_repr() const override;

  int64_t dim;
  Shape unflattened_size;
};

}  // namespace loom::nn
