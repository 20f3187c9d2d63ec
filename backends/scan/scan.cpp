// Running sums and products along the middle axis of a contiguous [outer, n, inner] block:
// Backend's checks, then the CPU loops.
//   * inner == 1 (cumsum over the last dim): each row is one contiguous run; rows go to threads.
//   * inner > 1: out[o, j, i] = out[o, j - 1, i] + x[o, j, i] for a block of columns i at once,
//     so each step reads a contiguous piece of row j and the inner loop vectorises.
// The running value is kept in double, as PyTorch's CPU cumsum and cumprod keep it (their
// accumulate type for float), and rounded to float32 as it is written.
#include "backends/scan/scan.h"

#include <algorithm>
#include <cstdint>

#include "backends/backend.h"
#include "backends/contract.h"
#include "backends/cpu/loops.h"

namespace loom {

// ---------------------------------------------------------------------------- the public methods
void Backend::scan(ScanOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                   bool reverse, Tensor& out) {
  const Contract c{device_, op == ScanOp::Sum ? "cumsum" : "cumprod"};
  if (c.float32_block(outer, n, inner, {{x, "input"}}, out) > 0)
    run(cpu::scan, LOOM_CUDA_IMPL(cuda::scan), op, contiguous(x), outer, n, inner, reverse, out);
}

void Backend::cumprod_backward(const Tensor& grad, const Tensor& x, int64_t outer, int64_t n,
                               int64_t inner, Tensor& out) {
  const Contract c{device_, "cumprod_backward"};
  if (c.float32_block(outer, n, inner, {{grad, "grad"}, {x, "input"}}, out) > 0)
    run(cpu::cumprod_backward, LOOM_CUDA_IMPL(cuda::cumprod_backward), contiguous(grad),
        contiguous(x), outer, n, inner, out);
}

// ---------------------------------------------------------------------------- the CPU
namespace {

template <ScanOp Op>
inline double combine(double acc, float v) {
  return Op == ScanOp::Sum ? acc + v : acc * v;
}
constexpr double identity(ScanOp op) { return op == ScanOp::Sum ? 0.0 : 1.0; }

// One contiguous row of n.
template <ScanOp Op>
void scan_row(const float* x, int64_t n, bool reverse, float* out) {
  double acc = identity(Op);
  if (reverse) {
    for (int64_t j = n - 1; j >= 0; --j) out[j] = static_cast<float>(acc = combine<Op>(acc, x[j]));
  } else {
    for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(acc = combine<Op>(acc, x[j]));
  }
}

// Columns [i0, i1) of one [n, inner] slice, stepping down its rows.
template <ScanOp Op>
void scan_columns(const float* x, int64_t n, int64_t inner, int64_t i0, int64_t i1, bool reverse,
                  float* out) {
  double acc[cpu::kColumnBlock];
  const int64_t w = i1 - i0;
  std::fill(acc, acc + w, identity(Op));
  for (int64_t step = 0; step < n; ++step) {
    const int64_t j = reverse ? n - 1 - step : step;
    const float* row = x + j * inner + i0;
    float* dst = out + j * inner + i0;
#pragma omp simd
    for (int64_t i = 0; i < w; ++i) {
      acc[i] = combine<Op>(acc[i], row[i]);
      dst[i] = static_cast<float>(acc[i]);
    }
  }
}

template <ScanOp Op>
void scan_impl(const float* x, int64_t outer, int64_t n, int64_t inner, bool reverse, float* out) {
  if (inner == 1) {
    cpu::parallel_for(0, outer, std::max<int64_t>(1, cpu::kGrainCheap / n),
                      [&](int64_t b, int64_t e) {
                        for (int64_t o = b; o < e; ++o)
                          scan_row<Op>(x + o * n, n, reverse, out + o * n);
                      });
    return;
  }
  const int64_t blocks = (inner + cpu::kColumnBlock - 1) / cpu::kColumnBlock;  // per slice
  const int64_t grain = std::max<int64_t>(1, cpu::kGrainCheap / (n * cpu::kColumnBlock));
  cpu::parallel_for(0, outer * blocks, grain, [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t o = u / blocks, i0 = (u % blocks) * cpu::kColumnBlock;
      const int64_t i1 = std::min(inner, i0 + cpu::kColumnBlock);
      scan_columns<Op>(x + o * n * inner, n, inner, i0, i1, reverse, out + o * n * inner);
    }
  });
}

// dL/dx of y = cumprod(x) along one strided column: dx_k = sum_{j >= k} g_j prod_{i <= j,
// i != k} x_i. Before the first zero z of x this is (sum_{j >= k} g_j y_j) / x_k, PyTorch's
// formula (every y_j past z is 0); at z the division is impossible and the sum is taken
// directly, y_{z-1} sum_{j >= z} g_j prod_{z < i <= j} x_i; past z every term holds x_z = 0.
void cumprod_backward_column(const float* g, const float* x, int64_t n, int64_t s, float* out) {
  int64_t z = 0;
  while (z < n && x[z * s] != 0.0f) ++z;
  double before = 1.0;  // y_{z-1}, then g_j y_j into out for j < z
  for (int64_t j = 0; j < z; ++j) {
    before *= x[j * s];
    out[j * s] = static_cast<float>(g[j * s] * before);
  }
  if (z < n) {
    double p = before, at_zero = 0.0;
    for (int64_t j = z; j < n; ++j) {
      if (j > z) p *= x[j * s];
      at_zero += g[j * s] * p;
    }
    for (int64_t j = z + 1; j < n; ++j) out[j * s] = 0.0f;
    out[z * s] = static_cast<float>(at_zero);
  }
  double acc = 0.0;
  for (int64_t k = z - 1; k >= 0; --k) {
    acc += out[k * s];
    out[k * s] = static_cast<float>(acc / x[k * s]);
  }
}

}  // namespace

void cpu::scan(ScanOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse,
               Tensor& out) {
  const float* xp = x.data_ptr<float>();
  float* op_ = out.data_ptr<float>();
  if (op == ScanOp::Sum)
    scan_impl<ScanOp::Sum>(xp, outer, n, inner, reverse, op_);
  else
    scan_impl<ScanOp::Prod>(xp, outer, n, inner, reverse, op_);
}

void cpu::cumprod_backward(const Tensor& grad, const Tensor& x, int64_t outer, int64_t n,
                           int64_t inner, Tensor& out) {
  const float *g = grad.data_ptr<float>(), *xp = x.data_ptr<float>();
  float* dx = out.data_ptr<float>();
  cpu::parallel_for(0, outer * inner, std::max<int64_t>(1, cpu::kGrainCheap / n),
                    [&](int64_t b, int64_t e) {
                      for (int64_t c = b; c < e; ++c) {
                        const int64_t at = (c / inner) * n * inner + c % inner;
                        cumprod_backward_column(g + at, xp + at, n, inner, dx + at);
                      }
                    });
}

}  // namespace loom
