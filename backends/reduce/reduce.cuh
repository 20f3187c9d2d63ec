// The reduction launcher, which other families' CUDA code reuses on raw partial sums (the
// column sums of layer_norm's parameter gradients). Defined in reduce.cu.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/device.h"
#include "backends/reduce/reduce.h"
#include "core/dtype.h"

namespace loom::cuda {

// x contiguous [outer, n, inner] of `type` -> out [outer, inner] of `type` (int64 for Arg*;
// float32 for the sum of a bfloat16 x, the one reduction bfloat16 takes).
void launch_reduce(ReduceOp op, const void* x, DType type, int64_t outer, int64_t n, int64_t inner,
                   void* out, Scratch& scratch, cudaStream_t stream);

}  // namespace loom::cuda
