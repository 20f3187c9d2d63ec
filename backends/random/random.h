// Random tensors from the counter-based Philox generator (core/rng.h): element i of out is a
// pure function of (seed, offset + i), so the numbers do not depend on how the work is split
// over threads or blocks, and the CPU and CUDA draw the same uniforms. The checks, the public
// methods and the CPU loops are in random.cpp, the CUDA kernels in random.cu.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace loom {

// Backend::rand_uniform's and rand_normal's arguments, after their checks: out contiguous
// float32, at least one element.
using RandomKernel = void(Tensor& out, uint64_t seed, uint64_t offset);

namespace cpu {
RandomKernel rand_uniform, rand_normal;
}  // namespace cpu

namespace cuda {
RandomKernel rand_uniform, rand_normal;
}  // namespace cuda

}  // namespace loom
