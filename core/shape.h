// Shapes, strides and broadcasting rules (NumPy / PyTorch semantics).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

// The most elements a tensor may have: 2^60, so that its size in bytes (8 bytes per element at
// most) and every offset into it fit in int64_t.
inline constexpr int64_t kMaxNumel = int64_t{1} << 60;

// Whether every dim is >= 0 and the product of the non-zero dims is at most kMaxNumel. Zero dims
// are skipped on purpose: [0, 2^62, 2^62] has no elements, but its strides would overflow.
bool shape_fits(const Shape& shape);
// Number of elements of a shape (1 for a 0-d scalar). Throws loom::Error naming the shape if
// it does not fit (see shape_fits): a product that wraps around must never size a buffer.
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
// Whether `from` stretches to `to` by broadcasting alone, without growing it (trailing dims
// aligned, each equal or 1): broadcast_shapes(from, to) == to, without the error.
bool broadcasts_to(const Shape& from, const Shape& to);

}  // namespace loom
