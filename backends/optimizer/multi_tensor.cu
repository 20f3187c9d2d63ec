// The multi-tensor kernels of clip_grad_norm (Pascanu et al. 2013, as
// torch.nn.utils.clip_grad_norm_): the squared global norm of all gradients and their scaling,
// and of zero_grad's zeroing in place, each over many tensors per launch (multi_tensor.cuh)
// instead of a few launches per gradient.
#include <cstdint>
#include <vector>

#include "backends/cuda/device.h"
#include "backends/cuda/device_utils.cuh"
#include "backends/optimizer/multi_tensor.cuh"
#include "backends/optimizer/optimizer.h"

namespace loom::cuda {

// Each launch of these kernels reads up to kMultiTensors tensors (n > 0 contiguous float32
// elements each).
struct FloatTensor {
  float* data;
  int64_t n;
};
constexpr int kMultiTensors = 200;

namespace {

struct FloatTable {
  ChunkMap<kMultiTensors> map;
  float* x[kMultiTensors];
};
// The sum-of-squares kernel also takes its partials pointer.
static_assert(sizeof(FloatTable) + sizeof(double*) <= 4096,
              "the table must fit in 4 KB of kernel parameters");

// Thread mapping: one block per chunk, threads strided through it, each accumulating x^2 in
// double; the block's sum goes to partials[block] (written by thread 0, no atomics, so the
// result does not depend on the order blocks run in).
__global__ void __launch_bounds__(kMultiThreads)
    sum_of_squares_multi_kernel(const LOOM_GRID_CONSTANT FloatTable table, double* partials) {
  __shared__ double shared[kWarp];
  const Chunk c = table.map.chunk(blockIdx.x);
  const float* x = table.x[c.t];
  double sum = 0.0;
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) {
    const double xi = x[i];
    sum += xi * xi;
  }
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// One block adds the partials in a fixed order and rounds the total to float32 once.
__global__ void __launch_bounds__(kMultiThreads)
    sum_partials_kernel(const double* partials, int64_t count, float* out) {
  __shared__ double shared[kWarp];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) out[0] = static_cast<float>(sum);
}

// Thread mapping: one block per chunk, threads strided through it.
__global__ void __launch_bounds__(kMultiThreads)
    scale_multi_kernel(const LOOM_GRID_CONSTANT FloatTable table, float alpha) {
  const Chunk c = table.map.chunk(blockIdx.x);
  float* x = table.x[c.t];
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) x[i] *= alpha;
}

// Thread mapping: one block per chunk, threads strided through it.
__global__ void __launch_bounds__(kMultiThreads)
    zero_multi_kernel(const LOOM_GRID_CONSTANT FloatTable table) {
  const Chunk c = table.map.chunk(blockIdx.x);
  float* x = table.x[c.t];
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) x[i] = 0.0f;
}

// Calls launch(table) for consecutive groups of the tensors, each as many as one table holds.
template <class Launch>
void for_each_table(const FloatTensor* xs, size_t count, const Launch& launch) {
  FloatTable table{};
  for (size_t i = 0; i < count; ++i) {
    if (table.map.full(xs[i].n)) {
      launch(table);
      table.map.clear();
    }
    table.x[table.map.add(xs[i].n)] = xs[i].data;
  }
  if (table.map.count > 0) launch(table);
}

}  // namespace

// out[0] = sum of x^2 over all the tensors, accumulated in double: one launch per kMultiTensors
// tensors writes the partial sum of each chunk, one more adds them up in a fixed order.
void launch_sum_of_squares_multi(const FloatTensor* xs, size_t count, float* out,
                                 Scratch& scratch, cudaStream_t stream) {
  int64_t blocks = 0;
  for (size_t i = 0; i < count; ++i) blocks += ceil_div(xs[i].n, kMultiChunk);
  double* partials = static_cast<double*>(scratch.get(blocks * sizeof(double)));
  int64_t done = 0;  // partials written by the earlier launches
  for_each_table(xs, count, [&](const FloatTable& table) {
    sum_of_squares_multi_kernel<<<table.map.blocks(), kMultiThreads, 0, stream>>>(
        table, partials + done);
    LOOM_CUDA_CHECK_LAUNCH();
    done += table.map.blocks();
  });
  sum_partials_kernel<<<1, kMultiThreads, 0, stream>>>(partials, blocks, out);
  LOOM_CUDA_CHECK_LAUNCH();
}

// x *= alpha over all the tensors, in place.
void launch_scale_multi(const FloatTensor* xs, size_t count, float alpha, cudaStream_t stream) {
  for_each_table(xs, count, [&](const FloatTable& table) {
    scale_multi_kernel<<<table.map.blocks(), kMultiThreads, 0, stream>>>(table, alpha);
    LOOM_CUDA_CHECK_LAUNCH();
  });
}

// x = 0 over all the tensors, in place.
void launch_zero_multi(const FloatTensor* xs, size_t count, cudaStream_t stream) {
  for_each_table(xs, count, [&](const FloatTable& table) {
    zero_multi_kernel<<<table.map.blocks(), kMultiThreads, 0, stream>>>(table);
    LOOM_CUDA_CHECK_LAUNCH();
  });
}

// ---------------------------------------------------------------------------- the kernels
namespace {
// The pointers and sizes of the tensors of a multi-tensor launch.
std::vector<FloatTensor> float_tensors(std::span<const Tensor> xs) {
  std::vector<FloatTensor> tensors(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) tensors[i] = {xs[i].data_ptr<float>(), xs[i].numel()};
  return tensors;
}
}  // namespace

void sum_of_squares_multi(std::span<const Tensor> xs, Tensor& out) {
  Scratch scratch;
  const std::vector<FloatTensor> tensors = float_tensors(xs);
  launch_sum_of_squares_multi(tensors.data(), tensors.size(), out.data_ptr<float>(), scratch,
                              stream());
}

void scale_multi(std::span<Tensor> xs, float alpha) {
  const std::vector<FloatTensor> tensors =
      float_tensors(std::span<const Tensor>(xs.data(), xs.size()));
  launch_scale_multi(tensors.data(), tensors.size(), alpha, stream());
}

void zero_multi(std::span<Tensor> xs) {
  const std::vector<FloatTensor> tensors =
      float_tensors(std::span<const Tensor>(xs.data(), xs.size()));
  launch_zero_multi(tensors.data(), tensors.size(), stream());
}

}  // namespace loom::cuda
