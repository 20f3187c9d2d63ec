// The dtype ops on CUDA against the CPU: casts to and from bool (contiguous, strided and
// broadcast, so the copy kernel's vector and plain paths both run), comparisons into Bool for
// float32, int64 and bool operands, int64 arithmetic and the rounding divisions, the logical
// and bitwise ops, where and masked_fill with Bool masks (values and gradients), sums of bools
// and any/all/equal/allclose. Every result must be the CPU's exactly: integer and bool results
// have no rounding, and the float ones compute the same formulas. Without a GPU the cases return
// at once (test_cuda.cpp's first case reports that once).
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

// f on the CPU and on CUDA gives the same dtype, shape and values (NaN matching NaN).
void same_on_cuda(const std::string& what, const std::function<Tensor(Device)>& f) {
  INFO(what);
  const Tensor cpu = f(Device::CPU), gpu = f(Device::CUDA);
  CHECK(gpu.device() == Device::CUDA);
  CHECK(gpu.dtype() == cpu.dtype());
  REQUIRE(gpu.shape() == cpu.shape());
  if (is_floating_point(cpu.dtype()))
    check_close(gpu.cpu(), cpu, 0.0f, 0.0f, what);
  else
    CHECK(gpu.to_vector_i64() == cpu.to_vector_i64());
}

// Small integers with ties, as float32 with a NaN, on the device.
Tensor tied(const Shape& shape, uint64_t seed, Device d) {
  std::vector<float> v = philox_tensor(shape, seed).to_vector();
  for (size_t i = 0; i < v.size(); ++i) v[i] = i % 17 == 3 ? NAN : std::round(v[i] * 3.0f);
  return tensor(v, shape).to(d);
}

Tensor ints(const Shape& shape, uint64_t seed, Device d, bool avoid_zero = false) {
  Tensor t = (philox_tensor(shape, seed) * 50.0f).to(DType::Int64);
  if (avoid_zero) t = where(t == 0, tensor_i64({3}, {1}), t);
  return t.to(d);
}

}  // namespace

TEST_CASE("cuda dtypes: casts to and from bool in every layout") {
  LOOM_REQUIRE_GPU();
  for (DType from : {DType::Float32, DType::Int64, DType::BFloat16}) {
    const std::string name = dtype_name(from);
    same_on_cuda("contiguous " + name + " -> bool",
                 [&](Device d) { return tied({67}, 1, d).to(from).to(DType::Bool); });
    same_on_cuda("transposed " + name + " -> bool", [&](Device d) {
      return tied({9, 33}, 2, d).to(from).t().to(DType::Bool);
    });
    same_on_cuda("broadcast " + name + " -> bool", [&](Device d) {
      return tied({1, 40}, 3, d).to(from).expand({5, 40}).to(DType::Bool);
    });
    same_on_cuda("bool -> " + name, [&](Device d) { return (tied({67}, 4, d) > 0).to(from); });
    same_on_cuda("transposed bool -> " + name, [&](Device d) {
      return (tied({9, 33}, 5, d) > 0).t().to(from);
    });
  }
  same_on_cuda("bool fill", [](Device d) { return ones({37}, DType::Bool, d); });
  same_on_cuda("bool contiguous copy", [](Device d) {
    return (tied({5, 7}, 6, d) < 0).t().contiguous();
  });
}

TEST_CASE("cuda dtypes: comparisons give Bool for float32, int64 and bool operands") {
  LOOM_REQUIRE_GPU();
  using Cmp = Tensor (*)(const Tensor&, const Tensor&);
  const std::vector<std::pair<std::string, Cmp>> ops = {{"eq", eq}, {"ne", ne}, {"lt", lt},
                                                        {"le", le}, {"gt", gt}, {"ge", ge}};
  for (const auto& [name, op] : ops) {
    same_on_cuda("float32 " + name, [&](Device d) {
      return op(tied({6, 7}, 7, d), tied({7}, 8, d));
    });
    same_on_cuda("int64 " + name,
                 [&](Device d) { return op(ints({40}, 9, d), ints({40}, 10, d)); });
    same_on_cuda("bool " + name,
                 [&](Device d) { return op(tied({40}, 11, d) > 0, tied({40}, 12, d) > 0); });
    same_on_cuda("bfloat16 with a number " + name, [&](Device d) {
      return op(tied({40}, 13, d).to(DType::BFloat16), scalar_tensor(0.5f, d));
    });
  }
  same_on_cuda("number on the left", [](Device d) { return 1 < ints({30}, 14, d); });
}

