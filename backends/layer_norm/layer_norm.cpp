// Layer normalisation (layer_norm.h): Backend's checks, then the CPU loops, which normalise one
// row at a time (add_layer_norm's sum written out first, in the same loop).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/backend.h"
#include "backends/contract.h"
#include "backends/cpu/loops.h"
#include "backends/elementwise/cpu_float32.h"
#include "backends/layer_norm/layer_norm.h"
#include "core/error.h"

namespace loom {

// ---------------------------------------------------------------------------- the public methods
namespace {

// weight or bias: undefined, or contiguous float32 [cols], cols the last dim of x.
void check_affine(const Contract& c, const Tensor& t, const char* name, const Tensor& x,
                  int64_t cols) {
  if (!t.defined()) return;
  c.output(t, DType::Float32, t.numel(), name);
  LOOM_CHECK(t.shape() == Shape{cols},
             "{}: weight/bias of shape {} do not match the last dim of input {}", c.op,
             shape_str(t.shape()), shape_str(x.shape()));
}

// What layer_norm and add_layer_norm check alike: x float32 in mean.numel() rows, the affine
// weight and bias, and the outputs y, mean and rstd. Returns the row length.
int64_t check_layer_norm(const Contract& c, const Tensor& x, const Tensor& weight,
                         const Tensor& bias, const Tensor& y, const Tensor& mean,
                         const Tensor& rstd) {
  c.on_device(x, "input");
  const int64_t rows = mean.numel(), cols = c.row_length(x, rows, "input");
  LOOM_CHECK(cols > 0 || rows == 0, "{}: cannot normalise rows of 0 elements", c.op);
  c.dtype(x, DType::Float32, "input");
  check_affine(c, weight, "weight", x, cols);
  check_affine(c, bias, "bias", x, cols);
  c.output(y, DType::Float32, rows * cols, "out");
  c.output(mean, DType::Float32, rows, "mean");
  c.output(rstd, DType::Float32, rows, "rstd");
  return cols;
}

}  // namespace

void Backend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                         Tensor& y, Tensor& mean, Tensor& rstd) {
  check_layer_norm(Contract{device_, "layer_norm"}, x, weight, bias, y, mean, rstd);
  Tensor none;
  if (mean.numel() > 0)
    run(cpu::layer_norm, LOOM_CUDA_IMPL(cuda::layer_norm), contiguous(x), none, weight, bias, eps,
        none, y, mean, rstd);
}

void Backend::add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                             const Tensor& bias, float eps, Tensor& sum, Tensor& y, Tensor& mean,
                             Tensor& rstd) {
  const Contract c{device_, "add_layer_norm", /*takes_bfloat16=*/true};
  const int64_t count = mean.numel() * check_layer_norm(c, x, weight, bias, y, mean, rstd);
  c.floating(residual, "residual");  // a bfloat16 branch is added in float32
  c.numel(residual, count, "residual");
  c.output(sum, DType::Float32, count, "sum");
  if (mean.numel() > 0)
    run(cpu::layer_norm, LOOM_CUDA_IMPL(cuda::layer_norm), contiguous(x), contiguous(residual),
        weight, bias, eps, sum, y, mean, rstd);
}

void Backend::layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                  const Tensor& mean, const Tensor& rstd, Tensor& dx,
                                  Tensor& dweight, Tensor& dbias) {
  const Contract c{device_, "layer_norm_backward"};
  c.on_device(x, "input");
  const int64_t rows = mean.numel(), cols = c.row_length(x, rows, "input");
  c.dtype(x, DType::Float32, "input");
  c.input(dy, DType::Float32, rows * cols, "grad");
  if (weight.defined()) c.output(weight, DType::Float32, cols, "weight");
  c.output(mean, DType::Float32, rows, "mean");
  c.output(rstd, DType::Float32, rows, "rstd");
  c.output(dx, DType::Float32, rows * cols, "dx");
  if (dweight.defined()) c.output(dweight, DType::Float32, cols, "dweight");
  if (dbias.defined()) c.output(dbias, DType::Float32, cols, "dbias");
  if (rows * cols == 0) {  // no rows: the parameter gradients are empty sums
    for (Tensor* t : {&dweight, &dbias})
      if (t->defined()) fill(*t, 0.0);
    return;
  }
  run(cpu::layer_norm_backward, LOOM_CUDA_IMPL(cuda::layer_norm_backward), contiguous(dy),
      contiguous(x), weight, mean, rstd, dx, dweight, dbias);
}

