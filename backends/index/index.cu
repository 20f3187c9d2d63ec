// Indexing kernels over a contiguous [outer, n, inner] block: index_select and its backward
// index_add (embedding lookups and their gradients), index_copy (writing rows at positions held
// in device memory: a KV cache filled by a recorded graph), gather and its backward scatter_add
// (cross-entropy-style picks along any dim), and scatter (torch.scatter's writes).
//
// Thread mapping (index_kernel, which runs all six): one thread per element of the
// [outer, k, inner] side (the output of select/gather, the source of add/scatter), grid-stride,
// so consecutive threads take consecutive i and both the index read and the data access
// coalesce along inner.
// An index outside [0, n) raises the DeviceErrorFlag; the thread then writes 0 (select/gather)
// or skips its update, and the CUDA device turns the flag into a loom::Error at its next wait
// for the GPU (backends/cuda/device.h).
// The backward kernels (index_add, scatter_add) accumulate with atomicAdd because several j may
// name the same row; float atomics make the order of those additions, and so the last bits, vary
// between runs (int64 sums are exact). Both serve float32 and int64, like the CPU ones.
#include <cstdint>
#include <type_traits>

#include "backends/cuda/device.h"
#include "backends/cuda/device_utils.cuh"
#include "backends/index/index.h"

namespace loom::cuda {
namespace {

// Splits a flat position e of an [outer, k, inner] block into (o, j, i).
struct Position {
  int64_t o, j, i;
};
__device__ __forceinline__ Position split(int64_t e, int64_t k, int64_t inner) {
  return {e / (k * inner), (e / inner) % k, e % inner};
}

// `position` is where the index sits in the index tensor, for the error message.
__device__ __forceinline__ bool valid(int64_t index, int64_t position, int64_t n,
                                      DeviceErrorFlag* error) {
  if (index >= 0 && index < n) return true;
  raise_error(error, index, position);
  return false;
}

// out += v for the two element types; int64 adds through the unsigned 64-bit atomic, which
// gives the same bits as a signed two's-complement addition.
__device__ __forceinline__ void atomic_add(float* out, float v) { atomicAdd(out, v); }
__device__ __forceinline__ void atomic_add(long long* out, long long v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(out), static_cast<unsigned long long>(v));
}

// Where the index of element e = (o, j, i) of the [outer, k, inner] side sits: at index[j] (a
// 1-D index: index_select, index_add, index_copy) or at index[e] (one index per element: gather,
// scatter_add).
enum class IndexPer { Row, Element };

// What the thread of element e of the [outer, k, inner] side does with `slot`, the element of the
// [outer, n, inner] side that its index names (same o and i), or -1 for an index outside [0, n).
struct Select {  // out[e] = x[slot] (0 for a bad index): index_select, gather
  template <typename T>
  __device__ __forceinline__ void operator()(const T* x, T* out, int64_t e, int64_t slot) const {
    out[e] = slot >= 0 ? x[slot] : T{0};
  }
};
struct Add {  // out[slot] += src[e]: index_add, scatter_add
  template <typename T>
  __device__ __forceinline__ void operator()(const T* src, T* out, int64_t e, int64_t slot) const {
    if (slot >= 0) atomic_add(&out[slot], src[e]);
  }
};
struct Copy {  // out[slot] = src[e]: index_copy, scatter; with repeated indices one write wins
  template <typename T>
  __device__ __forceinline__ void operator()(const T* src, T* out, int64_t e, int64_t slot) const {
    if (slot >= 0) out[slot] = src[e];
  }
};

// The family's one kernel, for each move and place of the index. T is the element type for Add,
// else a same-size stand-in whose bits are moved as they are.
template <IndexPer kPer, typename T, typename Move>
__global__ void index_kernel(const T* in, int64_t outer, int64_t n, int64_t inner,
                             const int64_t* index, int64_t k, T* out, DeviceErrorFlag* error,
                             Move move) {
  LOOM_GRID_STRIDE_LOOP(e, outer * k * inner) {
    const Position p = split(e, k, inner);
    const int64_t at = kPer == IndexPer::Element ? e : p.j;
    const int64_t row = index[at];
    move(in, out, e, valid(row, at, n, error) ? (p.o * n + row) * inner + p.i : -1);
  }
}

// Calls launch(T{}) with T the type index_kernel runs on for Move over elements of `type`: for
// Add the element type (int64 as long long, for the atomic), else a stand-in of the element's
// size (2 bytes: bfloat16, which index_copy also takes; 4: float32; 8: int64).
template <typename Move, typename Launch>
void with_element_type(DType type, const Launch& launch) {
  if constexpr (std::is_same_v<Move, Add>) {
    if (type == DType::Float32)
      launch(float{});
    else
      launch(0LL);
  } else if (element_size(type) == 2) {
    launch(uint16_t{});
  } else if (element_size(type) == 4) {
    launch(uint32_t{});
  } else {
    launch(uint64_t{});
  }
}

// index_kernel for op: Move between in (x or src, the [outer, k, inner] side) and out, with an
// error flag of its own for the launch (device.h); waits for the kernel only under
// CUDA_LAUNCH_BLOCKING=1.
template <typename Move, IndexPer kPer>
void launch_index(const char* op, const Tensor& in, int64_t outer, int64_t n, int64_t inner,
                  const Tensor& index, int64_t k, Tensor& out) {
  const void* from = in.raw_data();
  void* to = out.raw_data();
  const int64_t* at = index.data_ptr<int64_t>();
  DeviceErrorFlag* error = index_error_flag(op, n);
  const unsigned grid = grid_for(outer * k * inner);
  with_element_type<Move>(out.dtype(), [&](auto type) {
    using T = decltype(type);
    index_kernel<kPer><<<grid, kBlock, 0, stream()>>>(static_cast<const T*>(from), outer, n, inner,
                                                      at, k, static_cast<T*>(to), error, Move{});
  });
  LOOM_CUDA_CHECK_LAUNCH();
  after_checked_launch();
}

// k of gather's and scatter_add's index [outer, k, inner] (Backend has checked that it splits).
int64_t index_depth(const Tensor& index, int64_t outer, int64_t inner) {
  return index.numel() / (outer * inner);
}

}  // namespace

// ---------------------------------------------------------------------------- the kernels
void index_select(const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                  Tensor& out) {
  launch_index<Select, IndexPer::Row>("index_select", x, outer, n, inner, index, index.numel(),
                                      out);
}

void index_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
               Tensor& out) {
  launch_index<Add, IndexPer::Row>("index_add", src, outer, n, inner, index, index.numel(), out);
}

void index_copy(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                Tensor& out) {
  launch_index<Copy, IndexPer::Row>("index_copy", src, outer, n, inner, index, index.numel(), out);
}

void gather(const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
            Tensor& out) {
  launch_index<Select, IndexPer::Element>("gather", x, outer, n, inner, index,
                                          index_depth(index, outer, inner), out);
}

void scatter_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                 Tensor& out) {
  launch_index<Add, IndexPer::Element>("scatter_add", src, outer, n, inner, index,
                                       index_depth(index, outer, inner), out);
}

void scatter(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
             Tensor& out) {
  launch_index<Copy, IndexPer::Element>("scatter", src, outer, n, inner, index,
                                        index_depth(index, outer, inner), out);
}

}  // namespace loom::cuda
