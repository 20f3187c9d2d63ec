// The CUDA backend checked against the CPU backend, which is the reference (the llm.c habit:
// every fast kernel is measured against the plain one). Two levels:
//   * every kernel of the Backend table, called directly on both devices with the same
//     inputs, in contiguous, transposed, sliced and broadcast (stride 0) layouts, at sizes
//     that reach every launch path (row and column reductions, split and unsplit);
//   * every public op of autograd/ops.h, values and gradients, with the inputs moved to the
//     GPU with .to(Device::CUDA).
// Without a GPU the first test case says so once and checks that asking for the device fails
// cleanly; every other case returns at once. tests/cuda/emulator/run_emulated.sh runs this
// whole suite on a CPU emulator of the CUDA execution model instead.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "core/rng.h"
#include "cuda_parity.h"
#include "test_util.h"

#ifdef LOOM_WITH_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

using namespace loom;
using namespace loom::testing;

#ifndef LOOM_WITH_CUDA

TEST_CASE("without the CUDA backend, cuda is unavailable and moving a tensor there throws") {
  CHECK_FALSE(cuda_available());
  CHECK_THROWS_AS(ones({2}).to(Device::CUDA), Error);
}

#else

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

Backend& gpu() { return backend(Device::CUDA); }

// Deterministic inputs: n values uniform in [lo, hi) from the Philox stream `seed`.
std::vector<float> uniform_values(int64_t n, float lo, float hi, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = lo + (hi - lo) * philox_uniform(static_cast<uint64_t>(i), seed);
  return v;
}

Tensor uniform(const Shape& shape, float lo, float hi, uint64_t seed) {
  return tensor(uniform_values(shape_numel(shape), lo, hi, seed), shape);
}

// Multiples of 1/8 in [-4, 4]: many exact ties (for argmax/argmin and comparisons), and sums
// that are exact in any order (so atomics and reduction trees cannot change them).
Tensor eighths(const Shape& shape, uint64_t seed) {
  std::vector<float> v = uniform_values(shape_numel(shape), -4.0f, 4.0f, seed);
  for (float& x : v) x = std::round(x * 8.0f) / 8.0f;
  return tensor(v, shape);
}

// Integers in [lo, hi) as int64.
Tensor integers(const Shape& shape, int64_t lo, int64_t hi, uint64_t seed) {
  std::vector<int64_t> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = lo + static_cast<int64_t>(philox_uniform(i, seed) * static_cast<float>(hi - lo));
  return tensor_i64(v, shape);
}

Tensor empty_on(Device device, const Shape& shape, DType dtype = DType::Float32) {
  return Tensor::empty(shape, dtype, device);
}

// The same values of a 2-D tensor (already on its device) in three memory layouts:
// contiguous, transposed in memory (strides [1, rows]) and a column slice of a wider tensor
// (row stride 2 * cols). Built with that device's own copy kernels.
std::vector<std::pair<std::string, Tensor> > layouts(const Tensor& x) {
  NoGradGuard no_grad;
  return {{"contiguous", x},
          {"transposed", x.t().contiguous().t()},
          {"sliced", cat({x, x}, 1).narrow(1, 0, x.size(1))}};
}

// Every (source, destination) pair of the floating dtypes, for the copy kernels' casts.
std::vector<std::pair<DType, DType> > float_type_pairs() {
  return {{DType::Float32, DType::Float32},
          {DType::Float32, DType::BFloat16},
          {DType::BFloat16, DType::Float32},
          {DType::BFloat16, DType::BFloat16}};
}

// Runs one kernel call on both devices: `call` builds the call's tensors on the device it is
// given, from the same host values, and returns the tensors to compare. The CUDA results must
// match the CPU ones within rtol/atol (0/0 = bit for bit).
using DeviceCall = std::function<std::vector<Tensor>(Backend&, Device)>;

void compare_devices(const std::string& what, const DeviceCall& call, float rtol, float atol) {
  const std::vector<Tensor> want = call(cpu_backend(), Device::CPU);
  const std::vector<Tensor> got = call(gpu(), Device::CUDA);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].device() == Device::CUDA);
    check_close(got[i], want[i], rtol, atol, what + " (result " + std::to_string(i) + ")");
  }
}

// Every op of the unary table (backends/unary_math.h), so a new op is compared on CUDA too.
#define LOOM_TEST_UNARY_OP(Name) UnaryOp::Name,
const UnaryOp kUnaryOps[] = {LOOM_UNARY_OPS(LOOM_TEST_UNARY_OP)};
#undef LOOM_TEST_UNARY_OP

// Each unary op with its parameters (a, b) and an input range inside its domain.
struct UnaryCase {
  UnaryOp op;
  float a, b, lo, hi;
};

std::vector<UnaryCase> unary_cases() {
  std::vector<UnaryCase> cases;
  for (UnaryOp op : kUnaryOps) {
    const bool positive = op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt ||
                          op == UnaryOp::RDiv || op == UnaryOp::Reciprocal ||
                          op == UnaryOp::Log1p || op == UnaryOp::Log2;
    if (op == UnaryOp::Pow) {
      for (float a : {2.0f, 3.0f, 0.5f, -1.0f, -0.5f, 0.0f, 1.0f, 1.7f})
        cases.push_back({op, a, 0.0f, 0.1f, 3.0f});
    } else if (op == UnaryOp::Affine) {
      cases.push_back({op, 1.5f, -0.25f, -3.0f, 3.0f});
    } else if (op == UnaryOp::RDiv) {
      cases.push_back({op, 2.0f, 0.0f, 0.1f, 3.0f});
    } else if (op == UnaryOp::Clamp) {
      cases.push_back({op, -0.5f, 0.7f, -3.0f, 3.0f});
    } else if (op == UnaryOp::Logit) {  // without eps (a < 0) and with eps 0.1, inside (0, 1)
      for (float eps : {-1.0f, 0.1f}) cases.push_back({op, eps, 0.0f, 0.01f, 0.99f});
    } else if (op == UnaryOp::Softplus) {  // beta 2, threshold 3: both branches
      cases.push_back({op, 2.0f, 3.0f, -3.0f, 3.0f});
    } else if (op == UnaryOp::LeakyRelu || op == UnaryOp::Elu) {
      cases.push_back({op, 0.3f, 0.0f, -3.0f, 3.0f});
    } else {
      cases.push_back({op, 0.0f, 0.0f, positive ? 0.1f : -3.0f, 3.0f});
    }
  }
  return cases;
}

std::string unary_name(const UnaryCase& c) {
  return "unary op " + std::to_string(static_cast<int>(c.op)) + " a=" + std::to_string(c.a);
}

}  // namespace

// ============================================================================ availability

TEST_CASE("CUDA availability is reported cleanly, with or without a GPU") {
  if (!cuda_available()) {
    MESSAGE("CUDA tests skipped: no GPU");
    CHECK_FALSE(cuda_device_available());
    expect_error([] { backend(Device::CUDA); }, {"cuda", "no CUDA device"});
    expect_error([] { ones({2}).to(Device::CUDA); }, {"cuda"});
    return;
  }
  CHECK(cuda_device_available());
  CHECK_FALSE(cuda_tf32_enabled());  // off by default, as in PyTorch
  const Tensor x = ones({2, 3}).to(Device::CUDA);
  CHECK(x.device() == Device::CUDA);
  CHECK(x.to(Device::CPU).to_vector() == std::vector<float>(6, 1.0f));
}

// ============================================================================ memory

TEST_CASE("the caching allocator hands a freed block back instead of calling cudaMalloc") {
  LOOM_REQUIRE_GPU();
  void* first = gpu().allocate(1000);
  REQUIRE(first != nullptr);
  gpu().deallocate(first, 1000);
  void* again = gpu().allocate(1000);  // same size class: the cached block comes back
  CHECK(again == first);
  void* other = gpu().allocate(1000);  // the cache is empty again: a fresh block
  CHECK(other != first);
  gpu().deallocate(again, 1000);
  gpu().deallocate(other, 1000);
  CHECK(gpu().allocate(0) == nullptr);

  // Host <-> device round trip through a raw block.
  const std::vector<float> host = uniform_values(1000, -1.0f, 1.0f, 1);
  void* block = gpu().allocate(host.size() * sizeof(float));
  gpu().copy_from_host(block, host.data(), host.size() * sizeof(float));
  std::vector<float> back(host.size());
  gpu().copy_to_host(back.data(), block, back.size() * sizeof(float));
  gpu().synchronize();
  gpu().deallocate(block, host.size() * sizeof(float));
  CHECK(back == host);
}

TEST_CASE("running out of device memory is a loom::Error, and the device stays usable") {
  LOOM_REQUIRE_GPU();
  expect_error([] { gpu().allocate(size_t{1} << 52); }, {"cuda", "out of memory"});
  expect_error([] { Tensor::empty({int64_t{1} << 50}, DType::Float32, Device::CUDA); },
               {"out of memory"});
  CHECK((ones({3}, Device::CUDA) * 2.0f).to_vector() == std::vector<float>(3, 2.0f));
}

// ============================================================================ layout and fill

