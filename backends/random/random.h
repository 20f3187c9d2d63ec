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

// Backend::rand_bits: out contiguous int64, at least one element.
// Backend::multinomial: weights contiguous float32 [rows, k] with k >= 1, out contiguous int64
// [rows, samples] with at least one element.
using MultinomialKernel = void(const Tensor& weights, uint64_t seed, uint64_t offset,
                               Tensor& out);

// Backend::dropout: x, out and mask contiguous float32 of x's element count (at least one),
// p in [0, 1).
using DropoutKernel = void(const Tensor& x, float p, uint64_t seed, uint64_t offset,
                           Tensor& out, Tensor& mask);

namespace cpu {
RandomKernel rand_uniform, rand_normal, rand_bits;
MultinomialKernel multinomial;
DropoutKernel dropout;
}  // namespace cpu

namespace cuda {
RandomKernel rand_uniform, rand_normal, rand_bits;
MultinomialKernel multinomial;
DropoutKernel dropout;
}  // namespace cuda

}  // namespace loom
