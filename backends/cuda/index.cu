// Indexing kernels over a contiguous [outer, n, inner] block: index_select and its backward
// index_add (embedding lookups and their gradients), index_copy (writing rows at positions held
// in device memory: a KV cache filled by a recorded graph), gather and its backward scatter_add
// (cross-entropy-style picks along any dim).
//
// Thread mapping (every kernel here): one thread per element of the [outer, k, inner] side
// (the output of select/gather, the source of add/scatter), grid-stride, so consecutive threads
// take consecutive i and both the index read and the data access coalesce along inner.
// An index outside [0, n) raises the DeviceErrorFlag; the thread then writes 0 (select/gather)
// or skips its update, and CudaBackend turns the flag into a loom::Error at its next wait for
// the GPU.
// The backward kernels accumulate with atomicAdd because several j may name the same row;
// float atomics make the order of those additions, and so the last bits, vary between runs
// (int64 sums are exact). Both kernels serve float32 and int64, like the CPU ones.
#include <cstdint>

#include "backends/cuda/device_utils.cuh"

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

// out[o, j, i] = x[o, index[j], i]. T is a same-size stand-in for the element type.
template <typename T>
__global__ void index_select_kernel(const T* x, int64_t outer, int64_t n, int64_t inner,
                                    const int64_t* index, int64_t k, T* out,
                                    DeviceErrorFlag* error) {
  LOOM_GRID_STRIDE_LOOP(e, outer * k * inner) {
    const Position p = split(e, k, inner);
    const int64_t row = index[p.j];
    out[e] = valid(row, p.j, n, error) ? x[(p.o * n + row) * inner + p.i] : T{0};
  }
}

// out[o, index[j], i] += src[o, j, i]
template <typename T>
__global__ void index_add_kernel(const T* src, int64_t outer, int64_t n, int64_t inner,
                                 const int64_t* index, int64_t k, T* out, DeviceErrorFlag* error) {
  LOOM_GRID_STRIDE_LOOP(e, outer * k * inner) {
    const Position p = split(e, k, inner);
    const int64_t row = index[p.j];
    if (valid(row, p.j, n, error)) atomic_add(&out[(p.o * n + row) * inner + p.i], src[e]);
  }
}

// out[o, index[j], i] = src[o, j, i]; with repeated indices, one of the writes wins.
template <typename T>
__global__ void index_copy_kernel(const T* src, int64_t outer, int64_t n, int64_t inner,
                                  const int64_t* index, int64_t k, T* out, DeviceErrorFlag* error) {
  LOOM_GRID_STRIDE_LOOP(e, outer * k * inner) {
    const Position p = split(e, k, inner);
    const int64_t row = index[p.j];
    if (valid(row, p.j, n, error)) out[(p.o * n + row) * inner + p.i] = src[e];
  }
}

// out[o, j, i] = x[o, index[o, j, i], i]
template <typename T>
__global__ void gather_kernel(const T* x, int64_t outer, int64_t n, int64_t inner,
                              const int64_t* index, int64_t k, T* out, DeviceErrorFlag* error) {
  LOOM_GRID_STRIDE_LOOP(e, outer * k * inner) {
    const Position p = split(e, k, inner);
    const int64_t row = index[e];
    out[e] = valid(row, e, n, error) ? x[(p.o * n + row) * inner + p.i] : T{0};
  }
}

// out[o, index[o, j, i], i] += src[o, j, i]
template <typename T>
__global__ void scatter_add_kernel(const T* src, int64_t outer, int64_t n, int64_t inner,
                                   const int64_t* index, int64_t k, T* out,
                                   DeviceErrorFlag* error) {
  LOOM_GRID_STRIDE_LOOP(e, outer * k * inner) {
    const Position p = split(e, k, inner);
    const int64_t row = index[e];
    if (valid(row, e, n, error)) atomic_add(&out[(p.o * n + row) * inner + p.i], src[e]);
  }
}

}  // namespace

