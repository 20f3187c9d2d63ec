// The CUDA device: its kernel table and the few CUDA-only switches.
// Only this header is seen by code outside backends/cuda; it needs no CUDA headers.
#pragma once

#include "backends/backend.h"

namespace loom {

// True when the CUDA runtime finds at least one device. Never throws: no GPU, no driver or a
// driver older than the runtime all read as "not available".
bool cuda_device_available();

// The CUDA kernel table (device 0). The first call creates the stream, the cuBLAS handle and
// the caching allocator; callers check cuda_device_available() first (backend() does).
Backend& cuda_backend();

// TF32 tensor-core math for float32 matrix products (cuBLAS CUBLAS_TF32_TENSOR_OP_MATH).
// Off by default, as in PyTorch >= 1.12 (torch.backends.cuda.matmul.allow_tf32 = False):
// TF32 keeps 10 mantissa bits of the inputs, ~1e-3 relative error, for up to ~8x the speed.
void cuda_set_tf32(bool enabled);
bool cuda_tf32_enabled();

// Whether each kernel that checks its input (index_select, index_add, gather, scatter_add,
// cross_entropy) is waited for, so that a bad index or target throws at the call that launched
// it. Off by default: the error is thrown at the next point that waits for the GPU (a copy to or
// from the host, synchronize()), as PyTorch reports device-side errors, and the host never
// stalls for a check. The environment variable CUDA_LAUNCH_BLOCKING=1 (PyTorch's switch) turns
// it on at start-up.
void cuda_set_launch_blocking(bool enabled);
bool cuda_launch_blocking();

}  // namespace loom
