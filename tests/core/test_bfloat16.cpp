// The bfloat16 dtype: its size and name, float32 <-> bfloat16 rounding checked against an
// independent reference on ~400k bit patterns and against PyTorch (tests/golden/gen_bf16.py),
// the int64 conversions, creation, printing, the differentiable cast, and the clear refusal of
// the kernels that do not take it.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "core/bfloat16.h"
#include "io/safetensors.h"
#include "test_util.h"

using namespace loom;
using loom::testing::expect_error;

namespace {

float from_bits(uint32_t bits) { return std::bit_cast<float>(bits); }

// Round to nearest, ties to even, written from the definition rather than with c10's bias
// trick: of the two bfloat16 values around x (x's top 16 bits, and the next one away from zero;
// past the largest finite value that is infinity, which IEEE treats as 2^128 for rounding), the
// nearer one, measured in double; on a tie the one with an even last bit.
uint16_t reference_round(float x) {
  if (std::isnan(x)) return 0x7FC0;
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint16_t low = static_cast<uint16_t>(bits >> 16), high = static_cast<uint16_t>(low + 1);
  if ((bits & 0xFFFF) == 0 || std::isinf(x)) return low;
  auto value = [](uint16_t b) {
    if ((b & 0x7FFF) == 0x7F80) return std::copysign(std::ldexp(1.0, 128), b & 0x8000 ? -1.0 : 1.0);
    return static_cast<double>(from_bits(static_cast<uint32_t>(b) << 16));
  };
  const double d_low = std::fabs(static_cast<double>(x) - value(low));
  const double d_high = std::fabs(value(high) - static_cast<double>(x));
  if (d_low != d_high) return d_low < d_high ? low : high;
  return (low & 1) == 0 ? low : high;
}

// The float32 bit patterns of the test: every upper half with lower halves at and around the
// rounding boundaries (0x8000 is a tie), and with one pseudo-random lower half.
std::vector<uint32_t> tricky_bit_patterns() {
  std::vector<uint32_t> out;
  uint32_t lcg = 12345;
  for (uint32_t hi = 0; hi < 65536; ++hi) {
    lcg = lcg * 1664525u + 1013904223u;
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu, lcg >> 16})
      out.push_back(hi << 16 | lo);
  }
  return out;
}

Tensor floats_from_bits(const std::vector<uint32_t>& bits) {
  Tensor t = Tensor::empty({static_cast<int64_t>(bits.size())}, DType::Float32);
  std::memcpy(t.raw_data(), bits.data(), bits.size() * 4);
  return t;
}

std::vector<uint16_t> bf16_bits(const Tensor& t) {
  REQUIRE(t.dtype() == DType::BFloat16);
  Tensor c = t.contiguous();
  std::vector<uint16_t> out(static_cast<size_t>(c.numel()));
  std::memcpy(out.data(), c.raw_data(), out.size() * 2);
  return out;
}

std::map<std::string, Tensor> golden() {
  return nn::read_safetensors(LOOM_TEST_DATA "/bf16.safetensors", nullptr, true);
}

}  // namespace

TEST_CASE("bfloat16 is a 2-byte floating-point dtype named bfloat16") {
  CHECK(element_size(DType::BFloat16) == 2);
  CHECK(std::string(dtype_name(DType::BFloat16)) == "bfloat16");
  CHECK(is_floating_point(DType::BFloat16));
  CHECK(is_floating_point(DType::Float32));
  CHECK_FALSE(is_floating_point(DType::Int64));
  Tensor t = Tensor::empty({3, 5}, DType::BFloat16);
  CHECK(t.dtype() == DType::BFloat16);
  CHECK(t.impl()->storage()->bytes == 30);
  CHECK(t.narrow(1, 2, 2).data_ptr<BFloat16>() == t.data_ptr<BFloat16>() + 2);
}

