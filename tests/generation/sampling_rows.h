// Logits for the next-token sampling tests (tests/generation/test_sampling.cpp and the CUDA parity
// test, tests/cuda/test_cuda_sampling.cpp).
#pragma once

#include <cmath>
#include <vector>

#include "loom.h"

namespace loom::testing {

// rows x vocab logits, 3 N(0, 1) from the global generator: smooth rows, or rows rounded to
// halves, full of ties (at the maximum, at the k-th value, at the top-p cut).
inline Tensor sampling_rows(int64_t rows, int64_t vocab, bool with_ties) {
  std::vector<float> v = (randn({rows, vocab}) * 3.0f).to_vector();
  if (with_ties)
    for (float& x : v) x = std::round(x * 2.0f) / 2.0f;
  return tensor(v, {rows, vocab});
}

}  // namespace loom::testing
