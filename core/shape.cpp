#include "core/shape.h"

#include "core/error.h"

namespace loom {

bool shape_fits(const Shape& shape) {
  int64_t product = 1;  // of the non-zero dims
  for (int64_t s : shape) {
    if (s < 0) return false;
    if (s > 0 && (__builtin_mul_overflow(product, s, &product) || product > kMaxNumel))
      return false;
  }
  return true;
}

int64_t shape_numel(const Shape& shape) {
  LOOM_CHECK(shape_fits(shape),
             "shape {}: a size is negative, or the tensor would have more than 2^60 elements "
             "(the numel cap)",
             shape_str(shape));
  int64_t n = 1;
  for (int64_t s : shape) n *= s;  // cannot overflow: checked above
  return n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i] > 0 ? shape[i] : 1;
  }
  return strides;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t lo = ndim > 0 ? -ndim : -1, hi = ndim > 0 ? ndim - 1 : 0;
  LOOM_CHECK(dim >= lo && dim <= hi, "{}: dim {} out of range for a tensor with {} dims", op, dim,
             ndim);
  return dim < 0 ? dim + (ndim > 0 ? ndim : 1) : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    LOOM_CHECK(da == db || da == 1 || db == 1, "{}: shapes {} and {} cannot be broadcast", op,
               shape_str(a), shape_str(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

}  // namespace loom