TEST_CASE("float32 -> bfloat16 rounds to nearest even, like an independent reference, on 458k "
          "bit patterns") {
  const std::vector<uint32_t> bits = tricky_bit_patterns();
  // The scalar conversion (core/bfloat16.h) ...
  size_t bad = 0;
  for (uint32_t b : bits) {
    const float x = from_bits(b);
    const uint16_t got = float_to_bfloat16_bits(x), want = reference_round(x);
    const bool ok = std::isnan(x) ? got == 0x7FC0 : got == want;
    if (!ok && ++bad <= 5)
      FAIL_CHECK("bits 0x" << std::hex << b << ": got 0x" << got << ", expected 0x" << want);
  }
  CHECK(bad == 0);
  // ... and the tensor conversion, which the CPU copy kernel does, agree bit for bit.
  const std::vector<uint16_t> converted = bf16_bits(floats_from_bits(bits).to(DType::BFloat16));
  bad = 0;
  for (size_t i = 0; i < bits.size(); ++i)
    bad += converted[i] != float_to_bfloat16_bits(from_bits(bits[i]));
  CHECK(bad == 0);
}

TEST_CASE("bfloat16 rounding: the named cases (ties, subnormals, overflow, infinities, NaN)") {
  auto round = [](uint32_t bits) { return float_to_bfloat16_bits(from_bits(bits)); };
  CHECK(round(0x3F808000) == 0x3F80);  // 1 + 2^-8 is a tie: the even neighbour 1
  CHECK(round(0x3F818000) == 0x3F82);  // 1 + 3*2^-8 is a tie: the even neighbour is above
  CHECK(round(0x3F807FFF) == 0x3F80);  // just below a tie
  CHECK(round(0x3F808001) == 0x3F81);  // just above a tie
  CHECK(round(0xBF818000) == 0xBF82);  // negative ties are symmetric
  CHECK(round(0x3FFFFFFF) == 0x4000);  // the carry moves into the exponent: 2
  CHECK(round(0x7F7F7FFF) == 0x7F7F);  // stays the largest finite bfloat16 ...
  CHECK(round(0x7F7F8000) == 0x7F80);  // ... a tie above it goes to infinity (its last bit is odd)
  CHECK(round(0x7F7FFFFF) == 0x7F80);  // float32's largest finite value overflows to inf
  CHECK(round(0xFF7FFFFF) == 0xFF80);
  CHECK(round(0x00010000) == 0x0001);  // the smallest bfloat16 subnormal, 2^-133
  CHECK(round(0x00008000) == 0x0000);  // a tie between 0 and it: 0 is even
  CHECK(round(0x00018000) == 0x0002);  // a tie between 2^-133 and 2^-132: up to even
  CHECK(round(0x00000001) == 0x0000);  // float32's smallest subnormal vanishes
  CHECK(round(0x807FFFFF) == 0x8080);  // the largest subnormal rounds up to -2^-126
  CHECK(round(0x80000000) == 0x8000);  // -0 keeps its sign
  CHECK(round(0x7F800000) == 0x7F80);
  CHECK(round(0xFF800000) == 0xFF80);
  for (uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x7FFFFFFFu, 0xFFFFFFFFu})
    CHECK(round(nan) == 0x7FC0);  // a NaN whose payload is only in the low bits stays a NaN
  CHECK(static_cast<float>(BFloat16(1.0f / 3.0f)) == 0.333984375f);
  CHECK(BFloat16(3.3895314e38f).bits == 0x7F7F);
}

TEST_CASE("bfloat16 -> float32 is exact: all 65536 patterns round-trip") {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  Tensor b = Tensor::empty({65536}, DType::BFloat16);
  std::memcpy(b.raw_data(), all.data(), all.size() * 2);
  const std::vector<float> f = b.to_vector();  // through the CPU copy kernel
  size_t bad = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    bad += std::bit_cast<uint32_t>(f[i]) != i << 16;  // the exact widening, NaN payloads too
    const uint16_t back = float_to_bfloat16_bits(f[i]);
    bad += std::isnan(f[i]) ? back != 0x7FC0 : back != i;
  }
  CHECK(bad == 0);
  const std::vector<uint16_t> again = bf16_bits(b.to(DType::Float32).to(DType::BFloat16));
  size_t changed = 0;
  for (uint32_t i = 0; i < 65536; ++i) changed += again[i] != i && !std::isnan(f[i]);
  CHECK(changed == 0);
}