TEST_CASE("copy re-lays out and casts exactly like the CPU backend") {
  LOOM_REQUIRE_GPU();
  std::vector<float> v = uniform_values(6 * 7, -1000.0f, 1000.0f, 2);
  v[3] = kNaN;  // float -> int64 of NaN: INT64_MIN on both devices
  v[5] = 3e19f;
  const Tensor floats = tensor(v, {6, 7});
  const Tensor ints = integers({6, 7}, -50, 50, 3);
  for (const Tensor& host : {floats, ints}) {
    for (DType to : {DType::Float32, DType::Int64}) {
      compare_devices(
          "copy to contiguous",
          [&](Backend& be, Device d) {
            std::vector<Tensor> outs;
            for (const auto& [name, src] : layouts(host.to(d))) {
              Tensor out = empty_on(d, {6, 7}, to);
              be.copy(src, out);
              outs.push_back(out);
            }
            return outs;
          },
          0.0f, 0.0f);
      compare_devices(
          "copy into a strided view, from a broadcast row",
          [&](Backend& be, Device d) {
            Tensor big = empty_on(d, {6, 9}, to);
            be.fill(big, -7.0);
            Tensor view = big.narrow(1, 1, 7).t();  // [7, 6], strides [1, 9]
            be.copy(host.to(d).t(), view);
            Tensor row = host.to(d).narrow(0, 2, 1).expand({6, 7});  // stride 0 rows
            Tensor out = empty_on(d, {6, 7}, to);
            be.copy(row, out);
            return std::vector<Tensor>{big, out};
          },
          0.0f, 0.0f);
    }
  }
}

TEST_CASE("fill writes contiguous and strided views of both dtypes") {
  LOOM_REQUIRE_GPU();
  for (DType dtype : {DType::Float32, DType::Int64}) {
    for (double value : {0.0, -2.5, 7.0}) {
      compare_devices(
          "fill",
          [&](Backend& be, Device d) {
            Tensor whole = empty_on(d, {5, 8}, dtype);
            be.fill(whole, value);
            Tensor part = empty_on(d, {5, 8}, dtype);
            be.fill(part, 1.0);
            Tensor view = part.narrow(1, 2, 3);
            be.fill(view, value);
            return std::vector<Tensor>{whole, part};
          },
          0.0f, 0.0f);
    }
  }
}

// ============================================================================ elementwise

TEST_CASE("every unary op matches the CPU in every layout") {
  LOOM_REQUIRE_GPU();
  for (const UnaryCase& c : unary_cases()) {
    const Tensor host = uniform({13, 17}, c.lo, c.hi, 4);
    compare_devices(
        unary_name(c),
        [&](Backend& be, Device d) {
          std::vector<Tensor> outs;
          for (const auto& [name, x] : layouts(host.to(d))) {
            Tensor out = empty_on(d, {13, 17});
            be.unary(c.op, x, out, c.a, c.b);
            outs.push_back(out);
          }
          Tensor row = host.to(d).narrow(0, 0, 1).expand({13, 17});
          Tensor out = empty_on(d, {13, 17});
          be.unary(c.op, row, out, c.a, c.b);
          outs.push_back(out);
          Tensor transposed_out = empty_on(d, {17, 13}).t();  // a strided output works too
          be.unary(c.op, host.to(d), transposed_out, c.a, c.b);
          outs.push_back(transposed_out);
          return outs;
        },
        1e-5f, 1e-6f);
  }
  // NaN and infinities follow the CPU's rules (relu and clamp let NaN through, sign(NaN)=NaN).
  const Tensor special = tensor({kNaN, kInf, -kInf, 0.0f, -0.0f, 1.0f}, {6});
  for (UnaryOp op : {UnaryOp::Relu, UnaryOp::Sign, UnaryOp::Clamp, UnaryOp::Abs, UnaryOp::Exp,
                     UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Neg}) {
    compare_devices(
        "unary special values, op " + std::to_string(static_cast<int>(op)),
        [&](Backend& be, Device d) {
          Tensor out = empty_on(d, {6});
          be.unary(op, special.to(d), out, -0.5f, 0.5f);
          return std::vector<Tensor>{out};
        },
        1e-6f, 0.0f);
  }
}

TEST_CASE("every unary derivative matches the CPU, with x, y or both given") {
  LOOM_REQUIRE_GPU();
  for (const UnaryCase& c : unary_cases()) {
    const Tensor x_host = uniform({11, 19}, c.lo, c.hi, 5);
    const Tensor g_host = uniform({11, 19}, -1.0f, 1.0f, 6);
    Tensor y_host = empty_on(Device::CPU, {11, 19});
    cpu_backend().unary(c.op, x_host, y_host, c.a, c.b);
    compare_devices(
        unary_name(c) + " backward",
        [&](Backend& be, Device d) {
          const Tensor x = x_host.to(d), y = y_host.to(d);
          std::vector<Tensor> outs;
          for (const auto& [name, g] : layouts(g_host.to(d))) {
            Tensor out = empty_on(d, {11, 19});
            be.unary_backward(c.op, g, x.t().contiguous().t(), y, out, c.a, c.b);
            outs.push_back(out);
          }
          Tensor recomputed = empty_on(d, {11, 19});  // y not saved: recomputed from x
          be.unary_backward(c.op, g_host.to(d), x, Tensor(), recomputed, c.a, c.b);
          outs.push_back(recomputed);
          return outs;
        },
        2e-5f, 1e-6f);
  }
  // Derivatives written with y need no x.
  for (UnaryOp op : {UnaryOp::Exp, UnaryOp::Sqrt, UnaryOp::Rsqrt, UnaryOp::Tanh, UnaryOp::Sigmoid,
                     UnaryOp::Neg, UnaryOp::Affine, UnaryOp::Sign}) {
    compare_devices(
        "unary backward from y alone, op " + std::to_string(static_cast<int>(op)),
        [&](Backend& be, Device d) {
          Tensor out = empty_on(d, {50});
          be.unary_backward(op, uniform({50}, -1.0f, 1.0f, 7).to(d), Tensor(),
                            uniform({50}, 0.2f, 0.9f, 8).to(d), out, 3.0f, 0.0f);
          return std::vector<Tensor>{out};
        },
        1e-6f, 1e-7f);
  }
}

TEST_CASE("binary arithmetic and comparisons match the CPU with broadcasting") {
  LOOM_REQUIRE_GPU();
  const Tensor a_host = eighths({9, 14}, 9);
  const Tensor b_host = eighths({9, 14}, 10);
  const Tensor row_host = eighths({1, 14}, 11);
  const Tensor positive = uniform({9, 14}, 0.5f, 2.0f, 12);
  for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Pow,
                      BinaryOp::Maximum, BinaryOp::Minimum, BinaryOp::Eq, BinaryOp::Ne,
                      BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge}) {
    const bool needs_positive = op == BinaryOp::Div || op == BinaryOp::Pow;
    compare_devices(
        "binary op " + std::to_string(static_cast<int>(op)),
        [&](Backend& be, Device d) {
          const Tensor b = (needs_positive ? positive : b_host).to(d);
          const Tensor a = (op == BinaryOp::Pow ? positive : a_host).to(d);
          std::vector<Tensor> outs;
          for (const auto& [name, av] : layouts(a)) {
            Tensor out = empty_on(d, {9, 14});
            be.binary(op, av, b, out);
            outs.push_back(out);
          }
          Tensor broadcast = empty_on(d, {9, 14});  // b is one row repeated (stride 0)
          be.binary(op, a,
                    (needs_positive ? positive.narrow(0, 0, 1) : row_host).to(d).expand({9, 14}),
                    broadcast);
          outs.push_back(broadcast);
          return outs;
        },
        2e-6f, 1e-7f);  // powf (CUDA, <= 4 ulp) against the C library's pow
  }
  const Tensor i_host = integers({30}, -3, 3, 13), j_host = integers({30}, -3, 3, 14);
  for (BinaryOp op :
       {BinaryOp::Eq, BinaryOp::Ne, BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge}) {
    compare_devices(
        "int64 comparison " + std::to_string(static_cast<int>(op)),
        [&](Backend& be, Device d) {
          Tensor out = empty_on(d, {30});
          be.binary(op, i_host.to(d), j_host.to(d), out);
          return std::vector<Tensor>{out};
        },
        0.0f, 0.0f);
  }
  // NaN on either side propagates through maximum/minimum, as torch.maximum does.
  compare_devices(
      "maximum/minimum with NaN",
      [&](Backend& be, Device d) {
        const Tensor a = tensor({kNaN, 1.0f, 2.0f, kNaN}, {4}).to(d);
        const Tensor b = tensor({1.0f, kNaN, 3.0f, kNaN}, {4}).to(d);
        Tensor hi = empty_on(d, {4}), lo = empty_on(d, {4});
        be.binary(BinaryOp::Maximum, a, b, hi);
        be.binary(BinaryOp::Minimum, a, b, lo);
        return std::vector<Tensor>{hi, lo};
      },
      0.0f, 0.0f);
}

TEST_CASE("where selects like the CPU for every condition and value dtype") {
  LOOM_REQUIRE_GPU();
  std::vector<float> cv = uniform_values(40, -1.0f, 1.0f, 15);
  for (float& c : cv) c = c < -0.3f ? 0.0f : (c < 0.3f ? 1.0f : -2.5f);  // nonzero = true
  const Tensor cond_f = tensor(cv, {5, 8}), cond_i = integers({5, 8}, 0, 2, 16);
  for (const Tensor& cond : {cond_f, cond_i}) {
    for (DType dtype : {DType::Float32, DType::Int64}) {
      const Tensor a =
          dtype == DType::Float32 ? uniform({5, 8}, -1, 1, 17) : integers({5, 8}, 0, 9, 18);
      const Tensor b =
          dtype == DType::Float32 ? uniform({5, 8}, -1, 1, 19) : integers({5, 8}, 0, 9, 20);
      compare_devices(
          "where",
          [&](Backend& be, Device d) {
            Tensor out = empty_on(d, {5, 8}, dtype), filled = empty_on(d, {5, 8}, dtype);
            be.where(cond.to(d).t().contiguous().t(), a.to(d), b.to(d), out);
            // masked_fill's pattern: the fill value is one element broadcast everywhere.
            be.where(cond.to(d), a.to(d).narrow(0, 0, 1).narrow(1, 0, 1).expand({5, 8}), b.to(d),
                     filled);
            return std::vector<Tensor>{out, filled};
          },
          0.0f, 0.0f);
    }
  }
}

