// cpu::bias_unary_rows (activation_rows.h): bias_unary's loop, a row at a time.
#include "backends/elementwise/activation_rows.h"

#include "backends/cpu/cpu_math.h"
#include "backends/cpu/loops.h"
#include "core/error.h"

namespace loom::cpu {

void bias_unary_rows(UnaryOp op, const float* x, int64_t ldx, const float* bias, float* out,
                     int64_t ldo, int64_t rows, int64_t cols) {
  // The loops of bias_unary and unary over contiguous operands (cpu_unary.cpp's map_run and
  // forward_loop), a row at a time.
  const auto rows_of = [&](auto entry) LOOM_FLATTEN {
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * ldx;
      float* o = out + r * ldo;
      if (bias != nullptr) {
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) o[j] = entry.forward(xr[j] + bias[j]);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) o[j] = entry.forward(xr[j]);
      }
    }
  };
  switch (op) {  // the three activations GemmArgs takes, each its own instantiation
    case UnaryOp::Relu: return rows_of(unary::Relu<CpuMath>{});
    case UnaryOp::Gelu: return rows_of(unary::Gelu<CpuMath>{});
    case UnaryOp::GeluTanh: return rows_of(unary::GeluTanh<CpuMath>{});
    default:
      LOOM_FAIL("bias_unary_rows: activation {} is not Relu, Gelu or GeluTanh",
                unary_op_name(op));
  }
}

}  // namespace loom::cpu
