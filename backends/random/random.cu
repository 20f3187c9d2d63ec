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

// dropout's mask and output from rand_uniform's uniforms, as the CPU computes them.
__global__ void dropout_kernel(const float* x, int64_t n, float p, float scale, uint64_t seed,
                               uint64_t offset, float* out, float* mask) {
  LOOM_GRID_STRIDE_LOOP(i, n) {
    const float m = philox_uniform(offset + i, seed) >= p ? scale : 0.0f;
    mask[i] = m;
    out[i] = x[i] * m;
  }
}

__global__ void rand_bits_kernel(int64_t* out, int64_t n, uint64_t seed, uint64_t offset) {
  LOOM_GRID_STRIDE_LOOP(i, n) { out[i] = philox_bits63(offset + i, seed); }
}

// One thread per draw (r, s): the row's total, then a walk along its running sum to the first
// category that exceeds u * total. The sums are the CPU's, added in the same order in double,
// so both devices draw the same categories; the walk costs k per draw (the CPU builds the sums
// once per row and bisects).
__global__ void multinomial_kernel(const float* w, int64_t rows, int64_t k, int64_t samples,
                                   uint64_t seed, uint64_t offset, int64_t* out) {
  LOOM_GRID_STRIDE_LOOP(e, rows * samples) {
    const float* row = w + (e / samples) * k;
    double total = 0.0;
    for (int64_t c = 0; c < k; ++c) total += row[c];
    const double target = philox_uniform_double(offset + e, seed) * total;
    double sum = 0.0;
    int64_t pick = -1, last_positive = 0;
    for (int64_t c = 0; c < k; ++c) {
      sum += row[c];
      if (row[c] > 0.0f) last_positive = c;
      if (pick < 0 && sum > target) pick = c;
    }
    out[e] = pick >= 0 ? pick : last_positive;  // u * total rounded up to total
  }
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

void dropout(const Tensor& x, float p, uint64_t seed, uint64_t offset, Tensor& out,
             Tensor& mask) {
  const int64_t n = x.numel();
  dropout_kernel<<<grid_for(n), kBlock, 0, stream()>>>(x.data_ptr<float>(), n, p,
                                                       1.0f / (1.0f - p), seed, offset,
                                                       out.data_ptr<float>(),
                                                       mask.data_ptr<float>());
  LOOM_CUDA_CHECK_LAUNCH();
}

void rand_bits(Tensor& out, uint64_t seed, uint64_t offset) {
  const int64_t n = out.numel();
  rand_bits_kernel<<<grid_for(n), kBlock, 0, stream()>>>(out.data_ptr<int64_t>(), n, seed,
                                                         offset);
  LOOM_CUDA_CHECK_LAUNCH();
}

void multinomial(const Tensor& weights, uint64_t seed, uint64_t offset, Tensor& out) {
  const int64_t rows = weights.size(0), k = weights.size(1), samples = out.size(1);
  multinomial_kernel<<<grid_for(rows * samples), kBlock, 0, stream()>>>(
      weights.data_ptr<float>(), rows, k, samples, seed, offset, out.data_ptr<int64_t>());
  LOOM_CUDA_CHECK_LAUNCH();
}

}  // namespace loom::cuda