TEST_CASE("axpy accumulates like the CPU") {
  LOOM_REQUIRE_GPU();
  compare_devices(
      "axpy",
      [&](Backend& be, Device d) {
        Tensor dst = uniform({1000}, -1, 1, 21).to(d);
        be.axpy(-0.75f, uniform({1000}, -1, 1, 22).to(d), dst);
        return std::vector<Tensor>{dst};
      },
      1e-6f, 1e-7f);
}

TEST_CASE("the vector fast path (copy/cast, fill, unary, binary, axpy) matches the CPU at every "
          "alignment and tail length") {
  // Contiguous operands whose addresses are multiples of 16 bytes take the vector kernels
  // (elementwise.cu); a view starting 1 to 3 elements into its buffer takes the scalar path,
  // and a length that is not a multiple of the vector width leaves a tail. All must agree with
  // the CPU bit for bit (the unary math within its usual tolerance).
  LOOM_REQUIRE_GPU();
  // A contiguous [n] view starting `offset` elements into a buffer holding `host`'s values.
  auto at_offset = [](const Tensor& host, Device d, int64_t offset, DType dtype) {
    const int64_t n = host.numel();
    Tensor buffer = cat({zeros({offset}), host, zeros({3})}, 0).to(dtype).to(d);
    return buffer.narrow(0, offset, n);
  };
  for (int64_t n : {1, 3, 4, 5, 8, 9, 15, 16, 17, 1027}) {
    for (int64_t offset : {0, 1, 2, 3, 8}) {  // 8: aligned, but not the buffer's start
      CAPTURE(n);
      CAPTURE(offset);
      const Tensor x_host = uniform({n}, -3.0f, 3.0f, 31), g_host = uniform({n}, -1.0f, 1.0f, 32);
      for (auto [from, to] : {std::pair{DType::Float32, DType::BFloat16},
                              std::pair{DType::BFloat16, DType::Float32}}) {
        compare_devices(
            "cast",
            [&](Backend& be, Device d) {
              Tensor out = at_offset(zeros({n}), d, offset % 4 == 0 ? 0 : 4 - offset, to);
              be.copy(at_offset(x_host, d, offset, from), out);
              return std::vector<Tensor>{out};
            },
            0.0f, 0.0f);
      }
      for (DType dtype : {DType::Float32, DType::BFloat16}) {
        compare_devices(
            "fill",
            [&](Backend& be, Device d) {
              Tensor out = at_offset(zeros({n}), d, offset, dtype);
              be.fill(out, -1.3);
              return std::vector<Tensor>{out};
            },
            0.0f, 0.0f);
      }
      for (UnaryOp op : {UnaryOp::GeluTanh, UnaryOp::Tanh, UnaryOp::Neg}) {
        compare_devices(
            "unary and its derivative, op " + std::to_string(static_cast<int>(op)),
            [&](Backend& be, Device d) {
              const Tensor x = at_offset(x_host, d, offset, DType::Float32);
              Tensor y = at_offset(zeros({n}), d, 0, DType::Float32);
              be.unary(op, x, y, 0.0f, 0.0f);
              Tensor dx = at_offset(zeros({n}), d, offset, DType::Float32);
              be.unary_backward(op, at_offset(g_host, d, 0, DType::Float32), x, y, dx, 0.0f, 0.0f);
              return std::vector<Tensor>{y, dx};
            },
            1e-5f, 1e-6f);
      }
      compare_devices(
          "binary",
          [&](Backend& be, Device d) {
            const Tensor a = at_offset(x_host, d, offset, DType::Float32);
            const Tensor b = at_offset(g_host, d, 0, DType::Float32);
            std::vector<Tensor> outs;
            for (BinaryOp op : {BinaryOp::Add, BinaryOp::Mul, BinaryOp::Maximum}) {
              Tensor out = at_offset(zeros({n}), d, 0, DType::Float32);
              be.binary(op, a, b, out);
              outs.push_back(out);
            }
            return outs;
          },
          0.0f, 0.0f);
      compare_devices(
          "axpy",  // the GPU may fuse the multiply-add: within a rounding
          [&](Backend& be, Device d) {
            Tensor acc = at_offset(g_host, d, offset, DType::Float32);
            be.axpy(0.37f, at_offset(x_host, d, 0, DType::Float32), acc);
            return std::vector<Tensor>{acc};
          },
          1e-6f, 1e-7f);
    }
  }
}

TEST_CASE("copying one row into every row of a matrix (a bias as a GEMM's start) matches the CPU") {
  // [rows, cols] from a stride-0 row: the row-broadcast vector kernel when cols, the output's
  // row stride and both addresses allow whole vectors, the strided kernel otherwise.
  LOOM_REQUIRE_GPU();
  const Tensor host = uniform({4, 24}, -2.0f, 2.0f, 33);
  for (int64_t cols : {8, 12, 16, 13}) {
    for (int64_t start : {0, 1}) {
      for (auto [from, to] : float_type_pairs()) {
        CAPTURE(cols);
        CAPTURE(start);
        compare_devices(
            "broadcast rows",
            [&](Backend& be, Device d) {
              const Tensor row = host.to(from).to(d).narrow(0, 1, 1).narrow(1, start, cols);
              Tensor dense = empty_on(d, {37, cols}, to);
              be.copy(row.expand({37, cols}), dense);
              Tensor wide = zeros({37, 24}, to, d);  // rows padded to 24: a row stride of 24
              Tensor padded = wide.narrow(1, 0, cols);
              be.copy(row.expand({37, cols}), padded);
              return std::vector<Tensor>{dense, wide};
            },
            0.0f, 0.0f);
      }
    }
  }
}

TEST_CASE("a copy that keeps rows whole (attention's heads permuted) matches the CPU") {
  // x [2, 5, W] viewed as heads [2, 5, 3, hs] (a column slice at `start`) and permuted to
  // [2, 3, 5, hs], copied into a dense tensor and into a permuted view of one. The vector kernel
  // runs when hs, every outer stride and both addresses allow whole vectors (hs 16; 12 for
  // float32 only), the strided kernel otherwise (hs 13, a misaligned start, W odd).
  LOOM_REQUIRE_GPU();
  for (int64_t hs : {16, 12, 13})
    for (int64_t start : {0, 1})
      for (int64_t extra : {0, 1})
        for (auto [from, to] : float_type_pairs()) {
          CAPTURE(hs);
          CAPTURE(start);
          CAPTURE(extra);
          const int64_t width = 4 * hs * 3 + extra;
          const Tensor host = uniform({2, 5, width}, -2.0f, 2.0f, 34);
          compare_devices(
              "heads permuted",
              [&](Backend& be, Device d) {
                const Tensor heads =
                    host.to(from).to(d).narrow(2, start, 3 * hs).reshape({2, 5, 3, hs});
                Tensor dense = empty_on(d, {2, 3, 5, hs}, to);
                be.copy(heads.transpose(1, 2), dense);
                Tensor back = zeros({2, 5, 3, hs}, to, d);
                Tensor view = back.transpose(1, 2);  // [2, 3, 5, hs] with strides of [2, 5, 3, hs]
                be.copy(heads.transpose(1, 2), view);
                return std::vector<Tensor>{dense, back};
              },
              0.0f, 0.0f);
        }
}

// ============================================================================ reductions

