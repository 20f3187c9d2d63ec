// Reductions over the middle axis of a contiguous [outer, n, inner] block. Two layouts need two
// thread mappings (softmax.cu uses the same two):
//   * inner == 1 (the reduced axis is the last one, e.g. softmax over attention scores): a
//     row of n floats is contiguous, so one block owns a row and its threads read it together;
//   * inner > 1 (e.g. summing a [B, T, C] gradient over T): a warp owns 32 consecutive inner
//     positions and walks down n, so each of its loads is 32 consecutive floats.
// When those mappings leave the GPU idle (few long rows, e.g. the sum of one big tensor), the
// n axis is split into chunks reduced by separate blocks, and a second pass combines the
// per-chunk partials. Both passes add in a fixed order: results are deterministic.
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backends/cuda/device.h"
#include "backends/cuda/device_utils.cuh"
#include "backends/reduce/reduce.cuh"
#include "backends/reduce/reduce.h"
#include "core/bfloat16.h"

namespace loom::cuda {
namespace {

enum class Kind { Sum, Max, Min };

// The accumulator type: float sums run in double (as on the CPU), so the result does not
// depend on the summation order in any visible way; max/min and int64 keep their type. A
// bfloat16 input is only summed (into a float32 result), in double too.
template <Kind K, typename T>
using AccumType =
    std::conditional_t<K == Kind::Sum && (std::is_same_v<T, float> || std::is_same_v<T, BFloat16>),
                       double, T>;

// An element as the accumulator type (a bfloat16 through its exact float value).
template <typename A, typename T>
__device__ __forceinline__ A to_acc(T v) {
  if constexpr (std::is_same_v<T, BFloat16>)
    return static_cast<A>(static_cast<float>(v));
  else
    return static_cast<A>(v);
}

// A running reduction: the value and, for Max/Min, the index where it was found.
template <typename A>
struct Acc {
  A value;
  long long index;
};

template <typename T>
__device__ __forceinline__ bool is_nan(T v) {
  return v != v;  // always false for int64
}

template <Kind K, typename A>
__device__ __forceinline__ Acc<A> identity() {
  if constexpr (K == Kind::Sum)
    return {A{0}, 0};
  else if constexpr (std::is_same_v<A, long long>)
    return {K == Kind::Max ? LLONG_MIN : LLONG_MAX, LLONG_MAX};
  else
    return {K == Kind::Max ? -INFINITY : INFINITY, LLONG_MAX};
}

// Max/Min order (value, index) pairs totally: NaN beats every number (PyTorch's max propagates
// NaN), then the better value, then the smaller index (torch.argmax returns the first
// occurrence). A total order makes the combine associative and commutative, so every
// reduction tree, and every chunking, returns the same pair.
template <Kind K, typename A>
__device__ __forceinline__ Acc<A> combine(Acc<A> a, Acc<A> b) {
  if constexpr (K == Kind::Sum) {
    return {a.value + b.value, 0};
  } else {
    const bool a_nan = is_nan(a.value), b_nan = is_nan(b.value);
    bool take_b;
    if (a_nan || b_nan)
      take_b = a_nan == b_nan ? b.index < a.index : b_nan;
    else if (a.value == b.value)
      take_b = b.index < a.index;
    else
      take_b = K == Kind::Max ? b.value > a.value : b.value < a.value;
    return take_b ? b : a;
  }
}

template <Kind K, typename A>
__device__ __forceinline__ Acc<A> warp_combine(Acc<A> acc) {
#pragma unroll
  for (int delta = kWarp / 2; delta > 0; delta /= 2) {
    const Acc<A> other{__shfl_xor_sync(0xffffffffu, acc.value, delta),
                       __shfl_xor_sync(0xffffffffu, acc.index, delta)};
    acc = combine<K>(acc, other);
  }
  return acc;
}

// Like block_reduce in device_utils.cuh, for (value, index) pairs.
template <Kind K, typename A>
__device__ __forceinline__ Acc<A> block_combine(Acc<A> acc, Acc<A>* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  acc = warp_combine<K>(acc);
  __syncthreads();
  if (lane == 0) shared[warp] = acc;
  __syncthreads();
  acc = lane < static_cast<int>(blockDim.x / kWarp) ? shared[lane] : identity<K, A>();
  return warp_combine<K>(acc);
}

// Thread mapping: block b (grid-stride) reduces chunk (b % chunks) of row (b / chunks), i.e.
// x[row, begin:end) with begin = chunk * chunk_len; its threads stride over the chunk, then
// combine through warp shuffles and shared memory. Output slot b = row * chunks + chunk.
// x_index, when given, holds the index of every x element (partials of an earlier pass).
template <Kind K, typename In, typename Out>
__global__ void reduce_rows_kernel(const In* x, const long long* x_index, int64_t rows, int64_t n,
                                   int64_t chunks, int64_t chunk_len, Out* out_value,
                                   long long* out_index) {
  using A = AccumType<K, In>;
  __shared__ Acc<A> shared[kWarp];
  for (int64_t block = blockIdx.x; block < rows * chunks; block += gridDim.x) {
    const int64_t row = block / chunks, begin = (block % chunks) * chunk_len;
    const int64_t end = min(n, begin + chunk_len);
    Acc<A> acc = identity<K, A>();
    for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
      const int64_t at = row * n + j;
      acc = combine<K>(acc, Acc<A>{to_acc<A>(x[at]), x_index ? x_index[at] : j});
    }
    acc = block_combine<K>(acc, shared);
    if (threadIdx.x == 0) {
      if (out_value) out_value[block] = static_cast<Out>(acc.value);
      if (out_index) out_index[block] = acc.index;
    }
  }
}

constexpr int kColumnRows = 8;  // threadIdx.y extent of the column kernel

// Thread mapping: blocks of 32 x 8 threads. blockIdx.x = chunk * tiles + tile picks 32
// consecutive inner positions (threadIdx.x) and a chunk [begin, end) of n; the 8 rows of
// threads (threadIdx.y) take every 8th j of the chunk; blockIdx.y strides over outer.
// The 8 partials of each column meet in shared memory. Output [outer, chunks, inner].
template <Kind K, typename In, typename Out>
__global__ void reduce_columns_kernel(const In* x, const long long* x_index, int64_t outer,
                                      int64_t n, int64_t inner, int64_t chunks, int64_t chunk_len,
                                      Out* out_value, long long* out_index) {
  using A = AccumType<K, In>;
  __shared__ Acc<A> partial[kColumnRows][kWarp];
  const int64_t tiles = ceil_div(inner, kWarp);
  const int64_t chunk = blockIdx.x / tiles, i = (blockIdx.x % tiles) * kWarp + threadIdx.x;
  const int64_t begin = chunk * chunk_len, end = min(n, begin + chunk_len);
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    Acc<A> acc = identity<K, A>();
    if (i < inner) {
      for (int64_t j = begin + threadIdx.y; j < end; j += kColumnRows) {
        const int64_t at = (o * n + j) * inner + i;
        acc = combine<K>(acc, Acc<A>{to_acc<A>(x[at]), x_index ? x_index[at] : j});
      }
    }
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && i < inner) {
      for (int r = 1; r < kColumnRows; ++r) acc = combine<K>(acc, partial[r][threadIdx.x]);
      const int64_t slot = (o * chunks + chunk) * inner + i;
      if (out_value) out_value[slot] = static_cast<Out>(acc.value);
      if (out_index) out_index[slot] = acc.index;
    }
    __syncthreads();  // partial is rewritten by the next o
  }
}