TEST_CASE("golden: float32 <-> bfloat16 conversions match PyTorch bit for bit") {
  const auto g = golden();
  const Tensor in = g.at("conv_f32_in"), want = g.at("conv_bf16_out");
  REQUIRE(want.dtype() == DType::BFloat16);
  const std::vector<uint16_t> got = bf16_bits(in.to(DType::BFloat16)), expected = bf16_bits(want);
  const std::vector<float> x = in.to_vector();
  REQUIRE(got.size() == expected.size());
  REQUIRE(got.size() > 3000);
  size_t bad = 0, nans = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(x[i])) {  // PyTorch's vectorised and scalar paths spell NaN differently
      ++nans;
      bad += !std::isnan(bfloat16_bits_to_float(got[i])) ||
             !std::isnan(bfloat16_bits_to_float(expected[i]));
    } else {
      bad += got[i] != expected[i];
    }
  }
  CHECK(nans == 5);
  CHECK(bad == 0);
  const std::vector<float> back = want.to(DType::Float32).to_vector();
  const std::vector<float> torch_back = g.at("conv_back_f32").to_vector();
  for (size_t i = 0; i < back.size(); ++i)
    if (!std::isnan(back[i]))
      bad += std::bit_cast<uint32_t>(back[i]) != std::bit_cast<uint32_t>(torch_back[i]);
  CHECK(bad == 0);
}

TEST_CASE("golden: int64 <-> bfloat16 conversions match PyTorch") {
  const auto g = golden();
  CHECK(bf16_bits(g.at("i64_in").to(DType::BFloat16)) == bf16_bits(g.at("i64_to_bf16")));
  // Truncation toward zero, like float32 -> int64.
  CHECK(g.at("bf16_to_i64_in").to(DType::Int64).to_vector_i64() ==
        g.at("bf16_to_i64_out").to_vector_i64());
  CHECK(tensor_i64({257, 259, -3}, {3}).to(DType::BFloat16).to_vector() ==
        std::vector<float>{256, 260, -3});
  CHECK(full({2}, -2.75f, DType::BFloat16).to_vector_i64() == std::vector<int64_t>{-2, -2});
}

TEST_CASE("zeros, ones, full and empty make bfloat16 tensors, and full rounds its value") {
  CHECK(zeros({2, 3}, DType::BFloat16).dtype() == DType::BFloat16);
  CHECK(zeros({2, 3}, DType::BFloat16).to_vector() == std::vector<float>(6, 0.0f));
  CHECK(ones({4}, DType::BFloat16).to_vector() == std::vector<float>(4, 1.0f));
  CHECK(full({2}, 1.0f / 3.0f, DType::BFloat16).to_vector() ==
        std::vector<float>(2, 0.333984375f));
  CHECK(full({}, 3.0e38f, DType::BFloat16).item() == bfloat16_bits_to_float(0x7F62));
  CHECK(full({2}, 5.0f, DType::Int64).to_vector_i64() == std::vector<int64_t>{5, 5});
  CHECK(full({2}, 5.0f, DType::Float32).dtype() == DType::Float32);
  Tensor e = Tensor::empty({0, 4}, DType::BFloat16);
  CHECK(e.numel() == 0);
  CHECK(e.to(DType::Float32).shape() == Shape{0, 4});
}

TEST_CASE("bfloat16 tensors read back through item, to_vector, to_vector_i64 and printing") {
  Tensor b = tensor({1.5f, -2.0f, 0.1f, 1000.0f}, {2, 2}).to(DType::BFloat16);
  CHECK(b.to_vector() == std::vector<float>{1.5f, -2.0f, 0.10009765625f, 1000.0f});
  CHECK(b.to_vector_i64() == std::vector<int64_t>{1, -2, 0, 1000});
  CHECK(b.narrow(0, 1, 1).narrow(1, 1, 1).item() == 1000.0f);
  std::ostringstream s;
  s << b;
  CHECK(s.str() == "tensor([[1.5000, -2.0000],\n        [0.1001, 1000.0000]], shape=[2,2], "
                   "dtype=bfloat16)");
  std::ostringstream f;
  f << tensor({1.0f}, {1});
  CHECK(f.str().find("dtype") == std::string::npos);  // float32 printing is unchanged
}

