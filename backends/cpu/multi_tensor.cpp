// The multi-tensor kernels of clip_grad_norm (Backend::sum_of_squares_multi, scale_multi).
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/loops.h"

namespace loom {

// One tensor after the other (the lists save launches on CUDA only). The sum of squares runs in
// double: the order of the additions, split over the threads, changes only bits far below
// float32's.
void CpuBackend::sum_of_squares_multi_impl(std::span<const Tensor> xs, Tensor& out) {
  double total = 0.0;
  for (const Tensor& x : xs) {
    const float* p = x.data_ptr<float>();
    const int64_t n = x.numel();
    double sum = 0.0;
#pragma omp parallel for simd reduction(+ : sum) schedule(static) if (n >= 4 * cpu::kGrainCheap)
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(p[i]) * p[i];
    total += sum;
  }
  out.data_ptr<float>()[0] = static_cast<float>(total);
}

void CpuBackend::scale_multi_impl(std::span<Tensor> xs, float alpha) {
  for (Tensor& x : xs) {
    float* p = x.data_ptr<float>();
    cpu::parallel_for(0, x.numel(), cpu::kGrainCheap, [=](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) p[i] *= alpha;
    });
  }
}

}  // namespace loom
