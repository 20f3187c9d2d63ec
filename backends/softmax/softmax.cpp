// softmax and log_softmax along the middle axis of [outer, n, inner], forward and backward:
// Backend's checks, then the CPU loops.
// Numerically stable form: softmax(x) = exp(x - m) / sum exp(x - m) with m = max x, and
// log_softmax(x) = x - m - log sum exp(x - m). A row of all -inf gives NaN (-inf - -inf), as
// in PyTorch. inner == 1 (the usual last-dim softmax) works on contiguous rows; inner > 1 works
// on blocks of columns, stepping down the rows so the inner loop stays contiguous.
#include <cmath>
#include <limits>
#include <vector>

#include "backends/backend.h"
#include "backends/contract.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/vec_math.h"
#include "backends/softmax/softmax.h"

namespace loom {

// ---------------------------------------------------------------------------- the public methods
void Backend::softmax(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log,
                      Tensor& out) {
  const Contract c{device_, log ? "log_softmax" : "softmax"};
  if (c.float32_block(outer, n, inner, {{x, "input"}}, out) > 0)
    run(cpu::softmax, LOOM_CUDA_IMPL(cuda::softmax), contiguous(x), outer, n, inner, log, out);
}

void Backend::add_softmax(const Tensor& x, const Tensor& bias, Tensor& out) {
  const Contract c{device_, "add_softmax"};
  c.dtype(x, DType::Float32, "input");
  c.dtype(bias, DType::Float32, "bias");
  c.on_device(x, "input");
  c.on_device(bias, "bias");
  c.same_shape(bias, x, "bias");
  LOOM_CHECK(x.dim() >= 1, "add_softmax: input must have a dim to normalise, got shape {}",
             shape_str(x.shape()));
  c.output(out, DType::Float32, x.numel(), "out");
  if (x.numel() == 0) return;
  const int64_t n = x.size(-1), rows = x.numel() / n;
  if (device_ != Device::CPU || bias.strides().back() != 1) {  // the add, then the softmax
    Tensor sum = Tensor::empty(x.shape(), DType::Float32, device_);
    binary(BinaryOp::Add, x, bias, sum);
    return softmax(sum, rows, n, 1, false, out);
  }
  run(cpu::add_softmax, nullptr, contiguous(x), bias, rows, n, out);
}

void Backend::softmax_backward(const Tensor& grad, const Tensor& y, int64_t outer, int64_t n,
                               int64_t inner, bool log, Tensor& out) {
  const Contract c{device_, log ? "log_softmax_backward" : "softmax_backward"};
  if (c.float32_block(outer, n, inner, {{grad, "grad"}, {y, "output"}}, out) > 0)
    run(cpu::softmax_backward, LOOM_CUDA_IMPL(cuda::softmax_backward), contiguous(grad),
        contiguous(y), outer, n, inner, log, out);
}

// ---------------------------------------------------------------------------- the CPU
namespace {

LOOM_FLATTEN void softmax_row(const float* x, int64_t n, bool log, float* y) {
  const float m = cpu::max_of(x, n);
  // A NaN anywhere makes the sum, and so every output of the row, NaN (as in PyTorch).
  float sum = 0.0f;
  if (log) {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) sum += cpu::exp_nonpositive_f(x[j] - m);
    const float lse = m + std::log(sum);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = x[j] - lse;
    return;
  }
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    y[j] = cpu::exp_nonpositive_f(x[j] - m);
    sum += y[j];
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
}

// Columns [i0, i1) of one [n, inner] slice.
LOOM_FLATTEN void softmax_columns(const float* x, int64_t n, int64_t inner, int64_t i0, int64_t i1,
                                  bool log, float* y) {
  float m[cpu::kColumnBlock], sum[cpu::kColumnBlock];
  const int64_t w = i1 - i0;
  for (int64_t i = 0; i < w; ++i) {
    m[i] = -std::numeric_limits<float>::infinity();
    sum[i] = 0.0f;
  }
  for (int64_t j = 0; j < n; ++j) {
    const float* row = x + j * inner + i0;
#pragma omp simd
    for (int64_t i = 0; i < w; ++i) m[i] = std::max(m[i], row[i]);
  }
  for (int64_t j = 0; j < n; ++j) {
    const float* row = x + j * inner + i0;
    float* out = y + j * inner + i0;
#pragma omp simd
    for (int64_t i = 0; i < w; ++i) {
      const float e = cpu::exp_nonpositive_f(row[i] - m[i]);
      sum[i] += e;
      if (!log) out[i] = e;
    }
  }
  for (int64_t i = 0; i < w; ++i) sum[i] = log ? m[i] + std::log(sum[i]) : 1.0f / sum[i];
  for (int64_t j = 0; j < n; ++j) {
    const float* row = x + j * inner + i0;
    float* out = y + j * inner + i0;
    if (log) {
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) out[i] = row[i] - sum[i];
    } else {
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) out[i] *= sum[i];
    }
  }
}