TEST_CASE("sum, max, min, argmax and argmin match the CPU on every launch path") {
  LOOM_REQUIRE_GPU();
  // [outer, n, inner]: rows, long rows split into chunks (outer * chunks partials, then a
  // second pass), columns, columns split along n, and degenerate sizes.
  const std::vector<Shape> shapes = {{1, 1, 1},      {3, 5, 1},    {2, 1000, 1},
                                     {1, 300000, 1}, {4, 7, 33},   {2, 5000, 3},
                                     {1, 70000, 40}, {2000, 9, 1}, {3, 64, 2}};
  for (const Shape& s : shapes) {
    const Tensor values = eighths({s[0] * s[1] * s[2]}, 23);
    const Tensor ints = integers({s[0] * s[1] * s[2]}, -1000, 1000, 24);
    for (ReduceOp op :
         {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax, ReduceOp::ArgMin}) {
      const bool arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
      for (const Tensor& x : {values, ints}) {
        compare_devices(
            "reduce op " + std::to_string(static_cast<int>(op)) + " over " + shape_str(s),
            [&](Backend& be, Device d) {
              Tensor out = empty_on(d, {s[0], s[2]}, arg ? DType::Int64 : x.dtype());
              be.reduce(op, x.to(d), s[0], s[1], s[2], out);
              return std::vector<Tensor>{out};
            },
            0.0f, 0.0f);  // eighths sum exactly; ties resolve to the first index on both
      }
    }
  }
  // Sums of general floats: double accumulation on both devices.
  compare_devices(
      "sum of a large tensor",
      [&](Backend& be, Device d) {
        Tensor all = empty_on(d, {1, 1}), cols = empty_on(d, {1, 300});
        const Tensor x = uniform({3000, 300}, -1, 1, 25).to(d);
        be.reduce(ReduceOp::Sum, x, 1, 900000, 1, all);
        be.reduce(ReduceOp::Sum, x, 1, 3000, 300, cols);
        return std::vector<Tensor>{all, cols};
      },
      1e-6f, 1e-6f);
  // NaN wins max and min; argmax/argmin point at the first NaN.
  compare_devices(
      "reductions with NaN",
      [&](Backend& be, Device d) {
        std::vector<float> v = uniform_values(2 * 9000, -1, 1, 26);
        v[4000] = kNaN;
        v[7000] = kNaN;
        v[9000 + 100] = kInf;
        const Tensor x = tensor(v, {2, 9000}).to(d);
        std::vector<Tensor> outs;
        for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax, ReduceOp::ArgMin}) {
          const bool arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
          Tensor out = empty_on(d, {2, 1}, arg ? DType::Int64 : DType::Float32);
          be.reduce(op, x, 2, 9000, 1, out);
          outs.push_back(out);
        }
        return outs;
      },
      0.0f, 0.0f);
  // An empty reduced dim: sums are 0, max has no answer.
  compare_devices(
      "sum over an empty dim",
      [&](Backend& be, Device d) {
        Tensor out = empty_on(d, {5, 3});
        be.reduce(ReduceOp::Sum, empty_on(d, {5, 0, 3}), 5, 0, 3, out);
        return std::vector<Tensor>{out};
      },
      0.0f, 0.0f);
  expect_error(
      [] {
        Tensor out = empty_on(Device::CUDA, {5, 3});
        gpu().reduce(ReduceOp::Max, empty_on(Device::CUDA, {5, 0, 3}), 5, 0, 3, out);
      },
      {"max", "empty dimension"});
}

TEST_CASE("softmax and log_softmax match the CPU, forward and backward") {
  LOOM_REQUIRE_GPU();
  const std::vector<Shape> shapes = {
      // rows held in registers (n <= 4096, full and partial), rows read three times (longer),
      // columns (inner > 1), a single element
      {4, 10, 1}, {64, 1024, 1}, {3, 4096, 1}, {2, 4097, 1}, {2, 50257, 1}, {3, 17, 5},
      {2, 3, 1000}, {1, 1, 1}};
  for (const Shape& s : shapes) {
    const int64_t numel = s[0] * s[1] * s[2];
    std::vector<float> v = uniform_values(numel, -8.0f, 8.0f, 27);
    if (numel > 4) v[1] = -kInf;  // a masked position
    const Tensor x_host = tensor(v, {numel});
    const Tensor g_host = uniform({numel}, -1, 1, 28);
    for (bool log : {false, true}) {
      compare_devices(
          std::string(log ? "log_softmax " : "softmax ") + shape_str(s),
          [&](Backend& be, Device d) {
            Tensor y = empty_on(d, {numel}), dx = empty_on(d, {numel});
            be.softmax(x_host.to(d), s[0], s[1], s[2], log, y);
            be.softmax_backward(g_host.to(d), y, s[0], s[1], s[2], log, dx);
            return std::vector<Tensor>{y, dx};
          },
          // log_softmax = x - logsumexp(x): near-zero outputs carry the absolute rounding of
          // the log-sum-exp (~16 for 50257 classes, one ulp = 2e-6), so atol is a few ulps.
          2e-5f, log ? 8e-6f : 1e-7f);
    }
  }
  // A fully masked row is NaN on both devices (-inf - -inf), as in PyTorch.
  compare_devices(
      "softmax of a fully masked row",
      [&](Backend& be, Device d) {
        Tensor y = empty_on(d, {2, 3});
        be.softmax(tensor({-kInf, -kInf, -kInf, 1, 2, 3}, {2, 3}).to(d), 2, 3, 1, false, y);
        return std::vector<Tensor>{y};
      },
      1e-6f, 0.0f);
}

// ============================================================================ matrix products

namespace {

// Runs args on both devices and compares the C buffers: `a`, `b`, `c` hold the stored
// operands (host values); the pointers in args are filled in per device.
// args on both devices; a, b and c of args' dtypes, bias (float32) optional.
void compare_gemm(const std::string& what, GemmArgs args, const Tensor& a, const Tensor& b,
                  const Tensor& c, float rtol, float atol, const Tensor& bias = Tensor()) {
  compare_devices(
      what,
      [&](Backend& be, Device d) {
        const Tensor ad = a.to(d), bd = b.to(d), cd = c.to(d).clone();
        const Tensor biasd = bias.defined() ? bias.to(d) : Tensor();
        GemmArgs g = args;
        g.a = ad.raw_data();
        g.b = bd.raw_data();
        g.c = cd.raw_data();
        g.bias = bias.defined() ? biasd.data_ptr<float>() : nullptr;
        be.gemm(g);
        return std::vector<Tensor>{cd};
      },
      rtol, atol);
}

}  // namespace

TEST_CASE("gemm through cuBLAS matches OpenBLAS for every transpose, batch and stride") {
  LOOM_REQUIRE_GPU();
  const int64_t m = 37, n = 29, k = 53, batch = 3;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      // Row strides 4 wider than a row: each operand is a column slice of a wider matrix.
      GemmArgs g;
      g.trans_a = ta;
      g.trans_b = tb;
      g.m = m;
      g.n = n;
      g.k = k;
      g.batch = batch;
      g.lda = (ta ? m : k) + 4;
      g.ldb = (tb ? k : n) + 4;
      g.ldc = n + 4;
      g.stride_a = (ta ? k : m) * g.lda;
      g.stride_b = 0;  // one B for every batch item (a broadcast weight)
      g.stride_c = m * g.ldc;
      g.alpha = 0.5f;
      g.beta = 2.0f;
      const Tensor a = uniform({batch * g.stride_a}, -1, 1, 29);
      const Tensor b = uniform({(tb ? n : k) * g.ldb}, -1, 1, 30);
      const Tensor c = uniform({batch * g.stride_c}, -1, 1, 31);
      compare_gemm("gemm trans_a=" + std::to_string(ta) + " trans_b=" + std::to_string(tb), g, a, b,
                   c, 1e-4f, 1e-4f);
    }
  }
  SUBCASE("a broadcast operand row (ld < cols) is densified first") {
    GemmArgs g;
    g.m = 6;
    g.n = 10;
    g.k = 4;
    g.lda = 4;
    g.ldb = 0;  // every row of B is the same row
    g.ldc = 10;
    compare_gemm("gemm with ldb = 0", g, uniform({24}, -1, 1, 32), uniform({10}, -1, 1, 33),
                 uniform({60}, -1, 1, 34), 1e-5f, 1e-5f);
  }
  SUBCASE("one-row operands with any stride, and k = 0") {
    GemmArgs g;
    g.m = 1;
    g.n = 7;
    g.k = 5;
    g.lda = 0;  // the stride of a size-1 dim never matters
    g.ldb = 7;
    g.ldc = 0;
    compare_gemm("gemm with m = 1", g, uniform({5}, -1, 1, 35), uniform({35}, -1, 1, 36),
                 uniform({7}, -1, 1, 37), 1e-5f, 1e-5f);
    GemmArgs empty_sum;
    empty_sum.m = 3;
    empty_sum.n = 4;
    empty_sum.k = 0;
    empty_sum.ldc = 4;
    empty_sum.lda = 1;
    empty_sum.ldb = 4;
    std::vector<float> nans(12, kNaN);
    compare_gemm("gemm with k = 0, beta = 0 (C not read)", empty_sum, zeros({1}), zeros({4}),
                 tensor(nans, {12}), 0.0f, 0.0f);
    empty_sum.beta = 3.0f;
    compare_gemm("gemm with k = 0, beta = 3", empty_sum, zeros({1}), zeros({4}),
                 uniform({12}, -1, 1, 38), 1e-6f, 0.0f);
  }
  SUBCASE("TF32 tensor-core math is close to float32 when switched on") {
    GemmArgs g;
    g.m = 64;
    g.n = 96;
    g.k = 128;
    g.lda = 128;
    g.ldb = 96;
    g.ldc = 96;
    cuda_set_tf32(true);
    CHECK(cuda_tf32_enabled());
    // TF32 keeps 10 mantissa bits: about 1e-3 relative error per product.
    compare_gemm("gemm in TF32", g, uniform({64 * 128}, -1, 1, 39), uniform({128 * 96}, -1, 1, 40),
                 zeros({64 * 96}), 2e-2f, 2e-2f);
    cuda_set_tf32(false);
    compare_gemm("gemm back in float32", g, uniform({64 * 128}, -1, 1, 39),
                 uniform({128 * 96}, -1, 1, 40), zeros({64 * 96}), 1e-4f, 1e-4f);
  }
}

