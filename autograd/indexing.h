// Indexing as PyTorch users write it (torch::indexing; the entries of an index list are in
// core/tensor_index.h), and the shape ops that go with it. Defined in autograd/ops_indexing.cpp
// (index, index_put, masked_select, nonzero) and autograd/ops_shape.cpp (the rest); every
// tensor-valued op here is differentiable, as PyTorch's.
//
// x.index({...}) reads like x[...] in Python. The entries, left to right, take the dims of x:
//   * an integer i selects index i of its dim (negative counts from the end): the dim goes;
//   * Slice(start, stop, step) keeps every step-th index of [start, stop), the bounds clamped
//     into range as in Python (step > 0);
//   * None inserts a new dim of size 1, Ellipsis stands for as many Slice() as the dims the
//     other entries leave (at most one Ellipsis);
//   * a bool adds a dim of size 1 (true) or 0 (false), as NumPy's x[True];
//   * an int64 tensor picks indices along its dim (negative from the end), a Bool tensor (a
//     mask) the positions where it is true over as many dims as it has, its shape matching
//     theirs; other dtypes are refused.
// With integers, slices, None and Ellipsis only ("basic indexing") the result is a VIEW that
// shares x's storage, so writes through it are seen by x. Tensors ("advanced indexing") give a
// copy: the index tensors (a mask counted as its nonzero() columns) broadcast together to a
// shape B, and the result holds B's dims where the indexed dims were when these are next to
// each other, else first (NumPy's rule, as PyTorch applies it after the integers have selected).
// The gradient of an advanced index adds up the gradient of repeated positions.
//
// index_put_(indices, values) writes values (broadcast to x.index(indices)'s shape) at the
// positions x.index(indices) reads: basic entries through the view, advanced ones as a
// scatter. With accumulate (the tensor-list form) repeated positions add up; without it one
// of the repeated writes wins. On a tensor that requires grad, in place follows PyTorch: a
// leaf is refused, a non-leaf takes the history of index_put (its gradient is right), a view
// of a tensor that requires grad is refused (use index_put, out of place).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace loom {

// --- indexing (free forms of Tensor::index and friends) ------------------------------------
Tensor index(const Tensor& x, std::initializer_list<indexing::TensorIndex> indices);
Tensor index(const Tensor& x, const std::vector<indexing::TensorIndex>& indices);
// torch::index(x, indices): one int64 or Bool tensor per leading dim; an undefined Tensor()
// keeps its dim whole (PyTorch's None in the list).
Tensor index(const Tensor& x, const std::vector<Tensor>& indices);
// x with values written at the positions index(x, indices) reads, out of place, as
// torch::index_put. Gradients: x's is the gradient with the written positions zeroed (all of
// it with accumulate), values' the gradient at those positions summed to values' shape.
Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate = false);
Tensor index_put(const Tensor& x, const std::vector<indexing::TensorIndex>& indices,
                 const Tensor& values, bool accumulate = false);
Tensor index_put(const Tensor& x, std::initializer_list<indexing::TensorIndex> indices,
                 const Tensor& values, bool accumulate = false);
// The view of every step-th index of [start, end) along dim (Tensor::slice, Python's
// x[start:end:step] on one dim): bounds clamped into [0, size] after negative ones are counted
// from the end; step > 0.
Tensor slice(const Tensor& x, int64_t dim = 0, std::optional<int64_t> start = std::nullopt,
             std::optional<int64_t> end = std::nullopt, int64_t step = 1);
// The elements of x where mask (Bool, broadcast with x) is true, in row-major order: 1-D copy.
Tensor masked_select(const Tensor& x, const Tensor& mask);
// The coordinates of x's nonzero (true) elements, int64 [n, x.dim()], in row-major order. Not
// differentiable. On CUDA, as in PyTorch, the count makes the host wait for the GPU.
Tensor nonzero(const Tensor& x);

// --- shape ops ---------------------------------------------------------------------------------
// The views x.select(dim, i) for every i (torch.unbind).
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
// dim of x split into `sizes` (one may be -1), as torch.unflatten: the inverse of flatten.
Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes);
// x tiled repeats[i] times along dim i (torch.Tensor.repeat): repeats may have more entries
// than x has dims (new leading dims). A copy.
Tensor repeat(const Tensor& x, const Shape& repeats);
// x reversed along each of dims (torch.flip). A copy, as PyTorch's.
Tensor flip(const Tensor& x, const Shape& dims);
// Free forms of the Tensor views of the same name (torch::squeeze, ...).
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);

}  // namespace loom