// softmax:      dx = y * (g - sum_j g y)
// log_softmax:  dx = g - exp(y) * sum_j g     (y = log_softmax(x), so exp(y) = softmax(x))
LOOM_FLATTEN void softmax_backward_row(const float* g, const float* y, int64_t n, bool log,
                                       float* dx) {
  float dot = 0.0f;
  if (log) {
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < n; ++j) dot += g[j];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) dx[j] = g[j] - cpu::exp_f(y[j]) * dot;
    return;
  }
#pragma omp simd reduction(+ : dot)
  for (int64_t j = 0; j < n; ++j) dot += g[j] * y[j];
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dx[j] = y[j] * (g[j] - dot);
}

LOOM_FLATTEN void softmax_backward_columns(const float* g, const float* y, int64_t n, int64_t inner,
                                           int64_t i0, int64_t i1, bool log, float* dx) {
  float dot[cpu::kColumnBlock];
  const int64_t w = i1 - i0;
  for (int64_t i = 0; i < w; ++i) dot[i] = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t r = j * inner + i0;
#pragma omp simd
    for (int64_t i = 0; i < w; ++i) dot[i] += log ? g[r + i] : g[r + i] * y[r + i];
  }
  for (int64_t j = 0; j < n; ++j) {
    const int64_t r = j * inner + i0;
    if (log) {
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) dx[r + i] = g[r + i] - cpu::exp_f(y[r + i]) * dot[i];
    } else {
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) dx[r + i] = y[r + i] * (g[r + i] - dot[i]);
    }
  }
}

// Calls row(o) for each outer slice when inner == 1, else column(o, i0, i1) for each slice and
// block of columns, spread over threads.
template <class Row, class Column>
void for_each_slice(int64_t outer, int64_t n, int64_t inner, const Row& row, const Column& column) {
  if (inner == 1) {
    cpu::parallel_for(0, outer, cpu::row_grain(n), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) row(o);
    });
    return;
  }
  const int64_t blocks = (inner + cpu::kColumnBlock - 1) / cpu::kColumnBlock;
  cpu::parallel_for(0, outer * blocks, cpu::row_grain(n * std::min(inner, cpu::kColumnBlock)),
                    [&](int64_t b, int64_t e) {
                      for (int64_t t = b; t < e; ++t) {
                        const int64_t o = t / blocks, i0 = (t % blocks) * cpu::kColumnBlock;
                        column(o, i0, std::min(inner, i0 + cpu::kColumnBlock));
                      }
                    });
}

}  // namespace

void cpu::softmax(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log, Tensor& out) {
  const float* xp = x.data_ptr<float>();
  float* yp = out.data_ptr<float>();
  for_each_slice(
      outer, n, inner, [&](int64_t o) { softmax_row(xp + o * n, n, log, yp + o * n); },
      [&](int64_t o, int64_t i0, int64_t i1) {
        softmax_columns(xp + o * n * inner, n, inner, i0, i1, log, yp + o * n * inner);
      });
}

void cpu::add_softmax(const Tensor& x, const Tensor& bias, int64_t rows, int64_t n, Tensor& out) {
  const float* xp = x.data_ptr<float>();
  const float* bp = bias.data_ptr<float>();
  float* yp = out.data_ptr<float>();
  // Row r's bias starts at the dot product of r's index over the leading dims with the view's
  // strides (0 along a broadcast dim), counted up row by row like an odometer.
  const Shape shape(x.shape().begin(), x.shape().end() - 1);
  const Strides strides(bias.strides().begin(), bias.strides().end() - 1);
  cpu::parallel_for(0, rows, cpu::row_grain(n), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> index(shape.size());
    int64_t offset = 0;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1, r = begin; d >= 0; --d) {
      index[d] = r % shape[d];
      offset += index[d] * strides[d];
      r /= shape[d];
    }
    for (int64_t r = begin; r < end; ++r) {
      const float *xr = xp + r * n, *br = bp + offset;
      float* yr = yp + r * n;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) yr[j] = xr[j] + br[j];  // binary(Add)'s sum
      softmax_row(yr, n, false, yr);  // in place: each value is read before it is written
      for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
        offset += strides[d];
        if (++index[d] < shape[d]) break;
        offset -= index[d] * strides[d];
        index[d] = 0;
      }
    }
  });
}

void cpu::softmax_backward(const Tensor& grad, const Tensor& y, int64_t outer, int64_t n,
                           int64_t inner, bool log, Tensor& out) {
  const float* gp = grad.data_ptr<float>();
  const float* yp = y.data_ptr<float>();
  float* dp = out.data_ptr<float>();
  for_each_slice(
      outer, n, inner,
      [&](int64_t o) { softmax_backward_row(gp + o * n, yp + o * n, n, log, dp + o * n); },
      [&](int64_t o, int64_t i0, int64_t i1) {
        const int64_t base = o * n * inner;
        softmax_backward_columns(gp + base, yp + base, n, inner, i0, i1, log, dp + base);
      });
}

}  // namespace loom