TEST_CASE("few-row products (decoding's Linear layers) match OpenBLAS, bias and activation too") {
  // act(x [m, k] W^T + bias) with W [n, k], m <= 8: CUDA runs these in its own kernel
  // (gemm.cu), by 16-byte vectors where every row starts aligned (k a multiple of 4 floats or 8
  // bfloat16s) and element by element otherwise, with a tail of k mod 4 or 8 after the vectors.
  // With more rows, cuBLAS's product and then a pass of the activation.
  LOOM_REQUIRE_GPU();
  struct Case {
    int64_t m, n, k, pad;  // pad: extra elements at the end of each row of x and W
    float alpha, beta;
    bool bias;
    std::optional<UnaryOp> activation = std::nullopt;
  };
  const std::vector<Case> cases = {
      {1, 300, 768, 0, 1.0f, 0.0f, true},  // a decoding step's product (aligned)
      {1, 13, 771, 0, 1.0f, 0.0f, true},   // rows misaligned: element by element
      {2, 37, 260, 0, 1.0f, 0.0f, false},  // aligned rows, no bias
      {3, 29, 133, 3, 0.5f, 2.0f, true},   // padded rows (ld 136: aligned), a tail, beta
      {5, 8, 64, 0, 1.0f, 1.0f, false},    // C added to
      {8, 70, 1030, 2, 1.0f, 0.0f, true},  // the most rows, vectors + a tail of 2
      {1, 1, 5000, 0, 1.0f, 0.0f, true},   // one output column, a long row
      {7, 5, 3, 1, 1.0f, 0.0f, true},      // rows shorter than one vector
      {1, 96, 64, 0, 1.0f, 0.0f, true, UnaryOp::GeluTanh},  // the activation in the epilogue
      {4, 33, 20, 0, 1.0f, 0.0f, false, UnaryOp::Relu},
      {2, 17, 40, 0, 1.0f, 0.0f, true, UnaryOp::Gelu},
      {16, 40, 72, 0, 1.0f, 0.0f, true, UnaryOp::GeluTanh},  // 16 rows: cuBLAS, then a pass
      {12, 24, 40, 0, 1.0f, 2.0f, true},                     // cuBLAS from 2 C + the bias
  };
  for (const DType type : {DType::Float32, DType::BFloat16}) {
    for (const DType c_type : {DType::Float32, DType::BFloat16}) {
      if (type == DType::Float32 && c_type == DType::BFloat16) continue;
      for (const Case& c : cases) {
        GemmArgs g;
        g.trans_b = true;
        g.m = c.m, g.n = c.n, g.k = c.k;
        g.lda = c.k + c.pad, g.ldb = c.k + c.pad, g.ldc = c.n;
        g.alpha = c.alpha, g.beta = c.beta;
        g.ab_type = type, g.c_type = c_type;
        g.activation = c.activation;
        const Tensor x = uniform({c.m * g.lda}, -1, 1, 41).to(type);
        const Tensor w = uniform({c.n * g.ldb}, -1, 1, 42).to(type);
        const Tensor c0 = uniform({c.m * c.n}, -1, 1, 43).to(c_type);
        const Tensor bias = c.bias ? uniform({c.n}, -1, 1, 44) : Tensor();
        const bool bf16_out = c_type == DType::BFloat16;
        // float32: the sums' order differs; a bfloat16 C is one rounding (2^-8) apart at most.
        compare_gemm(
            "few-row gemm m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                " k=" + std::to_string(c.k) + " " + dtype_name(type) + " -> " + dtype_name(c_type),
            g, x, w, c0, bf16_out ? 1.0f / 128 : 1e-4f, bf16_out ? 1.0f / 128 : 1e-4f, bias);
      }
    }
  }
}

TEST_CASE("a few-row product with beta = 0 does not read C; linear of one strided row") {
  LOOM_REQUIRE_GPU();
  GemmArgs g;
  g.trans_b = true;
  g.m = 2, g.n = 9, g.k = 16, g.lda = 16, g.ldb = 16, g.ldc = 9;
  compare_gemm("few-row gemm over NaN", g, uniform({32}, -1, 1, 45), uniform({144}, -1, 1, 46),
               tensor(std::vector<float>(18, kNaN), {18}), 1e-5f, 1e-5f, uniform({9}, -1, 1, 47));
  // The value and the gradients (whose products have many rows: cuBLAS) of a one-row Linear.
  const Tensor x = uniform({1, 3, 40}, -1, 1, 48), w = uniform({24, 40}, -1, 1, 49);
  const Tensor b = uniform({24}, -1, 1, 50);
  compare_op("linear of one row",
             [](const std::vector<Tensor>& in) {
               return linear(in[0].select(1, 2), in[1], in[2]);  // x: one row, a strided view
             },
             {x, w, b});
}

// ============================================================================ indexing

TEST_CASE("index_select, index_add, gather and scatter_add match the CPU") {
  LOOM_REQUIRE_GPU();
  const int64_t outer = 3, n = 7, inner = 5, k = 11;
  const Tensor index = integers({k}, 0, n, 41);  // with repeats: index_add must accumulate
  const Tensor index3 = integers({outer, k, inner}, 0, n, 42);
  for (DType dtype : {DType::Float32, DType::Int64}) {
    const Tensor x = dtype == DType::Float32 ? eighths({outer, n, inner}, 43)
                                             : integers({outer, n, inner}, -9, 9, 44);
    const Tensor src = dtype == DType::Float32 ? eighths({outer, k, inner}, 45)
                                               : integers({outer, k, inner}, -9, 9, 46);
    compare_devices(
        std::string("indexing ") + dtype_name(dtype),
        [&](Backend& be, Device d) {
          Tensor selected = empty_on(d, {outer, k, inner}, dtype);
          be.index_select(x.to(d), outer, n, inner, index.to(d), selected);
          Tensor added = x.to(d).clone();
          be.index_add(src.to(d), outer, n, inner, index.to(d), added);
          Tensor gathered = empty_on(d, {outer, k, inner}, dtype);
          be.gather(x.to(d), outer, n, inner, index3.to(d), gathered);
          Tensor scattered = x.to(d).clone();
          be.scatter_add(src.to(d), outer, n, inner, index3.to(d), scattered);
          // Embedding's layout: outer = 1, rows of a [num, dim] table.
          Tensor rows = empty_on(d, {1, k, outer * inner}, dtype);
          be.index_select(x.to(d), 1, n, outer * inner, index.to(d).narrow(0, 0, k), rows);
          return std::vector<Tensor>{selected, added, gathered, scattered, rows};
        },
        0.0f, 0.0f);  // eighths and integers add exactly in any order
  }
}

// cuda_set_launch_blocking for one scope, so that these tests do not depend on whether
// CUDA_LAUNCH_BLOCKING is set.
struct LaunchBlocking {
  explicit LaunchBlocking(bool on) : previous(cuda_launch_blocking()) {
    cuda_set_launch_blocking(on);
  }
  ~LaunchBlocking() { cuda_set_launch_blocking(previous); }
  LaunchBlocking(const LaunchBlocking&) = delete;
  LaunchBlocking& operator=(const LaunchBlocking&) = delete;
  bool previous;
};

TEST_CASE("an out-of-range index is a loom::Error naming the op, and the device stays usable") {
  LOOM_REQUIRE_GPU();
  const LaunchBlocking deferred(false);
  // The kernels flag the error on the GPU; it is thrown at the next wait for it (here
  // synchronize() and .cpu()).
  const Tensor x = uniform({5, 3}, -1, 1, 47).to(Device::CUDA);
  const Tensor bad = tensor_i64({0, 4, 7, 1}, {4}).to(Device::CUDA);
  expect_error(
      [&] {
        Tensor out = empty_on(Device::CUDA, {1, 4, 3});
        gpu().index_select(x, 1, 5, 3, bad, out);
        gpu().synchronize();
      },
      {"index_select", "index 7", "position 2", "size 5", "CUDA_LAUNCH_BLOCKING=1"});
  expect_error(
      [&] {
        Tensor out = empty_on(Device::CUDA, {5, 3});
        gpu().index_add(empty_on(Device::CUDA, {4, 3}), 1, 5, 3,
                        tensor_i64({0, -1, 2, 3}, {4}).to(Device::CUDA), out);
        gpu().synchronize();
      },
      {"index_add", "index -1", "position 1"});
  expect_error(
      [&] {
        Tensor out = empty_on(Device::CUDA, {2, 3});
        gpu().gather(x, 1, 5, 3, tensor_i64({0, 1, 2, 3, 9, 4}, {1, 2, 3}).to(Device::CUDA), out);
        gpu().synchronize();
      },
      {"gather", "index 9", "position 4"});
  expect_error(
      [&] {
        Tensor out = zeros({5, 3}, Device::CUDA);
        gpu().scatter_add(ones({1, 3}, Device::CUDA), 1, 5, 3,
                          tensor_i64({5, 0, 0}, {1, 1, 3}).to(Device::CUDA), out);
        gpu().synchronize();
      },
      {"scatter_add", "index 5"});
  expect_error([&] { embedding(x, tensor_i64({1, 5}, {2}).to(Device::CUDA)).cpu(); },
               {"index 5", "size 5"});
  // Kernels never touched memory out of bounds, so the context is healthy.
  check_close(index_select(x, 0, tensor_i64({4, 0}, {2}).to(Device::CUDA)),
              index_select(x.cpu(), 0, tensor_i64({4, 0}, {2})), 0.0f, 0.0f, "after errors");
}

