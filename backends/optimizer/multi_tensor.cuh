// Multi-tensor apply (as PyTorch's multi_tensor_apply and fused optimizers): one launch works on
// many tensors, whose pointers travel in the kernel's argument (a table within the 4 KB of
// kernel parameters every CUDA version accepts), so there is no table to upload. Each tensor
// is cut into chunks of kMultiChunk elements, one block per chunk:
//
//   blocks:   | t0 c0 | t0 c1 | t1 c0 | t2 c0 | t2 c1 | t2 c2 | ...
//   first_block = [0, 2, 3, 6, ...]   (prefix sum of the chunk counts)
//
// and a block finds its tensor by binary search in that prefix sum. A host loop fills a
// table with ChunkMap::add until ChunkMap::full, launches, and starts the next table.
#pragma once

#include <cstdint>

#include "backends/cuda/device_utils.cuh"

namespace loom::cuda {

constexpr int64_t kMultiChunk = 65536;  // elements per block
constexpr int kMultiThreads = 512;      // threads per block, striding through the chunk
// Blocks per launch: at most the grid's x limit, 2^31 - 1.
constexpr int64_t kMultiMaxBlocks = (int64_t{1} << 31) - 1;

// The elements [begin, end) of tensor t that one block works on.
struct Chunk {
  int t;
  int64_t begin, end;
};

// Which tensors a launch covers (count, each one's n > 0 elements) and their blocks.
template <int N>
struct ChunkMap {
  static constexpr int kTensors = N;
  int count = 0;
  uint32_t first_block[N + 1] = {};
  int64_t n[N] = {};

  // Host: whether a tensor of `numel` elements must wait for the next launch.
  bool full(int64_t numel) const {
    return count == N || first_block[count] + ceil_div(numel, kMultiChunk) > kMultiMaxBlocks;
  }
  // Host: appends a tensor (after checking full()); returns its slot in the table.
  int add(int64_t numel) {
    const int t = count++;
    n[t] = numel;
    first_block[t + 1] = static_cast<uint32_t>(first_block[t] + ceil_div(numel, kMultiChunk));
    return t;
  }
  unsigned blocks() const { return first_block[count]; }
  void clear() { count = 0; }  // first_block[0] stays 0

  // Device: the chunk of block `block`.
  __device__ __forceinline__ Chunk chunk(uint32_t block) const {
    int lo = 0, hi = count - 1;  // the last t with first_block[t] <= block
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (first_block[mid] <= block) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    const int64_t begin = static_cast<int64_t>(block - first_block[lo]) * kMultiChunk;
    return {lo, begin, begin + kMultiChunk < n[lo] ? begin + kMultiChunk : n[lo]};
  }
};

// A table argument read in place from the parameter space, also where it is indexed by a
// run-time value (without __grid_constant__ the compiler may copy the whole table to each
// thread's local memory). The emulator passes it as a plain argument.
#ifdef LOOM_CUDA_EMULATED
#define LOOM_GRID_CONSTANT
#else
#define LOOM_GRID_CONSTANT __grid_constant__
#endif

}  // namespace loom::cuda
