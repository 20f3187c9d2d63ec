// PackedWeightsGuard: decoding multiplies the same weights token after token. On the CPU a
// Linear's product x W^T reads W^T by rows of k (backends/gemm/tiled_gemm.h: its tiles load a
// few vectors of op(B)'s row k at each step of k), which W [out, in] does not hold: a product of
// more than a few rows copies W^T into rows on every call, in blocks, and one of a few rows
// reads W where it lies as the broadcast operand of C^T = W x^T, rows of W far apart. Inside
// this guard a Linear whose weight is a parameter keeps W^T in panels (GemmArgs::b_panel), made
// at the weight's second use, once for the guard's life (a weight used once, as an encoder's
// in a decoding, is not worth packing): each panel, two vectors of W^T's columns for every k,
// lies in one piece, so a product reads it in order and copies nothing. The guard changes no
// result, bit for bit. A program that runs its own loop of forward passes with fixed weights
// (evaluation, serving) can open one too; beam search and generation open one around their
// loops:
//
//   {
//     NoGradGuard no_grad;
//     PackedWeightsGuard packed;  // the weights do not change until it closes
//     for (...) logits = model.forward(batch);
//   }
//
// Weights that are not parameters can be marked as fixed with keep(). A copy is checked against
// the weight's version counter on every use, so a weight changed in place (an optimizer's step,
// copy_) is packed again rather than read stale; what the counter cannot see (writes through
// data_ptr) is the caller's to avoid while the guard is open. The copies are the process's, one
// set for all threads (threads decoding with one model at once read one copy of each weight,
// and the cache holds one set rather than one per thread): they serve every thread while any
// guard is open, on any thread, and are freed when the last open guard closes. A copy of a
// weight that nothing else holds any more (a finished decoding's stacked projections, a model
// that is gone) is dropped before a new one is noted, so that one guard can stay open around a
// whole test set's decodings. While gradients are recorded, on a GPU, in bfloat16, for a single
// row (a matrix-vector product) and where the build's products do not use loom's tiles (without
// AVX-512: OpenBLAS), nothing is packed: products run as without the guard.
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

  // How many weights the open guards hold packed copies of (0 with none open).
  static int64_t cached();

  // Marks `weight` [out, in], a tensor that is not a parameter, as fixed while guards are
  // open, so that its products are packed too, from its first use: a decoder's projections
  // stacked once per decoding (models/transformer.cpp's DecoderCache). Nothing when no guard is
  // open. Only what is marked is packed: the guard never packs an activation that happens to be
  // a product's operand.
  static void keep(const Tensor& weight);
};

namespace detail {

// For linear(x, weight) with `rows` rows of x: W^T as the guard's panels of `weight` [out, in],
// a [panels, in, cpu::panel_columns()] tensor (made at the second use, or the first of a kept
// weight; again after an in-place change), or an undefined Tensor where the product reads the
// weight as it is (no guard open, gradients being recorded, a weight that is not a float32 CPU
// parameter or kept, its first use, or a product that does not run in loom's tiles).
Tensor packed_weight(const Tensor& weight, int64_t rows);

}  // namespace detail
}  // namespace loom