// ---------------------------------------------------------------------------- the CPU
namespace {

// weight, bias, dweight and dbias may be undefined (no affine transform, or not wanted).
float* optional(const Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

// Rows go through the forward in groups of kRowGroup, each step of the arithmetic for every row
// of the group before the next step: a row's sums end in a chain of dependent additions (the
// vector's lanes added up), and a step over a few rows lets the core work on the next row's
// chain while one finishes. Each row's arithmetic is unchanged, so are its bits. On 2 cores,
// 12,544 rows of 64 (swin-fmnist's first stage): 260 -> 209-217 us; 6,400 rows of 128: 221 ->
// 160. The backward, whose sums are in float, grouped the same way was no faster.
constexpr int64_t kRowGroup = 4;

// sum_c x[c], and sum_c (x[c] - mean)^2, in double: var = E[x^2] - E[x]^2 would cancel badly
// for rows with a large mean.
double row_sum(const float* x, int64_t cols) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < cols; ++c) sum += x[c];
  return sum;
}
double row_squared_deviations(const float* x, int64_t cols, float mean) {
  double sq = 0.0;
#pragma omp simd reduction(+ : sq)
  for (int64_t c = 0; c < cols; ++c) {
    const float d = x[c] - mean;
    sq += static_cast<double>(d * d);
  }
  return sq;
}

// y = (x - mean) * rstd * w + b for one row (w, b optional).
void normalized(const float* x, int64_t cols, float mean, float rstd, const float* w,
                const float* b, float* y) {
  if (w && b) {
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) y[c] = (x[c] - mean) * rstd * w[c] + b[c];
  } else if (w) {
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) y[c] = (x[c] - mean) * rstd * w[c];
  } else if (b) {
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) y[c] = (x[c] - mean) * rstd + b[c];
  } else {
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) y[c] = (x[c] - mean) * rstd;
  }
}

// `count` rows (at most kRowGroup) of x, `cols` apart: their means and rstds, then y.
LOOM_FLATTEN void normalize_rows(const float* x, int64_t count, int64_t cols, const float* w,
                                 const float* b, float eps, float* y, float* mean,
                                 float* rstd) {
  const double n = static_cast<double>(cols);
  for (int64_t r = 0; r < count; ++r)
    mean[r] = static_cast<float>(row_sum(x + r * cols, cols) / n);
  for (int64_t r = 0; r < count; ++r) {
    const double sq = row_squared_deviations(x + r * cols, cols, mean[r]);
    rstd[r] = static_cast<float>(1.0 / std::sqrt(sq / n + static_cast<double>(eps)));
  }
  for (int64_t r = 0; r < count; ++r)
    normalized(x + r * cols, cols, mean[r], rstd[r], w, b, y + r * cols);
}

// dx for one row, and (when dw_acc is set) dw_acc += dy * xhat, db_acc += dy. With
// xhat = (x - mean) * rstd and g = dy * w:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
template <bool kHasWeight>
LOOM_FLATTEN void normalize_row_backward(const float* dy, const float* x, const float* w,
                                         float mean, float rstd, int64_t cols, float* dx,
                                         float* dw_acc, float* db_acc) {
  float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
  for (int64_t c = 0; c < cols; ++c) {
    const float g = kHasWeight ? dy[c] * w[c] : dy[c];
    sum_g += g;
    sum_gx += g * (x[c] - mean) * rstd;
  }
  const float mean_g = sum_g / static_cast<float>(cols);
  const float mean_gx = sum_gx / static_cast<float>(cols);
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) {
    const float xhat = (x[c] - mean) * rstd;
    const float g = kHasWeight ? dy[c] * w[c] : dy[c];
    dx[c] = rstd * (g - mean_g - xhat * mean_gx);
  }
  if (dw_acc) {
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) dw_acc[c] += dy[c] * (x[c] - mean) * rstd;
  }
  if (db_acc) {
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) db_acc[c] += dy[c];
  }
}

}  // namespace

