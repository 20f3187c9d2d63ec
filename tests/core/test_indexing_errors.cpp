// The error paths of torch::indexing and its shape ops (autograd/indexing.h): each names the op
// and the shapes, dtypes or values at fault.
#include "test_util.h"

using namespace loom;
using namespace loom::indexing;
using loom::testing::expect_error;

TEST_CASE("index refuses what PyTorch refuses, naming the op and the shapes") {
  Tensor x = zeros({3, 4});
  expect_error([&] { x.index({3}); }, {"index", "index 3", "size 3", "[3,4]"});
  expect_error([&] { x.index({0, -5}); }, {"index", "-5", "size 4"});
  expect_error([&] { x.index({0, 0, 0}); }, {"index", "too many indices", "[3,4]"});
  expect_error([&] { x.index({Ellipsis, 0, Ellipsis}); }, {"index", "single ellipsis"});
  expect_error([&] { x.index({Slice(None, None, 0)}); }, {"slice", "step", "positive", "0"});
  expect_error([&] { x.index({Slice(None, None, -1)}); }, {"slice", "step", "-1"});
  expect_error([&] { x.index({zeros({2})}); }, {"index", "int64", "bool", "float32", "[2]"});
  expect_error([&] { x.index({tensor_i64({0, 3}, {2})}); }, {"index", "index 3", "size 3"});
  expect_error([&] { x.index({Slice(), tensor_i64({-5}, {1})}); }, {"index", "-5", "size 4"});
  expect_error([&] { x.index({zeros({4}) > 0.0f}); }, {"index", "mask", "[4]", "[3]", "[3,4]"});
  expect_error([&] { x.index({zeros({3, 4, 1}) > 0.0f}); }, {"index", "too many indices"});
  expect_error([&] { x.index({tensor_i64({0, 1}, {2}), tensor_i64({0, 1, 2}, {3})}); },
               {"index", "[2]", "[3]"});
  expect_error([&] { x.index({Tensor()}); }, {"index", "undefined"});
  expect_error([&] { scalar_tensor(1.0f).slice(0, 0, 1); }, {"slice", "0-d"});
}

TEST_CASE("index_put refuses values that do not fit, and in-place writes on leaves") {
  Tensor x = zeros({3, 4});
  expect_error([&] { x.index_put_({0}, ones({3})); }, {"index_put_", "[3]", "[4]"});
  expect_error([&] { x.index_put_({tensor_i64({0, 1}, {2})}, ones({3, 4})); },
               {"index_put_", "[3,4]", "[2,4]"});
  expect_error([&] { x.index_put_({0}, tensor_i64({1, 2, 3, 4}, {4})); },
               {"index_put_", "int64", "float32"});
  expect_error([&] { index_put(x, {tensor_i64({7}, {1})}, ones({4})); }, {"index", "7", "size 3"});
  expect_error([&] { index_put(x, std::vector<Tensor>{zeros({1})}, ones({4})); },
               {"index", "float32"});
  Tensor leaf = zeros({2}).requires_grad_();
  expect_error([&] { leaf.index_put_({0}, 1.0f); }, {"index_put_", "leaf", "in-place", "[2]"});
}

TEST_CASE("masked_select, unbind, unflatten, repeat and flip check their arguments") {
  Tensor x = zeros({2, 3});
  expect_error([&] { masked_select(x, zeros({2, 3})); }, {"masked_select", "bool", "float32"});
  expect_error([&] { masked_select(x, zeros({4}) > 0.0f); }, {"masked_select", "[2,3]", "[4]"});
  expect_error([&] { unbind(x, 2); }, {"unbind", "2", "[2,3]"});
  expect_error([&] { unflatten(x, 1, {2, 2}); }, {"unflatten", "[2,2]", "3"});
  expect_error([&] { unflatten(x, 1, {}); }, {"unflatten", "empty"});
  expect_error([&] { repeat(x, {2}); }, {"repeat", "1 repeats", "[2,3]"});
  expect_error([&] { repeat(x, {2, -1}); }, {"repeat", "negative"});
  expect_error([&] { flip(x, {0, -2}); }, {"flip", "dim 0", "more than once"});
  expect_error([&] { flip(x, {2}); }, {"flip", "2"});
  expect_error([&] { nonzero(Tensor()); }, {"nonzero", "undefined"});
}