unsigned grid_y(int64_t outer) { return static_cast<unsigned>(std::min<int64_t>(outer, 65535)); }

// One pass of either kernel: reduces x [outer, n, inner] split into `split` chunks.
template <Kind K, typename In, typename Out>
void reduce_pass(const In* x, const long long* x_index, int64_t outer, int64_t n, int64_t inner,
                 Split split, Out* out_value, long long* out_index, cudaStream_t stream) {
  if (inner == 1) {
    reduce_rows_kernel<K>
        <<<grid_for(outer * split.chunks, 1), row_threads(split.chunk_len, 256), 0, stream>>>(
            x, x_index, outer, n, split.chunks, split.chunk_len, out_value, out_index);
  } else {
    const dim3 grid(static_cast<unsigned>(ceil_div(inner, kWarp) * split.chunks), grid_y(outer));
    reduce_columns_kernel<K><<<grid, dim3(kWarp, kColumnRows), 0, stream>>>(
        x, x_index, outer, n, inner, split.chunks, split.chunk_len, out_value, out_index);
  }
  LOOM_CUDA_CHECK_LAUNCH();
}

// One pass when the blocks already fill the GPU; otherwise chunk partials (kept in the
// accumulator type) and a second pass over them.
template <Kind K, typename T, typename Out>
void reduce_typed(const T* x, int64_t outer, int64_t n, int64_t inner, Out* out_value,
                  long long* out_index, Scratch& scratch, cudaStream_t stream) {
  using A = AccumType<K, T>;
  const Split split = inner == 1 ? plan_split(outer, n, 4096)
                                 : plan_split(outer * ceil_div(inner, kWarp), n, 8 * kColumnRows);
  if (split.chunks == 1)
    return reduce_pass<K>(x, nullptr, outer, n, inner, split, out_value, out_index, stream);
  const int64_t count = outer * split.chunks * inner;
  auto* value = static_cast<A*>(scratch.get(count * sizeof(A)));
  auto* index =
      K == Kind::Sum ? nullptr : static_cast<long long*>(scratch.get(count * sizeof(long long)));
  reduce_pass<K>(x, nullptr, outer, n, inner, split, value, index, stream);
  reduce_pass<K>(value, index, outer, split.chunks, inner, Split{1, split.chunks}, out_value,
                 out_index, stream);
}

