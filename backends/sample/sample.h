// Next-token sampling (models::sample_next): one token per row of float32 logits, greedy or by
// temperature, top-k and top-p (the rules of Backend::sample). The checks, the public method
// and the CPU reference (a sort of each row) are in sample.cpp; the CUDA kernel, which reaches
// the same token without sorting, in sample.cu.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace loom {

// Backend::sample's arguments, after its checks: logits contiguous [rows, n] with rows, n > 0.
using SampleKernel = void(const Tensor& logits, float temperature, int64_t top_k, float top_p,
                          uint64_t seed, uint64_t offset, const Tensor& offset_by, Tensor& out);

namespace cpu {
SampleKernel sample;
// The next token from one row of n logits (the rules of Backend::sample), drawn at `uniform` in
// [0, 1); models::sample_token runs it on a host vector.
int64_t sample_row(const float* logits, int64_t n, float temperature, int64_t top_k, float top_p,
                   float uniform);
}  // namespace cpu

namespace cuda {
SampleKernel sample;
}  // namespace cuda

}  // namespace loom
