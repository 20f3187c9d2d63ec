// The elementwise launchers that other families' CUDA code reuses on raw matrices (gemm.cu: a
// broadcast operand made dense, a Linear's bias copied into C, the activation pass over C,
// C = beta * C). Defined in elementwise.cu; their Layout and Operands come from
// backends/cuda/launch_plan.h (matrix_layout, matrix_operand).
#pragma once

#include <cuda_runtime_api.h>

#include "backends/cuda/launch_plan.h"
#include "backends/unary_math.h"
#include "core/dtype.h"

namespace loom::cuda {

void launch_copy(const Layout& layout, const Operand& src, DType src_type, const Operand& dst,
                 DType dst_type, cudaStream_t stream);
// Every Operand may be strided, outputs included (stride 0 only for inputs). The math of each
// unary op is in backends/unary_math.h; each operand float32 or bfloat16 (Operand::bf16).
void launch_unary(UnaryOp op, const Layout& layout, const Operand& x, const Operand& out, float a,
                  float b, cudaStream_t stream);
// x = alpha * x in place over a float32 strided view (0 writes zeros without reading x).
void launch_scale(const Layout& layout, const Operand& x, float alpha, cudaStream_t stream);

}  // namespace loom::cuda
