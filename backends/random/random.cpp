// Random tensors (random.h): Backend's checks, then the CPU loops.
#include "backends/backend.h"
#include "backends/contract.h"
#include "backends/cpu/loops.h"
#include "backends/random/random.h"
#include "core/rng.h"

namespace loom {

void Backend::rand_uniform(Tensor& out, uint64_t seed, uint64_t offset) {
  Contract{device_, "rand"}.output(out, DType::Float32, out.numel(), "out");
  if (out.numel() > 0)
    run(cpu::rand_uniform, LOOM_CUDA_IMPL(cuda::rand_uniform), out, seed, offset);
}

void Backend::rand_normal(Tensor& out, uint64_t seed, uint64_t offset) {
  Contract{device_, "randn"}.output(out, DType::Float32, out.numel(), "out");
  if (out.numel() > 0)
    run(cpu::rand_normal, LOOM_CUDA_IMPL(cuda::rand_normal), out, seed, offset);
}

// ---------------------------------------------------------------------------- the CPU
void cpu::rand_uniform(Tensor& out, uint64_t seed, uint64_t offset) {
  const int64_t n = out.numel();
  float* y = out.data_ptr<float>();
  cpu::parallel_for(0, n, cpu::kGrainHeavy, [=](int64_t b, int64_t e) LOOM_FLATTEN {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) y[i] = philox_uniform(offset + static_cast<uint64_t>(i), seed);
  });
}

void cpu::rand_normal(Tensor& out, uint64_t seed, uint64_t offset) {
  const int64_t n = out.numel();
  float* y = out.data_ptr<float>();
  cpu::parallel_for(0, n, cpu::kGrainHeavy, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = philox_normal(offset + static_cast<uint64_t>(i), seed);
  });
}

}  // namespace loom