TEST_CASE("cuda dtypes: int64 arithmetic and rounding division") {
  LOOM_REQUIRE_GPU();
  using Op = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
      {"true div", [](const Tensor& a, const Tensor& b) { return a / b; }},
      {"floor div", [](const Tensor& a, const Tensor& b) { return div(a, b, "floor"); }},
      {"trunc div", [](const Tensor& a, const Tensor& b) { return div(a, b, "trunc"); }},
  };
  for (const auto& [name, op] : ops) {
    same_on_cuda("int64 " + name, [&](Device d) {
      return op(ints({5, 9}, 15, d), ints({9}, 16, d, true));
    });
  }
  same_on_cuda("float floor div", [](Device d) {
    return div(philox_tensor({50}, 17).to(d) * 7.0f, philox_tensor({50}, 18).to(d), "floor");
  });
  same_on_cuda("float trunc div", [](Device d) {
    return div(philox_tensor({50}, 19).to(d) * 7.0f, philox_tensor({50}, 20).to(d), "trunc");
  });
  same_on_cuda("int64 * 3 and - 2.5", [](Device d) { return ints({20}, 21, d) * 3 - 2.5; });
  same_on_cuda("-int64", [](Device d) { return -ints({20}, 22, d); });
  same_on_cuda("bool + bool, bool * int64", [](Device d) {
    const Tensor m = tied({30}, 23, d) > 0, n = tied({30}, 24, d) < 0;
    return (m + n) * ints({30}, 25, d);
  });
}

TEST_CASE("cuda dtypes: logical and bitwise ops") {
  LOOM_REQUIRE_GPU();
  same_on_cuda("logical_and",
               [](Device d) { return logical_and(tied({40}, 26, d), ints({40}, 27, d)); });
  same_on_cuda("logical_or",
               [](Device d) { return logical_or(tied({40}, 28, d), tied({40}, 29, d)); });
  same_on_cuda("logical_xor", [](Device d) {
    return logical_xor(tied({4, 10}, 30, d), tied({10}, 31, d));
  });
  same_on_cuda("logical_not", [](Device d) { return logical_not(tied({40}, 32, d)); });
  same_on_cuda("int64 & | ^ ~", [](Device d) {
    const Tensor a = ints({40}, 33, d), b = ints({40}, 34, d);
    return ((a & b) | (a ^ ~b)) + (a | b);
  });
  same_on_cuda("bool & | ^ ~", [](Device d) {
    const Tensor m = tied({40}, 35, d) > 0, n = tied({40}, 36, d) > 0;
    return (m & n) | (~m ^ n);
  });
}

TEST_CASE("cuda dtypes: where and masked_fill with Bool masks, values and gradients") {
  LOOM_REQUIRE_GPU();
  auto run = [](Device d, bool masked) {
    const Tensor cond = tied({4, 6}, 37, d) > 0;
    Tensor x = philox_tensor({4, 6}, 38).to(d).detach().requires_grad_();
    Tensor y = philox_tensor({6}, 39).to(d).detach().requires_grad_();
    const Tensor out = masked ? x.masked_fill(cond, -2.0f) * y : where(cond, x, y);
    sum(out * philox_tensor({4, 6}, 40).to(d)).backward();
    return std::vector<Tensor>{out, x.grad(), y.grad()};
  };
  for (bool masked : {false, true}) {
    const std::vector<Tensor> cpu = run(Device::CPU, masked), gpu = run(Device::CUDA, masked);
    for (size_t i = 0; i < cpu.size(); ++i)
      check_close(gpu[i].cpu(), cpu[i], 0.0f, 0.0f,
                  std::string(masked ? "masked_fill" : "where") + " tensor " + std::to_string(i));
  }
  same_on_cuda("where on int64 and bool values", [](Device d) {
    const Tensor cond = tied({30}, 41, d) > 0;
    return where(cond, ints({30}, 42, d), 7) + where(cond, cond, ~cond);
  });
  same_on_cuda("masked_fill on int64 with a float32 mask", [](Device d) {
    return masked_fill(ints({30}, 43, d), tied({30}, 44, d).abs(), -1);
  });
}

TEST_CASE("cuda dtypes: sums of bools, any, all, equal and allclose") {
  LOOM_REQUIRE_GPU();
  same_on_cuda("sum of bool", [](Device d) { return (tied({7, 9}, 45, d) > 0).sum(); });
  same_on_cuda("sum of bool along a dim", [](Device d) {
    return (tied({7, 9}, 46, d) > 0).sum(1);
  });
  same_on_cuda("any / all", [](Device d) {
    const Tensor x = tied({7, 9}, 47, d);
    return stack(
        {any(x, 1).to(DType::Int64), all(x, 1).to(DType::Int64), any(x > 2, 1).to(DType::Int64)});
  });
  const Tensor x = philox_tensor({50}, 48);
  CHECK(equal(x.cuda(), x.cuda()));
  CHECK_FALSE(equal(x.cuda(), (x + 1e-3f).cuda()));
  CHECK(allclose(x.cuda(), (x + 1e-7f).cuda()));
  CHECK_FALSE(allclose(x.cuda(), (x + 1e-2f).cuda()));
  CHECK(any(x.cuda() > 0).item<bool>());
}