template <typename T>
void reduce_any(ReduceOp op, const T* x, int64_t outer, int64_t n, int64_t inner, void* out,
                Scratch& scratch, cudaStream_t stream) {
  const bool arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
  T* out_value = arg ? nullptr : static_cast<T*>(out);
  long long* out_index = arg ? static_cast<long long*>(out) : nullptr;
  switch (op) {
    case ReduceOp::Sum:
      return reduce_typed<Kind::Sum>(x, outer, n, inner, out_value, out_index, scratch, stream);
    case ReduceOp::Max:
    case ReduceOp::ArgMax:
      return reduce_typed<Kind::Max>(x, outer, n, inner, out_value, out_index, scratch, stream);
    case ReduceOp::Min:
    case ReduceOp::ArgMin:
      return reduce_typed<Kind::Min>(x, outer, n, inner, out_value, out_index, scratch, stream);
  }
}

}  // namespace

// ---------------------------------------------------------------------------- launchers
void launch_reduce(ReduceOp op, const void* x, DType type, int64_t outer, int64_t n, int64_t inner,
                   void* out, Scratch& scratch, cudaStream_t stream) {
  if (outer * inner == 0) return;
  if (type == DType::Float32)
    reduce_any(op, static_cast<const float*>(x), outer, n, inner, out, scratch, stream);
  else if (type == DType::BFloat16)  // a sum into float32 (Backend::reduce)
    reduce_typed<Kind::Sum>(static_cast<const BFloat16*>(x), outer, n, inner,
                            static_cast<float*>(out), nullptr, scratch, stream);
  else
    reduce_any(op, static_cast<const long long*>(x), outer, n, inner, out, scratch, stream);
}

// The CUDA reduction (reduce.h): scratch for the chunk partials, then the passes on the stream.
void reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out) {
  Scratch scratch;
  launch_reduce(op, x.raw_data(), x.dtype(), outer, n, inner, out.raw_data(), scratch, stream());
}

}  // namespace loom::cuda
