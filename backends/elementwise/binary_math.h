// The math of the binary ops that is more than one C++ operator, written once for the CPU loops
// (cpu_binary.cpp) and the CUDA kernels (elementwise.cu), as unary_math.h is for the unary ones:
// maximum/minimum (NaN wins), and floor and truncating division on floats and on int64, each
// with PyTorch's semantics (c10's div_floor_floating and div_floor_integer).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/host_device.h"

namespace loom::binary {

// torch.maximum/minimum propagate NaN from either side (for int64 the NaN tests are false).
template <class T>
LOOM_HOST_DEVICE T maximum(T a, T b) {
  return a != a ? a : (b != b ? b : (a > b ? a : b));
}
template <class T>
LOOM_HOST_DEVICE T minimum(T a, T b) {
  return a != a ? a : (b != b ? b : (a < b ? a : b));
}

// a / b rounded toward zero. int64: C++'s own division; b == 0 (which autograd refuses before
// any kernel runs, as PyTorch raises ZeroDivisionError) gives 0 here instead of a trap, and
// INT64_MIN / -1 wraps to INT64_MIN, as the hardware-free two's complement would.
template <class T>
LOOM_HOST_DEVICE T trunc_div(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return truncf(a / b);
  } else {
    if (b == 0) return 0;
    if (b == -1) return static_cast<T>(0ull - static_cast<unsigned long long>(a));
    return a / b;
  }
}

// a / b rounded toward negative infinity (Python's //). Floats: PyTorch's formula, which
// rounds the exact quotient (a - fmod(a, b)) / b rather than the rounded a / b, so that
// floor_div(a, b) * b + fmod-style remainder reproduces a; division by zero gives IEEE's a / b.
template <class T>
LOOM_HOST_DEVICE T floor_div(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (b == 0) return a / b;
    const T mod = fmodf(a, b);
    T div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0)) div -= T(1);
    if (div == 0) return copysignf(T(0), a / b);
    T floordiv = floorf(div);
    if (div - floordiv > T(0.5)) floordiv += T(1);
    return floordiv;
  } else {
    const T q = trunc_div(a, b);
    // Truncation rounded up where the signs differ and the division was inexact.
    return (b != 0 && (a < 0) != (b < 0) && q * b != a) ? q - 1 : q;
  }
}

}  // namespace loom::binary
