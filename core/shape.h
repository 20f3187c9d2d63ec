// Shapes, strides and broadcasting rules (NumPy / PyTorch semantics).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

// Number of elements of a shape (1 for a 0-d scalar).
int64_t shape_numel(const Shape& shape);
// Row-major strides of a contiguous tensor of this shape.
Strides contiguous_strides(const Shape& shape);
// "[2,3,4]" — the format used in every error message.
std::string shape_str(const Shape& shape);
// Wraps a possibly negative dim into [0, ndim); `op` names the caller for the error.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// The broadcast shape of a and b (trailing dims aligned; size 1 stretches), or a loom::Error
// naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace loom