TEST_CASE("a device-side error is thrown once, at the next wait, naming the first op that met it") {
  LOOM_REQUIRE_GPU();
  const LaunchBlocking deferred(false);
  const Tensor x = uniform({5, 3}, -1, 1, 48).to(Device::CUDA);
  const Tensor good = tensor_i64({4, 0}, {2}).to(Device::CUDA);
  const Tensor expected = index_select(x.cpu(), 0, good.cpu());
  SUBCASE("later ops run; the copy to the host throws; the flags are then clear") {
    // Every input is on the device first: a copy from the host waits for the GPU too.
    const Tensor bad_index = tensor_i64({1, 6}, {2}).to(Device::CUDA);
    const Tensor bad_gather = tensor_i64({0, 9, 1}, {1, 3}).to(Device::CUDA);
    const Tensor bad_rows = index_select(x, 0, bad_index);
    const Tensor bad_picks = gather(x, 0, bad_gather);  // a second bad op: the first is named
    const Tensor fine = index_select(x, 0, good);        // queued after the bad ones
    expect_error([&] { (void)fine.cpu(); }, {"index_select", "index 6", "position 1"});
    check_close(fine, expected, 0.0f, 0.0f, "read again: no error left");
    CHECK_NOTHROW(gpu().synchronize());
  }
  SUBCASE("cuda_set_launch_blocking(true) throws at the call") {
    const LaunchBlocking blocking(true);
    expect_error(
        [&] {
          (void)cross_entropy(uniform({2, 4}, -1, 1, 3).to(Device::CUDA),
                              tensor_i64({2, 9}, {2}).to(Device::CUDA));
        },
        {"cross_entropy", "target 9", "position 1", "4 classes"});
    check_close(index_select(x, 0, good), expected, 0.0f, 0.0f, "after the error");
  }
  SUBCASE("more checked launches than flags between two waits") {
    // 600 launches need the 256 flags more than twice; running out of them waits for the GPU,
    // so the bad 300th launch is reported within the next 256.
    const Tensor bad = tensor_i64({8}, {1}).to(Device::CUDA);
    int launched = 0;
    expect_error(
        [&] {
          for (; launched < 600; ++launched)
            (void)index_select(x, 0, launched == 299 ? bad : good);
        },
        {"index_select", "index 8", "position 0"});
    CHECK(launched > 299);
    CHECK(launched <= 299 + 256);
    check_close(index_select(x, 0, good), expected, 0.0f, 0.0f, "after the error");
  }
}

// ============================================================================ random numbers

TEST_CASE("random tensors are the CPU's numbers: Philox is the same on both devices") {
  LOOM_REQUIRE_GPU();
  for (uint64_t offset : {uint64_t{0}, uint64_t{12345}, uint64_t{1} << 40}) {
    compare_devices(
        "rand_uniform",
        [&](Backend& be, Device d) {
          Tensor out = empty_on(d, {1 << 20});
          be.rand_uniform(out, 2024, offset);
          return std::vector<Tensor>{out};
        },
        0.0f, 0.0f);  // integer arithmetic and one exact scaling: bit for bit
    compare_devices(
        "rand_normal",
        [&](Backend& be, Device d) {
          Tensor out = empty_on(d, {1 << 20});
          be.rand_normal(out, 2024, offset);
          return std::vector<Tensor>{out};
        },
        1e-5f, 1e-5f);  // CUDA's logf/cosf/sqrtf round differently from the C library's
  }
}

// ============================================================================ fused kernels

TEST_CASE("layer_norm forward and backward match the CPU, with and without affine") {
  LOOM_REQUIRE_GPU();
  // {rows, cols}: small, many rows (the dweight/dbias column sums split into chunks), wide rows;
  // 128 rows or more of up to 1024 columns take the warp-per-row kernel, the others a block per
  // row.
  const std::vector<std::pair<int64_t, int64_t> > sizes = {
      {4, 8}, {5000, 64}, {3, 4096}, {1, 1}, {70, 768}, {200, 768}, {5, 1024}, {130, 1024},
      {2, 1025}};
  for (const auto& [rows, cols] : sizes) {
    const Tensor x = uniform({rows, cols}, -3, 5, 48);
    const Tensor dy = uniform({rows, cols}, -1, 1, 49);
    const Tensor w = uniform({cols}, 0.5f, 1.5f, 50), b = uniform({cols}, -0.5f, 0.5f, 51);
    for (bool affine : {true, false}) {
      compare_devices(
          "layer_norm [" + std::to_string(rows) + "," + std::to_string(cols) + "]" +
              (affine ? " affine" : ""),
          [&](Backend& be, Device d) {
            const Tensor wd = affine ? w.to(d) : Tensor(), bd = affine ? b.to(d) : Tensor();
            Tensor y = empty_on(d, {rows, cols}), mean = empty_on(d, {rows}),
                   rstd = empty_on(d, {rows});
            be.layer_norm(x.to(d), wd, bd, 1e-5f, y, mean, rstd);
            Tensor dx = empty_on(d, {rows, cols});
            Tensor dw = affine ? empty_on(d, {cols}) : Tensor();
            Tensor db = affine ? empty_on(d, {cols}) : Tensor();
            be.layer_norm_backward(dy.to(d), x.to(d), wd, mean, rstd, dx, dw, db);
            std::vector<Tensor> outs{y, mean, rstd, dx};
            if (affine) {
              outs.push_back(dw);
              outs.push_back(db);
            }
            return outs;
          },
          // dweight/dbias are float sums over `rows` terms on both devices, in different orders.
          1e-4f, 1e-5f * std::max<float>(1.0f, static_cast<float>(rows) / 50.0f));
    }
  }
}

TEST_CASE("add_layer_norm matches the CPU and the GPU's own add followed by layer_norm") {
  LOOM_REQUIRE_GPU();
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t> >{
           {4, 8}, {300, 64}, {3, 4096}, {1, 1}, {70, 768}, {200, 768}, {5, 1024}, {130, 1024},
           {2, 1025}}) {
    const Tensor x = uniform({rows, cols}, -3, 5, 52), r = uniform({rows, cols}, -2, 2, 53);
    const Tensor w = uniform({cols}, 0.5f, 1.5f, 54), b = uniform({cols}, -0.5f, 0.5f, 55);
    for (bool affine : {true, false}) {
      const std::string what = "add_layer_norm [" + std::to_string(rows) + "," +
                               std::to_string(cols) + "]" + (affine ? " affine" : "");
      compare_devices(
          what,
          [&](Backend& be, Device d) {
            const Tensor wd = affine ? w.to(d) : Tensor(), bd = affine ? b.to(d) : Tensor();
            Tensor sum = empty_on(d, {rows, cols}), y = empty_on(d, {rows, cols}),
                   mean = empty_on(d, {rows}), rstd = empty_on(d, {rows});
            be.add_layer_norm(x.to(d), r.to(d), wd, bd, 1e-5f, sum, y, mean, rstd);
            return std::vector<Tensor>{sum, y, mean, rstd};
          },
          1e-4f, 1e-5f);
      // On the GPU itself: the same numbers as the two kernels (the sum is one float addition).
      const Tensor xg = x.to(Device::CUDA), rg = r.to(Device::CUDA);
      const Tensor wd = affine ? w.to(Device::CUDA) : Tensor();
      const Tensor bd = affine ? b.to(Device::CUDA) : Tensor();
      Tensor sum = empty_on(Device::CUDA, {rows, cols}), y = empty_on(Device::CUDA, {rows, cols});
      Tensor mean = empty_on(Device::CUDA, {rows}), rstd = empty_on(Device::CUDA, {rows});
      gpu().add_layer_norm(xg, rg, wd, bd, 1e-5f, sum, y, mean, rstd);
      const Tensor added = xg + rg;
      Tensor y2 = empty_on(Device::CUDA, {rows, cols});
      Tensor mean2 = empty_on(Device::CUDA, {rows}), rstd2 = empty_on(Device::CUDA, {rows});
      gpu().layer_norm(added, wd, bd, 1e-5f, y2, mean2, rstd2);
      check_close(sum, added, 0.0f, 0.0f, what + ": sum");
      check_close(y, y2, 0.0f, 0.0f, what + ": normalised");
      check_close(rstd, rstd2, 0.0f, 0.0f, what + ": rstd");
    }
  }
  // A bfloat16 residual (a bfloat16 branch) is added in float32 as it is read: the CPU's
  // numbers, and on the GPU exactly its own float32 add of the upcast branch then layer_norm.
  // Both kernels: a block per row (70 rows) and a warp per row (200).
  const int64_t cols = 768;
  for (const int64_t rows : {int64_t{70}, int64_t{200}}) {
    const Tensor x = uniform({rows, cols}, -3, 5, 56);
    const Tensor rb = uniform({rows, cols}, -2, 2, 57).to(DType::BFloat16);
    compare_devices(
        "add_layer_norm, bfloat16 residual, " + std::to_string(rows) + " rows",
        [&](Backend& be, Device d) {
          Tensor sum = empty_on(d, {rows, cols}), y = empty_on(d, {rows, cols}),
                 mean = empty_on(d, {rows}), rstd = empty_on(d, {rows});
          be.add_layer_norm(x.to(d), rb.to(d), Tensor(), Tensor(), 1e-5f, sum, y, mean, rstd);
          return std::vector<Tensor>{sum, y, mean, rstd};
        },
        1e-4f, 1e-5f);
    Tensor sum = empty_on(Device::CUDA, {rows, cols}), y = empty_on(Device::CUDA, {rows, cols});
    Tensor mean = empty_on(Device::CUDA, {rows}), rstd = empty_on(Device::CUDA, {rows});
    const Tensor xg = x.to(Device::CUDA), rg = rb.to(Device::CUDA);
    gpu().add_layer_norm(xg, rg, Tensor(), Tensor(), 1e-5f, sum, y, mean, rstd);
    const Tensor added = xg + rg.to(DType::Float32);
    Tensor y2 = empty_on(Device::CUDA, {rows, cols});
    Tensor mean2 = empty_on(Device::CUDA, {rows}), rstd2 = empty_on(Device::CUDA, {rows});
    gpu().layer_norm(added, Tensor(), Tensor(), 1e-5f, y2, mean2, rstd2);
    check_close(sum, added, 0.0f, 0.0f, "bfloat16 residual: sum");
    check_close(y, y2, 0.0f, 0.0f, "bfloat16 residual: normalised");
  }
}

