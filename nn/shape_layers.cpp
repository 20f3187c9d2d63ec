// Identity, Flatten and Unflatten.
#include "nn/shape_layers.h"

#include "autograd/ops.h"

namespace loom::nn {

Tensor Identity::forward(const Tensor& x) const { return x; }

Flatten::Flatten(int64_t start_dim_, int64_t end_dim_) : start_dim(start_dim_), end_dim(end_dim_) {}

Tensor Flatten::forward(const Tensor& x) const {
  // [d0, ..., d_start, ..., d_end, ...] -> [d0, ..., d_start * ... * d_end, ...]
  LOOM_CHECK(x.defined(), "Flatten: undefined input");
  return x.flatten(start_dim, end_dim);
}

std::string Flatten::extra_repr() const {
  return fmt::format("start_dim={}, end_dim={}", start_dim, end_dim);
}

Unflatten::Unflatten(int64_t dim_, Shape sizes) : dim(dim_), unflattened_size(std::move(sizes)) {
  LOOM_CHECK(!unflattened_size.empty(), "Unflatten: unflattened_size is empty");
}

Tensor Unflatten::forward(const Tensor& x) const {
  // [..., d, ...] -> [..., sizes..., ...], prod(sizes) = d (one size may be -1)
  LOOM_CHECK(x.defined() && x.dim() > 0, "Unflatten: expected a tensor with dims, got {}",
             x.defined() ? shape_str(x.shape()) : "undefined");
  const int64_t rank = x.dim();
  LOOM_CHECK(dim >= -rank && dim < rank, "Unflatten: dim {} is out of range for input {}", dim,
             shape_str(x.shape()));
  const int64_t d = dim < 0 ? dim + rank : dim;
  int64_t known = 1, inferred = 0;
  for (int64_t s : unflattened_size) {
    LOOM_CHECK(s > 0 || s == -1, "Unflatten: invalid size {} in {}", s,
               shape_str(unflattened_size));
    s == -1 ? ++inferred : known *= s;
  }
  const bool fits = inferred == 0 ? known == x.size(d) : inferred == 1 && x.size(d) % known == 0;
  LOOM_CHECK(fits, "Unflatten: sizes {} do not multiply to {}, the size of dim {} of input {}",
             shape_str(unflattened_size), x.size(d), dim, shape_str(x.shape()));
  Shape shape(x.shape().begin(), x.shape().begin() + d);
  shape.insert(shape.end(), unflattened_size.begin(), unflattened_size.end());
  shape.insert(shape.end(), x.shape().begin() + d + 1, x.shape().end());
  return x.reshape(shape);
}

std::string Unflatten::extra_repr() const {
  std::string sizes;
  for (int64_t s : unflattened_size) sizes += (sizes.empty() ? "" : ", ") + std::to_string(s);
  if (unflattened_size.size() == 1) sizes += ",";
  return fmt::format("dim={}, unflattened_size=({})", dim, sizes);
}

}  // namespace loom::nn
