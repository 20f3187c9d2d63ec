// add_flat_index on the GPU (mask_index.h): one thread per position, grid-stride. An index
// outside [-n, n) raises the launch's DeviceErrorFlag (the CUDA device turns it into a
// loom::Error at its next wait for the GPU, backends/cuda/device.h) and adds nothing, so the
// position stays in range and the index kernel that reads it next touches no stray memory.
#include <cstdint>

#include "backends/cuda/device.h"
#include "backends/cuda/device_utils.cuh"
#include "backends/mask_index/mask_index.h"

namespace loom::cuda {
namespace {

__global__ void add_flat_index_kernel(const int64_t* index, int64_t count, int64_t n,
                                      int64_t step, int64_t* out, DeviceErrorFlag* error) {
  LOOM_GRID_STRIDE_LOOP(j, count) {
    const int64_t i = index[j];
    if (i < -n || i >= n) {
      raise_error(error, i, j);
      continue;
    }
    out[j] += (i < 0 ? i + n : i) * step;
  }
}

}  // namespace

void add_flat_index(const char* op, const Tensor& index, int64_t n, int64_t step, Tensor& out) {
  const int64_t count = out.numel();
  DeviceErrorFlag* error = index_error_flag(op, n);
  add_flat_index_kernel<<<grid_for(count), kBlock, 0, stream()>>>(
      index.data_ptr<int64_t>(), count, n, step, out.data_ptr<int64_t>(), error);
  LOOM_CUDA_CHECK_LAUNCH();
  after_checked_launch();
}

}  // namespace loom::cuda