TEST_CASE("cross_entropy forward and backward match the CPU, with ignore_index and smoothing") {
  LOOM_REQUIRE_GPU();
  for (const auto& [rows, classes] :
       std::vector<std::pair<int64_t, int64_t> >{{37, 11}, {4, 50257}}) {
    std::vector<int64_t> t = integers({rows}, 0, classes, 52).to_vector_i64();
    t[1] = -100;  // ignored rows
    t[rows - 1] = -100;
    const Tensor target = tensor_i64(t, {rows});
    const Tensor logits = uniform({rows, classes}, -6, 6, 53);
    for (float smoothing : {0.0f, 0.1f}) {
      compare_devices(
          "cross_entropy " + std::to_string(classes) + " classes, smoothing " +
              std::to_string(smoothing),
          [&](Backend& be, Device d) {
            Tensor losses = empty_on(d, {rows}), lse = empty_on(d, {rows});
            be.cross_entropy(logits.to(d), target.to(d), -100, smoothing, losses, lse);
            Tensor dlogits = empty_on(d, {rows, classes});
            be.cross_entropy_backward(logits.to(d), target.to(d), lse, -100, smoothing, 0.25f,
                                      dlogits);
            // The same logits as a view with padded rows (an LM head's output), read in place.
            const Tensor padded =
                cat({logits, uniform({rows, 5}, -6, 6, 54)}, 1).to(d).narrow(1, 0, classes);
            Tensor losses_p = empty_on(d, {rows}), lse_p = empty_on(d, {rows});
            be.cross_entropy(padded, target.to(d), -100, smoothing, losses_p, lse_p);
            Tensor dlogits_p = empty_on(d, {rows, classes});
            be.cross_entropy_backward(padded, target.to(d), lse_p, -100, smoothing, 0.25f,
                                      dlogits_p);
            return std::vector<Tensor>{losses, lse, dlogits, losses_p, lse_p, dlogits_p};
          },
          2e-5f, 1e-6f);
    }
  }
  expect_error(
      [] {
        Tensor losses = empty_on(Device::CUDA, {2}), lse = empty_on(Device::CUDA, {2});
        gpu().cross_entropy(zeros({2, 3}, Device::CUDA), tensor_i64({0, 3}, {2}).to(Device::CUDA),
                            -100, 0.0f, losses, lse);
        gpu().synchronize();  // where the GPU's error is reported
      },
      {"cross_entropy", "target 3", "position 1", "3 classes"});
}

TEST_CASE("the fused Adam and AdamW updates match the CPU over several steps") {
  LOOM_REQUIRE_GPU();
  for (bool decoupled : {false, true}) {
    compare_devices(
        decoupled ? "adamw" : "adam",
        [&](Backend& be, Device d) {
          Tensor param = uniform({3000}, -1, 1, 54).to(d);
          Tensor m = zeros({3000}, d), v = zeros({3000}, d);
          AdamArgs args;
          args.lr = 0.01f;
          args.weight_decay = 0.1f;
          args.decoupled = decoupled;
          for (int step = 1; step <= 5; ++step) {
            args.bias1 = 1.0f - std::pow(args.beta1, static_cast<float>(step));
            args.bias2 = 1.0f - std::pow(args.beta2, static_cast<float>(step));
            // A strided gradient (stride 2): the kernel reads a contiguous copy of it.
            const Tensor grad = uniform({3000, 2}, -1, 1, 55 + step).to(d).select(1, 0);
            be.adam_step(args, param, grad, m, v);
          }
          return std::vector<Tensor>{param, m, v};
        },
        1e-5f, 1e-6f);
  }
}

// ============================================================================ public ops

TEST_CASE("elementwise ops and their gradients match the CPU through .to(Device::CUDA)") {
  LOOM_REQUIRE_GPU();
  const Tensor a = uniform({3, 4, 5}, -2, 2, 60), b = uniform({4, 1}, -2, 2, 61);
  const Tensor pos = uniform({3, 4, 5}, 0.2f, 3, 62), pos_b = uniform({5}, 0.5f, 2, 63);
  compare_op("add", [](auto& t) { return t[0] + t[1]; }, {a, b});
  compare_op("sub", [](auto& t) { return t[0] - t[1]; }, {a, b});
  compare_op("mul", [](auto& t) { return t[0] * t[1]; }, {a, b});
  compare_op("div", [](auto& t) { return t[0] / t[1]; }, {a, pos_b});
  compare_op("pow", [](auto& t) { return pow(t[0], t[1]); }, {pos, pos_b});
  compare_op("maximum", [](auto& t) { return maximum(t[0], t[1]); }, {a, b});
  compare_op("minimum", [](auto& t) { return minimum(t[0], t[1]); }, {a, b});
  compare_op("scalars", [](auto& t) { return (2.0f - t[0]) * 3.0f + t[0] / 2.0f - 1.0f; }, {a});
  compare_op("rdiv", [](auto& t) { return 3.0f / t[0]; }, {pos});
  compare_op("neg", [](auto& t) { return -t[0]; }, {a});
  compare_op("exp", [](auto& t) { return exp(t[0]); }, {a});
  compare_op("log", [](auto& t) { return log(t[0]); }, {pos});
  compare_op("sqrt", [](auto& t) { return sqrt(t[0]); }, {pos});
  compare_op("rsqrt", [](auto& t) { return rsqrt(t[0]); }, {pos});
  compare_op("tanh", [](auto& t) { return tanh(t[0]); }, {a});
  compare_op("sigmoid", [](auto& t) { return sigmoid(t[0]); }, {a});
  compare_op("relu", [](auto& t) { return relu(t[0]); }, {a});
  compare_op("gelu", [](auto& t) { return gelu(t[0]); }, {a});
  compare_op("gelu_tanh", [](auto& t) { return gelu_tanh(t[0]); }, {a});
  compare_op("abs", [](auto& t) { return abs(t[0]); }, {a});
  compare_op("sin", [](auto& t) { return sin(t[0]); }, {a});
  compare_op("cos", [](auto& t) { return cos(t[0]); }, {a});
  compare_op("sign", [](auto& t) { return sign(t[0]); }, {a});
  compare_op("clamp", [](auto& t) { return clamp(t[0], -0.5f, 1.0f); }, {a});
  compare_op("pow scalar", [](auto& t) { return pow(t[0], 2.5f); }, {pos});
  compare_op("square", [](auto& t) { return pow(t[0], 2.0f); }, {a});
  const Tensor e = eighths({6, 7}, 64), f = eighths({7}, 65);
  compare_op(
      "eq", [](auto& t) { return eq(t[0], t[1]); }, {e, f}, 0, 0);
  compare_op(
      "ne", [](auto& t) { return ne(t[0], t[1]); }, {e, f}, 0, 0);
  compare_op(
      "lt", [](auto& t) { return lt(t[0], t[1]); }, {e, f}, 0, 0);
  compare_op(
      "le", [](auto& t) { return le(t[0], t[1]); }, {e, f}, 0, 0);
  compare_op(
      "gt", [](auto& t) { return gt(t[0], 0.5f); }, {e}, 0, 0);
  compare_op(
      "ge", [](auto& t) { return ge(t[0], t[1]); }, {e, f}, 0, 0);
  compare_op(
      "eq scalar", [](auto& t) { return eq(t[0], 0.25f); }, {e}, 0, 0);
  compare_op(
      "lt scalar", [](auto& t) { return lt(t[0], 0.25f); }, {e}, 0, 0);
  compare_op("where", [](auto& t) { return where(gt(t[0], 0.0f), t[0] * 2.0f, t[1]); }, {a, b});
  compare_op("masked_fill", [](auto& t) { return masked_fill(t[0], lt(t[1], 0.0f), -1e9f); },
             {a, b});
}

