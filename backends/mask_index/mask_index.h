// The positions behind advanced indexing (Tensor::index with Bool or int64 tensors,
// autograd/indexing.h), which the index kernels (backends/index) then read or write:
//   nonzero        the row-major positions of x's nonzero (true) elements: flat offsets, or
//                  one coordinate per dim
//   add_flat_index out[e] += wrap(index[e]) * step, the index checked against [-n, n)
// A Bool mask becomes flat offsets into the dims it covers; several index tensors, broadcast
// together, become one flat position each by add_flat_index with the row-major steps of their
// dims, so one index_select (or index_put's index_copy) moves the elements.
// The checks, the public methods and the CPU loops are in mask_index.cpp; the CUDA kernel of
// add_flat_index in mask_index.cu. nonzero has no CUDA kernel: the count decides the output's
// size, so the host waits for the GPU anyway (as in PyTorch), and reads the mask to find them.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace loom {

// The arguments of Backend::add_flat_index after its checks: index and out contiguous int64 of
// the same element count (at least one).
using AddFlatIndexKernel = void(const char* op, const Tensor& index, int64_t n, int64_t step,
                                Tensor& out);

namespace cpu {
AddFlatIndexKernel add_flat_index;
// The positions of the nonzero elements of contiguous host x (any dtype) of `shape`: flat
// offsets [count], or coordinates [count, dims].
Tensor nonzero(const Tensor& x, const Shape& shape, bool flat);
}  // namespace cpu

namespace cuda {
AddFlatIndexKernel add_flat_index;
}  // namespace cuda

}  // namespace loom
