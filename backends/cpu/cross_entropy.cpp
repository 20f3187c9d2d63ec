// Fused softmax cross-entropy over rows of logits [rows, classes] with int64 targets [rows].
// With lse = log sum_c exp(x_c) and label smoothing ls (PyTorch's definition: the target
// distribution is (1 - ls) one_hot(t) + ls / C everywhere):
//   loss = lse - (1 - ls) x_t - ls mean_c(x_c)
//   dloss/dx_c = softmax(x)_c - (1 - ls) [c == t] - ls / C
// Rows whose target equals ignore_index get loss 0 and gradient 0.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/vec_math.h"

namespace loom {

namespace {

// Checks every target is ignore_index or in [0, classes).
void check_targets(const int64_t* t, int64_t rows, int64_t classes, int64_t ignore_index,
                   const char* op) {
  for (int64_t r = 0; r < rows; ++r)
    LOOM_CHECK(t[r] == ignore_index || (t[r] >= 0 && t[r] < classes),
               "{}: target {} at position {} is out of range for {} classes; valid targets "
               "are [0, {}) or ignore_index ({})",
               op, t[r], r, classes, classes, ignore_index);
}

LOOM_FLATTEN float log_sum_exp(const float* x, int64_t n) {
  const float m = cpu::max_of(x, n);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < n; ++c) sum += cpu::exp_f(x[c] - m);
  return m + std::log(sum);
}

float row_mean(const float* x, int64_t n) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < n; ++c) sum += x[c];
  return static_cast<float>(sum / static_cast<double>(n));
}

}  // namespace

void CpuBackend::cross_entropy_impl(const Tensor& logits, const Tensor& target,
                                    int64_t ignore_index, float label_smoothing, Tensor& losses,
                                    Tensor& lse) {
  if (logits.dtype() == DType::BFloat16)  // the reference path: the exact float32 values
    return cross_entropy_impl(float32_copy(logits), target, ignore_index, label_smoothing, losses,
                              lse);
  const int64_t rows = target.numel(), classes = logits.numel() / rows;
  const int64_t ld = logits_row_stride(logits);
  const float* x = logits.data_ptr<float>();
  const int64_t* t = target.data_ptr<int64_t>();
  check_targets(t, rows, classes, ignore_index, "cross_entropy");
  float* loss = losses.data_ptr<float>();
  float* lse_out = lse.data_ptr<float>();
  const float ls = label_smoothing;
  cpu::parallel_for(0, rows, cpu::row_grain(classes), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* row = x + r * ld;
      const float l = log_sum_exp(row, classes);
      lse_out[r] = l;
      if (t[r] == ignore_index) {
        loss[r] = 0.0f;
        continue;
      }
      const float smooth = ls != 0.0f ? ls * row_mean(row, classes) : 0.0f;
      loss[r] = l - ((1.0f - ls) * row[t[r]] + smooth);
    }
  });
}

void CpuBackend::cross_entropy_backward_impl(const Tensor& logits, const Tensor& target,
                                             const Tensor& lse, int64_t ignore_index,
                                             float label_smoothing, float scale_arg,
                                             const Tensor& scale_by, Tensor& dlogits) {
  if (logits.dtype() == DType::BFloat16)  // float32 gradients, rounded once into dlogits
    return into(dlogits, [&](Tensor& d) {
      cross_entropy_backward_impl(float32_copy(logits), target, lse, ignore_index, label_smoothing,
                                  scale_arg, scale_by, d);
    });
  const float scale = scale_by.defined() ? scale_arg * scale_by.data_ptr<float>()[0] : scale_arg;
  const int64_t rows = target.numel(), classes = logits.numel() / rows;
  const int64_t ld = logits_row_stride(logits);
  const float* x = logits.data_ptr<float>();
  const int64_t* t = target.data_ptr<int64_t>();
  check_targets(t, rows, classes, ignore_index, "cross_entropy_backward");
  const float* lse_in = lse.data_ptr<float>();
  float* dx = dlogits.data_ptr<float>();
  const float ls = label_smoothing;
  const float uniform = classes > 0 ? ls / static_cast<float>(classes) : 0.0f;
  cpu::parallel_for(0, rows, cpu::row_grain(classes), [&](int64_t b, int64_t e) LOOM_FLATTEN {
    for (int64_t r = b; r < e; ++r) {
      const float* row = x + r * ld;
      float* d = dx + r * classes;
      if (t[r] == ignore_index) {
        std::fill(d, d + classes, 0.0f);
        continue;
      }
      const float l = lse_in[r];
#pragma omp simd
      for (int64_t c = 0; c < classes; ++c) d[c] = scale * (cpu::exp_f(row[c] - l) - uniform);
      d[t[r]] -= scale * (1.0f - ls);
    }
  });
}

}  // namespace loom
