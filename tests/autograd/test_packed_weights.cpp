// PackedWeightsGuard (autograd/packed_weights.h): inside it, linear() multiplies by a copy of a
// parameter's W^T made once, with the same results as without it.
#include "autograd/packed_weights.h"

#include <utility>

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

// Whether this build's products of `rows` rows copy W^T on every call (AVX-512's kernel): then
// the guard keeps one copy per weight, else none.
int64_t copies_expected(int64_t rows, int64_t out) {
  return cpu::copies_transposed_b(rows, out) ? 1 : 0;
}

}  // namespace

TEST_CASE("PackedWeightsGuard: linear with a weight's copy equals linear without, one copy") {
  manual_seed(3);
  NoGradGuard no_grad;
  // Widths of whole vectors and not (100: the copy's rows are padded), inputs of whole 8 x 8
  // blocks and not (99: the copy's last rows are transposed element by element), bias or none,
  // GELU fused.
  for (const auto& [out, in] : {std::pair<int64_t, int64_t>{768, 256}, {100, 256}, {100, 99}}) {
    const Params p = parameters(out, in);
    const Tensor x = randn({128, in});
    const Tensor y = linear(x, p.weight, p.bias), y_plain = linear(x, p.weight, Tensor());
    const Tensor y_gelu = linear_activation(x, p.weight, p.bias, UnaryOp::Gelu);
    {
      PackedWeightsGuard packed;
      CHECK(PackedWeightsGuard::cached() == 0);
      check_close(linear(x, p.weight, p.bias), y, 1e-6f, 1e-6f);
      CHECK(PackedWeightsGuard::cached() == copies_expected(128, out));
      check_close(linear(x, p.weight, Tensor()), y_plain, 1e-6f, 1e-6f);
      check_close(linear_activation(x, p.weight, p.bias, UnaryOp::Gelu), y_gelu, 1e-6f, 1e-6f);
      {
        PackedWeightsGuard nested;  // the same copy: still one
        check_close(linear(x, p.weight, p.bias), y, 1e-6f, 1e-6f);
      }
      CHECK(PackedWeightsGuard::cached() == copies_expected(128, out));
    }
    CHECK(PackedWeightsGuard::cached() == 0);  // the outermost guard frees the copies
  }
}

TEST_CASE("PackedWeightsGuard: a weight changed in place is copied again, never read stale") {
  manual_seed(4);
  NoGradGuard no_grad;
  Params p = parameters(256, 256);
  const Tensor x = randn({64, 256});
  PackedWeightsGuard packed;
  const Tensor before = linear(x, p.weight, p.bias);
  check_close(before, matmul(x, p.weight.t()) + p.bias, 1e-5f, 1e-5f);
  p.weight.mul_(-2.0f);  // an in-place change: the version counter moves
  const Tensor after = linear(x, p.weight, p.bias);
  check_close(after, matmul(x, p.weight.t()) + p.bias, 1e-5f, 1e-5f);
  check_close(after, before * -2.0f + p.bias * 3.0f, 1e-4f, 1e-4f);
  CHECK(PackedWeightsGuard::cached() == copies_expected(64, 256));
}

TEST_CASE("PackedWeightsGuard: no copy where the product reads the weight as it is") {
  manual_seed(5);
  const Params p = parameters(256, 128);
  const Tensor plain_weight = p.weight.detach().clone();  // not a parameter: may change any time
  PackedWeightsGuard packed;
  {
    NoGradGuard no_grad;
    linear(randn({1, 128}), p.weight, p.bias);   // one row: a matrix-vector product
    linear(randn({8, 128}), p.weight, p.bias);   // a few rows: W read where it lies
    linear(randn({64, 128}), plain_weight, p.bias);
  }
  // Recording gradients (a training step changes the weights between calls).
  const Tensor y = linear(randn({64, 128}), p.weight, p.bias);
  CHECK(y.requires_grad());
  CHECK(PackedWeightsGuard::cached() == 0);
}

TEST_CASE("PackedWeightsGuard: the kept W^T is the weight transposed, with zeros in its padding") {
  manual_seed(6);
  NoGradGuard no_grad;
  PackedWeightsGuard packed;
  // 100 x 99: neither side a whole number of 8 x 8 blocks; 768 x 256: rows of W^T over threads.
  for (const auto& [out, in] : {std::pair<int64_t, int64_t>{100, 99}, {768, 256}}) {
    const Params p = parameters(out, in);
    const Tensor weight_t = detail::packed_weight_t(p.weight, 128);  // [in, out] of padded rows
    if (!cpu::copies_transposed_b(128, out)) {  // a build without AVX-512 keeps no copy
      CHECK_FALSE(weight_t.defined());
      continue;
    }
    REQUIRE(weight_t.defined());
    CHECK(weight_t.shape() == Shape{in, out});
    CHECK(weight_t.equal(p.weight.detach().t()));
    const int64_t row = weight_t.stride(0);
    CHECK(row >= cpu::tile_gemm_padded(out));
    const float* data = weight_t.data_ptr<float>();
    int64_t nonzero = 0;
    for (int64_t r = 0; r < in; ++r)
      for (int64_t c = out; c < row; ++c) nonzero += data[r * row + c] != 0.0f;
    CHECK(nonzero == 0);
  }
}
