// Unary ops (float32) and their derivatives: one loop for every entry of the table in
// backends/unary_math.h. unary::visit switches on the op once per call and hands the loop the
// op's type, so each op gets its own instantiation that the compiler inlines and vectorises.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>

#include "backends/cpu/cpu_math.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/vec_math.h"
#include "backends/elementwise/activation_rows.h"
#include "backends/elementwise/cpu_float32.h"
#include "backends/elementwise/elementwise.h"
#include "backends/unary_math.h"

namespace loom {

namespace {

using cpu::Ptrs;
using cpu::Steps;

using cpu::CpuMath;  // (backends/cpu/cpu_math.h)

constexpr int64_t grain(unary::Cost cost) {
  return cost == unary::Cost::Heavy ? cpu::kGrainHeavy : cpu::kGrainCheap;
}

// out = op.forward(x) over one strided iteration space.
template <class Op>
void forward_loop(const cpu::StridedIter<2>& iter, Op op) {
  iter.for_each(grain(Op::forward_cost),
                [op](const Ptrs<2>& p, const Steps<2>& s, int64_t n) LOOM_FLATTEN {
                  float* out = reinterpret_cast<float*>(p[0]);
                  const float* x = reinterpret_cast<const float*>(p[1]);
                  if (s[0] == 4 && s[1] == 4) {
#pragma omp simd
                    for (int64_t i = 0; i < n; ++i) out[i] = op.forward(x[i]);
                  } else if (s[0] == 4 && s[1] == 0) {  // broadcast input: one value for the run
                    const float v = op.forward(*x);
#pragma omp simd
                    for (int64_t i = 0; i < n; ++i) out[i] = v;
                  } else {
                    for (int64_t i = 0; i < n; ++i)
                      *reinterpret_cast<float*>(p[0] + i * s[0]) =
                          op.forward(*reinterpret_cast<const float*>(p[1] + i * s[1]));
                  }
                });
}

// out = f(in...) over one strided iteration space of float32 operands, operand 0 the output:
// runs where every operand is contiguous take a plain loop that the compiler vectorises, the
// others step by bytes. The loops of the derivatives and of the bias-fused ops, whose inputs
// arrive as they are in a training step (contiguous, a broadcast bias row included). p and s
// are taken by value, as copies the compiler can keep in registers: through references the
// strided loop ran 1.4x slower on a transposed input (GCC 12).
template <size_t N, class F, size_t... K>
LOOM_VEC_INLINE void map_run(const F& f, Ptrs<N> p, Steps<N> s, int64_t n,
                             std::index_sequence<K...>) {
  float* out = reinterpret_cast<float*>(p[0]);
  const float* in[] = {reinterpret_cast<const float*>(p[K + 1])...};
  if (s[0] == 4 && ((s[K + 1] == 4) && ...)) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = f(in[K][i]...);
  } else {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<float*>(p[0] + i * s[0]) =
          f(*reinterpret_cast<const float*>(p[K + 1] + i * s[K + 1])...);
  }
}

template <size_t N, class F>
void map_loop(const cpu::StridedIter<N>& iter, int64_t grain, F f) {
  iter.for_each(grain, [f](const Ptrs<N>& p, const Steps<N>& s, int64_t n) LOOM_FLATTEN {
    map_run(f, p, s, n, std::make_index_sequence<N - 1>{});
  });
}

}  // namespace

void cpu::unary(UnaryOp op, const Tensor& x, Tensor& out, float a, float b) {
  if (!all_float32({&x, &out}))  // bfloat16: see into()
    return into(out, [&](Tensor& o) { unary(op, float32_copy(x), o, a, b); });
  const cpu::StridedIter<2> it({&out, &x}, "unary");
  unary::visit<CpuMath>(op, a, b, [&](auto entry) { forward_loop(it, entry); });
}

