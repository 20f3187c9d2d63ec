// Random tensors from the counter-based Philox generator (core/rng.h): element i is a pure
// function of (seed, offset + i), so the result does not depend on how the loop is split over
// threads, and the CUDA backend produces the same numbers.
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/loops.h"
#include "core/rng.h"

namespace loom {

void CpuBackend::rand_uniform_impl(Tensor& out, uint64_t seed, uint64_t offset) {
  const int64_t n = out.numel();
  float* y = out.data_ptr<float>();
  cpu::parallel_for(0, n, cpu::kGrainHeavy, [=](int64_t b, int64_t e) LOOM_FLATTEN {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) y[i] = philox_uniform(offset + static_cast<uint64_t>(i), seed);
  });
}

void CpuBackend::rand_normal_impl(Tensor& out, uint64_t seed, uint64_t offset) {
  const int64_t n = out.numel();
  float* y = out.data_ptr<float>();
  cpu::parallel_for(0, n, cpu::kGrainHeavy, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = philox_normal(offset + static_cast<uint64_t>(i), seed);
  });
}

}  // namespace loom
