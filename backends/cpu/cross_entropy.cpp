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

// classes = logits.numel() / rows; checks every target is ignore_index or in [0, classes).
int64_t check_targets(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                      const char* op) {
  const int64_t rows = target.numel();
  LOOM_CHECK(rows > 0 ? logits.numel() % rows == 0 : logits.numel() == 0,
             "{}: logits of shape {} do not split into {} rows (one per target)", op,
             shape_str(logits.shape()), rows);
  const int64_t classes = rows > 0 ? logits.numel() / rows : 0;
  const int64_t* t = target.data_ptr<int64_t>();
  for (int64_t r = 0; r < rows; ++r)
    LOOM_CHECK(t[r] == ignore_index || (t[r] >= 0 && t[r] < classes),
               "{}: target {} at position {} is out of range for {} classes; valid targets "
               "are [0, {}) or ignore_index ({})",
               op, t[r], r, classes, classes, ignore_index);
  return classes;
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

void CpuBackend::cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                               float label_smoothing, Tensor& losses, Tensor& lse) {
  const char* op = "cross_entropy";
  cpu::check_dtype(target, DType::Int64, op, "target");
  const Tensor tc = cpu::contiguous_input(target), xc = cpu::contiguous_input(logits);
  const int64_t classes = check_targets(xc, tc, ignore_index, op);
  const int64_t rows = tc.numel();
  LOOM_CHECK(classes > 0 || rows == 0, "{}: logits have 0 classes", op);
  const float* x = cpu::float_input(xc, rows * classes, op, "logits");
  const int64_t* t = tc.data_ptr<int64_t>();
  float* loss = cpu::float_output(losses, rows, op, "losses");
  float* lse_out = cpu::float_output(lse, rows, op, "lse");
  const float ls = label_smoothing;
  cpu::parallel_for(0, rows, cpu::row_grain(classes), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* row = x + r * classes;
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

void CpuBackend::cross_entropy_backward(const Tensor& logits, const Tensor& target,
                                        const Tensor& lse, int64_t ignore_index,
                                        float label_smoothing, float scale, Tensor& dlogits) {
  const char* op = "cross_entropy_backward";
  cpu::check_dtype(target, DType::Int64, op, "target");
  const Tensor tc = cpu::contiguous_input(target), xc = cpu::contiguous_input(logits);
  const int64_t classes = check_targets(xc, tc, ignore_index, op);
  const int64_t rows = tc.numel();
  const float* x = cpu::float_input(xc, rows * classes, op, "logits");
  const int64_t* t = tc.data_ptr<int64_t>();
  const float* lse_in = cpu::float_input(lse, rows, op, "lse");
  float* dx = cpu::float_output(dlogits, rows * classes, op, "dlogits");
  const float ls = label_smoothing;
  const float uniform = classes > 0 ? ls / static_cast<float>(classes) : 0.0f;
  cpu::parallel_for(0, rows, cpu::row_grain(classes), [&](int64_t b, int64_t e) LOOM_FLATTEN {
    for (int64_t r = b; r < e; ++r) {
      const float* row = x + r * classes;
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