void cpu::unary_rows(UnaryOp op, float* x, int64_t batch, int64_t rows, int64_t cols,
                     int64_t ld, int64_t stride) {
  // bias_unary_rows without a bias, in place, a row at a time over every item's rows.
  cpu::parallel_region(batch * rows * cols >= cpu::kGrainHeavy, [&] {
#pragma omp for collapse(2) schedule(static) nowait
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t r = 0; r < rows; ++r) {
        float* row = x + b * stride + r * ld;
        cpu::bias_unary_rows(op, row, ld, nullptr, row, ld, 1, cols);
      }
  });
}

void cpu::unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y,
                         Tensor& out, float a, float b) {
  if (!all_float32({&grad, &x, &y, &out}))  // bfloat16: see into()
    return into(out, [&](Tensor& o) {
      unary_backward(op, float32_copy(grad), float32_copy(x), float32_copy(y), o, a, b);
    });
  // The derivative reads at most one of x and y; the other slot gets an operand it ignores.
  const Tensor& xs = x.defined() ? x : grad;
  const Tensor& ys = y.defined() ? y : grad;
  const cpu::StridedIter<4> it({&out, &grad, &xs, &ys}, "unary_backward");
  unary::visit<CpuMath>(op, a, b, [&](auto entry) {  // out = grad * dy/dx
    map_loop(it, grain(entry.backward_cost),
             [entry](float g, float xv, float yv) { return entry.backward(g, xv, yv); });
  });
}

void cpu::bias_unary(UnaryOp op, const Tensor& x, const Tensor& bias, Tensor& out) {
  if (!all_float32({&x, &bias, &out}))  // bfloat16: see into()
    return into(out, [&](Tensor& o) { bias_unary(op, float32_copy(x), float32_copy(bias), o); });
  const cpu::StridedIter<3> it({&out, &x, &bias}, "bias_unary");
  // out = op(x + bias): the add and the activation in one pass. Only ops whose derivative reads
  // the input get here (Backend::bias_unary); the others are not instantiated.
  unary::visit<CpuMath>(op, 0.0f, 0.0f, [&](auto entry) {
    if constexpr (decltype(entry)::reads != unary::Reads::Output)
      map_loop(it, grain(entry.forward_cost),
               [entry](float xv, float bv) { return entry.forward(xv + bv); });
  });
}

void cpu::bias_unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x,
                              const Tensor& bias, Tensor& out) {
  if (!all_float32({&grad, &x, &bias, &out}))
    return into(out, [&](Tensor& o) {
      bias_unary_backward(op, float32_copy(grad), float32_copy(x), float32_copy(bias), o);
    });
  const cpu::StridedIter<4> it({&out, &grad, &x, &bias}, "bias_unary_backward");
  unary::visit<CpuMath>(op, 0.0f, 0.0f, [&](auto entry) {  // out = grad * op'(x + bias)
    if constexpr (decltype(entry)::reads != unary::Reads::Output)
      map_loop(it, grain(entry.backward_cost), [entry](float g, float xv, float bv) {
        return entry.backward(g, xv + bv, 0.0f);
      });
  });
}

void cpu::bias_unary_backward_sums(UnaryOp op, const float* grad, const float* x,
                                   const float* bias, int64_t rows, int64_t cols, float* out,
                                   float* dbias) {
  // Each row's out = grad * op'(x + bias) as bias_unary_backward computes it, added into the
  // chunk's sums while it is in registers: one pass where the two kernels read out again. The
  // rows of grad and x further on are requested as each row begins (cpu::rows_ahead).
  const int64_t ahead = cpu::rows_ahead(cols);
  unary::visit<CpuMath>(op, 0.0f, 0.0f, [&](auto entry) {
    if constexpr (decltype(entry)::reads != unary::Reads::Output)
      cpu::column_sums_by_chunks(rows, cols, dbias, [&](int64_t r, double* sums) LOOM_FLATTEN {
        const float *g = grad + r * cols, *xr = x + r * cols;
        float* o = out + r * cols;
        if (r + ahead < rows) {
          cpu::prefetch_floats(g + ahead * cols, cols);
          cpu::prefetch_floats(xr + ahead * cols, cols);
        }
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) {
          o[j] = entry.backward(g[j], xr[j] + bias[j], 0.0f);
          sums[j] += o[j];
        }
      });
  });
}

}  // namespace loom
