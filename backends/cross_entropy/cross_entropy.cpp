// Softmax cross-entropy (cross_entropy.h): Backend's checks, then the CPU loops, one row of
// logits at a time.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/backend.h"
#include "backends/contract.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/vec_math.h"
#include "backends/cross_entropy/cross_entropy.h"
#include "backends/elementwise/cpu_float32.h"
#include "core/error.h"

namespace loom {

// ---------------------------------------------------------------------------- the public methods
namespace {

// Float32 or bfloat16 logits of one row per int64 target, at least one class; returns the
// classes.
int64_t logits_per_target(const Contract& c, const Tensor& logits, const Tensor& target) {
  c.floating(logits, "logits");
  c.dtype(target, DType::Int64, "target");
  const int64_t rows = target.numel(), classes = c.row_length(logits, rows, "logits");
  LOOM_CHECK(classes > 0 || rows == 0, "{}: logits have 0 classes", c.op);
  return classes;
}

}  // namespace

int64_t logits_row_stride(const Tensor& logits) {
  return logits.dim() == 2 && logits.size(0) > 1 ? logits.stride(0) : logits.size(-1);
}

void Backend::cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                            float label_smoothing, Tensor& losses, Tensor& lse) {
  const Contract c{device_, "cross_entropy", /*takes_bfloat16=*/true};
  logits_per_target(c, logits, target);
  const int64_t rows = target.numel();
  c.output(losses, DType::Float32, rows, "losses");
  c.output(lse, DType::Float32, rows, "lse");
  if (rows > 0)
    run(cpu::cross_entropy, LOOM_CUDA_IMPL(cuda::cross_entropy), unit_stride_rows(logits),
        contiguous(target), ignore_index, label_smoothing, losses, lse);
}

void Backend::cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& lse,
                                     int64_t ignore_index, float label_smoothing, float scale,
                                     Tensor& dlogits, const Tensor& scale_by) {
  const Contract c{device_, "cross_entropy_backward", /*takes_bfloat16=*/true};
  const int64_t rows = target.numel(), classes = logits_per_target(c, logits, target);
  c.input(lse, DType::Float32, rows, "lse");
  c.output(dlogits, logits.dtype(), rows * classes, "dlogits");
  if (scale_by.defined()) c.input(scale_by, DType::Float32, 1, "scale_by");
  if (rows > 0)
    run(cpu::cross_entropy_backward, LOOM_CUDA_IMPL(cuda::cross_entropy_backward),
        unit_stride_rows(logits), contiguous(target), contiguous(lse), ignore_index,
        label_smoothing, scale, scale_by, dlogits);
}

// ---------------------------------------------------------------------------- the CPU
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
  for (int64_t c = 0; c < n; ++c) sum += cpu::exp_nonpositive_f(x[c] - m);
  return m + std::log(sum);
}

float row_mean(const float* x, int64_t n) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < n; ++c) sum += x[c];
  return static_cast<float>(sum / static_cast<double>(n));
}

}  // namespace

void cpu::cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                        float label_smoothing, Tensor& losses, Tensor& lse) {
  if (logits.dtype() == DType::BFloat16)  // the reference path: the exact float32 values
    return cross_entropy(float32_copy(logits), target, ignore_index, label_smoothing, losses, lse);
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
      if (t[r] == ignore_index) {  // not read: its loss and lse are 0
        loss[r] = lse_out[r] = 0.0f;
        continue;
      }
      const float* row = x + r * ld;
      const float l = log_sum_exp(row, classes);
      lse_out[r] = l;
      const float smooth = ls != 0.0f ? ls * row_mean(row, classes) : 0.0f;
      loss[r] = l - ((1.0f - ls) * row[t[r]] + smooth);
    }
  });
}

void cpu::cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& lse,
                                 int64_t ignore_index, float label_smoothing, float scale_arg,
                                 const Tensor& scale_by, Tensor& dlogits) {
  if (logits.dtype() == DType::BFloat16)  // float32 gradients, rounded once into dlogits
    return into(dlogits, [&](Tensor& d) {
      cross_entropy_backward(float32_copy(logits), target, lse, ignore_index, label_smoothing,
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
