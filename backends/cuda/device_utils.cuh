// Helpers shared by the .cu files: launch sizes, strided addressing and the warp-shuffle
// reductions (one warp = 32 threads that exchange registers with __shfl_xor_sync).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/launch_plan.h"
#include "core/host_device.h"

namespace loom::cuda {

constexpr int kBlock = 256;  // threads per block of the elementwise kernels
constexpr int kWarp = 32;

__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for a grid-stride loop over n items: one item per thread up to a cap, beyond which
// each thread loops (the cap keeps the grid small; 2^20 blocks of 256 fill any GPU).
inline unsigned grid_for(int64_t n, int threads = kBlock) {
  return static_cast<unsigned>(std::clamp<int64_t>(ceil_div(n, threads), 1, int64_t{1} << 20));
}

// How to split a reduced axis of n elements when `units` independent blocks are too few to
// fill the GPU: into chunks of at least `min_chunk` elements, aiming at about kTargetBlocks
// blocks in all (8 per SM on a 132-SM H100). A second pass then combines the chunk partials.
struct Split {
  int64_t chunks, chunk_len;
};
constexpr int64_t kTargetBlocks = 1024;

inline Split plan_split(int64_t units, int64_t n, int64_t min_chunk) {
  if (units >= kTargetBlocks || n <= min_chunk) return {1, n};
  const int64_t wanted = std::min(ceil_div(n, min_chunk), ceil_div(kTargetBlocks, units));
  const int64_t chunk_len = ceil_div(n, wanted);
  return {ceil_div(n, chunk_len), chunk_len};  // no empty chunk
}

// Threads for a block that cooperates on one row of n elements: a multiple of the warp size
// (the block reductions need whole warps), about 4 elements per thread, at most `max_threads`.
inline int row_threads(int64_t n, int max_threads = 512) {
  const int64_t want = ceil_div(ceil_div(n, 4), kWarp) * kWarp;
  return static_cast<int>(std::clamp<int64_t>(want, kWarp, max_threads));
}

// A grid-stride loop: thread t of a grid of T threads visits i = t, t + T, t + 2T, ... < n.
#define LOOM_GRID_STRIDE_LOOP(i, n)                                                      \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// The storage offsets of element i of the row-major index space of `layout` in N operands:
// i's coordinates are found once (a divide and a remainder per dim, the costly part of
// strided addressing) and dotted with each operand's strides. The loops are unrolled over
// kMaxDims so everything stays in registers; the outermost coordinate needs no division.
template <int N>
struct Offsets {
  int64_t at[N];
};

template <typename Index, int N>
__device__ __forceinline__ Offsets<N> strided_offsets(Index i, const Layout& layout,
                                                      const int64_t* const (&strides)[N]) {
  Index offset[N] = {};
#pragma unroll
  for (int d = kMaxDims - 1; d >= 0; --d) {
    if (d < layout.ndim) {
      Index coord = i;
      if (d > 0) {
        const Index size = static_cast<Index>(layout.shape[d]);
        coord = i % size;
        i /= size;
      }
#pragma unroll
      for (int k = 0; k < N; ++k) offset[k] += coord * static_cast<Index>(strides[k][d]);
    }
  }
  Offsets<N> result;
#pragma unroll
  for (int k = 0; k < N; ++k) result.at[k] = static_cast<int64_t>(offset[k]);
  return result;
}

// Element offsets of element i in each operand: i itself on the contiguous fast path. When
// every offset fits in 32 bits (Layout::index32: all but huge tensors) the arithmetic is done
// in 32 bits, where a divide costs a fraction of a 64-bit one.
template <typename... Ops>
__device__ __forceinline__ Offsets<sizeof...(Ops)> element_offsets(int64_t i, const Layout& layout,
                                                                   const Ops&... operands) {
  constexpr int N = sizeof...(Ops);
  if (layout.contiguous) return {{(static_cast<void>(operands), i)...}};
  const int64_t* const strides[N] = {operands.strides...};
  if (layout.index32)
    return strided_offsets<uint32_t, N>(static_cast<uint32_t>(i), layout, strides);
  return strided_offsets<int64_t, N>(i, layout, strides);
}

// ---------------------------------------------------------------------------- unary math
// CUDA's math library for the unary table (backends/unary_math.h).
constexpr float kSqrtHalf = 0.70710678118654752f;  // 1/sqrt(2)

struct CudaMath {
  static LOOM_HOST_DEVICE float exp(float x) { return expf(x); }
  static LOOM_HOST_DEVICE float log(float x) { return logf(x); }
  static LOOM_HOST_DEVICE float sqrt(float x) { return sqrtf(x); }  // (rsqrtf is only 2 ulp)
  static LOOM_HOST_DEVICE float tanh(float x) { return tanhf(x); }
  static LOOM_HOST_DEVICE float sin(float x) { return sinf(x); }
  static LOOM_HOST_DEVICE float cos(float x) { return cosf(x); }
  static LOOM_HOST_DEVICE float abs(float x) { return fabsf(x); }
  static LOOM_HOST_DEVICE float pow(float x, float a) { return powf(x, a); }
  static LOOM_HOST_DEVICE float normal_cdf(float x) { return 0.5f * (1.0f + erff(x * kSqrtHalf)); }
  struct CdfPdf {
    float cdf, pdf;
  };
  static LOOM_HOST_DEVICE CdfPdf normal_cdf_pdf(float x) {  // Phi(x) and phi(x)
    return {normal_cdf(x), 0.3989422804014327f * expf(-0.5f * x * x)};
  }
  static LOOM_HOST_DEVICE float log1p(float x) { return log1pf(x); }
  static LOOM_HOST_DEVICE float expm1(float x) { return expm1f(x); }
  static LOOM_HOST_DEVICE float log2(float x) { return log2f(x); }
  static LOOM_HOST_DEVICE float exp2(float x) { return exp2f(x); }
  static LOOM_HOST_DEVICE float erf(float x) { return erff(x); }
  static LOOM_HOST_DEVICE float floor(float x) { return floorf(x); }
  static LOOM_HOST_DEVICE float ceil(float x) { return ceilf(x); }
  static LOOM_HOST_DEVICE float rint(float x) { return rintf(x); }  // ties to even
  static LOOM_HOST_DEVICE float trunc(float x) { return truncf(x); }
};

// ---------------------------------------------------------------------------- reductions
// Butterfly reduction: after log2(32) = 5 exchange steps every lane holds the warp's total.
template <typename Combine, typename T>
__device__ __forceinline__ T warp_reduce(T value, Combine combine) {
#pragma unroll
  for (int delta = kWarp / 2; delta > 0; delta /= 2)
    value = combine(value, __shfl_xor_sync(0xffffffffu, value, delta));
  return value;
}

// Block-wide reduction; every thread gets the result. blockDim.x must be a multiple of 32.
// `shared` holds one slot per warp (32 values). Each warp reduces its lanes, lane 0 parks the
// partial in shared memory, then every warp reduces the (at most 32) partials itself, which
// saves a second __syncthreads. The order of additions is fixed, so results are deterministic.
template <typename T, typename Combine>
__device__ __forceinline__ T block_reduce(T value, T identity, T* shared, Combine combine) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  value = warp_reduce(value, combine);
  __syncthreads();  // a previous call may still be reading `shared`
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  value = lane < warps ? shared[lane] : identity;
  return warp_reduce(value, combine);
}

struct SumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename T>
__device__ __forceinline__ T block_sum(T value, T* shared) {
  return block_reduce(value, T{0}, shared, SumOp{});
}
__device__ __forceinline__ float block_max(float value, float* shared) {
  return block_reduce(value, -INFINITY, shared, MaxOp{});
}

// Raises a DeviceErrorFlag; only the first thread to arrive records its value and position.
__device__ __forceinline__ void raise_error(DeviceErrorFlag* flag, long long value,
                                            long long position) {
  if (atomicCAS(&flag->raised, 0, 1) == 0) {
    flag->value = value;
    flag->position = position;
  }
}

}  // namespace loom::cuda
