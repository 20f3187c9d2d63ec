// Every invalid argument throws loom::Error whose message names the op and the shapes/values.
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

TEST_CASE("creation errors") {
  expect_error([] { tensor({1, 2, 3}, {2, 2}); }, {"tensor", "3 values", "[2,2]"});
  expect_error([] { tensor_i64({1}, {2}); }, {"tensor_i64", "[2]"});
  expect_error([] { zeros({2, -1}); }, {"full", "[2,-1]"});
  expect_error([] { randint(5, 5, {2}); }, {"randint", "[5, 5)"});
  expect_error([] { arange(-1); }, {"arange", "-1"});
  expect_error([] { zeros({2, 3}).item(); }, {"item", "[2,3]"});
  expect_error([] { set_num_threads(0); }, {"set_num_threads"});
}

TEST_CASE("elementwise and broadcasting errors") {
  expect_error([] { zeros({2, 3}) + zeros({4}); }, {"add", "[2,3]", "[4]"});
  // float32 * int64 promotes (autograd/ops_dtype.h); integer powers and bool subtraction do not.
  expect_error([] { pow(arange(2), arange(2)); }, {"pow", "int64"});
  expect_error([] { exp(arange(2)); }, {"exp", "int64"});
  expect_error([] { zeros({2}) - (arange(2) > 0); }, {"sub", "bool"});
  expect_error([] { clamp(zeros({2}), 1.0f, 0.0f); }, {"clamp", "min"});
  expect_error([] { where(ones({3}), zeros({2}), zeros({2})); }, {"where", "[3]", "[2]"});
  expect_error([] { masked_fill(zeros({2}), ones({3, 2}), 0.0f); },
               {"masked_fill", "[3,2]", "[2]"});
  expect_error([] { Tensor() + zeros({1}); }, {"add", "undefined"});
}

TEST_CASE("reduction and softmax errors") {
  expect_error([] { sum(zeros({2, 3}), 2); }, {"sum", "dim 2", "2 dims"});
  expect_error([] { max(zeros({2, 0}), 1); }, {"max", "[2,0]"});
  expect_error([] { softmax(zeros({2}), -2); }, {"softmax", "dim -2"});
  expect_error([] { argmax(arange(3), 0); }, {"argmax", "int64"});
  expect_error([] { sum_to(zeros({2, 3}), {4}); }, {"sum_to", "[2,3]", "[4]"});
  expect_error([] { var(zeros({1, 3}), 0); }, {"var", "[1,3]"});
}

TEST_CASE("matmul errors") {
  expect_error([] { matmul(zeros({2, 3}), zeros({4, 5})); }, {"matmul", "[2,3]", "[4,5]"});
  expect_error([] { matmul(zeros({2, 2, 3}), zeros({3, 3, 4})); }, {"matmul", "[2]", "[3]"});
  expect_error([] { matmul(zeros({}), zeros({2})); }, {"matmul", "at least 1 dim"});
  expect_error([] { matmul(zeros({2}), arange(2)); }, {"matmul", "int64"});
}

TEST_CASE("view and layout errors") {
  expect_error([] { zeros({2, 3}).reshape({4, 2}); }, {"reshape", "[4,2]", "size 6"});
  expect_error([] { zeros({2, 3}).reshape({-1, -1}); }, {"reshape", "-1"});
  expect_error([] { zeros({2, 3}).transpose(0, 1).view({6}); }, {"view", "not contiguous"});
  expect_error([] { zeros({2, 3}).narrow(1, 2, 2); }, {"narrow", "size 3"});
  expect_error([] { zeros({2, 3}).permute({0, 0}); }, {"permute", "repeated"});
  expect_error([] { zeros({2, 3}).permute({0}); }, {"permute", "[2,3]"});
  expect_error([] { zeros({2, 3}).expand({4, 3, 2}); }, {"expand", "[2,3]", "[4,3,2]"});
  expect_error([] { zeros({2, 3}).select(0, 2); }, {"select", "index 2"});
  expect_error([] { zeros({2, 3}).transpose(0, 3); }, {"transpose", "dim 3"});
  expect_error([] { cat({zeros({2, 3}), zeros({3, 3})}, 1); }, {"cat", "[2,3]", "[3,3]"});
  expect_error([] { cat({}, 0); }, {"cat", "non-empty"});
  expect_error([] { stack({zeros({2}), zeros({3})}); }, {"stack", "[2]", "[3]"});
  expect_error([] { tril(zeros({3})); }, {"tril", "[3]"});
}

TEST_CASE("indexing errors") {
  expect_error([] { index_select(zeros({3, 2}), 0, tensor({0}, {1})); }, {"index_select", "int64"});
  expect_error([] { index_select(zeros({3, 2}), 0, tensor_i64({3}, {1})); }, {"index_select", "3"});
  expect_error([] { embedding(zeros({4, 2}), tensor_i64({-1}, {1})); }, {"index_select", "-1"});
  expect_error([] { embedding(zeros({4}), tensor_i64({0}, {1})); }, {"embedding", "[4]"});
  expect_error([] { gather(zeros({2, 3}), 1, tensor_i64({0}, {1})); }, {"gather", "[1]", "[2,3]"});
  expect_error([] { gather(zeros({2, 3}), 1, tensor_i64({0, 5}, {2, 1})); }, {"gather", "5"});
}

TEST_CASE("nn op errors") {
  expect_error([] { layer_norm(zeros({2, 3}), ones({4}), zeros({4})); },
               {"layer_norm", "[4]", "[2,3]"});
  expect_error([] { cross_entropy(zeros({2, 3}), tensor_i64({0}, {1})); },
               {"cross_entropy", "[2,3]", "[1]"});
  expect_error([] { cross_entropy(zeros({2, 3}), tensor({0, 1}, {2})); },
               {"cross_entropy", "int64"});
  expect_error([] { cross_entropy(zeros({2, 3}), tensor_i64({0, 3}, {2})); },
               {"cross_entropy", "3"});
  expect_error([] { dropout(zeros({2}), 1.5f, true); }, {"dropout", "1.5"});
}
