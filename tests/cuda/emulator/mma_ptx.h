// The emulator's tensor-core instructions at PTX level, the two that the bfloat16 attention
// kernels (backends/attention/attention.cu) issue through inline assembly on a GPU:
//   ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16   (ldmatrix_x4)
//   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (mma_m16n8k16_bf16)
// Their register layouts are the documented ones (PTX ISA, "Warp-level matrix load instruction:
// ldmatrix" and "Matrix fragments for mma.m16n8k16"); lane l, g = l / 4, t = l % 4:
//   ldmatrix .x4: lane l gives the address of row l % 8 of matrix l / 8 (8 consecutive 16-bit
//     elements); register j of lane l receives elements (g, 2t) and (g, 2t + 1) of matrix j, the
//     first in the low half; with .trans elements (2t, g) and (2t + 1, g).
//   mma A [16, 16] (row): registers (g, 2t..2t+1), (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..)
//       B [16, 8] (col): registers (k = 2t..2t+1, n = g), (k = 2t + 8..2t + 9, n = g)
//       C, D [16, 8] float: (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1)
// Both are warp collectives, emulated like __shfl_xor_sync: every lane publishes its operands,
// all wait, each computes its own result from the others', all wait again. So, as for the
// shuffles, every warp of a block must issue them the same number of times.
#pragma once

#include <cstdint>
#include <cstdlib>

#include "core/bfloat16.h"
#include "emu.h"

namespace emu {

inline void ldmatrix_x4(uint32_t (&r)[4], const void* row, bool trans) {
  if (block_threads() % 32 != 0) std::abort();  // full warps only
  auto** slots = static_cast<const uint16_t**>(shuffle_buffer(sizeof(void*) * block_threads()));
  const int me = linear_thread(), lane = me % 32, first = me - lane;
  slots[me] = static_cast<const uint16_t*>(row);
  barrier();
  const int g = lane / 4, t = lane % 4;
  for (int j = 0; j < 4; ++j) {
    const uint16_t* const* rows = slots + first + 8 * j;  // the 8 row addresses of matrix j
    const uint16_t lo = trans ? rows[2 * t][g] : rows[g][2 * t];
    const uint16_t hi = trans ? rows[2 * t + 1][g] : rows[g][2 * t + 1];
    r[j] = lo | static_cast<uint32_t>(hi) << 16;
  }
  barrier();
}

// d += a b, the products summed in float in k order.
inline void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if (block_threads() % 32 != 0) std::abort();  // full warps only
  struct Operands {
    uint32_t a[4], b[2];
  };
  auto* slots = static_cast<Operands*>(shuffle_buffer(sizeof(Operands) * block_threads()));
  const int me = linear_thread(), lane = me % 32, first = me - lane;
  slots[me] = {{a[0], a[1], a[2], a[3]}, {b[0], b[1]}};
  barrier();
  const auto half = [](uint32_t reg, int k) {
    return loom::bfloat16_bits_to_float(static_cast<uint16_t>(reg >> (16 * (k % 2))));
  };
  // Element (row, k) of A and (k, n) of B, read from the lane and register that hold it.
  const auto A = [&](int row, int k) {
    const Operands& o = slots[first + (row % 8) * 4 + (k % 8) / 2];
    return half(o.a[(row / 8) + 2 * (k / 8)], k);
  };
  const auto B = [&](int k, int n) {
    const Operands& o = slots[first + n * 4 + (k % 8) / 2];
    return half(o.b[k / 8], k);
  };
  const int g = lane / 4, t = lane % 4;
  float out[4];
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
    float sum = d[i];
    for (int k = 0; k < 16; ++k) sum += A(row, k) * B(k, col);
    out[i] = sum;
  }
  barrier();
  for (int i = 0; i < 4; ++i) d[i] = out[i];
}

}  // namespace emu
