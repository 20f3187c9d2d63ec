// Random numbers on the GPU (random.h).
#include <cstdint>

#include "backends/cuda/device.h"
#include "backends/cuda/device_utils.cuh"
#include "backends/random/random.h"
#include "core/rng.h"

namespace loom::cuda {
namespace {

// Thread mapping: one thread per element, grid-stride. Element i is a pure function of
// (seed, offset + i) (core/rng.h, shared with the CPU backend), so the GPU draws exactly the
// CPU's uniforms; normals may differ in the last bits, where CUDA's logf/cosf/sqrtf round
// differently from the C library's.
__global__ void rand_uniform_kernel(float* out, int64_t n, uint64_t seed, uint64_t offset) {
  LOOM_GRID_STRIDE_LOOP(i, n) { out[i] = philox_uniform(offset + i, seed); }
}

__global__ void rand_normal_kernel(float* out, int64_t n, uint64_t seed, uint64_t offset) {
  LOOM_GRID_STRIDE_LOOP(i, n) { out[i] = philox_normal(offset + i, seed); }
}

}  // namespace

// ---------------------------------------------------------------------------- launchers
void launch_rand_uniform(float* out, int64_t n, uint64_t seed, uint64_t offset,
                         cudaStream_t stream) {
  rand_uniform_kernel<<<grid_for(n), kBlock, 0, stream>>>(out, n, seed, offset);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_rand_normal(float* out, int64_t n, uint64_t seed, uint64_t offset,
                        cudaStream_t stream) {
  rand_normal_kernel<<<grid_for(n), kBlock, 0, stream>>>(out, n, seed, offset);
  LOOM_CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------------------- the kernels
void rand_uniform(Tensor& out, uint64_t seed, uint64_t offset) {
  launch_rand_uniform(out.data_ptr<float>(), out.numel(), seed, offset, stream());
}

void rand_normal(Tensor& out, uint64_t seed, uint64_t offset) {
  launch_rand_normal(out.data_ptr<float>(), out.numel(), seed, offset, stream());
}

}  // namespace loom::cuda
