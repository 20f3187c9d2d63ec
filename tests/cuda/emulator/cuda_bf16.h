// The emulator's <cuda_bf16.h>: __nv_bfloat16 as its 16 bits, with the two conversions, which
// round as CUDA's do (to nearest, ties to even: core/bfloat16.h implements exactly that).
#pragma once

#include <cstdint>

#include "core/bfloat16.h"

struct __nv_bfloat16 {
  unsigned short __x;
};
static_assert(sizeof(__nv_bfloat16) == 2, "__nv_bfloat16 is 2 bytes");

inline __nv_bfloat16 __float2bfloat16(float value) {
  return __nv_bfloat16{loom::float_to_bfloat16_bits(value)};
}
inline float __bfloat162float(__nv_bfloat16 value) {
  return loom::bfloat16_bits_to_float(value.__x);
}
