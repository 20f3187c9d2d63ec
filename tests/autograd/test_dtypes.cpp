// The dtype behaviour PyTorch's golden values do not pin down by themselves (test_golden_dtypes.cpp
// has those): casts that round-trip, item<T>, printing, that a number keeps today's meaning on
// float tensors, integer division by zero, the old float32 masks still accepted, and gradients
// through where and masked_fill with Bool masks checked against finite differences.
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <vector>

#include "test_util.h"

using namespace loom;
using loom::testing::check_close;
using loom::testing::gradcheck;

TEST_CASE("Bool is a one-byte dtype named bool") {
  CHECK(element_size(DType::Bool) == 1);
  CHECK(std::string(dtype_name(DType::Bool)) == "bool");
  CHECK_FALSE(is_floating_point(DType::Bool));
  const Tensor m = zeros({2, 3}, DType::Bool);
  CHECK(m.dtype() == DType::Bool);
  CHECK(m.to_vector_bool() == std::vector<bool>(6, false));
  CHECK(ones({2}, DType::Bool).to_vector_bool() == std::vector<bool>{true, true});
}

TEST_CASE("casts round-trip among float32, int64, bfloat16 and bool") {
  const Tensor m = tensor({1, 0, 1, 1, 0}, {5}).to(DType::Bool);
  for (DType t : {DType::Float32, DType::Int64, DType::BFloat16, DType::Bool})
    CHECK(m.to(t).to(DType::Bool).to_vector_bool() == m.to_vector_bool());
  const Tensor ids = tensor_i64({-5, 0, 7, 1 << 20}, {4});
  CHECK(ids.to(DType::Float32).to(DType::Int64).to_vector_i64() == ids.to_vector_i64());
  // A strided (transposed) source and a broadcast one go through the same conversion.
  const Tensor x = tensor({0.0f, 2.0f, -1.0f, 0.0f, 0.5f, 0.0f}, {2, 3});
  CHECK(x.t().to(DType::Bool).to_vector_bool() ==
        std::vector<bool>{false, false, true, true, true, false});
  CHECK(scalar_tensor(3.0f).expand({3}).to(DType::Bool).to_vector_bool() ==
        std::vector<bool>(3, true));
  // NaN is nonzero, so it is true, in float32 and bfloat16 alike (torch.tensor(nan).bool()).
  const Tensor nan = full({2}, std::nanf(""));
  CHECK(nan.to(DType::Bool).to_vector_bool() == std::vector<bool>{true, true});
  CHECK(nan.to(DType::BFloat16).to(DType::Bool).to_vector_bool() == std::vector<bool>{true, true});
}

TEST_CASE("item<T> converts the one element") {
  CHECK(scalar_tensor(2.75f).item<float>() == 2.75f);
  CHECK(scalar_tensor(2.75f).item<double>() == 2.75);
  CHECK(scalar_tensor(-2.75f).item<int64_t>() == -2);  // truncation toward zero
  CHECK(scalar_tensor(0.25f).item<bool>());
  CHECK_FALSE(scalar_tensor(0.0f).item<bool>());
  CHECK(scalar_tensor(std::nanf("")).item<bool>());
  const int64_t big = (int64_t{1} << 62) + 1;  // beyond float's precision: read exactly
  CHECK(tensor_i64({big}, {1}).item<int64_t>() == big);
  CHECK(tensor_i64({-7}, {}).item<int>() == -7);
  CHECK(ones({1, 1}, DType::Bool).item<int64_t>() == 1);
  CHECK(scalar_tensor(1.5f).to(DType::BFloat16).item<float>() == 1.5f);
  CHECK(scalar_tensor(3.0f).item() == 3.0f);  // the float item() of before
}

TEST_CASE("a Bool tensor prints its elements as True and False") {
  std::ostringstream out;
  out << tensor({1, 0}, {2}).to(DType::Bool);
  CHECK(out.str() == "tensor([True, False], shape=[2], dtype=bool)");
}

TEST_CASE("a number keeps its meaning on float tensors and follows Scalar rules on int64") {
  const Tensor x = tensor({1.0f, -2.0f, 4.0f}, {3});
  check_close(x * 0.5f, tensor({0.5f, -1.0f, 2.0f}, {3}), 0, 0, "x * 0.5f");
  check_close(x * 2, tensor({2.0f, -4.0f, 8.0f}, {3}), 0, 0, "x * 2");
  check_close(2 * x, tensor({2.0f, -4.0f, 8.0f}, {3}), 0, 0, "2 * x");
  check_close(x / 4, tensor({0.25f, -0.5f, 1.0f}, {3}), 0, 0, "x / 4");
  check_close(1 - x, tensor({0.0f, 3.0f, -3.0f}, {3}), 0, 0, "1 - x");
  check_close(2.0 / x, tensor({2.0f, -1.0f, 0.5f}, {3}), 0, 0, "2.0 / x");
  CHECK((x * size_t{3}).dtype() == DType::Float32);
  CHECK((x.to(DType::BFloat16) * 0.5).dtype() == DType::BFloat16);
  const Tensor ids = tensor_i64({3, -4, 5}, {3});
  CHECK((ids * 2).dtype() == DType::Int64);
  CHECK((ids * 2).to_vector_i64() == std::vector<int64_t>{6, -8, 10});
  CHECK((ids * 2.0f).dtype() == DType::Float32);
  check_close(ids / 2, tensor({1.5f, -2.0f, 2.5f}, {3}), 0, 0, "ids / 2");
  CHECK((1 - ids).to_vector_i64() == std::vector<int64_t>{-2, 5, -4});
  // Values beyond float32's 24 bits survive int64 arithmetic with a number.
  const int64_t big = (int64_t{1} << 40) + 1;
  CHECK((tensor_i64({big}, {1}) + 1).item<int64_t>() == big + 1);
}

