// Invalid arguments of the selection, sorting and random ops (autograd/selection.h): each throws
// loom::Error whose message names the op and the offending shape, dtype or value.
#include <cmath>

#include "test_util.h"

using namespace loom;
using namespace loom::testing;

TEST_CASE("topk, sort and argsort reject a bad k, dim or dtype") {
  expect_error([] { topk(zeros({3, 4}), 5); }, {"topk", "k = 5", "size 4", "[3,4]"});
  expect_error([] { topk(zeros({3, 4}), -1, 0); }, {"topk", "k = -1", "size 3"});
  expect_error([] { topk(zeros({3, 4}), 1, 2); }, {"topk", "dim 2", "2 dims"});
  expect_error([] { sort(zeros({3}), -2); }, {"sort", "dim -2"});
  expect_error([] { argsort(Tensor()); }, {"sort", "undefined"});
  expect_error([] { zeros({2}).topk(1, 1); }, {"topk", "dim 1"});
}

TEST_CASE("amax, amin and min reject repeated or bad dims, integers and empty dims") {
  expect_error([] { amax(zeros({2, 3}), {1, -1}); }, {"amax", "dim 1", "more than once"});
  expect_error([] { amin(zeros({2, 3}), {2}); }, {"amin", "dim 2"});
  expect_error([] { amax(arange(3)); }, {"amax", "float32", "int64"});
  expect_error([] { amin(zeros({2, 0}), {1}); }, {"amin", "empty", "[2,0]"});
  expect_error([] { min(zeros({0})); }, {"min", "empty", "[0]"});
}

TEST_CASE("scatter rejects bad index dtypes, shapes and mismatched dtypes") {
  const Tensor index = tensor_i64({0, 1}, {1, 2});
  expect_error([] { scatter(zeros({2, 2}), 0, zeros({1, 2}), ones({1, 2})); },
               {"scatter", "int64", "float32"});
  expect_error([&] { scatter(zeros({2, 2}), 0, index, ones({1, 1})); },
               {"scatter", "[1,2]", "[2,2]", "[1,1]"});
  expect_error([&] { scatter(zeros({2, 1}), 0, index, 1.0f); }, {"scatter", "[1,2]", "[2,1]"});
  expect_error([&] { scatter(zeros({2, 2}), 0, index.reshape({2}), ones({2})); },
               {"scatter", "[2]", "[2,2]"});
  expect_error([&] { scatter(zeros({2, 2}), 0, index, index); },
               {"scatter", "float32", "int64"});
  expect_error([&] { scatter(zeros({2, 2}), 2, index, ones({1, 2})); }, {"scatter", "dim 2"});
  expect_error([] { scatter(zeros({2, 2}), 0, tensor_i64({0, 2}, {1, 2}), ones({1, 2})); },
               {"scatter", "index 2", "size 2"});
}

TEST_CASE("one_hot rejects non-integer input and classes out of range") {
  expect_error([] { one_hot(zeros({3})); }, {"one_hot", "int64", "float32", "[3]"});
  expect_error([] { one_hot(tensor_i64({0, -1}, {2})); }, {"one_hot", "non-negative", "-1"});
  expect_error([] { one_hot(tensor_i64({0, 5}, {2}), 3); }, {"one_hot", "num_classes = 3", "5"});
  expect_error([] { one_hot(zeros({0}, DType::Int64)); }, {"one_hot", "empty", "[0]"});
  expect_error([] { one_hot(arange(2), -2); }, {"one_hot", "-2"});
}

TEST_CASE("randperm, bernoulli and multinomial reject bad sizes, probabilities and weights") {
  expect_error([] { randperm(-1); }, {"randperm", "-1"});
  expect_error([] { bernoulli(tensor({0.5f, 1.5f}, {2})); }, {"bernoulli", "[0, 1]", "1.5"});
  expect_error([] { bernoulli(tensor({NAN}, {1})); }, {"bernoulli", "[0, 1]", "nan"});
  expect_error([] { bernoulli(arange(2)); }, {"bernoulli", "int64", "[2]"});
  expect_error([] { bernoulli(zeros({2}), 2.0f); }, {"bernoulli", "[0, 1]", "2"});
  expect_error([] { multinomial(tensor({1.0f, -1.0f}, {2}), 1); },
               {"multinomial", "non-negative", "-1"});
  expect_error([] { multinomial(tensor({1.0f, INFINITY}, {2}), 1); },
               {"multinomial", "finite", "inf"});
  expect_error([] { multinomial(tensor({1.0f, NAN}, {2}), 1); }, {"multinomial", "nan"});
  expect_error([] { multinomial(tensor({1.0f, 0.0f, 2.0f}, {3}), 3); },
               {"multinomial", "2 nonzero", "num_samples = 3"});
  expect_error([] { multinomial(ones({2}), 3); },
               {"multinomial", "num_samples = 3", "2 categories"});
  expect_error([] { multinomial(zeros({2, 2}), 1, true); }, {"multinomial", "sums to 0"});
  expect_error([] { multinomial(ones({2, 2, 2}), 1); }, {"multinomial", "[2,2,2]"});
  expect_error([] { multinomial(ones({2, 0}), 1); }, {"multinomial", "empty", "[2,0]"});
  expect_error([] { multinomial(ones({2}), 0, true); }, {"multinomial", "num_samples = 0"});
  expect_error([] { multinomial(arange(2), 1); }, {"multinomial", "int64"});
}

TEST_CASE("normal_ and uniform_ reject bad bounds, integer tensors and leaves that need grad") {
  expect_error([] { zeros({2}).normal_(0.0f, -1.0f); }, {"normal_", "std", "-1"});
  expect_error([] { uniform_(zeros({2}), 3.0f, 1.0f); }, {"uniform_", "3", "1"});
  expect_error([] { arange(3).uniform_(); }, {"uniform_", "int64", "[3]"});
  expect_error([] { zeros({2}).requires_grad_().normal_(); }, {"normal_", "leaf", "NoGradGuard"});
  expect_error([] { normal_(Tensor()); }, {"normal_", "undefined"});
}
