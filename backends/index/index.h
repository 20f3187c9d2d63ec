// The indexing kernels, on a contiguous [outer, n, inner] view with int64 indices along the
// middle axis:
//   index_select  out[o, j, i] = x[o, index[j], i]             index [k]
//   index_add     out[o, index[j], i] += src[o, j, i]          (the backward of index_select)
//   index_copy    out[o, index[j], i] = src[o, j, i]           (any element type, bfloat16 too)
//   move_rows     out[to[j], i] = out[from[j], i], in place      (every row read before any write)
//   gather        out[o, j, i] = x[o, index[o, j, i], i]       index [outer, k, inner]
//   scatter_add   out[o, index[o, j, i], i] += src[o, j, i]    (the backward of gather)
//   scatter       out[o, index[o, j, i], i] = src[o, j, i]     (torch.scatter: one write wins)
// The checks, the public methods and the CPU loops are in index.cpp, the CUDA kernels in
// index.cu.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace loom {

// The arguments of the Backend method of the same name, after its checks: x (or src) and the
// index contiguous, at least one index. Each kernel checks the index values against [0, n)
// itself.
using IndexKernel = void(const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                         const Tensor& index, Tensor& out);

namespace cpu {
IndexKernel index_select, index_add, index_copy, gather, scatter_add, scatter;
}  // namespace cpu

namespace cpu {
// Backend::move_rows on the CPU, after its checks: out a matrix of n rows of inner elements
// (padded rows too), from and to contiguous, of one length k > 0.
void move_rows(const Tensor& from, const Tensor& to, int64_t n, int64_t inner, Tensor& out);
}  // namespace cpu

namespace cuda {
IndexKernel index_select, index_add, index_copy, gather, scatter_add, scatter;
}  // namespace cuda

}  // namespace loom