// Elements are moved as raw 4- or 8-byte words, so one kernel serves float32 and int64.
void launch_index_select(const void* x, size_t element_size, int64_t outer, int64_t n,
                         int64_t inner, const int64_t* index, int64_t k, void* out,
                         DeviceErrorFlag* error, cudaStream_t stream) {
  const unsigned grid = grid_for(outer * k * inner);
  if (element_size == 4)
    index_select_kernel<<<grid, kBlock, 0, stream>>>(static_cast<const uint32_t*>(x), outer, n,
                                                     inner, index, k, static_cast<uint32_t*>(out),
                                                     error);
  else
    index_select_kernel<<<grid, kBlock, 0, stream>>>(static_cast<const uint64_t*>(x), outer, n,
                                                     inner, index, k, static_cast<uint64_t*>(out),
                                                     error);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_index_add(const void* src, DType type, int64_t outer, int64_t n, int64_t inner,
                      const int64_t* index, int64_t k, void* out, DeviceErrorFlag* error,
                      cudaStream_t stream) {
  const unsigned grid = grid_for(outer * k * inner);
  if (type == DType::Float32)
    index_add_kernel<<<grid, kBlock, 0, stream>>>(static_cast<const float*>(src), outer, n, inner,
                                                  index, k, static_cast<float*>(out), error);
  else
    index_add_kernel<<<grid, kBlock, 0, stream>>>(static_cast<const long long*>(src), outer, n,
                                                  inner, index, k, static_cast<long long*>(out),
                                                  error);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_index_copy(const void* src, size_t element_size, int64_t outer, int64_t n,
                       int64_t inner, const int64_t* index, int64_t k, void* out,
                       DeviceErrorFlag* error, cudaStream_t stream) {
  const unsigned grid = grid_for(outer * k * inner);
  if (element_size == 2)
    index_copy_kernel<<<grid, kBlock, 0, stream>>>(static_cast<const uint16_t*>(src), outer, n,
                                                   inner, index, k, static_cast<uint16_t*>(out),
                                                   error);
  else if (element_size == 4)
    index_copy_kernel<<<grid, kBlock, 0, stream>>>(static_cast<const uint32_t*>(src), outer, n,
                                                   inner, index, k, static_cast<uint32_t*>(out),
                                                   error);
  else
    index_copy_kernel<<<grid, kBlock, 0, stream>>>(static_cast<const uint64_t*>(src), outer, n,
                                                   inner, index, k, static_cast<uint64_t*>(out),
                                                   error);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_gather(const void* x, size_t element_size, int64_t outer, int64_t n, int64_t inner,
                   const int64_t* index, int64_t k, void* out, DeviceErrorFlag* error,
                   cudaStream_t stream) {
  const unsigned grid = grid_for(outer * k * inner);
  if (element_size == 4)
    gather_kernel<<<grid, kBlock, 0, stream>>>(static_cast<const uint32_t*>(x), outer, n, inner,
                                               index, k, static_cast<uint32_t*>(out), error);
  else
    gather_kernel<<<grid, kBlock, 0, stream>>>(static_cast<const uint64_t*>(x), outer, n, inner,
                                               index, k, static_cast<uint64_t*>(out), error);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_scatter_add(const void* src, DType type, int64_t outer, int64_t n, int64_t inner,
                        const int64_t* index, int64_t k, void* out, DeviceErrorFlag* error,
                        cudaStream_t stream) {
  const unsigned grid = grid_for(outer * k * inner);
  if (type == DType::Float32)
    scatter_add_kernel<<<grid, kBlock, 0, stream>>>(static_cast<const float*>(src), outer, n, inner,
                                                    index, k, static_cast<float*>(out), error);
  else
    scatter_add_kernel<<<grid, kBlock, 0, stream>>>(static_cast<const long long*>(src), outer, n,
                                                    inner, index, k, static_cast<long long*>(out),
                                                    error);
  LOOM_CUDA_CHECK_LAUNCH();
}

}  // namespace loom::cuda
