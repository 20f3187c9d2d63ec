// Invalid arguments of the reductions over dims, the scans, the elementwise functions with
// parameters and the linear algebra (einsum, outer, bmm, baddbmm, addmm): each throws loom::Error
// whose message names the op and the offending shape, dim or value.
#include <cmath>
#include <optional>

#include "test_util.h"

using namespace loom;
using namespace loom::testing;

TEST_CASE("reductions over dims reject repeated, out-of-range and empty dims") {
  expect_error([] { sum(zeros({2, 3}), {1, -1}); }, {"sum", "dim 1", "more than once", "[2,3]"});
  expect_error([] { mean(zeros({2, 3}), {0, 2}); }, {"mean", "dim 2"});
  expect_error([] { mean(zeros({2, 0}), {1}); }, {"mean", "empty", "[2,0]"});
  expect_error([] { var(zeros({2, 3}), {0, 0}, 1); }, {"var", "more than once"});
  expect_error([] { loom::std(zeros({2, 3}), {3}); }, {"var", "dim 3"});
  expect_error([] { logsumexp(zeros({2, 3}), {-3}); }, {"logsumexp", "dim -3"});
  expect_error([] { norm(zeros({2, 3}), 2, {5}); }, {"norm", "dim 5"});
  expect_error([] { norm(zeros({2, 0}), INFINITY, 1); }, {"norm", "empty dim 1", "[2,0]"});
  expect_error([] { norm(zeros({2}), NAN); }, {"norm", "NaN"});
  expect_error([] { prod(zeros({2, 3}), 2); }, {"prod", "dim 2"});
  expect_error([] { mean(arange(3), {0}); }, {"mean", "float32", "int64"});
}

TEST_CASE("cumsum and cumprod reject a bad dim and integer inputs") {
  expect_error([] { cumsum(zeros({2, 3}), 2); }, {"cumsum", "dim 2"});
  expect_error([] { cumprod(zeros({2, 3}), -3); }, {"cumprod", "dim -3"});
  expect_error([] { cumsum(arange(4), 0); }, {"cumsum", "float32", "int64"});
  expect_error([] { cumsum(Tensor(), 0); }, {"cumsum", "undefined"});
}

TEST_CASE("elementwise functions reject bad parameters") {
  expect_error([] { clamp(zeros({2}), std::nullopt, std::nullopt); },
               {"clamp", "at least one of min and max"});
  expect_error([] { clamp(zeros({2}), 2.0f, 1.0f); }, {"clamp", "min 2", "max 1"});
  expect_error([] { logit(zeros({2}), 0.7f); }, {"logit", "eps", "0.7"});
  expect_error([] { softplus(zeros({2}), 0.0f); }, {"softplus", "beta"});
  expect_error([] { silu(arange(3)); }, {"silu", "float32", "int64"});
}

TEST_CASE("einsum rejects bad equations, operand counts and sizes as PyTorch does") {
  const Tensor a = zeros({2, 3}), b = zeros({3, 4});
  expect_error([&] { einsum("ij,jk->ik", {a}); }, {"einsum", "2 operands", "1 tensors"});
  expect_error(
      [&] {
        einsum("ijk,jk->ik", {a, b});
      },
      {"einsum", "operand 0", "3 subscripts", "2 dims", "[2,3]"});
  expect_error(
      [&] {
        einsum("ij,ik->jk", {a, b});
      },
      {"einsum", "subscript 'i'", "size 3", "2 elsewhere"});
  expect_error([&] { einsum("ij,jk->iz", {a, b}); }, {"einsum", "'z'", "no input dim"});
  expect_error([&] { einsum("ij,jk->ii", {a, b}); }, {"einsum", "'i'", "twice"});
  expect_error([&] { einsum("i1,jk", {a, b}); }, {"einsum", "invalid subscript '1'"});
  expect_error([&] { einsum("i.j,jk", {a, b}); }, {"einsum", "\"...\""});
}

TEST_CASE("outer, bmm, baddbmm and addmm reject wrong ranks and shapes") {
  expect_error([] { outer(zeros({2, 2}), zeros({3})); }, {"outer", "1-D", "[2,2]", "[3]"});
  expect_error([] { bmm(zeros({2, 3}), zeros({3, 4})); }, {"bmm", "[2,3]", "[3,4]"});
  expect_error([] { bmm(zeros({2, 2, 3}), zeros({3, 3, 4})); }, {"bmm", "[2,2,3]", "[3,3,4]"});
  expect_error([] { baddbmm(zeros({5}), zeros({2, 2, 3}), zeros({2, 3, 4})); }, {"baddbmm", "[5]"});
  expect_error(
      [] {
        addmm(zeros({2, 4}), zeros({2, 3}), zeros({2, 4}));
      },
      {"addmm", "[2,3]", "[2,4]"});
  expect_error([] { addmm(zeros({3, 4}), zeros({2, 3}), zeros({3, 4})); }, {"addmm", "[3,4]"});
}
