// The activation a product applies to the rows of its C as it finishes them
// (GemmArgs::activation_out, backends/gemm/tiled_gemm.cpp): the element-wise kernels' math
// (backends/cpu/cpu_math.h, backends/unary_math.h) over rows, in a file of its own that needs
// nothing of loom's but headers, as the product kernel does (scripts/gemm_ab.sh compiles the
// two alone).
#pragma once

#include <cstdint>

#include "backends/unary_math.h"

namespace loom::cpu {

// out[r, j] = op(x[r, j] + bias[j]) over float32 [rows, cols] with row strides ldx and ldo, on
// the calling thread: what bias_unary computes, to the bit, for the rows of a product's C as
// the tiles finish them (GemmArgs::activation_out). A null bias adds nothing: op(x[r, j]), as
// unary computes it. op: Relu, Gelu or GeluTanh.
void bias_unary_rows(UnaryOp op, const float* x, int64_t ldx, const float* bias, float* out,
                     int64_t ldo, int64_t rows, int64_t cols);

}  // namespace loom::cpu
