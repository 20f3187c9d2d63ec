// bfloat16: the top 16 bits of an IEEE float32 (1 sign bit, the same 8 exponent bits, 7 mantissa
// bits). It covers float32's whole range with about 3 significant decimal digits, which is why
// mixed-precision training stores activations and multiplies matrices in it while the master
// weights, the optimizer state and the reductions stay in float32.
//
// The conversions are PyTorch's (c10/util/BFloat16.h):
//   * float32 -> bfloat16 rounds to the nearest representable value, ties to even (the 16 bits
//     dropped are added to with 0x7FFF plus the lowest kept bit, then truncated). Subnormals
//     round the same way; values above the largest finite bfloat16 (3.3895e38) round to
//     infinity, as in IEEE arithmetic; +-inf stay +-inf; every NaN becomes the quiet NaN 0x7FC0.
//   * bfloat16 -> float32 is exact: the 16 bits are shifted back into place.
// LOOM_HOST_DEVICE: the same two functions serve the CPU loops and, later, the CUDA kernels.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace loom {

LOOM_HOST_DEVICE uint16_t float_to_bfloat16_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if (value != value) return 0x7FC0;  // NaN: the canonical quiet NaN (c10's choice)
  const uint32_t lsb = (bits >> 16) & 1u;  // the lowest bit that is kept: ties go to even
  return static_cast<uint16_t>((bits + 0x7FFFu + lsb) >> 16);
}

LOOM_HOST_DEVICE float bfloat16_bits_to_float(uint16_t bits) {
  const uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, sizeof value);
  return value;
}

// The element type of a DType::BFloat16 tensor (data_ptr<BFloat16>()): 2 bytes, trivially
// copyable, converted explicitly from float and implicitly to float (exact), like c10::BFloat16.
struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  LOOM_HOST_DEVICE explicit BFloat16(float value) : bits(float_to_bfloat16_bits(value)) {}
  LOOM_HOST_DEVICE operator float() const { return bfloat16_bits_to_float(bits); }

  LOOM_HOST_DEVICE static BFloat16 from_bits(uint16_t raw) {
    BFloat16 b;
    b.bits = raw;
    return b;
  }
};

static_assert(sizeof(BFloat16) == 2, "BFloat16 must be 2 bytes, like the file format's BF16");

}  // namespace loom
