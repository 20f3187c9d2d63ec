// The index of Tensor::index and Tensor::index_put_, spelled as LibTorch's torch::indexing:
//
//   Python              loom
//   x[1:, ::2]          x.index({Slice(1, None), Slice(None, None, 2)})
//   x[..., 0, None]     x.index({Ellipsis, 0, None})
//   x[mask]             x.index({mask})              (mask: a Bool tensor)
//   x[idx, 1:3]         x.index({idx, Slice(1, 3)})  (idx: an int64 tensor)
//
// A TensorIndex is one entry of such a list, made implicitly from an integer, a Slice, None,
// Ellipsis, a bool or a Tensor. What each entry does is written beside Tensor::index in
// autograd/indexing.h; this header only holds the values.
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>

#include "core/tensor.h"

namespace loom::indexing {

// Python's None: inside a Slice an absent bound, in an index list a new dim of size 1.
struct None_t {
  constexpr explicit None_t(int) {}
};
inline constexpr None_t None{0};

// Python's `...`: as many full slices as the dims the other entries leave.
struct Ellipsis_t {
  constexpr explicit Ellipsis_t(int) {}
};
inline constexpr Ellipsis_t Ellipsis{0};

// One bound of a Slice: an integer (negative counts from the end) or None (absent).
class SliceBound {
 public:
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  constexpr SliceBound(T value) : value_(static_cast<int64_t>(value)) {}  // NOLINT: implicit
  constexpr SliceBound(None_t) {}                                          // NOLINT: implicit
  constexpr SliceBound(std::nullopt_t) {}                                  // NOLINT: implicit
  constexpr SliceBound(std::optional<int64_t> value) : value_(value) {}    // NOLINT: implicit
  constexpr const std::optional<int64_t>& value() const { return value_; }

 private:
  std::optional<int64_t> value_;
};

// Python's start:stop:step, each part optional: Slice() is `:`, Slice(1) is `1:`,
// Slice(None, None, 2) is `::2`. Bounds past either end are clamped, as in Python; the step must
// be positive (as in PyTorch, which has no negative steps: flip reverses).
class Slice {
 public:
  constexpr Slice(SliceBound start = None, SliceBound stop = None, SliceBound step = None)
      : start_(start.value()), stop_(stop.value()), step_(step.value()) {}
  constexpr const std::optional<int64_t>& start() const { return start_; }
  constexpr const std::optional<int64_t>& stop() const { return stop_; }
  constexpr int64_t step() const { return step_.value_or(1); }

 private:
  std::optional<int64_t> start_, stop_, step_;
};

// One entry of an index list (at::indexing::TensorIndex).
class TensorIndex {
 public:
  enum class Kind { Integer, Slice, None, Ellipsis, Boolean, Tensor };

  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  TensorIndex(T integer)  // NOLINT: implicit, as LibTorch's
      : kind_(Kind::Integer), integer_(static_cast<int64_t>(integer)) {}
  template <class T, std::enable_if_t<std::is_same_v<T, bool>, int> = 0>
  TensorIndex(T boolean) : kind_(Kind::Boolean), boolean_(boolean) {}  // NOLINT: implicit
  TensorIndex(Slice slice) : kind_(Kind::Slice), slice_(slice) {}      // NOLINT: implicit
  TensorIndex(None_t) : kind_(Kind::None) {}                           // NOLINT: implicit
  TensorIndex(Ellipsis_t) : kind_(Kind::Ellipsis) {}                   // NOLINT: implicit
  TensorIndex(Tensor tensor) : kind_(Kind::Tensor), tensor_(std::move(tensor)) {}  // NOLINT

  Kind kind() const { return kind_; }
  int64_t integer() const { return integer_; }
  bool boolean() const { return boolean_; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  int64_t integer_ = 0;
  bool boolean_ = false;
  Slice slice_;
  Tensor tensor_;
};

}  // namespace loom::indexing
