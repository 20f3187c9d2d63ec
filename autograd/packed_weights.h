// PackedWeightsGuard: decoding multiplies the same weights token after token. On the CPU a
// Linear's product x W^T of more than a few rows copies W^T into rows on every call, in blocks
// (backends/gemm/tiled_gemm.h: its kernel reads op(B) row by row); inside this guard a Linear
// whose weight is a parameter keeps that copy, W^T [in, out] made once, for the guard's life,
// so a decode transposes each weight once rather than once per token (the product may still
// copy blocks of the kept W^T into its buffer, a plain copy where a transpose was, as it does
// for a product of at most 128 rows: tiled_gemm.cpp's read_about_once). Beam search and
// generation open one around their loops; a program that runs its own loop of forward passes
// with fixed weights (evaluation, serving) can too:
//
//   {
//     NoGradGuard no_grad;
//     PackedWeightsGuard packed;  // the weights do not change until it closes
//     for (...) logits = model.forward(batch);
//   }
//
// A copy is checked against the weight's version counter on every use, so a weight changed in
// place (an optimizer's step, copy_) is copied again rather than read stale; what the counter
// cannot see (writes through data_ptr) is the caller's to avoid while the guard is open. The
// copies are freed when the outermost guard of the thread closes. While gradients are recorded,
// on a GPU, in bfloat16, for a single row (a matrix-vector product) and for a few rows (which
// read W where it lies), nothing is copied: products run as without the guard.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace loom {

class PackedWeightsGuard {
 public:
  PackedWeightsGuard();
  ~PackedWeightsGuard();
  PackedWeightsGuard(const PackedWeightsGuard&) = delete;
  PackedWeightsGuard& operator=(const PackedWeightsGuard&) = delete;

  // How many weights this thread's open guards hold copies of (0 with none open).
  static int64_t cached();
};

namespace detail {

// For linear(x, weight) with `rows` rows of x: W^T [in, out] as a view of the guard's copy of
// `weight` [out, in] (made on first use, again after an in-place change), or an undefined
// Tensor where the product reads the weight as it is (no guard open, gradients being recorded,
// a weight that is not a float32 CPU parameter, or a product that would not copy it).
Tensor packed_weight_t(const Tensor& weight, int64_t rows);

}  // namespace detail
}  // namespace loom
