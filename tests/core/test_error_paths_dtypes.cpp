// Error paths of the dtype ops (autograd/ops_dtype.h and the promotion in the arithmetic): each
// is a loom::Error naming the op and the dtypes, shapes or values at fault, where PyTorch raises.
#include <cmath>
#include <cstdint>

#include "test_util.h"

using namespace loom;
using loom::testing::expect_error;

TEST_CASE("subtraction and negation refuse bool tensors, as PyTorch") {
  const Tensor m = tensor({1, 0, 1}, {3}) > 0.5f;
  expect_error([&] { m - m; }, {"sub", "bool", "[3]", "logical_xor"});
  expect_error([&] { m - 1; }, {"sub", "bool", "~"});
  expect_error([&] { 1.0f - m; }, {"sub", "bool", "logical_not"});
  expect_error([&] { ones({3}) - m; }, {"sub", "bool"});
  expect_error([&] { -m; }, {"neg", "bool"});
}

TEST_CASE("mean, pow and the floating-only ops refuse integer tensors") {
  const Tensor ids = tensor_i64({1, 2, 3}, {3});
  expect_error([&] { mean(ids); }, {"mean", "int64"});
  expect_error([&] { mean(ids > 1); }, {"mean", "bool"});
  expect_error([&] { pow(ids, ids); }, {"pow", "int64"});
  expect_error([&] { exp(ids > 1); }, {"exp", "bool"});
  expect_error([&] { (ids > 1).requires_grad_(); }, {"requires_grad_", "bool"});
}

TEST_CASE("bitwise ops take bool and int64 only") {
  const Tensor x = randn({2, 3});
  expect_error([&] { x& x; }, {"bitwise_and", "float32", "[2,3]"});
  expect_error([&] { (x > 0) | x.to(DType::BFloat16); }, {"bitwise_or", "bfloat16"});
  expect_error([&] { ~x; }, {"bitwise_not", "float32"});
}

TEST_CASE("div with a rounding mode checks the mode, bools and zero divisors") {
  const Tensor a = tensor_i64({1, 2, 3}, {3}), b = tensor_i64({1, 0, 2}, {3});
  expect_error([&] { div(a, a, "round"); }, {"div", "rounding_mode", "round"});
  expect_error([&] { div(a, b, "floor"); }, {"div", "division by zero", "[3]", "floor"});
  expect_error([&] { div(a, 0, "trunc"); }, {"div", "division by zero", "trunc"});
  expect_error([&] { div(a > 1, a > 0, "floor"); }, {"div", "bool", "[3]"});
}

TEST_CASE("item<T> refuses tensors of other sizes and values T cannot hold") {
  expect_error([] { ones({2, 2}).item<float>(); }, {"item", "[2,2]", "4 elements"});
  expect_error([] { zeros({0}).item<bool>(); }, {"item", "0 elements"});
  expect_error([] { scalar_tensor(std::nanf("")).item<int64_t>(); }, {"item", "nan", "64-bit"});
  expect_error([] { scalar_tensor(1e30f).item<int64_t>(); }, {"item", "64-bit"});
  expect_error([] { tensor_i64({int64_t{1} << 40}, {1}).item<int>(); }, {"item", "32-bit"});
}

TEST_CASE("comparisons, where and the tests name the op and the shapes") {
  const Tensor x = randn({2, 3}), y = randn({4});
  expect_error([&] { x == y; }, {"eq", "[2,3]", "[4]"});
  expect_error([&] { lt(x, Tensor()); }, {"lt", "undefined"});
  expect_error([&] { where(x > 0, x, y); }, {"where", "[2,3]", "[4]"});
  expect_error([&] { where(Tensor(), x, x); }, {"where", "undefined"});
  expect_error([&] { masked_fill(x, y > 0, 1.0f); }, {"masked_fill", "[4]", "[2,3]"});
  expect_error([&] { logical_and(x, y); }, {"logical_and", "[2,3]", "[4]"});
  expect_error([&] { any(x, 2); }, {"any", "2"});
  expect_error([&] { all(x, -3); }, {"all", "-3"});
  expect_error([&] { allclose(x, x, -1.0); }, {"allclose", "rtol"});
  expect_error([&] { allclose(x, y); }, {"allclose", "[2,3]", "[4]"});
  CHECK_FALSE(equal(x, y));  // shapes differ: not equal, not an error (torch.equal)
}

TEST_CASE("the binary kernel checks its operands' dtypes") {
  Backend& be = cpu_backend();
  const Tensor ints = tensor_i64({1, 2}, {2}), bools = ints > 1, floats = randn({2});
  Tensor out_int = Tensor::empty({2}, DType::Int64), out_bool = Tensor::empty({2}, DType::Bool);
  expect_error([&] { be.binary(BinaryOp::Eq, ints, ints, out_int); },
               {"binary", "comparison", "int64"});
  expect_error([&] { be.binary(BinaryOp::Eq, ints, floats, out_bool); },
               {"binary", "int64", "float32"});
  expect_error([&] { be.binary(BinaryOp::BitAnd, ints, bools, out_int); },
               {"binary", "bitwise", "int64", "bool"});
  expect_error([&] { be.binary(BinaryOp::Div, ints, ints, out_int); }, {"binary", "int64"});
  expect_error([&] { be.binary(BinaryOp::Add, ints, ints, out_bool); },
               {"binary", "bool", "int64"});
}
