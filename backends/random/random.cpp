// Random tensors (random.h): Backend's checks, then the CPU loops.
#include <algorithm>
#include <vector>

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

void Backend::rand_bits(Tensor& out, uint64_t seed, uint64_t offset) {
  Contract{device_, "rand_bits"}.output(out, DType::Int64, out.numel(), "out");
  if (out.numel() > 0) run(cpu::rand_bits, LOOM_CUDA_IMPL(cuda::rand_bits), out, seed, offset);
}

void Backend::multinomial(const Tensor& weights, uint64_t seed, uint64_t offset, Tensor& out) {
  const Contract c{device_, "multinomial"};
  LOOM_CHECK(weights.dim() == 2 && weights.size(1) > 0 && out.dim() == 2 &&
                 out.size(0) == weights.size(0),
             "multinomial: expected weights [rows, k > 0] and out [rows, samples], got {} and {}",
             shape_str(weights.shape()), shape_str(out.shape()));
  c.input(weights, DType::Float32, weights.numel(), "weights");
  c.output(out, DType::Int64, out.numel(), "out");
  if (out.numel() > 0)
    run(cpu::multinomial, LOOM_CUDA_IMPL(cuda::multinomial), contiguous(weights), seed, offset,
        out);
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

void cpu::rand_bits(Tensor& out, uint64_t seed, uint64_t offset) {
  const int64_t n = out.numel();
  int64_t* y = out.data_ptr<int64_t>();
  cpu::parallel_for(0, n, cpu::kGrainHeavy, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = philox_bits63(offset + static_cast<uint64_t>(i), seed);
  });
}

// Each row's running sums once, then a binary search per draw: the first category whose sum
// exceeds the target (a zero weight never does: its sum equals the one before it).
void cpu::multinomial(const Tensor& weights, uint64_t seed, uint64_t offset, Tensor& out) {
  const int64_t rows = weights.size(0), k = weights.size(1), samples = out.size(1);
  const float* w = weights.data_ptr<float>();
  int64_t* y = out.data_ptr<int64_t>();
  cpu::parallel_for(0, rows, cpu::row_grain(k + samples), [=](int64_t b, int64_t e) {
    std::vector<double> running(static_cast<size_t>(k));
    for (int64_t r = b; r < e; ++r) {
      double sum = 0.0;
      int64_t last_positive = 0;
      for (int64_t c = 0; c < k; ++c) {
        sum += w[r * k + c];
        running[c] = sum;
        if (w[r * k + c] > 0.0f) last_positive = c;
      }
      for (int64_t s = 0; s < samples; ++s) {
        const uint64_t counter = offset + static_cast<uint64_t>(r * samples + s);
        const double target = philox_uniform_double(counter, seed) * sum;
        const int64_t c = std::upper_bound(running.begin(), running.end(), target) -
                          running.begin();
        y[r * samples + s] = c < k ? c : last_positive;  // u * sum rounded up to sum
      }
    }
  });
}

}  // namespace loom
