// ExpandingArray<D>: a size per spatial dim, given either as one number for every dim or as D
// numbers, like LibTorch's torch::ExpandingArray. So the convolution and pooling layers take
// both spellings of PyTorch:
//   nn::Conv2d(3, 8, 3)                   // kernel 3x3
//   nn::Conv2d(3, 8, {3, 5}, {1, 2})      // kernel 3x5, stride 1 along H and 2 along W
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/error.h"

namespace loom::nn {

template <size_t D>
class ExpandingArray {
 public:
  // One number for every dim. bool is refused: Conv2d(..., padding, false) must not read the
  // bias flag as a size.
  template <std::integral I>
    requires(!std::same_as<I, bool>)
  ExpandingArray(I value) {  // NOLINT(google-explicit-constructor): 3 means {3, 3}
    values_.fill(static_cast<int64_t>(value));
  }
  // Exactly D numbers, {kh, kw}.
  ExpandingArray(std::initializer_list<int64_t> values) {
    LOOM_CHECK(values.size() == D, "ExpandingArray: expected {} sizes, got {}", D, values.size());
    size_t i = 0;
    for (int64_t v : values) values_[i++] = v;
  }

  int64_t operator[](size_t i) const { return values_[i]; }
  const std::array<int64_t, D>& values() const { return values_; }
  bool operator==(const ExpandingArray&) const = default;
  // PyTorch's tuple repr: "(3, 5)".
  std::string str() const {
    std::string out = "(";
    for (size_t i = 0; i < D; ++i) out += (i ? ", " : "") + std::to_string(values_[i]);
    return out + (D == 1 ? ",)" : ")");
  }
  // One number when every dim has it ("3"), else the tuple: how PyTorch prints a pooling's
  // sizes, and how error messages name them.
  std::string compact_str() const {
    for (size_t i = 1; i < D; ++i)
      if (values_[i] != values_[0]) return str();
    return std::to_string(values_[0]);
  }

 private:
  std::array<int64_t, D> values_{};
};

}  // namespace loom::nn