void cpu::layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                     const Tensor& bias, float eps, Tensor& sum, Tensor& y, Tensor& mean,
                     Tensor& rstd) {
  if (residual.defined() && residual.dtype() != DType::Float32)  // bfloat16: see into()
    return layer_norm(x, float32_copy(residual), weight, bias, eps, sum, y, mean, rstd);
  const int64_t rows = mean.numel(), cols = x.numel() / rows;
  const float* xp = x.data_ptr<float>();
  const float* resp = optional(residual);
  float* sp = optional(sum);
  const float* wp = optional(weight);
  const float* bp = optional(bias);
  float* yp = y.data_ptr<float>();
  float* mp = mean.data_ptr<float>();
  float* rp = rstd.data_ptr<float>();
  cpu::parallel_for(0, rows, std::max<int64_t>(1, cpu::kGrainCheap / std::max<int64_t>(cols, 1)),
                    [&](int64_t b, int64_t e) {
                      for (int64_t r = b; r < e; r += kRowGroup) {
                        const int64_t count = std::min(kRowGroup, e - r);
                        const float* rows_x = xp + r * cols;
                        if (resp) {  // add_layer_norm: the rows are x + residual, kept in sum
                          float* s = sp + r * cols;
                          const float* res = resp + r * cols;
#pragma omp simd
                          for (int64_t c = 0; c < count * cols; ++c) s[c] = rows_x[c] + res[c];
                          rows_x = s;
                        }
                        normalize_rows(rows_x, count, cols, wp, bp, eps, yp + r * cols, mp + r,
                                       rp + r);
                      }
                    });
}

void cpu::layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                              const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dweight,
                              Tensor& dbias) {
  const int64_t rows = mean.numel(), cols = x.numel() / rows;
  const float* xp = x.data_ptr<float>();
  const float* gp = dy.data_ptr<float>();
  const float* wp = optional(weight);
  const float* mp = mean.data_ptr<float>();
  const float* rp = rstd.data_ptr<float>();
  float* dxp = dx.data_ptr<float>();
  float* dwp = optional(dweight);
  float* dbp = optional(dbias);

  // The column sums for dweight/dbias go into one private buffer per thread (no races, no
  // atomics), which are added up at the end. Each thread's buffer, dw's sums then db's, starts
  // a cache line of its own (a CPU tensor's data starts on one): when one thread's db sums
  // ended in the line where the next thread's dw sums began, every row's update passed that
  // line from core to core, and on 2 Zen 5 cores 3,136 x 128 took 145 us on two threads
  // against 114 on one; 58 with the buffers apart (6,400 x 128: 296 -> 120).
  const int64_t grain = std::max<int64_t>(1, cpu::kGrainCheap / cols);
  const int threads =
      static_cast<int>(std::min<int64_t>(cpu::max_threads(), std::max<int64_t>(1, rows / grain)));
  constexpr int64_t kLineFloats = 64 / sizeof(float);
  const int64_t stride = (2 * cols + kLineFloats - 1) / kLineFloats * kLineFloats;
  const Tensor buffers = dwp || dbp ? Tensor::empty({threads, stride}) : Tensor();
  float* partial = buffers.defined() ? buffers.data_ptr<float>() : nullptr;
  if (partial) std::fill_n(partial, threads * stride, 0.0f);  // a thread not started adds 0
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t chunk = (rows + nt - 1) / nt;
    const int64_t b = std::min<int64_t>(rows, t * chunk), e = std::min<int64_t>(rows, b + chunk);
    float* dw_acc = dwp ? partial + t * stride : nullptr;
    float* db_acc = dbp ? partial + t * stride + cols : nullptr;
    for (int64_t r = b; r < e; ++r) {
      const auto row = wp ? normalize_row_backward<true> : normalize_row_backward<false>;
      row(gp + r * cols, xp + r * cols, wp, mp[r], rp[r], cols, dxp + r * cols, dw_acc, db_acc);
    }
  }
  for (int64_t c = 0; c < cols; ++c) {
    float dw = 0.0f, db = 0.0f;
    for (int t = 0; t < threads; ++t) {
      dw += partial ? partial[t * stride + c] : 0.0f;
      db += partial ? partial[t * stride + cols + c] : 0.0f;
    }
    if (dwp) dwp[c] = dw;
    if (dbp) dbp[c] = db;
  }
}

}  // namespace loom
