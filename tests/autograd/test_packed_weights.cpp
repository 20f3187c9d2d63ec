// PackedWeightsGuard (autograd/packed_weights.h): inside it, linear() multiplies by a parameter's
// W^T in panels, packed once at its second use, with the same results as without it, to the bit.
#include "autograd/packed_weights.h"

#include <cstring>
#include <utility>
#include <vector>

#include "backends/gemm/tiled_gemm.h"
#include "test_util.h"

using namespace loom;
using loom::testing::check_close;

namespace {

// A Linear's parameters: W [out, in] and b [out], both requiring grad.
struct Params {
  Tensor weight, bias;
};

Params parameters(int64_t out, int64_t in) {
  return {randn({out, in}).requires_grad_(), randn({out}).requires_grad_()};
}

// Whether this build's products of `rows` rows x `out` columns run in loom's tiles (AVX-512):
// then the guard packs a weight at its second use, else never.
int64_t packed_expected(int64_t rows, int64_t out) {
  return cpu::use_tiled_gemm(rows, out) ? 1 : 0;
}

// The same values to the bit (shape too).
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const std::vector<float> x = a.to_vector(), y = b.to_vector();
  return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("PackedWeightsGuard: linear with a weight's panels equals linear without, to the bit") {
  manual_seed(3);
  NoGradGuard no_grad;
  // Widths of whole panels and not (100: the last panel padded), inputs of whole 8 x 8 blocks
  // and not (99); a few rows (decoding's, which read W where it lies without the guard; k of
  // 1,100 summed at once) and more (k in blocks); bias or none, GELU fused.
  struct Case {
    int64_t rows, out, in;
  };
  for (const Case& c : {Case{128, 768, 256}, Case{128, 100, 256}, Case{128, 100, 99},
                        Case{32, 256, 1100}, Case{8, 100, 99}, Case{2, 64, 40}}) {
    CAPTURE(c.rows);
    CAPTURE(c.out);
    CAPTURE(c.in);
    const Params p = parameters(c.out, c.in);
    const Tensor x = randn({c.rows, c.in});
    const Tensor y = linear(x, p.weight, p.bias), y_plain = linear(x, p.weight, Tensor());
    const Tensor y_gelu = linear_activation(x, p.weight, p.bias, UnaryOp::Gelu);
    {
      PackedWeightsGuard packed;
      CHECK(PackedWeightsGuard::cached() == 0);
      CHECK(same_bits(linear(x, p.weight, p.bias), y));  // the first use: read as it is
      CHECK(PackedWeightsGuard::cached() == 0);
      CHECK(same_bits(linear(x, p.weight, p.bias), y));  // the second: packed
      CHECK(PackedWeightsGuard::cached() == packed_expected(c.rows, c.out));
      CHECK(same_bits(linear(x, p.weight, Tensor()), y_plain));
      CHECK(same_bits(linear_activation(x, p.weight, p.bias, UnaryOp::Gelu), y_gelu));
      {
        PackedWeightsGuard nested;  // the same copy: still one
        CHECK(same_bits(linear(x, p.weight, p.bias), y));
      }
      CHECK(PackedWeightsGuard::cached() == packed_expected(c.rows, c.out));
    }
    CHECK(PackedWeightsGuard::cached() == 0);  // the outermost guard frees the copies
  }
}

TEST_CASE("PackedWeightsGuard: a weight changed in place is packed again, never read stale") {
  manual_seed(4);
  NoGradGuard no_grad;
  Params p = parameters(256, 256);
  for (const int64_t rows : {64, 8}) {
    const Tensor x = randn({rows, 256});
    PackedWeightsGuard packed;
    linear(x, p.weight, p.bias);
    const Tensor before = linear(x, p.weight, p.bias);
    check_close(before, matmul(x, p.weight.t()) + p.bias, 1e-5f, 1e-5f);
    CHECK(PackedWeightsGuard::cached() == packed_expected(rows, 256));
    p.weight.mul_(-2.0f);  // an in-place change: the version counter moves
    const Tensor after = linear(x, p.weight, p.bias);
    check_close(after, matmul(x, p.weight.t()) + p.bias, 1e-5f, 1e-5f);
    check_close(after, before * -2.0f + p.bias * 3.0f, 1e-4f, 1e-4f);
    CHECK(PackedWeightsGuard::cached() == packed_expected(rows, 256));
  }
}

TEST_CASE("PackedWeightsGuard: nothing packed where the product reads the weight as it is") {
  manual_seed(5);
  const Params p = parameters(256, 128), once = parameters(256, 128);
  const Tensor plain_weight = p.weight.detach().clone();  // not a parameter: may change any time
  PackedWeightsGuard packed;
  {
    NoGradGuard no_grad;
    for (int i = 0; i < 2; ++i) {
      linear(randn({1, 128}), p.weight, p.bias);       // one row: a matrix-vector product
      linear(randn({64, 128}), plain_weight, p.bias);  // neither a parameter nor kept
    }
    linear(randn({64, 128}), once.weight, once.bias);  // a parameter used once
  }
  // Recording gradients (a training step changes the weights between calls).
  for (int i = 0; i < 2; ++i) CHECK(linear(randn({64, 128}), p.weight, p.bias).requires_grad());
  CHECK(PackedWeightsGuard::cached() == 0);
}

TEST_CASE("PackedWeightsGuard::keep packs a tensor that is not a parameter from its first use") {
  manual_seed(7);
  NoGradGuard no_grad;
  const Params p = parameters(96, 64), q = parameters(96, 64);
  const Tensor stacked = cat({p.weight, q.weight}, 0);  // [192, 64], as a decoder stacks W^Q...
  const Tensor x = randn({16, 64});
  const Tensor want = linear(x, stacked, Tensor());
  PackedWeightsGuard::keep(stacked);  // no guard open: nothing
  {
    PackedWeightsGuard packed;
    CHECK(same_bits(linear(x, stacked, Tensor()), want));
    CHECK(PackedWeightsGuard::cached() == 0);
    PackedWeightsGuard::keep(stacked);
    PackedWeightsGuard::keep(stacked);  // marked once
    CHECK(same_bits(linear(x, stacked, Tensor()), want));
    CHECK(PackedWeightsGuard::cached() == packed_expected(16, 192));
  }
  CHECK(PackedWeightsGuard::cached() == 0);
}

// The copies are the process's: threads that multiply by one weight at once (decoding groups,
// models/beam_search.cpp) read one copy of it, whichever thread opened the guard, and two threads'
// guards that overlap free the copies when the last of them closes.
TEST_CASE("PackedWeightsGuard: the threads of a team share one copy of each weight") {
  manual_seed(8);
  const Params p = parameters(256, 128);
  const Tensor x = randn({32, 128});
  // What a thread of a team computes without a guard (single-threaded, as loom's kernels are
  // inside a team: the bits of a product cut among threads need not be the same in every build).
  Tensor want;
#pragma omp parallel num_threads(2)
  {
    NoGradGuard no_grad;
#pragma omp single
    want = linear(x, p.weight, p.bias);
  }
  const int64_t one = packed_expected(32, 256);
  std::vector<int> same(4, 0);
  {
    PackedWeightsGuard packed;  // opened by the calling thread, which multiplies nothing
#pragma omp parallel for num_threads(4) schedule(static, 1)
    for (int t = 0; t < 4; ++t) {
      if (t == 0) continue;  // (thread 0 is the calling thread)
      NoGradGuard no_grad;  // per thread, as grad mode is
      bool all = true;
      for (int i = 0; i < 3; ++i) all = all && same_bits(linear(x, p.weight, p.bias), want);
      same[static_cast<size_t>(t)] = all ? 1 : 0;
    }
    CHECK(PackedWeightsGuard::cached() == one);  // one copy, not one per thread, nor none
  }
  CHECK(same == std::vector<int>{0, 1, 1, 1});
  CHECK(PackedWeightsGuard::cached() == 0);
  // Guards opened by the team's threads alone: all closed at the end of the region.
#pragma omp parallel num_threads(2)
  {
    NoGradGuard no_grad;
    PackedWeightsGuard packed;
    for (int i = 0; i < 3; ++i) linear(x, p.weight, p.bias);
  }
  CHECK(PackedWeightsGuard::cached() == 0);
}

TEST_CASE("PackedWeightsGuard: the panels are W^T, two vectors of columns each, zeros past out") {
  manual_seed(6);
  NoGradGuard no_grad;
  PackedWeightsGuard packed;
  // 100 x 99: neither side a whole number of 8 x 8 blocks, a last panel of 4 columns; 768 x 256:
  // panels spread over the threads.
  for (const auto& [out, in] : {std::pair<int64_t, int64_t>{100, 99}, {768, 256}}) {
    const Params p = parameters(out, in);
    CHECK_FALSE(detail::packed_weight(p.weight, 128).defined());  // the first use
    const Tensor panels = detail::packed_weight(p.weight, 128);
    if (!cpu::use_tiled_gemm(128, out)) {  // a build without AVX-512 keeps no copy
      CHECK_FALSE(panels.defined());
      continue;
    }
    REQUIRE(panels.defined());
    const int64_t width = cpu::panel_columns(), count = (out + width - 1) / width;
    CHECK(panels.shape() == Shape{count, in, width});
    const std::vector<float> w = p.weight.detach().to_vector(), got = panels.to_vector();
    int64_t wrong = 0;
    for (int64_t j = 0; j < count; ++j)
      for (int64_t r = 0; r < in; ++r)
        for (int64_t c = 0; c < width; ++c) {
          const int64_t column = j * width + c;
          const float want = column < out ? w[static_cast<size_t>(column * in + r)] : 0.0f;
          wrong += got[static_cast<size_t>((j * in + r) * width + c)] != want;
        }
    CHECK(wrong == 0);
  }
}
