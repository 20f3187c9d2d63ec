// The sorting kernel on the GPU (sort.h).
//
// Method: one block per row, a bitonic sort (Batcher 1968) of the row's (key, index) pairs,
// padded to a power of two m with pairs that sort last. Keys are the CPU's (sort.cpp): an
// unsigned integer in the order of the values, complemented for a descending order, and the
// index breaks ties, so the order is total and both devices give the same indices. The m / 2
// compare-exchanges of each of the log2(m) (log2(m) + 1) / 2 steps are spread over the block's
// threads, a __syncthreads between steps. A row of up to kSharedItems pairs is sorted in shared
// memory; a longer one in a global scratch array (each block still owns its row, so the block's
// barriers suffice). Then the first k pairs are written out as values and indices: topk sorts
// the whole row here, where the CPU selects.
#include <cstdint>
#include <cstring>

#include "backends/cuda/device.h"
#include "backends/cuda/device_utils.cuh"
#include "backends/sort/sort.h"

namespace loom::cuda {
namespace {

constexpr int64_t kSharedItems = 2048;  // 32 KB of pairs
constexpr int kMaxThreads = 1024;

__device__ __forceinline__ uint64_t order_key(float v) {
  if (v != v) return 0xFFFFFFFFull;  // every NaN above +inf
  if (v == 0.0f) v = 0.0f;           // -0 == +0
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}
__device__ __forceinline__ uint64_t order_key(int64_t v) {
  return static_cast<uint64_t>(v) ^ (1ull << 63);
}
// The key of a descending order: the complement within the key's width.
__device__ __forceinline__ uint64_t flipped(float v) { return 0xFFFFFFFFull - order_key(v); }
__device__ __forceinline__ uint64_t flipped(int64_t v) { return ~order_key(v); }

// (key, index) pairs in lexicographic order; the padding (all ones) sorts after every pair.
__device__ __forceinline__ bool less(uint64_t ka, int64_t ia, uint64_t kb, int64_t ib) {
  return ka < kb || (ka == kb && ia < ib);
}

// Sorts the pairs (keys[0..m), idx[0..m)) of one row, m a power of two, with the whole block.
__device__ void bitonic_sort(uint64_t* keys, int64_t* idx, int64_t m) {
  for (int64_t size = 2; size <= m; size <<= 1) {
    for (int64_t stride = size / 2; stride > 0; stride >>= 1) {
      for (int64_t t = threadIdx.x; t < m / 2; t += blockDim.x) {
        const int64_t i = 2 * t - (t & (stride - 1)), j = i + stride;  // a pair stride apart
        const bool ascending = (i & size) == 0;
        if (less(keys[j], idx[j], keys[i], idx[i]) == ascending) {
          const uint64_t k = keys[i];
          keys[i] = keys[j];
          keys[j] = k;
          const int64_t x = idx[i];
          idx[i] = idx[j];
          idx[j] = x;
        }
      }
      __syncthreads();
    }
  }
}

// Thread mapping: block b sorts rows b, b + gridDim.x, ...; row r = (o, i) holds x[o, :, i].
// kInShared: the row's m pairs live in shared memory, else at scratch + b * 2m.
template <class T, bool kInShared>
__global__ void __launch_bounds__(kMaxThreads)
    sort_kernel(const T* x, int64_t rows, int64_t n, int64_t inner, int64_t k, int64_t m,
                bool descending, uint64_t* scratch, T* values, int64_t* indices) {
  __shared__ uint64_t shared_keys[kInShared ? kSharedItems : 1];
  __shared__ int64_t shared_idx[kInShared ? kSharedItems : 1];
  uint64_t* keys = kInShared ? shared_keys : scratch + 2 * m * blockIdx.x;
  int64_t* idx = kInShared ? shared_idx : reinterpret_cast<int64_t*>(keys + m);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t o = r / inner, i = r % inner;
    const T* row = x + o * n * inner + i;
    for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
      if (j < n) {
        const T v = row[j * inner];
        keys[j] = descending ? flipped(v) : order_key(v);
        idx[j] = j;
      } else {
        keys[j] = ~0ull;
        idx[j] = INT64_MAX;
      }
    }
    __syncthreads();
    bitonic_sort(keys, idx, m);
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
      const int64_t from = idx[j];
      indices[(o * k + j) * inner + i] = from;
      values[(o * k + j) * inner + i] = row[from * inner];
    }
    __syncthreads();  // the next row reuses keys and idx
  }
}

template <class T>
void launch_sort(const T* x, const SortArgs& a, T* values, int64_t* indices) {
  const int64_t rows = a.outer * a.inner;
  int64_t m = 1;
  while (m < a.n) m <<= 1;
  const int threads = static_cast<int>(std::min<int64_t>(kMaxThreads, std::max<int64_t>(m / 2,
                                                                                        kWarp)));
  if (m <= kSharedItems) {
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, 65535));
    sort_kernel<T, true><<<grid, threads, 0, stream()>>>(x, rows, a.n, a.inner, a.k, m,
                                                         a.descending, nullptr, values, indices);
    LOOM_CUDA_CHECK_LAUNCH();
    return;
  }
  // Long rows: as many blocks as the scratch of 16 bytes a pair allows in 256 MB, at least one.
  const int64_t fit = std::max<int64_t>(1, (int64_t{256} << 20) / (16 * m));
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>({rows, fit, 65535}));
  Scratch scratch;
  auto* pairs = static_cast<uint64_t*>(scratch.get(sizeof(uint64_t) * 2 * m * grid));
  sort_kernel<T, false><<<grid, threads, 0, stream()>>>(x, rows, a.n, a.inner, a.k, m,
                                                        a.descending, pairs, values, indices);
  LOOM_CUDA_CHECK_LAUNCH();
}

}  // namespace

void sort(const Tensor& x, const SortArgs& args, Tensor& values, Tensor& indices) {
  if (x.dtype() == DType::Float32)
    launch_sort(x.data_ptr<float>(), args, values.data_ptr<float>(),
                indices.data_ptr<int64_t>());
  else
    launch_sort(x.data_ptr<int64_t>(), args, values.data_ptr<int64_t>(),
                indices.data_ptr<int64_t>());
}

}  // namespace loom::cuda
