// The emulator's <mma.h>: nvcuda::wmma (warp-level matrix multiply-accumulate on tensor cores),
// the m16n16k16 shape with bfloat16 inputs and float accumulators, the only one loom uses.
//
// On a GPU a fragment is spread over the 32 lanes of a warp in an unspecified ("opaque") layout.
// Here every lane's fragment holds the whole 16x16 tile, but a lane OWNS only the elements
// e (row-major index in the tile) with e % 32 == lane: mma_sync computes only the owned
// accumulator elements and store_matrix_sync writes only them. So a warp's 32 fibers, running
// one after another, together compute and store each element exactly once, and a kernel that
// reads or writes fragment elements itself (which real hardware does not define) breaks here.
// Loads read the whole tile. The *_sync calls do not wait for the other lanes: a kernel must
// separate a store from another lane's load of the same memory with __syncthreads, as it must
// on the GPU (there with at least __syncwarp).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda_bf16.h"
#include "emu.h"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulator has the m16n16k16 shape only");
  static constexpr int num_elements = 256;
  float x[256];  // (row, col) at x[row * 16 + col], whatever the use
};

namespace detail {
inline int lane() { return emu::linear_thread() % 32; }
inline float value(float v) { return v; }
inline float value(__nv_bfloat16 v) { return __bfloat162float(v); }
inline bool owns(int e) { return e % 32 == lane(); }
}  // namespace detail

template <class Use, class T, class Layout, class P>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const P* p, unsigned ldm) {
  static_assert(!std::is_same_v<Use, accumulator>, "an accumulator load takes a layout_t");
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      f.x[r * 16 + c] =
          detail::value(std::is_same_v<Layout, col_major> ? p[r + c * ldm] : p[r * ldm + c]);
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p,
                             unsigned ldm, layout_t layout) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      f.x[r * 16 + c] = layout == mem_col_major ? p[r + c * ldm] : p[r * ldm + c];
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t layout) {
  for (int e = 0; e < 256; ++e) {
    if (!detail::owns(e)) continue;
    const int r = e / 16, c = e % 16;
    (layout == mem_col_major ? p[r + c * ldm] : p[r * ldm + c]) = f.x[e];
  }
}

template <class Use, class T, class Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, float value) {
  for (float& v : f.x) v = value;
}

// d = a b + c on the lane's own elements (d may be c).
template <class T, class LayoutA, class LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
              const fragment<matrix_a, 16, 16, 16, T, LayoutA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LayoutB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  for (int e = 0; e < 256; ++e) {
    if (!detail::owns(e)) continue;
    const int r = e / 16, col = e % 16;
    float sum = c.x[e];
    for (int k = 0; k < 16; ++k) sum += a.x[r * 16 + k] * b.x[k * 16 + col];
    d.x[e] = sum;
  }
}

}  // namespace nvcuda::wmma