TEST_CASE("the masks older code builds keep working") {
  const Tensor x = tensor({1.0f, -2.0f, 3.0f, -4.0f}, {4});
  const Tensor mask = x > 0.0f;
  CHECK(mask.dtype() == DType::Bool);
  check_close(mask * x, tensor({1.0f, 0.0f, 3.0f, 0.0f}, {4}), 0, 0, "mask * x");
  check_close(x * (mask * 0.5f), tensor({0.5f, 0.0f, 1.5f, 0.0f}, {4}), 0, 0, "x * mask * 0.5");
  CHECK(mask.sum().item() == 2.0f);
  CHECK(mask.sum().dtype() == DType::Int64);
  CHECK(mask.to(DType::Float32).mean().item() == 0.5f);
  // float32 and int64 masks are still taken by masked_fill and where (nonzero = fill).
  const Tensor float_mask = tensor({0.0f, 1.0f, 0.0f, 2.0f}, {4});
  check_close(masked_fill(x, float_mask, 9.0f), tensor({1.0f, 9.0f, 3.0f, 9.0f}, {4}), 0, 0,
              "float mask");
  check_close(masked_fill(x, tensor_i64({1, 0, 0, 0}, {4}), 9.0f),
              tensor({9.0f, -2.0f, 3.0f, -4.0f}, {4}), 0, 0, "int64 mask");
  check_close(where(float_mask, x, zeros({})), tensor({0.0f, -2.0f, 0.0f, -4.0f}, {4}), 0, 0,
              "where with a float cond");
  // masked_fill on bfloat16 and int64 tensors keeps their dtype.
  CHECK(masked_fill(x.to(DType::BFloat16), mask, 0.0f).dtype() == DType::BFloat16);
  CHECK(masked_fill(tensor_i64({1, 2, 3, 4}, {4}), mask, -1).to_vector_i64() ==
        std::vector<int64_t>{-1, 2, -1, 4});
}

TEST_CASE("comparisons of bfloat16 with a number round the number to bfloat16, as PyTorch") {
  const Tensor x = full({1}, 0.1f).to(DType::BFloat16);
  CHECK((x == 0.1).item<bool>());  // both sides are bfloat16(0.1)
  CHECK_FALSE((x.to(DType::Float32) == 0.1f).item<bool>());
}

TEST_CASE("gradients flow through where and masked_fill with Bool masks") {
  const Tensor w = randn({3, 4});
  const Tensor cond = rand({3, 4}) > 0.5f;
  auto weighted = [&](const Tensor& out) { return sum(out * w); };
  gradcheck([&](const std::vector<Tensor>& in) { return weighted(where(cond, in[0], in[1])); },
            {randn({3, 4}), randn({4})}, 1e-2f, 2e-2f, 2e-3f, "where(bool, x, y)");
  gradcheck([&](const std::vector<Tensor>& in) { return weighted(where(cond, in[0], 1.5f)); },
            {randn({3, 4}).t().contiguous().t()}, 1e-2f, 2e-2f, 2e-3f, "where(bool, x, 1.5)");
  gradcheck([&](const std::vector<Tensor>& in) { return weighted(where(cond, 0, in[0])); },
            {randn({3, 1})}, 1e-2f, 2e-2f, 2e-3f, "where(bool, 0, x)");
  gradcheck([&](const std::vector<Tensor>& in) { return weighted(in[0].masked_fill(cond, -3.0f)); },
            {randn({4, 3}).t()}, 1e-2f, 2e-2f, 2e-3f, "masked_fill(x.t(), bool, v)");
  gradcheck(
      [&](const std::vector<Tensor>& in) {
        return weighted(masked_fill(in[0], cond.narrow(0, 0, 1), 2.0f));
      },
      {randn({3, 4})}, 1e-2f, 2e-2f, 2e-3f, "masked_fill with a broadcast mask");
  // A Bool mask times a float tensor: the mask gets no gradient, the tensor the mask.
  gradcheck([&](const std::vector<Tensor>& in) { return weighted(cond * in[0] + in[0] * cond); },
            {randn({3, 4})}, 1e-2f, 2e-2f, 2e-3f, "mask * x");
  // where promotes an int64 operand to the float one, whose gradient still flows.
  gradcheck(
      [&](const std::vector<Tensor>& in) {
        return weighted(where(cond, tensor_i64({1, 2, 3, 4}, {4}), in[0]));
      },
      {randn({3, 4})}, 1e-2f, 2e-2f, 2e-3f, "where(bool, int64, x)");
}

TEST_CASE("rounding division by zero: IEEE for floats, no trap for INT64_MIN / -1") {
  // Floats divide by zero as IEEE does.
  const Tensor q = div(tensor({1.0f, -1.0f}, {2}), zeros({2}), "floor");
  CHECK(q.to_vector() == std::vector<float>{INFINITY, -INFINITY});
  // INT64_MIN / -1 wraps instead of trapping.
  const int64_t lowest = std::numeric_limits<int64_t>::min();
  CHECK(div(tensor_i64({lowest}, {1}), -1, "trunc").item<int64_t>() == lowest);
}