TEST_CASE("bfloat16 views, contiguous copies, cat and copy_/fill_ keep the exact bits") {
  Tensor x = randn({6, 40}).to(DType::BFloat16);
  const std::vector<float> v = x.to_vector();
  // A transpose made contiguous (the blocked copy) holds the same values, transposed.
  const std::vector<float> t = x.t().contiguous().to_vector();
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 40; ++j) REQUIRE(t[j * 6 + i] == v[i * 40 + j]);
  CHECK(cat({x.narrow(1, 10, 30), x.narrow(1, 0, 10)}, 1).to_vector() ==
        x.roll(-10, 1).to_vector());
  Tensor y = zeros({6, 40}, DType::BFloat16);
  {
    NoGradGuard guard;
    y.copy_(x.to(DType::Float32));  // float32 values that are bfloat16 values: exact
  }
  CHECK(y.to_vector() == v);
  y.fill_(0.1f);
  CHECK(y.to_vector() == std::vector<float>(240, 0.10009765625f));
  y.mul_(4.0f);  // in float32, rounded once
  CHECK(y.to_vector() == std::vector<float>(240, 0.400390625f));
}

TEST_CASE("the cast is differentiable: the gradient of .to(BFloat16) is the gradient cast back") {
  // float32 master weights through a bfloat16 computation get a float32 gradient.
  Tensor w = tensor({0.5f, -1.25f, 3.0f}, {3}).requires_grad_();
  Tensor loss = (w.to(DType::BFloat16) * 2.0f).sum();
  CHECK(loss.dtype() == DType::BFloat16);
  loss.backward();
  REQUIRE(w.grad().defined());
  CHECK(w.grad().dtype() == DType::Float32);
  CHECK(w.grad().to_vector() == std::vector<float>{2, 2, 2});
  // A bfloat16 leaf gets a bfloat16 gradient, which accumulates across backward calls.
  Tensor b = tensor({1.0f, 2.0f}, {2}).to(DType::BFloat16).requires_grad_();
  (b.to(DType::Float32) * 3.0f).sum().backward();
  CHECK(b.grad().dtype() == DType::BFloat16);
  CHECK(b.grad().to_vector() == std::vector<float>{3, 3});
  (b.to(DType::Float32) * 0.1f).sum().backward();
  CHECK(b.grad().dtype() == DType::BFloat16);
  CHECK(b.grad().to_vector() == std::vector<float>(2, BFloat16(3.0f + 0.1f)));
  // int64 conversions stay outside the graph.
  CHECK_FALSE(w.to(DType::Int64).requires_grad());
}

TEST_CASE("ops that do not take bfloat16 refuse it, naming the op and the dtype") {
  Tensor b = ones({2, 3}, DType::BFloat16);
  Tensor idx = tensor_i64({0, 1}, {2});
  expect_error([&] { index_select(b, 0, idx); }, {"index_select", "bfloat16"});
  expect_error([&] { gather(b, 1, tensor_i64({0, 0, 0, 0}, {2, 2})); }, {"gather", "bfloat16"});
  expect_error([&] { index_add(b, 0, idx, b); }, {"index_add", "bfloat16"});
  expect_error([&] { b.add_(b); }, {"add_", "bfloat16"});
  expect_error([&] { matmul(b, ones({3, 2})); }, {"matmul", "bfloat16", "float32"});
  expect_error([&] { b.to(DType::Int64).requires_grad_(); }, {"requires_grad_", "int64"});
  Tensor out = Tensor::empty({2, 3}, DType::Float32);
  expect_error([&] { cpu_backend().softmax(b, 2, 3, 1, false, out); },
               {"softmax", "[2,3]", "bfloat16"});
  expect_error([&] { cpu_backend().unary(UnaryOp::Exp, b.to(DType::Int64), out, 0, 0); },
               {"unary", "input", "int64", "float32 or bfloat16"});
  Tensor sums = Tensor::empty({2}, DType::BFloat16);
  expect_error([&] { cpu_backend().reduce(ReduceOp::Sum, b, 2, 3, 1, sums); },
               {"sum", "bfloat16"});
  expect_error([&] { cpu_backend().binary(BinaryOp::Eq, b, b, out); }, {"binary", "bfloat16"});
}
