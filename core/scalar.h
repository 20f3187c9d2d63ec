// Scalar: a number on the other side of a tensor op (x * 2, x + 0.5f, eq(x, 0), masked_fill's
// value), as LibTorch's c10::Scalar. It remembers whether it was written as a bool, an integer
// or a floating-point number, because that decides the result's dtype (PyTorch's rule for a
// number next to a tensor): a number of a higher category than the tensor's dtype (bool <
// integer < floating) lifts the result to that category's default dtype (int64, float32); one
// of the same or a lower category leaves the tensor's dtype alone. So int64 * 2 is int64,
// int64 * 2.0f is float32, float32 * 2 and bfloat16 * 0.5 keep their dtypes.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"

namespace loom {

class Scalar {
 public:
  enum class Kind { Bool, Integral, Floating };

  // Built implicitly from any C++ number (bool, int, int64_t, size_t, float, double, ...), as
  // c10::Scalar is, so that x * 2 and eq(x, 0.5f) need no cast.
  template <class T>
    requires std::is_arithmetic_v<T>
  Scalar(T value) {  // NOLINT(google-explicit-constructor)
    if constexpr (std::is_same_v<T, bool>) {
      kind_ = Kind::Bool;
      i_ = value ? 1 : 0;
    } else if constexpr (std::is_integral_v<T>) {
      kind_ = Kind::Integral;
      i_ = static_cast<int64_t>(value);
    } else {
      kind_ = Kind::Floating;
      d_ = static_cast<double>(value);
    }
  }

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_integral() const { return kind_ == Kind::Integral; }  // not bool, as c10's (false)
  bool is_floating_point() const { return kind_ == Kind::Floating; }

  double to_double() const { return kind_ == Kind::Floating ? d_ : static_cast<double>(i_); }
  float to_float() const { return static_cast<float>(to_double()); }
  // Integral and bool values exactly; a floating value truncated toward zero.
  int64_t to_int64() const { return kind_ == Kind::Floating ? static_cast<int64_t>(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::Floating ? d_ != 0.0 : i_ != 0; }

  // The dtype PyTorch gives the number alone (torch.tensor(value).dtype): bool, int64 or
  // float32 (the default floating dtype).
  DType dtype() const {
    return kind_ == Kind::Bool ? DType::Bool
                               : (kind_ == Kind::Integral ? DType::Int64 : DType::Float32);
  }

 private:
  Kind kind_ = Kind::Integral;
  int64_t i_ = 0;   // Bool and Integral
  double d_ = 0.0;  // Floating
};

}  // namespace loom
