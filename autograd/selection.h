// Selection, sorting and random sampling (autograd/ops_select.cpp, the random ones in
// autograd/ops_creation.cpp), spelled as LibTorch spells them; included from autograd/ops.h.
//
// Orders follow PyTorch: NaN sorts above every number (last ascending, first descending, first
// in topk's largest), -0 and +0 are equal, and equal values keep their index order (a stable
// sort), so topk, sort and argsort give the same indices on every device. The values of topk
// and sort are differentiable: their gradient goes back to the positions the indices name
// (the adjoint of gather). The sorting kernels are backends/sort/.
//
// The random functions draw from the global generator (core/rng.h: Philox counters), so
// manual_seed makes them repeatable, on the CPU and on CUDA; the numbers are loom's, not
// PyTorch's.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace loom {

// --- sorting -------------------------------------------------------------------------------------
// The k largest (largest = false: smallest) elements along dim and their int64 indices, as
// torch.topk. Both have x's shape with k at dim. They come sorted whatever `sorted` says (PyTorch
// leaves the order unspecified when it is false).
ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                   bool sorted = true);
// x sorted along dim (stable), and where each value came from, as torch.sort(stable=True).
ValuesIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false);
// sort(x, dim, descending).indices.
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);

// --- extrema -------------------------------------------------------------------------------------
// The minimum of all elements (0-d); ties share the gradient evenly, as max(x).
Tensor min(const Tensor& x);
// The maximum (minimum) over the dims in `dims` (negative ones count from the end; empty: every
// dim), as torch.amax: NaN propagates, and the gradient is split evenly among the elements
// equal to the result (torch.max(x, dim) sends it all to one of them instead).
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);

// --- scatter -------------------------------------------------------------------------------------
// x with out[..., index[..., j, ...], ...] = src[..., j, ...] along dim (torch.scatter, out of
// place): index int64 of x's rank, no larger than src in any dim nor than x outside dim. With
// repeated indices one of the writes wins (on the CPU the last). The gradient of x is zero at
// the written positions; src's is the gradient gathered from them.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
// int64 x of any shape -> int64 x.shape + [num_classes] with a 1 at each value (torch's
// one_hot); num_classes -1 takes max(x) + 1. Values must lie in [0, num_classes).
Tensor one_hot(const Tensor& x, int64_t num_classes = -1);

// --- random --------------------------------------------------------------------------------------
// A random permutation of 0..n-1 (int64), as torch.randperm.
Tensor randperm(int64_t n, Device device = Device::CPU);
// Float 0/1 draws, 1 with probability p: element-wise from a float tensor of probabilities in
// [0, 1] (torch.bernoulli(p)), or with one p for every element of x's shape (torch.bernoulli(x,
// p)).
Tensor bernoulli(const Tensor& p);
Tensor bernoulli(const Tensor& x, float p);
// num_samples int64 category indices drawn from each row of probs (1-D [k] -> [num_samples];
// 2-D [rows, k] -> [rows, num_samples]) with probability proportional to the weights, which
// need not sum to 1 (torch.multinomial). The weights must be finite and non-negative with a
// positive sum; without replacement no index repeats within a row, and num_samples may not
// exceed the row's count of nonzero weights.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);
// t filled in place with N(mean, std^2) or U[from, to) numbers (Tensor::normal_, uniform_);
// returns t.
Tensor normal_(const Tensor& t, float mean = 0.0f, float std = 1.0f);
Tensor uniform_(const Tensor& t, float from = 0.0f, float to = 1.0f);

}  // namespace loom