TEST_CASE("reductions, softmax and matmul match the CPU through .to(Device::CUDA)") {
  LOOM_REQUIRE_GPU();
  const Tensor x = uniform({4, 6, 5}, -2, 2, 70);
  compare_op("sum", [](auto& t) { return sum(t[0]); }, {x});
  compare_op("sum dim", [](auto& t) { return sum(t[0], 1); }, {x});
  compare_op("sum keepdim", [](auto& t) { return sum(t[0], 0, true); }, {x});
  compare_op("mean", [](auto& t) { return mean(t[0]); }, {x});
  compare_op("mean dim", [](auto& t) { return mean(t[0], -1); }, {x});
  compare_op("max", [](auto& t) { return max(t[0]); }, {x});
  compare_op("max dim", [](auto& t) { return max(t[0], 1); }, {x});
  compare_op("min dim", [](auto& t) { return min(t[0], 2, true); }, {x});
  compare_op(
      "argmax", [](auto& t) { return argmax(t[0], 1); }, {x}, 0, 0);
  compare_op(
      "argmin", [](auto& t) { return argmin(t[0], 0); }, {x}, 0, 0);
  compare_op("var", [](auto& t) { return var(t[0], 1); }, {x});
  compare_op("var biased keepdim", [](auto& t) { return var(t[0], 2, false, true); }, {x});
  compare_op("sum_to", [](auto& t) { return sum_to(t[0], {6, 1}); }, {x});
  compare_op("softmax last", [](auto& t) { return softmax(t[0], -1); }, {x});
  compare_op("softmax middle", [](auto& t) { return softmax(t[0], 1); }, {x});
  compare_op("log_softmax first", [](auto& t) { return log_softmax(t[0], 0); }, {x});
  const Tensor v = uniform({5}, -1, 1, 71), w = uniform({5}, -1, 1, 72);
  const Tensor m = uniform({5, 3}, -1, 1, 73), n = uniform({4, 5}, -1, 1, 74);
  const Tensor batched = uniform({2, 3, 4, 5}, -1, 1, 75), weight = uniform({6, 5}, -1, 1, 76);
  const Tensor left = uniform({3, 4, 5}, -1, 1, 77), right = uniform({1, 5, 2}, -1, 1, 78);
  compare_op("dot", [](auto& t) { return matmul(t[0], t[1]); }, {v, w});
  compare_op("vector @ matrix", [](auto& t) { return matmul(t[0], t[1]); }, {v, m});
  compare_op("matrix @ vector", [](auto& t) { return matmul(t[0], t[1]); }, {n, v});
  compare_op("batched @ transposed weight", [](auto& t) { return matmul(t[0], t[1].t()); },
             {batched, weight});
  compare_op("broadcast batch", [](auto& t) { return matmul(t[0], t[1]); }, {left, right});
  compare_op("attention scores", [](auto& t) { return matmul(t[0], t[0].transpose(-2, -1)); },
             {batched});
  const Tensor bias = uniform({6}, -1, 1, 79);
  compare_op("linear (GEMM from the bias)", [](auto& t) { return linear(t[0], t[1], t[2]); },
             {batched, weight, bias});
}

TEST_CASE("shape, indexing and fused nn ops match the CPU through .to(Device::CUDA)") {
  LOOM_REQUIRE_GPU();
  const Tensor x = uniform({4, 6, 5}, -2, 2, 80), y = uniform({4, 2, 5}, -2, 2, 81);
  const Tensor ids = integers({3}, 0, 6, 82), gidx = integers({4, 3, 5}, 0, 6, 83);
  compare_op("reshape", [](auto& t) { return t[0].reshape({6, 20}) * 1.5f; }, {x});
  compare_op("transpose contiguous", [](auto& t) { return t[0].transpose(0, 2).contiguous(); },
             {x});
  compare_op("permute", [](auto& t) { return exp(t[0].permute({2, 0, 1})); }, {x});
  compare_op("narrow", [](auto& t) { return t[0].narrow(1, 2, 3) * 2.0f; }, {x});
  compare_op("select squeeze unsqueeze",
             [](auto& t) { return t[0].select(0, 1).unsqueeze(0).squeeze(0); }, {x});
  compare_op("flatten", [](auto& t) { return t[0].flatten(1); }, {x});
  compare_op("cat", [](auto& t) { return cat({t[0], t[1]}, 1); }, {x, y});
  compare_op("roll", [](auto& t) { return roll(t[0], -7, 1); }, {x});
  compare_op("roll two dims of a transposed view",
             [](auto& t) {
               return roll(t[0].transpose(0, 2), {2, 1}, {0, -1});
             },
             {x});
  compare_op("add_softmax, a bias broadcast over dim 1",
             [](auto& t) { return add_softmax(t[0], t[1].narrow(1, 0, 1)); }, {x, y});
  compare_op("stack", [](auto& t) { return stack({t[0], t[0] * 2.0f}, 2); }, {x});
  compare_op("split, one piece unused (its gradient zeros)",
             [](auto& t) {
               const std::vector<Tensor> p = split(t[0], std::vector<int64_t>{2, 1, 3}, 1);
               return cat({p[0] * 2.0f, exp(p[2])}, 1);
             },
             {x});
  compare_op("chunk of a transposed view",
             [](auto& t) {
               // [5,6,4] in pieces of 3 and 2 along dim 0
               const std::vector<Tensor> p = t[0].transpose(0, 2).chunk(2, 0);
               return p[0].narrow(0, 1, 2) * p[1];
             },
             {x});
  compare_op("index_select", [](auto& t) { return index_select(t[0], 1, t[1]); }, {x, ids});
  compare_op("gather", [](auto& t) { return gather(t[0], 1, t[1]); }, {x, gidx});
  compare_op("embedding", [](auto& t) { return embedding(t[0], t[1]); },
             {uniform({10, 8}, -1, 1, 84), integers({2, 7}, 0, 10, 85)});
  compare_op("tril", [](auto& t) { return tril(t[0], -1); }, {x});
  compare_op("triu", [](auto& t) { return triu(t[0], 1); }, {x});
  compare_op("expand through broadcasting",
             [](auto& t) {
               return t[0] * ones({3, 1, 1}, t[0].device());
             },
             {uniform({1, 6, 5}, -1, 1, 86)});
  const Tensor h = uniform({2, 3, 16}, -3, 3, 87);
  compare_op("layer_norm", [](auto& t) { return layer_norm(t[0], t[1], t[2]); },
             {h, uniform({16}, 0.5f, 1.5f, 88), uniform({16}, -1, 1, 89)});
  compare_op("layer_norm without affine", [](auto& t) { return layer_norm(t[0], {}, {}); }, {h});
  compare_op("add_layer_norm, both outputs used",
             [](auto& t) {
               const auto [sum, normed] = add_layer_norm(t[0], t[1], t[2], t[3]);
               return normed * sum;
             },
             {h, uniform({2, 3, 16}, -1, 1, 91), uniform({16}, 0.5f, 1.5f, 88),
              uniform({16}, -1, 1, 89)});
  std::vector<int64_t> labels = integers({2, 3}, 0, 16, 90).to_vector_i64();
  labels[4] = -100;
  const Tensor target = tensor_i64(labels, {2, 3});
  compare_op("cross_entropy", [](auto& t) { return cross_entropy(t[0], t[1]); }, {h, target});
  compare_op("cross_entropy smoothed",
             [](auto& t) { return cross_entropy(t[0], t[1], -100, 0.2f); }, {h, target});
  // dropout draws its mask from the global generator: the same seed, the same mask.
  compare_op("dropout",
             [](auto& t) {
               manual_seed(5);
               return dropout(t[0], 0.3f, true);
             },
             {h});
}

TEST_CASE("creation on the device gives the CPU's values, random ones included") {
  LOOM_REQUIRE_GPU();
  auto both = [](const std::function<Tensor(Device)>& make, const std::string& what) {
    const Tensor want = make(Device::CPU), got = make(Device::CUDA);
    CHECK(got.device() == Device::CUDA);
    check_close(got, want, 0.0f, 0.0f, what);
  };
  both([](Device d) { return zeros({3, 4}, d); }, "zeros");
  both([](Device d) { return ones({3, 4}, d); }, "ones");
  both([](Device d) { return full({3, 4}, -2.5f, d); }, "full");
  both([](Device d) { return arange(10, d); }, "arange");
  both([](Device d) { return arange_f(0.5f, 3.0f, 0.25f, d); }, "arange_f");
  // Long enough for every thread of the grid-stride loop to take several elements; steps whose
  // products round, where a fused multiply-add would differ from the CPU.
  both([](Device d) { return arange(300000, d); }, "arange, long");
  both([](Device d) { return arange_f(-3.1f, 40000.0f, 0.1f, d); }, "arange_f, rounding");
  both([](Device d) { return scalar_tensor(4.0f, d); }, "scalar_tensor");
  both(
      [](Device d) {
        manual_seed(11);
        return rand({5000}, d);
      },
      "rand");
  both(
      [](Device d) {
        manual_seed(11);
        return randint(-3, 40, {5000}, d);
      },
      "randint");
  manual_seed(12);
  const Tensor normal_cpu = randn({5000});
  manual_seed(12);
  check_close(randn({5000}, Device::CUDA), normal_cpu, 1e-5f, 1e-5f, "randn");
}

TEST_CASE("gradients flow back across devices through .to()") {
  LOOM_REQUIRE_GPU();
  Tensor x = uniform({4, 3}, -1, 1, 91).requires_grad_(true);  // a CPU leaf
  Tensor loss = sum(exp(x.to(Device::CUDA)) * 2.0f);
  CHECK(loss.device() == Device::CUDA);
  loss.backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().device() == Device::CPU);
  check_close(x.grad(), exp(x.detach()) * 2.0f, 1e-5f, 1e-6f, "d/dx sum(2 exp(x))");
  expect_error([&] { add(ones({2}), ones({2}, Device::CUDA)); }, {"add"});
}

// Last on purpose: a failing CUDA call is reported as a loom::Error that names the call, the
// source file and the runtime's own message. (Copying to a null device pointer is rejected by
// the runtime before any transfer, so the context stays usable.)
TEST_CASE("a failing CUDA runtime call becomes a loom::Error naming the call") {
  LOOM_REQUIRE_GPU();
  const float host[4] = {1, 2, 3, 4};
  expect_error([&] { gpu().copy_from_host(nullptr, host, sizeof host); },
               {"CUDA error in cudaMemcpyAsync", "cuda_backend.cpp"});
}

#endif  // LOOM_WITH_CUDA
