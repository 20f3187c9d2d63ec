// The CPU kernel table, called directly through cpu_backend() and checked against plain
// reference loops written here in double precision. These loops are the "plain kernels" that
// every optimised or CUDA kernel is measured against (the llm.c habit): they spell out what
// each kernel computes, element by element, with no layout tricks.
// Sizes are chosen to hit both the serial and the multi-threaded paths (ctest runs with
// OMP_NUM_THREADS=2), and inputs come in contiguous, transposed and broadcast (stride 0) forms.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/caching_allocator.h"
#include "backends/config.h"
#include "backends/cpu/huge_pages.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/vec_math.h"
#include "backends/gemm/tiled_gemm.h"
#include "core/rng.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

Backend& kernels() { return cpu_backend(); }

// n deterministic values uniform in [lo, hi).
std::vector<float> uniform_values(int64_t n, float lo, float hi, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = lo + (hi - lo) * philox_uniform(static_cast<uint64_t>(i), seed);
  return v;
}

Tensor uniform_tensor(const Shape& shape, float lo, float hi, uint64_t seed) {
  return tensor(uniform_values(shape_numel(shape), lo, hi, seed), shape);
}

// The same values as a [rows, cols] tensor, laid out transposed in memory (strides [1, rows]).
Tensor transposed_layout(const Tensor& x) { return x.t().contiguous().t(); }

// |got - want| <= atol + rtol |want| everywhere, NaN matching NaN and inf matching inf.
void expect_close(const std::vector<float>& got, const std::vector<double>& want, double rtol,
                  double atol, const std::string& what) {
  REQUIRE_MESSAGE(got.size() == want.size(),
                  what << ": " << got.size() << " values, expected " << want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    const bool ok = (std::isnan(g) && std::isnan(w)) || (std::isinf(w) && g == w) ||
                    std::fabs(g - w) <= atol + rtol * std::fabs(w);
    if (!ok) {
      FAIL_CHECK(what << ": element " << i << " is " << g << ", expected " << w);
      return;
    }
  }
}

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// ------------------------------------------------------------------ reference unary ops

constexpr double kPi = 3.14159265358979323846;

double ref_unary(UnaryOp op, double x, double a, double b) {
  switch (op) {
    case UnaryOp::Neg:
      return -x;
    case UnaryOp::Exp:
      return std::exp(x);
    case UnaryOp::Log:
      return std::log(x);
    case UnaryOp::Sqrt:
      return std::sqrt(x);
    case UnaryOp::Rsqrt:
      return 1.0 / std::sqrt(x);
    case UnaryOp::Tanh:
      return std::tanh(x);
    case UnaryOp::Sigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case UnaryOp::Relu:
      return x > 0 ? x : 0.0;
    case UnaryOp::Gelu:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case UnaryOp::GeluTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (x + 0.044715 * x * x * x)));
    case UnaryOp::Abs:
      return std::fabs(x);
    case UnaryOp::Sin:
      return std::sin(x);
    case UnaryOp::Cos:
      return std::cos(x);
    case UnaryOp::Sign:
      return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
    case UnaryOp::Pow:
      return std::pow(x, a);
    case UnaryOp::Affine:
      return a * x + b;
    case UnaryOp::RDiv:
      return a / x;
    case UnaryOp::Clamp:
      return std::min(std::max(x, a), b);
    case UnaryOp::Reciprocal:
      return 1.0 / x;
    case UnaryOp::Square:
      return x * x;
    case UnaryOp::Log1p:
      return std::log1p(x);
    case UnaryOp::Expm1:
      return std::expm1(x);
    case UnaryOp::Log2:
      return std::log2(x);
    case UnaryOp::Exp2:
      return std::exp2(x);
    case UnaryOp::Erf:
      return std::erf(x);
    case UnaryOp::Floor:
      return std::floor(x);
    case UnaryOp::Ceil:
      return std::ceil(x);
    case UnaryOp::Round:
      return std::nearbyint(x);  // half to even
    case UnaryOp::Trunc:
      return std::trunc(x);
    case UnaryOp::Silu:
      return x / (1.0 + std::exp(-x));
    case UnaryOp::Softplus:
      return a * x > b ? x : std::log1p(std::exp(a * x)) / a;
    case UnaryOp::LeakyRelu:
      return x > 0 ? x : a * x;
    case UnaryOp::Elu:
      return x > 0 ? x : a * std::expm1(x);
    case UnaryOp::Mish:
      return x * std::tanh(std::log1p(std::exp(x)));
    case UnaryOp::Hardswish:
      return x * std::min(std::max(x + 3.0, 0.0), 6.0) / 6.0;
    case UnaryOp::Logit: {
      const double z = a < 0 ? x : std::min(std::max(x, a), 1.0 - a);
      return std::log(z / (1.0 - z));
    }
    case UnaryOp::Relu6:
      return std::min(std::max(x, 0.0), 6.0);
  }
  return 0.0;
}

// The piecewise-constant ops, whose derivative is 0 (central differences would see the steps).
bool is_step(UnaryOp op) {
  return op == UnaryOp::Sign || op == UnaryOp::Floor || op == UnaryOp::Ceil ||
         op == UnaryOp::Round || op == UnaryOp::Trunc;
}

struct UnaryCase {
  UnaryOp op;
  const char* name;
  float a, b;
  float lo, hi;  // input domain
};

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {UnaryOp::Neg, "neg", 0, 0, -5, 5},
      {UnaryOp::Exp, "exp", 0, 0, -20, 20},
      {UnaryOp::Log, "log", 0, 0, 0.01f, 50},
      {UnaryOp::Sqrt, "sqrt", 0, 0, 0.01f, 50},
      {UnaryOp::Rsqrt, "rsqrt", 0, 0, 0.01f, 50},
      {UnaryOp::Tanh, "tanh", 0, 0, -6, 6},
      {UnaryOp::Sigmoid, "sigmoid", 0, 0, -12, 12},
      {UnaryOp::Relu, "relu", 0, 0, -3, 3},
      {UnaryOp::Gelu, "gelu", 0, 0, -6, 6},
      {UnaryOp::GeluTanh, "gelu_tanh", 0, 0, -6, 6},
      {UnaryOp::Abs, "abs", 0, 0, -3, 3},
      {UnaryOp::Sin, "sin", 0, 0, -4, 4},
      {UnaryOp::Cos, "cos", 0, 0, -4, 4},
      {UnaryOp::Sign, "sign", 0, 0, -3, 3},
      {UnaryOp::Pow, "pow2", 2, 0, -3, 3},
      {UnaryOp::Pow, "pow3", 3, 0, -3, 3},
      {UnaryOp::Pow, "pow0.5", 0.5f, 0, 0.01f, 9},
      {UnaryOp::Pow, "pow-1", -1, 0, 0.1f, 9},
      {UnaryOp::Pow, "pow1.7", 1.7f, 0, 0.01f, 9},
      {UnaryOp::Affine, "affine", -2.5f, 0.75f, -3, 3},
      {UnaryOp::RDiv, "rdiv", 3, 0, 0.1f, 9},
      {UnaryOp::Clamp, "clamp", -1, 2, -3, 3},
      {UnaryOp::Reciprocal, "reciprocal", 0, 0, 0.1f, 9},
      {UnaryOp::Square, "square", 0, 0, -3, 3},
      {UnaryOp::Log1p, "log1p", 0, 0, -0.9f, 5},
      {UnaryOp::Expm1, "expm1", 0, 0, -5, 5},
      {UnaryOp::Log2, "log2", 0, 0, 0.01f, 50},
      {UnaryOp::Exp2, "exp2", 0, 0, -10, 10},
      {UnaryOp::Erf, "erf", 0, 0, -3, 3},
      {UnaryOp::Floor, "floor", 0, 0, -3, 3},
      {UnaryOp::Ceil, "ceil", 0, 0, -3, 3},
      {UnaryOp::Round, "round", 0, 0, -3, 3},
      {UnaryOp::Trunc, "trunc", 0, 0, -3, 3},
      {UnaryOp::Silu, "silu", 0, 0, -8, 8},
      {UnaryOp::Softplus, "softplus", 2, 20, -6, 6},
      {UnaryOp::Softplus, "softplus_threshold", 1, 2, 2.5f, 6},  // all past the threshold
      {UnaryOp::LeakyRelu, "leaky_relu", 0.1f, 0, -3, 3},
      {UnaryOp::Elu, "elu", 1.3f, 0, -4, 3},
      {UnaryOp::Mish, "mish", 0, 0, -6, 6},
      {UnaryOp::Hardswish, "hardswish", 0, 0, -5, 5},
      {UnaryOp::Logit, "logit", -1, 0, 0.01f, 0.99f},
      {UnaryOp::Logit, "logit_eps", 0.1f, 0, 0.02f, 0.98f},
      {UnaryOp::Relu6, "relu6", 0, 0, -2, 8},
  };
  return cases;
}

// dy/dx of the reference op by central differences in double precision.
double ref_derivative(const UnaryCase& c, double x) {
  const double h = 1e-6 * std::max(1.0, std::fabs(x));
  return (ref_unary(c.op, x + h, c.a, c.b) - ref_unary(c.op, x - h, c.a, c.b)) / (2 * h);
}

// ------------------------------------------------------------------ reference gemm

// C[b] = alpha op(A[b]) op(B[b]) + beta C[b], straight from the definition.
std::vector<double> ref_gemm(const GemmArgs& g, const std::vector<float>& c0) {
  std::vector<double> c(c0.begin(), c0.end());
  const auto* a = static_cast<const float*>(g.a);
  const auto* b = static_cast<const float*>(g.b);
  for (int64_t bt = 0; bt < g.batch; ++bt)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < g.k; ++p) {
          const float av = g.trans_a ? a[g.offset_a(bt) + p * g.lda + i]
                                     : a[g.offset_a(bt) + i * g.lda + p];
          const float bv = g.trans_b ? b[g.offset_b(bt) + j * g.ldb + p]
                                     : b[g.offset_b(bt) + p * g.ldb + j];
          acc += static_cast<double>(av) * bv;
        }
        double& out = c[static_cast<size_t>(g.offset_c(bt) + i * g.ldc + j)];
        out = g.alpha * acc + (g.beta == 0.0f ? 0.0 : g.beta * out);
      }
  return c;
}

// ------------------------------------------------------------------ reference layer norm / CE

// y = (x - mean) / sqrt(var + eps) * w + b per row, in double.
std::vector<double> ref_layer_norm(const std::vector<double>& x, const std::vector<double>& w,
                                   const std::vector<double>& b, int64_t rows, int64_t cols,
                                   double eps) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mean += x[r * cols + c] / cols;
    for (int64_t c = 0; c < cols; ++c) var += std::pow(x[r * cols + c] - mean, 2) / cols;
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = (x[r * cols + c] - mean) / std::sqrt(var + eps) * (w.empty() ? 1 : w[c]) +
                        (b.empty() ? 0 : b[c]);
  }
  return y;
}

// Per-row smoothed cross-entropy in double: the target distribution puts 1 - ls + ls/C on the
// target and ls/C on every other class.
std::vector<double> ref_cross_entropy(const std::vector<double>& x, const std::vector<int64_t>& t,
                                      int64_t classes, int64_t ignore, double ls) {
  std::vector<double> loss(t.size());
  for (size_t r = 0; r < t.size(); ++r) {
    if (t[r] == ignore) continue;
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < classes; ++c) m = std::max(m, x[r * classes + c]);
    for (int64_t c = 0; c < classes; ++c) s += std::exp(x[r * classes + c] - m);
    const double lse = m + std::log(s);
    for (int64_t c = 0; c < classes; ++c) {
      const double target_prob = (c == t[r] ? 1 - ls : 0) + ls / classes;
      loss[r] += target_prob * (lse - x[r * classes + c]);
    }
  }
  return loss;
}

// Central-difference gradient of a scalar function of v, in double.
std::vector<double> numeric_grad(const std::function<double(const std::vector<double>&)>& f,
                                 std::vector<double> v, double h = 1e-5) {
  std::vector<double> grad(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double saved = v[i];
    v[i] = saved + h;
    const double up = f(v);
    v[i] = saved - h;
    const double down = f(v);
    v[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

// =================================================================== memory, copy, fill

// parallel_region runs its body on every thread of a team, or once on the calling thread
// without one; a `#pragma omp for nowait` inside covers its range exactly once either way.
TEST_CASE("parallel_region: a team or the calling thread alone, the loop inside covered once") {
  for (bool parallel : {false, true}) {
    CAPTURE(parallel);
    std::vector<int> hits(1000, 0);
    int bodies = 0;
    bool inside_team = false;
    cpu::parallel_region(parallel, [&] {
#pragma omp atomic
      ++bodies;
      if (omp_in_parallel()) {
#pragma omp atomic write
        inside_team = true;
      }
#pragma omp for schedule(static) nowait
      for (int64_t i = 0; i < 1000; ++i) ++hits[static_cast<size_t>(i)];
    });
    CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
    CHECK(bodies == (parallel ? omp_get_max_threads() : 1));
    CHECK(inside_team == (parallel && omp_get_max_threads() > 1));
  }
}

// A program may call loom from its own OpenMP team (a `#pragma omp parallel for` over its
// inputs). parallel_region's loop must then still cover the calling thread's range whole, on that
// thread: without a region of its own, its `omp for` would share the loop out among the caller's
// team, whose other threads are inside other calls.
TEST_CASE("parallel_region inside the caller's own team: each thread's loop covered whole") {
  for (bool parallel : {false, true}) {
    CAPTURE(parallel);
    std::vector<std::vector<int>> hits(2, std::vector<int>(1000, 0));
#pragma omp parallel num_threads(2)
    {
      const int t = omp_get_thread_num();
      cpu::parallel_region(parallel, [&] {
#pragma omp for schedule(static) nowait
        for (int64_t i = 0; i < 1000; ++i) ++hits[static_cast<size_t>(t)][static_cast<size_t>(i)];
      });
    }
    for (int t = 0; t < 2; ++t) {
      CAPTURE(t);
      CHECK(std::all_of(hits[t].begin(), hits[t].end(), [](int h) { return h == 1; }));
    }
  }
}

TEST_CASE("cpu allocate returns 64-byte aligned, distinct blocks, even for 0 bytes") {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{1000}}) {
    void* p = kernels().allocate(bytes);
    void* q = kernels().allocate(bytes);
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
    CHECK(p != q);
    kernels().deallocate(p, bytes);
    kernels().deallocate(q, bytes);
  }
}

TEST_CASE("cpu allocate hands a freed block of the same size class back") {
#if defined(__SANITIZE_ADDRESS__)
  constexpr bool kCached = false;  // no cache under ASan: freed memory goes to its quarantine
#else
  constexpr bool kCached = true;
#endif
  void* p = kernels().allocate(3 << 20);
  kernels().deallocate(p, 3 << 20);
  void* q = kernels().allocate((3 << 20) - 1000);  // same class: the cached block comes back
  CHECK((q == p) == kCached);
  kernels().deallocate(q, (3 << 20) - 1000);
}

// The VmFlags of the mapping of this process that holds `address` ("" when none does), from
// /proc/self/smaps: "hg" among them means the range was advised into huge pages.
std::string mapping_flags(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(address);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long long first = 0, last = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &first, &last) == 2)  // "first-last perms ..."
      inside = first <= at && at < last;
    else if (inside && line.rfind("VmFlags:", 0) == 0)
      return line;
  }
  return "";
}

TEST_CASE("cpu memory of 2 MiB or more starts on a huge page, advised into huge pages") {
  constexpr size_t kBig = (5 << 20) + 4096;
  void* big = kernels().allocate(kBig);
  void* small = kernels().allocate(1000);
  CHECK(reinterpret_cast<uintptr_t>(big) % cpu::kHugePage == 0);
  CHECK(reinterpret_cast<uintptr_t>(small) % 64 == 0);
  std::memset(big, 1, kBig);  // every byte is ours to write
  // Where the kernel has transparent huge pages, the block's mapping carries the advice.
  if (std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good())
    CHECK(mapping_flags(big).find(" hg") != std::string::npos);
  kernels().deallocate(big, kBig);
  kernels().deallocate(small, 1000);

  cpu::HugePageBuffer buffer;  // gemm's scratch: grows, keeps its memory for smaller requests
  float* few = buffer.reserve(100);
  REQUIRE(few != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(few) % 64 == 0);
  float* many = buffer.reserve(size_t{3} << 20);  // 12 MiB of floats
  CHECK(reinterpret_cast<uintptr_t>(many) % cpu::kHugePage == 0);
  many[(size_t{3} << 20) - 1] = 2.0f;
  CHECK(buffer.reserve(1000) == many);
}

// A source of fake blocks with a budget, counting what it hands out and gets back.
struct FakeMemory {
  size_t budget = 0, obtained = 0, returned = 0, in_use = 0;
  std::vector<std::vector<char>> blocks;
  CachingAllocator::Source source() {
    auto obtain = [this](size_t bytes) -> void* {
      if (in_use + bytes > budget) return nullptr;
      in_use += bytes, ++obtained;
      blocks.emplace_back(bytes);
      return blocks.back().data();
    };
    auto give_back = [this](void* block) {
      for (auto& b : blocks)
        if (b.data() == block) in_use -= b.size();
      ++returned;
    };
    return {"fake", obtain, give_back};
  }
};

TEST_CASE("caching allocator: size classes, reuse, the cache limit and out of memory") {
  // Size classes: 512 bytes at least, then quarters of the power of two below.
  CHECK(CachingAllocator::round_size(1) == 512);
  CHECK(CachingAllocator::round_size(512) == 512);
  CHECK(CachingAllocator::round_size(513) == 640);
  CHECK(CachingAllocator::round_size(1024) == 1024);
  CHECK(CachingAllocator::round_size(1025) == 1280);
  CHECK(CachingAllocator::round_size((1 << 20) + 1) == (1 << 20) + (1 << 18));
  for (size_t bytes = 1; bytes < 100000; bytes = bytes * 3 + 1) {
    const size_t size = CachingAllocator::round_size(bytes);
    CHECK(size >= bytes);
    CHECK(size <= std::max<size_t>(512, bytes + bytes / 4 + 1));
  }

  FakeMemory memory;
  memory.budget = 10000;
  {
    CachingAllocator cache(memory.source(), /*cache_limit=*/2048);
    CHECK(cache.allocate(0) == nullptr);
    void* a = cache.allocate(1000);  // class 1024
    void* b = cache.allocate(1000);
    CHECK(a != b);
    CHECK(cache.allocated_bytes() == 2048);
    cache.deallocate(a);
    CHECK(cache.cached_bytes() == 1024);
    CHECK(cache.allocate(900) == a);  // same class: no new block from the source
    CHECK(memory.obtained == 2);
    cache.deallocate(a);
    cache.deallocate(b);
    CHECK(cache.cached_bytes() == 2048);
    void* c = cache.allocate(512);
    cache.deallocate(c);  // the cache is full (2048 + 512 > 2048): straight back
    CHECK(memory.returned == 1);
    CHECK(cache.cached_bytes() == 2048);

    // Out of memory: the cached blocks are given back and the request retried once.
    void* big = cache.allocate(8000);  // class 8192; 2048 cached + 8192 > 10000 at first
    CHECK(big != nullptr);
    CHECK(cache.cached_bytes() == 0);
    CHECK(memory.returned == 3);
    try {
      cache.allocate(5000);
      FAIL("expected an out-of-memory error");
    } catch (const Error& e) {
      const std::string what = e.what();
      CHECK(what.find("fake: out of memory allocating 5120 bytes") != std::string::npos);
      CHECK(what.find("8192 bytes held by tensors") != std::string::npos);
    }
    cache.deallocate(big);
    cache.empty_cache();
    CHECK(cache.cached_bytes() == 0);
    CHECK(cache.allocated_bytes() == 0);
  }
  CHECK(memory.in_use == 0);
}

TEST_CASE("cpu copy handles transposed, broadcast and strided destinations") {
  const Tensor x = uniform_tensor({37, 53}, -5, 5, 1);
  const std::vector<float> xv = x.to_vector();
  // transposed source -> contiguous destination
  Tensor xt = x.t();  // [53, 37], strides [1, 53]
  Tensor out = Tensor::empty({53, 37});
  kernels().copy(xt, out);
  std::vector<double> want(53 * 37);
  for (int64_t i = 0; i < 53; ++i)
    for (int64_t j = 0; j < 37; ++j) want[i * 37 + j] = xv[j * 53 + i];
  expect_close(out.to_vector(), want, 0, 0, "copy of a transpose");
  // broadcast row (stride 0) -> contiguous
  Tensor row = uniform_tensor({1, 300}, -1, 1, 2);
  Tensor wide = Tensor::empty({200, 300});
  kernels().copy(row.expand({200, 300}), wide);
  const std::vector<float> rv = row.to_vector(), wv = wide.to_vector();
  bool rows_equal = true;
  for (int64_t i = 0; i < 200; ++i)
    for (int64_t j = 0; j < 300; ++j) rows_equal = rows_equal && wv[i * 300 + j] == rv[j];
  CHECK(rows_equal);
  // contiguous source -> strided destination (a transposed view), large enough to go parallel
  Tensor big = uniform_tensor({300, 257}, -1, 1, 3);
  Tensor dst_base = Tensor::empty({257, 300});
  Tensor dst = dst_base.t();  // [300, 257] view
  kernels().copy(big, dst);
  expect_close(dst.to_vector(), to_double(big.to_vector()), 0, 0, "copy into a transposed view");
  // a batched transpose (the blocked path with an outer dim), float32 and int64
  const Tensor cube = uniform_tensor({3, 40, 70}, -1, 1, 4);
  Tensor swapped = Tensor::empty({3, 70, 40});
  kernels().copy(cube.transpose(1, 2), swapped);
  const std::vector<float> cv = cube.to_vector();
  std::vector<double> want3(cv.size());
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t i = 0; i < 70; ++i)
      for (int64_t j = 0; j < 40; ++j) want3[(b * 70 + i) * 40 + j] = cv[(b * 40 + j) * 70 + i];
  expect_close(swapped.to_vector(), want3, 0, 0, "batched transpose");
  std::vector<int64_t> iv(cv.size()), want_ids(cv.size());
  for (size_t i = 0; i < cv.size(); ++i) iv[i] = static_cast<int64_t>(i) * 7 - 1000;
  const Tensor ids = tensor_i64(iv, {3, 40, 70});
  Tensor ids_t = Tensor::empty({3, 70, 40}, DType::Int64);
  kernels().copy(ids.transpose(1, 2), ids_t);
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t i = 0; i < 70; ++i)
      for (int64_t j = 0; j < 40; ++j) want_ids[(b * 70 + i) * 40 + j] = iv[(b * 40 + j) * 70 + i];
  CHECK(ids_t.to_vector_i64() == want_ids);
}

TEST_CASE("cpu copy converts float32 <-> int64, truncating toward zero") {
  const std::vector<float> f = {-2.7f, -1.0f, -0.5f, 0.0f, 0.5f, 1.9f, 123456.0f};
  Tensor src = tensor(f, {7});
  Tensor as_int = Tensor::empty({7}, DType::Int64);
  kernels().copy(src, as_int);
  std::vector<int64_t> want;
  for (float v : f) want.push_back(static_cast<int64_t>(std::trunc(v)));
  CHECK(as_int.to_vector_i64() == want);
  Tensor back = Tensor::empty({7});
  kernels().copy(as_int, back);
  std::vector<double> want_f(want.begin(), want.end());
  expect_close(back.to_vector(), want_f, 0, 0, "int64 -> float32");
}

TEST_CASE("cpu fill writes only the elements of a strided view, for both dtypes") {
  Tensor base = Tensor::empty({6, 8});
  kernels().fill(base, 1.0);
  Tensor cols = base.narrow(1, 2, 3);  // [6, 3] with row stride 8
  kernels().fill(cols, -4.5);
  const std::vector<float> v = base.to_vector();
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 8; ++j) CHECK(v[i * 8 + j] == (j >= 2 && j < 5 ? -4.5f : 1.0f));
  Tensor ints = Tensor::empty({100000}, DType::Int64);
  kernels().fill(ints, 7.0);
  CHECK(ints.to_vector_i64() == std::vector<int64_t>(100000, 7));
}

// =================================================================== elementwise

TEST_CASE("vectorised exp, tanh, the normal CDF and density match <cmath> to float precision") {
  std::vector<float> xs = uniform_values(20000, -90, 90, 4);
  for (float x : {0.0f, -0.0f, 1e-30f, -1e-8f, 0.5f, -0.5f, 0.625f, 88.7f, -87.3f, 88.8f, -88.0f,
                  -100.0f, 100.0f})
    xs.push_back(x);
  for (float x : xs) {
    const double e = std::exp(static_cast<double>(x));
    const float ef = cpu::exp_f(x);
    if (e < 1.1754944e-38)  // below FLT_MIN exp_f flushes to zero
      CHECK(ef <= 1.1754944e-38f);
    else if (e > 3.4028235e38)
      CHECK(ef == kInf);
    else
      CHECK_MESSAGE(std::fabs(ef - e) <= 3e-7 * e, "exp(" << x << ") = " << ef << " vs " << e);
    const double t = std::tanh(static_cast<double>(x));
    CHECK_MESSAGE(std::fabs(cpu::tanh_f(x) - t) <= 4e-7 * std::fabs(t) + 1e-37,
                  "tanh(" << x << ") = " << cpu::tanh_f(x) << " vs " << t);
    const double xe = x / 12.0;  // the normal CDF saturates beyond |x| ~ 6
    const double cdf = 0.5 * std::erfc(-xe / std::sqrt(2.0));
    // Abramowitz-Stegun 7.1.26 bounds the absolute error (as in PyTorch's vectorised erf).
    CHECK_MESSAGE(
        std::fabs(cpu::normal_cdf_f(static_cast<float>(xe)) - cdf) <= 3e-7,
        "Phi(" << xe << ") = " << cpu::normal_cdf_f(static_cast<float>(xe)) << " vs " << cdf);
    // Phi and phi together (GELU's derivative): Phi to the bit; phi within exp's error plus
    // that of its rounded argument, whose relative error e^{-a} turns into an absolute one.
    const auto [both_cdf, both_pdf] = cpu::normal_cdf_pdf_f(static_cast<float>(xe));
    CHECK(both_cdf == cpu::normal_cdf_f(static_cast<float>(xe)));
    const double a = 0.5 * xe * xe, pdf = std::exp(-a) / std::sqrt(2.0 * M_PI);
    CHECK_MESSAGE(std::fabs(both_pdf - pdf) <= (4e-7 + 2.4e-7 * a) * pdf + 1e-37,
                  "phi(" << xe << ") = " << both_pdf << " vs " << pdf);
  }
  CHECK(cpu::exp_f(-kInf) == 0.0f);
  CHECK(cpu::exp_f(kInf) == kInf);
  CHECK(std::isnan(cpu::exp_f(kNaN)));
  CHECK(cpu::tanh_f(kInf) == 1.0f);
  CHECK(cpu::tanh_f(-kInf) == -1.0f);
  CHECK(std::isnan(cpu::tanh_f(kNaN)));
  CHECK(cpu::sigmoid_f(-kInf) == 0.0f);
  CHECK(cpu::sigmoid_f(kInf) == 1.0f);
}

// exp_nonpositive_f and exp_nonnegative_f leave out exp_f's steps for the other sign: they must
// give its bits for every argument of their own sign. A sweep over every 61st bit pattern of each
// half (35 million values each, in vectorised loops as the kernels call them), with the half's
// zero, infinity and largest NaN.
TEST_CASE("exp_nonpositive_f and exp_nonnegative_f are exp_f to the bit on their halves") {
  constexpr int64_t kStep = 61, kChunk = 1 << 16, kHalf = int64_t{1} << 31;
  std::vector<float> x(kChunk), want(kChunk), got(kChunk);
  for (const bool negative : {true, false}) {
    const uint32_t sign = negative ? 0x80000000u : 0u;
    int64_t differ = 0, checked = 0;
    for (int64_t first = 0; first < kHalf; first += kStep * kChunk) {
      for (int64_t i = 0; i < kChunk; ++i) {
        const int64_t bits = std::min(first + i * kStep, kHalf - 1);
        x[i] = std::bit_cast<float>(sign | static_cast<uint32_t>(bits));
      }
      if (first == 0) {
        x[1] = std::bit_cast<float>(sign | 0x7F800000u);  // x[0] is the zero
        x[2] = std::bit_cast<float>(sign | 0x7FFFFFFFu);
      }
#pragma omp simd
      for (int64_t i = 0; i < kChunk; ++i) {
        want[i] = cpu::exp_f(x[i]);
        got[i] = negative ? cpu::exp_nonpositive_f(x[i]) : cpu::exp_nonnegative_f(x[i]);
      }
      for (int64_t i = 0; i < kChunk; ++i, ++checked)
        if (std::bit_cast<uint32_t>(want[i]) != std::bit_cast<uint32_t>(got[i]) && differ++ < 3)
          FAIL_CHECK("exp(" << x[i] << "): exp_f " << want[i] << ", the half's own " << got[i]);
    }
    CHECK(differ == 0);
    CHECK(checked > 35'000'000);
  }
}

// GELU runs through the vectorised loop of backends/elementwise/cpu_unary.cpp (erf by
// Abramowitz-Stegun 7.1.26 inside); check it on a dense grid against the double-precision erf,
// forward and derivative, so a change of approximation or a loop that stops vectorising stays
// exact enough.
TEST_CASE("cpu exact GELU and its derivative match std::erf on a dense grid") {
  std::vector<float> xs;
  for (int i = -200000; i <= 200000; ++i) xs.push_back(static_cast<float>(i) * 5e-5f);  // [-10, 10]
  const int64_t n = static_cast<int64_t>(xs.size());
  const Tensor x = tensor(xs, {n});
  Tensor y = Tensor::empty({n}), dx = Tensor::empty({n});
  kernels().unary(UnaryOp::Gelu, x, y, 0.0f, 0.0f);
  const Tensor grad = tensor(std::vector<float>(xs.size(), 1.0f), {n});
  kernels().unary_backward(UnaryOp::Gelu, grad, x, Tensor(), dx, 0.0f, 0.0f);
  const std::vector<float> yv = y.to_vector(), dv = dx.to_vector();
  double max_y = 0, max_d = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double xd = xs[i];
    const double cdf = 0.5 * std::erfc(-xd / std::sqrt(2.0));
    const double pdf = std::exp(-0.5 * xd * xd) / std::sqrt(2.0 * M_PI);
    // Absolute error of Phi <= 2.5e-7, so |x| times that for x Phi(x); float rounding on top.
    max_y = std::max(max_y, std::fabs(yv[i] - xd * cdf) / (1.0 + std::fabs(xd)));
    max_d = std::max(max_d, std::fabs(dv[i] - (cdf + xd * pdf)) / (1.0 + std::fabs(xd)));
  }
  CHECK(max_y <= 4e-7);
  CHECK(max_d <= 4e-7);
}

TEST_CASE("cpu unary ops match the reference on contiguous, transposed and broadcast inputs") {
  for (const UnaryCase& c : unary_cases()) {
    for (int64_t n : {int64_t{7}, int64_t{100003}}) {  // serial and parallel
      const Tensor x = uniform_tensor({n}, c.lo, c.hi, 10);
      Tensor out = Tensor::empty({n});
      kernels().unary(c.op, x, out, c.a, c.b);
      std::vector<double> want;
      for (float v : x.to_vector()) want.push_back(ref_unary(c.op, v, c.a, c.b));
      expect_close(out.to_vector(), want, 2e-6, 1e-6, std::string(c.name) + " contiguous");
    }
    const Tensor x2 = transposed_layout(uniform_tensor({40, 30}, c.lo, c.hi, 11));
    Tensor out2 = Tensor::empty({40, 30});
    kernels().unary(c.op, x2, out2, c.a, c.b);
    std::vector<double> want2;
    for (float v : x2.to_vector()) want2.push_back(ref_unary(c.op, v, c.a, c.b));
    expect_close(out2.to_vector(), want2, 2e-6, 1e-6, std::string(c.name) + " transposed");
    const Tensor scalar = uniform_tensor({1, 1}, c.lo, c.hi, 12);
    Tensor out3 = Tensor::empty({5, 9});
    kernels().unary(c.op, scalar.expand({5, 9}), out3, c.a, c.b);
    const std::vector<double> want3(45, ref_unary(c.op, scalar.item(), c.a, c.b));
    expect_close(out3.to_vector(), want3, 2e-6, 1e-6, std::string(c.name) + " broadcast");
  }
}

TEST_CASE("cpu unary special values: sign(0) = 0, relu/clamp keep NaN, exp(-inf) = 0") {
  Tensor x = tensor({0.0f, -kInf, kInf, kNaN}, {4});
  Tensor out = Tensor::empty({4});
  kernels().unary(UnaryOp::Sign, x, out, 0, 0);
  const std::vector<float> s = out.to_vector();
  CHECK(s[0] == 0.0f);
  CHECK(s[1] == -1.0f);
  CHECK(s[2] == 1.0f);
  CHECK(std::isnan(s[3]));
  kernels().unary(UnaryOp::Exp, x, out, 0, 0);
  CHECK(out.to_vector()[1] == 0.0f);
  CHECK(out.to_vector()[2] == kInf);
  kernels().unary(UnaryOp::Relu, x, out, 0, 0);
  CHECK(std::isnan(out.to_vector()[3]));
  kernels().unary(UnaryOp::Clamp, x, out, -1, 1);
  CHECK(out.to_vector()[1] == -1.0f);
  CHECK(std::isnan(out.to_vector()[3]));
}

TEST_CASE("cpu unary_backward matches numerical derivatives of the reference ops") {
  for (const UnaryCase& c : unary_cases()) {
    for (int64_t n : {int64_t{9}, int64_t{40000}}) {
      const Tensor x = uniform_tensor({n}, c.lo, c.hi, 20);
      const Tensor g = uniform_tensor({n}, -2, 2, 21);
      Tensor y = Tensor::empty({n});
      kernels().unary(c.op, x, y, c.a, c.b);
      Tensor dx = Tensor::empty({n});
      kernels().unary_backward(c.op, g, x, y, dx, c.a, c.b);
      const std::vector<float> xv = x.to_vector(), gv = g.to_vector();
      std::vector<double> want(xv.size());
      for (size_t i = 0; i < xv.size(); ++i)
        want[i] = is_step(c.op) ? 0.0 : gv[i] * ref_derivative(c, xv[i]);
      expect_close(dx.to_vector(), want, 1e-3, 1e-4, std::string(c.name) + " backward");
      // The same with y left out (recomputed from x) and with a broadcast gradient.
      Tensor dx2 = Tensor::empty({n});
      const Tensor g1 = tensor({1.5f}, {1});
      kernels().unary_backward(c.op, g1.expand({n}), x, Tensor(), dx2, c.a, c.b);
      for (size_t i = 0; i < xv.size(); ++i)
        want[i] = is_step(c.op) ? 0.0 : 1.5 * ref_derivative(c, xv[i]);
      expect_close(dx2.to_vector(), want, 1e-3, 1e-4, std::string(c.name) + " backward, no y");
    }
  }
}

TEST_CASE("every op of the unary table (backends/unary_math.h) has a reference case here") {
  // A new op added to LOOM_UNARY_OPS fails here until it gets a reference and a case above.
#define LOOM_TEST_UNARY_OP(Name) UnaryOp::Name,
  for (UnaryOp op : {LOOM_UNARY_OPS(LOOM_TEST_UNARY_OP)}) {
    const bool covered = std::any_of(unary_cases().begin(), unary_cases().end(),
                                     [op](const UnaryCase& c) { return c.op == op; });
    CHECK_MESSAGE(covered, "unary op " << static_cast<int>(op) << " has no case in unary_cases()");
  }
#undef LOOM_TEST_UNARY_OP
}

TEST_CASE("unary_backward needs only the tensor the table says the derivative reads") {
  for (const UnaryCase& c : unary_cases()) {
    const Tensor x = uniform_tensor({33}, c.lo, c.hi, 22), g = uniform_tensor({33}, -2, 2, 23);
    Tensor y = Tensor::empty({33}), both = Tensor::empty({33}), only = Tensor::empty({33});
    kernels().unary(c.op, x, y, c.a, c.b);
    kernels().unary_backward(c.op, g, x, y, both, c.a, c.b);
    const unary::Reads reads = unary::backward_reads(c.op);
    kernels().unary_backward(c.op, g, reads == unary::Reads::Input ? x : Tensor(),
                             reads == unary::Reads::Output ? y : Tensor(), only, c.a, c.b);
    CHECK_MESSAGE(only.to_vector() == both.to_vector(), c.name);
  }
  expect_error(
      [] {
        Tensor out = Tensor::empty({3});
        kernels().unary_backward(UnaryOp::Log, Tensor::empty({3}), Tensor(), Tensor(), out, 0, 0);
      },
      {"unary_backward", "x is an undefined tensor"});
}

TEST_CASE("cpu relu and clamp backward pass the gradient exactly where PyTorch does") {
  // The kinks themselves: relu at 0, clamp at both bounds.
  const std::vector<float> xv = {-1.0f, 0.0f, 2.0f, -3.0f, 3.0f, 1e-7f};
  const std::vector<float> gv = {1, 2, 3, 4, 5, 6};
  const Tensor x = tensor(xv, {6}), g = tensor(gv, {6});
  Tensor dx = Tensor::empty({6});
  std::vector<double> relu_want, clamp_want;
  for (size_t i = 0; i < xv.size(); ++i) {
    relu_want.push_back(xv[i] > 0 ? gv[i] : 0.0);
    clamp_want.push_back(xv[i] >= -1 && xv[i] <= 2 ? gv[i] : 0.0);
  }
  kernels().unary_backward(UnaryOp::Relu, g, x, Tensor(), dx, 0, 0);
  expect_close(dx.to_vector(), relu_want, 0, 0, "relu'(x) = [x > 0]");
  kernels().unary_backward(UnaryOp::Clamp, g, x, Tensor(), dx, -1, 2);
  expect_close(dx.to_vector(), clamp_want, 0, 0, "clamp'(x) = [lo <= x <= hi]");
}

TEST_CASE("cpu binary ops broadcast through zero strides on either side") {
  struct Case {
    BinaryOp op;
    const char* name;
    std::function<double(double, double)> f;
  };
  const std::vector<Case> cases = {
      {BinaryOp::Add, "add", [](double a, double b) { return a + b; }},
      {BinaryOp::Sub, "sub", [](double a, double b) { return a - b; }},
      {BinaryOp::Mul, "mul", [](double a, double b) { return a * b; }},
      {BinaryOp::Div, "div", [](double a, double b) { return a / b; }},
      {BinaryOp::Pow, "pow", [](double a, double b) { return std::pow(a, b); }},
      {BinaryOp::Maximum, "maximum", [](double a, double b) { return std::max(a, b); }},
      {BinaryOp::Minimum, "minimum", [](double a, double b) { return std::min(a, b); }},
      {BinaryOp::Eq, "eq", [](double a, double b) { return a == b ? 1.0 : 0.0; }},
      {BinaryOp::Ne, "ne", [](double a, double b) { return a != b ? 1.0 : 0.0; }},
      {BinaryOp::Lt, "lt", [](double a, double b) { return a < b ? 1.0 : 0.0; }},
      {BinaryOp::Le, "le", [](double a, double b) { return a <= b ? 1.0 : 0.0; }},
      {BinaryOp::Gt, "gt", [](double a, double b) { return a > b ? 1.0 : 0.0; }},
      {BinaryOp::Ge, "ge", [](double a, double b) { return a >= b ? 1.0 : 0.0; }},
  };
  // Values are small integers + 0.5 so comparisons see ties; positive so pow is defined.
  auto rounded = [](const Shape& s, uint64_t seed) {
    std::vector<float> v = uniform_values(shape_numel(s), 0, 4, seed);
    for (float& e : v) e = std::floor(e) + 0.5f;
    return tensor(v, s);
  };
  const Shape shape = {70, 600};  // 42000 elements: the parallel path
  const Tensor a_full = rounded(shape, 30);
  const Tensor b_full = transposed_layout(rounded(shape, 31));
  const Tensor a_row = rounded({1, 600}, 32).expand(shape);
  const Tensor b_col = rounded({70, 1}, 33).expand(shape);
  const Tensor b_scalar = rounded({1, 1}, 34).expand(shape);
  const std::vector<std::pair<Tensor, Tensor>> inputs = {
      {a_full, b_full}, {a_full, b_scalar}, {b_scalar, a_full}, {a_row, b_col}, {a_full, b_col}};
  for (const Case& c : cases) {
    for (size_t k = 0; k < inputs.size(); ++k) {
      const auto& [a, b] = inputs[k];
      Tensor out = Tensor::empty(shape);
      kernels().binary(c.op, a, b, out);
      const std::vector<float> av = a.to_vector(), bv = b.to_vector();
      std::vector<double> want(av.size());
      for (size_t i = 0; i < av.size(); ++i) want[i] = c.f(av[i], bv[i]);
      expect_close(out.to_vector(), want, 1e-6, 0,
                   std::string(c.name) + " layout " + std::to_string(k));
    }
  }
}

TEST_CASE("cpu comparisons accept int64, maximum/minimum propagate NaN") {
  Tensor a = tensor_i64({1, 5, -3, 7}, {4}), b = tensor_i64({1, 4, -2, 9}, {4});
  Tensor out = Tensor::empty({4});
  kernels().binary(BinaryOp::Lt, a, b, out);
  expect_close(out.to_vector(), {0, 0, 1, 1}, 0, 0, "int64 lt");
  kernels().binary(BinaryOp::Eq, a, b, out);
  expect_close(out.to_vector(), {1, 0, 0, 0}, 0, 0, "int64 eq");
  Tensor x = tensor({kNaN, 1.0f, 2.0f, 3.0f}, {4}), y = tensor({0.0f, kNaN, 1.0f, 5.0f}, {4});
  kernels().binary(BinaryOp::Maximum, x, y, out);
  std::vector<float> m = out.to_vector();
  CHECK(std::isnan(m[0]));
  CHECK(std::isnan(m[1]));
  CHECK(m[2] == 2.0f);
  CHECK(m[3] == 5.0f);
  kernels().binary(BinaryOp::Minimum, x, y, out);
  m = out.to_vector();
  CHECK(std::isnan(m[0]));
  CHECK(std::isnan(m[1]));
  CHECK(m[2] == 1.0f);
  CHECK(m[3] == 3.0f);
}

TEST_CASE("cpu where picks a where cond is nonzero, with broadcast operands and int64 values") {
  const Shape shape = {50, 800};
  std::vector<float> cv = uniform_values(40000, 0, 1, 40);
  for (float& v : cv) v = v < 0.3f ? 0.0f : (v < 0.6f ? 1.0f : -2.0f);
  const Tensor cond = tensor(cv, shape);
  const Tensor a = tensor({-1e9f}, {1, 1}).expand(shape);  // the masked_fill pattern
  const Tensor b = transposed_layout(uniform_tensor(shape, -1, 1, 41));
  Tensor out = Tensor::empty(shape);
  kernels().where(cond, a, b, out);
  const std::vector<float> bv = b.to_vector();
  std::vector<double> want(bv.size());
  for (size_t i = 0; i < bv.size(); ++i) want[i] = cv[i] != 0 ? -1e9 : bv[i];
  expect_close(out.to_vector(), want, 0, 0, "where float");
  Tensor ai = tensor_i64({1, 2, 3}, {3}), bi = tensor_i64({-1, -2, -3}, {3});
  Tensor oi = Tensor::empty({3}, DType::Int64);
  kernels().where(tensor({1, 0, 1}, {3}), ai, bi, oi);
  CHECK(oi.to_vector_i64() == std::vector<int64_t>{1, -2, 3});
}

TEST_CASE("cpu axpy adds a scaled tensor in place") {
  for (int64_t n : {int64_t{5}, int64_t{70001}}) {
    Tensor dst = uniform_tensor({n}, -1, 1, 50);
    const Tensor src = uniform_tensor({n}, -1, 1, 51);
    const std::vector<float> d0 = dst.to_vector(), s = src.to_vector();
    kernels().axpy(-0.25f, src, dst);
    std::vector<double> want(d0.size());
    for (size_t i = 0; i < d0.size(); ++i) want[i] = d0[i] - 0.25 * s[i];
    expect_close(dst.to_vector(), want, 1e-6, 1e-7, "axpy");
  }
}

// =================================================================== reductions and softmax

TEST_CASE("cpu reduce matches reference loops along the middle axis, ties to the first index") {
  struct Extent {
    int64_t outer, n, inner;
  };
  const std::vector<Extent> extents = {{3, 5, 1},      {2, 7, 3},     {1, 1, 1},     {4, 1, 6},
                                       {1, 300001, 1}, {3, 40000, 1}, {64, 50, 600}, {2, 9, 300},
                                       {1, 6400, 70},  {1, 3, 5}};
  for (const Extent& e : extents) {
    std::vector<float> v = uniform_values(e.outer * e.n * e.inner, -2, 2, 60);
    for (float& x : v) x = std::floor(x * 2) / 2;  // a few distinct values: many ties
    const Tensor x = tensor(v, {e.outer, e.n, e.inner});
    const std::string where = shape_str({e.outer, e.n, e.inner});
    std::vector<double> sum(e.outer * e.inner, 0), mx(sum.size(), -INFINITY),
        mn(sum.size(), INFINITY);
    std::vector<int64_t> amax(sum.size(), 0), amin(sum.size(), 0);
    for (int64_t o = 0; o < e.outer; ++o)
      for (int64_t i = 0; i < e.inner; ++i) {
        const size_t r = static_cast<size_t>(o * e.inner + i);
        for (int64_t j = 0; j < e.n; ++j) {
          const double val = v[(o * e.n + j) * e.inner + i];
          sum[r] += val;
          if (val > mx[r]) mx[r] = val, amax[r] = j;
          if (val < mn[r]) mn[r] = val, amin[r] = j;
        }
      }
    Tensor out = Tensor::empty({e.outer, e.inner});
    Tensor idx = Tensor::empty({e.outer, e.inner}, DType::Int64);
    kernels().reduce(ReduceOp::Sum, x, e.outer, e.n, e.inner, out);
    expect_close(out.to_vector(), sum, 1e-6, 1e-6, "sum " + where);
    kernels().reduce(ReduceOp::Max, x, e.outer, e.n, e.inner, out);
    expect_close(out.to_vector(), mx, 0, 0, "max " + where);
    kernels().reduce(ReduceOp::Min, x, e.outer, e.n, e.inner, out);
    expect_close(out.to_vector(), mn, 0, 0, "min " + where);
    kernels().reduce(ReduceOp::ArgMax, x, e.outer, e.n, e.inner, idx);
    CHECK_MESSAGE(idx.to_vector_i64() == amax, "argmax " << where);
    kernels().reduce(ReduceOp::ArgMin, x, e.outer, e.n, e.inner, idx);
    CHECK_MESSAGE(idx.to_vector_i64() == amin, "argmin " << where);
  }
}

TEST_CASE("cpu::parallel_for_items visits every element of every item once, on any thread count") {
  // Empty items first, between and last; items smaller than a chunk and larger; a total above
  // the grain so that the chunks of two or three threads start inside items.
  const std::vector<int64_t> sizes = {0, 5, 0, 40000, 1, 0, 70001, 3, 0};
  const int saved = get_num_threads();
  for (int threads : {1, 2, 3}) {
    CAPTURE(threads);
    set_num_threads(threads);
    std::vector<std::vector<int>> visits;
    for (int64_t n : sizes) visits.emplace_back(static_cast<size_t>(n), 0);
    std::vector<int> calls(sizes.size(), 0);
    cpu::parallel_for_items(sizes, 1000, [&](size_t item, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) ++visits[item][static_cast<size_t>(i)];
#pragma omp atomic
      ++calls[item];
    });
    for (size_t item = 0; item < sizes.size(); ++item) {
      CAPTURE(item);
      CHECK(std::count(visits[item].begin(), visits[item].end(), 1) == sizes[item]);
      CHECK((calls[item] > 0) == (sizes[item] > 0));  // never called with nothing to do
      CHECK(calls[item] <= threads);
    }
  }
  set_num_threads(saved);
}

TEST_CASE("cpu column sums (a bias's gradient) are the same on one thread or two") {
  // reduce(Sum) of [n, inner] over n, outer 1: the rows in chunks fixed by n alone
  // (cpu::column_sums_by_chunks), so the thread count cannot change a bit of the sums. Fewer
  // rows than chunks, many (the threads' path), and inner = 1 and outer > 1 beside them.
  const int saved = get_num_threads();
  for (auto [outer, n, inner] : std::vector<std::array<int64_t, 3>>{
           {1, 3, 5}, {1, 31, 64}, {1, 6400, 96}, {1, 1000, 700}, {1, 5000, 1}, {3, 400, 40}}) {
    CAPTURE(shape_str({outer, n, inner}));
    const std::vector<float> v = uniform_values(outer * n * inner, -2, 2, 61);  // inexact sums
    const Tensor x = tensor(v, {outer, n, inner});
    std::vector<double> want(static_cast<size_t>(outer * inner), 0.0);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < inner; ++i) want[o * inner + i] += v[(o * n + j) * inner + i];
    std::vector<std::vector<float>> got;
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      Tensor out = Tensor::empty({outer, inner});
      kernels().reduce(ReduceOp::Sum, x, outer, n, inner, out);
      got.push_back(out.to_vector());
    }
    set_num_threads(saved);
    CHECK(got[0] == got[1]);
    expect_close(got[1], want, 1e-6, 1e-6, "column sums");
  }
}

// The bits of those sums, whichever way the kernel walks x: a few rows of many columns (up to
// 1,024 rows) go column block by column block, more rows chunk by chunk, both with the
// arithmetic cpu::column_sums_by_chunks documents, written out here.
TEST_CASE("cpu column sums: the chunks' arithmetic to the bit, for few rows or many") {
  const int saved = get_num_threads();
  for (auto [n, inner] : std::vector<std::array<int64_t, 2>>{
           {3, 5}, {33, 1000}, {64, 9604}, {1024, 300}, {1025, 300}, {6400, 96}}) {
    CAPTURE(shape_str({n, inner}));
    const std::vector<float> v = uniform_values(n * inner, -2, 2, 62);
    const Tensor x = tensor(v, {n, inner});
    const int64_t chunks = std::clamp<int64_t>(n, 1, cpu::kSumChunks);
    const int64_t chunk_rows = (n + chunks - 1) / chunks;
    std::vector<float> want(static_cast<size_t>(inner));
    for (int64_t i = 0; i < inner; ++i) {
      double total = 0.0;
      for (int64_t c = 0; c < chunks; ++c) {
        double part = 0.0;  // each chunk's rows in order, in doubles
        for (int64_t r = c * chunk_rows; r < std::min(n, (c + 1) * chunk_rows); ++r)
          part += v[static_cast<size_t>(r * inner + i)];
        total = c == 0 ? part : total + part;  // the chunks in order
      }
      want[static_cast<size_t>(i)] = static_cast<float>(total);  // rounded once
    }
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      Tensor out = Tensor::empty({1, inner});
      kernels().reduce(ReduceOp::Sum, x, 1, n, inner, out);
      CHECK(out.to_vector() == want);
    }
  }
  set_num_threads(saved);
}

TEST_CASE("cpu reduce: NaN propagates through max/min and wins argmax/argmin") {
  for (int64_t inner : {int64_t{1}, int64_t{2}}) {
    // Two rows of 40 (times inner): the first holds NaN at positions 17 and 30.
    std::vector<float> v = uniform_values(2 * 40 * inner, -1, 1, 61);
    for (int64_t i = 0; i < inner; ++i) v[17 * inner + i] = v[30 * inner + i] = kNaN;
    const Tensor x = tensor(v, {2, 40, inner});
    Tensor out = Tensor::empty({2, inner});
    Tensor idx = Tensor::empty({2, inner}, DType::Int64);
    kernels().reduce(ReduceOp::Max, x, 2, 40, inner, out);
    CHECK(std::isnan(out.to_vector()[0]));
    CHECK(!std::isnan(out.to_vector()[inner]));
    kernels().reduce(ReduceOp::Min, x, 2, 40, inner, out);
    CHECK(std::isnan(out.to_vector()[0]));
    kernels().reduce(ReduceOp::ArgMax, x, 2, 40, inner, idx);
    CHECK(idx.to_vector_i64()[0] == 17);
    kernels().reduce(ReduceOp::ArgMin, x, 2, 40, inner, idx);
    CHECK(idx.to_vector_i64()[0] == 17);
  }
}

TEST_CASE("cpu reduce on int64 input, and over an empty dimension") {
  const Tensor x = tensor_i64({4, -2, 9, 1, 1, 0}, {2, 3, 1});
  Tensor out = Tensor::empty({2, 1}, DType::Int64);
  kernels().reduce(ReduceOp::Sum, x, 2, 3, 1, out);
  CHECK(out.to_vector_i64() == std::vector<int64_t>{4 - 2 + 9, 1 + 1 + 0});
  kernels().reduce(ReduceOp::Max, x, 2, 3, 1, out);
  CHECK(out.to_vector_i64() == std::vector<int64_t>{9, 1});
  Tensor empty = Tensor::empty({3, 0});
  Tensor sums = Tensor::empty({3});
  kernels().reduce(ReduceOp::Sum, empty, 3, 0, 1, sums);
  CHECK(sums.to_vector() == std::vector<float>(3, 0.0f));
  expect_error([&] { kernels().reduce(ReduceOp::Max, empty, 3, 0, 1, sums); }, {"max", "empty"});
}

TEST_CASE("cpu softmax and log_softmax match the reference, forward and backward") {
  struct Extent {
    int64_t outer, n, inner;
  };
  for (const Extent& e : std::vector<Extent>{{4, 9, 1}, {500, 130, 1}, {3, 6, 5}, {40, 30, 300}}) {
    const int64_t numel = e.outer * e.n * e.inner;
    const Tensor x = uniform_tensor({numel}, -30, 30, 70);
    const Tensor g = uniform_tensor({numel}, -1, 1, 71);
    const std::vector<float> xv = x.to_vector(), gv = g.to_vector();
    std::vector<double> soft(numel), logsoft(numel), dsoft(numel), dlog(numel);
    for (int64_t o = 0; o < e.outer; ++o)
      for (int64_t i = 0; i < e.inner; ++i) {
        auto at = [&](int64_t j) { return static_cast<size_t>((o * e.n + j) * e.inner + i); };
        double m = -INFINITY, s = 0, gy = 0, gsum = 0;
        for (int64_t j = 0; j < e.n; ++j) m = std::max(m, static_cast<double>(xv[at(j)]));
        for (int64_t j = 0; j < e.n; ++j) s += std::exp(xv[at(j)] - m);
        for (int64_t j = 0; j < e.n; ++j) {
          soft[at(j)] = std::exp(xv[at(j)] - m) / s;
          logsoft[at(j)] = xv[at(j)] - m - std::log(s);
          gy += gv[at(j)] * soft[at(j)];
          gsum += gv[at(j)];
        }
        // Jacobians: dsoftmax_j/dx_k = y_j (delta_jk - y_k); dlogsoftmax_j/dx_k = delta_jk - y_k.
        for (int64_t k = 0; k < e.n; ++k) {
          dsoft[at(k)] = soft[at(k)] * (gv[at(k)] - gy);
          dlog[at(k)] = gv[at(k)] - soft[at(k)] * gsum;
        }
      }
    const std::string where = shape_str({e.outer, e.n, e.inner});
    Tensor y = Tensor::empty({numel}), ly = Tensor::empty({numel}), dx = Tensor::empty({numel});
    kernels().softmax(x, e.outer, e.n, e.inner, false, y);
    expect_close(y.to_vector(), soft, 1e-5, 1e-7, "softmax " + where);
    kernels().softmax(x, e.outer, e.n, e.inner, true, ly);
    expect_close(ly.to_vector(), logsoft, 1e-5, 1e-5, "log_softmax " + where);
    kernels().softmax_backward(g, y, e.outer, e.n, e.inner, false, dx);
    expect_close(dx.to_vector(), dsoft, 1e-4, 1e-6, "softmax backward " + where);
    kernels().softmax_backward(g, ly, e.outer, e.n, e.inner, true, dx);
    expect_close(dx.to_vector(), dlog, 1e-4, 1e-6, "log_softmax backward " + where);
  }
}

TEST_CASE("cpu softmax: -inf entries get exactly 0, an all -inf row gives NaN like PyTorch") {
  Tensor x = tensor({1.0f, -kInf, 2.0f, -kInf, -kInf, -kInf}, {2, 3});
  Tensor y = Tensor::empty({2, 3});
  kernels().softmax(x, 2, 3, 1, false, y);
  const std::vector<float> v = y.to_vector();
  CHECK(v[1] == 0.0f);
  CHECK(v[0] + v[2] == doctest::Approx(1.0f));
  for (int k = 3; k < 6; ++k) CHECK(std::isnan(v[k]));
  kernels().softmax(x, 2, 3, 1, true, y);
  CHECK(y.to_vector()[1] == -kInf);
  CHECK(std::isnan(y.to_vector()[4]));
}

// =================================================================== gemm

struct GemmCase {
  bool ta, tb;
  int64_t m, n, k, batch;
  float alpha, beta;
  bool share_b;  // stride_b = 0: one B for the whole batch
  int64_t pad;   // extra elements per row (ld > cols)
};

// The case's GemmArgs without operands: sizes, transposes, alpha, beta, and the strides of
// operands stored with `pad` extra elements per row.
GemmArgs gemm_geometry(const GemmCase& c) {
  GemmArgs g;
  g.trans_a = c.ta, g.trans_b = c.tb;
  g.m = c.m, g.n = c.n, g.k = c.k, g.batch = c.batch, g.alpha = c.alpha, g.beta = c.beta;
  const int64_t a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
  const int64_t b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
  g.lda = a_cols + c.pad, g.ldb = b_cols + c.pad, g.ldc = c.n + c.pad;
  g.stride_a = a_rows * g.lda, g.stride_b = c.share_b ? 0 : b_rows * g.ldb;
  g.stride_c = c.m * g.ldc;
  return g;
}

// The floats B spans: every item's, or the one B a shared-B batch reads.
int64_t b_extent(const GemmArgs& g) {
  return std::max<int64_t>(g.stride_b * g.batch, (g.trans_b ? g.n : g.k) * g.ldb);
}

// Random operands for a case's geometry g: A, B, a bias row and C's starting values, from seeds
// seed, seed + 1, ...
struct GemmOperands {
  std::vector<float> a, b, bias, c0;
};
GemmOperands random_operands(const GemmCase& c, const GemmArgs& g, uint64_t seed) {
  return {uniform_values(c.batch * g.stride_a, -1, 1, seed),
          uniform_values(b_extent(g), -1, 1, seed + 1), uniform_values(c.n, -2, 2, seed + 2),
          uniform_values(c.batch * g.stride_c, -1, 1, seed + 3)};
}

// Runs one case through `gemm` (Backend::gemm, or one of the CPU's product paths) on operands
// with the case's strides, and checks C against the definition.
void check_gemm_case(const GemmCase& c, const std::function<void(const GemmArgs&)>& gemm,
                     const std::string& where) {
  GemmArgs g = gemm_geometry(c);
  const std::vector<float> a = uniform_values(c.batch * g.stride_a, -1, 1, 80);
  const std::vector<float> b = uniform_values(b_extent(g), -1, 1, 81);
  std::vector<float> cbuf = uniform_values(c.batch * g.stride_c, -1, 1, 82);
  g.a = a.data(), g.b = b.data(), g.c = cbuf.data();
  const std::vector<double> want = ref_gemm(g, cbuf);
  gemm(g);
  expect_close(cbuf, want, 1e-4, 1e-4,
               where + " ta=" + std::to_string(c.ta) + " tb=" + std::to_string(c.tb) +
                   " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                   " k=" + std::to_string(c.k) + " batch=" + std::to_string(c.batch) +
                   " threads=" + std::to_string(get_num_threads()));
}

TEST_CASE("cpu gemm matches the definition for every transpose, batch stride and alpha/beta") {
  const std::vector<GemmCase> cases = {
      {false, false, 5, 7, 3, 1, 1.0f, 0.0f, false, 0},
      {true, false, 4, 6, 5, 1, 0.5f, 1.0f, false, 2},
      {false, true, 6, 3, 8, 3, 1.0f, 0.5f, false, 1},
      {true, true, 3, 9, 4, 2, -1.0f, 0.0f, true, 3},
      {false, false, 16, 16, 16, 37, 1.0f, 0.0f, false, 0},    // batch-parallel path
      // one product cut into panels of C's rows (m >= n) or columns, every transpose
      {false, true, 130, 150, 140, 1, 1.0f, 0.0f, false, 0},
      {false, false, 130, 150, 140, 3, 1.0f, 0.0f, false, 0},  // large items, batch loop
      {true, false, 201, 70, 150, 1, 0.5f, 1.0f, false, 3},
      {false, false, 90, 211, 130, 1, -1.0f, 0.5f, false, 2},
      {true, true, 173, 100, 140, 1, 1.0f, 0.0f, false, 1},
      {false, true, 250, 90, 120, 2, 1.0f, 0.0f, true, 0},
      {true, true, 64, 305, 110, 1, 2.0f, -1.0f, false, 0},
      {true, false, 64, 48, 32, 8, 2.0f, -1.0f, true, 0},
      // matrix-vector products (gemv), every transpose, padded strides and batches
      {false, false, 1, 9, 6, 1, 1.0f, 0.0f, false, 0},
      {true, false, 1, 9, 6, 2, 0.5f, 1.0f, false, 2},
      {false, true, 1, 7, 5, 3, 1.0f, 0.5f, true, 1},
      {true, true, 1, 7, 5, 4, -1.0f, 0.0f, false, 3},
      {false, false, 8, 1, 6, 1, 1.0f, 0.0f, false, 0},
      {true, false, 8, 1, 6, 2, 2.0f, 1.0f, true, 2},
      {false, true, 5, 1, 9, 3, 1.0f, -0.5f, false, 1},
      {true, true, 5, 1, 9, 2, 1.0f, 0.0f, false, 3},
      {false, false, 1, 1, 9, 5, 1.0f, 0.0f, false, 1},
      // large enough to be cut among threads: dot products four rows at a time and a tail of
      // three; sums of rows 64 columns at a time and a tail of 63; a column, either way
      {false, true, 1, 703, 400, 1, 0.5f, 1.0f, false, 1},
      {true, false, 1, 703, 400, 2, 1.0f, 0.0f, false, 2},
      {true, false, 650, 1, 410, 1, 1.0f, -0.5f, false, 0},
      {false, true, 650, 1, 410, 2, -1.0f, 0.0f, true, 3},
  };
  // 1, 2 and 3 threads: no panels, two, and three of unequal size.
  const int threads = get_num_threads();
  for (int t = 1; t <= 3; ++t)
    for (const GemmCase& c : cases) {
      set_num_threads(t);
      check_gemm_case(c, [](const GemmArgs& g) { kernels().gemm(g); }, "gemm");
    }
  set_num_threads(threads);
}

// The shapes gemm_tiled's paths are tested on.
std::vector<GemmCase> tiled_gemm_cases() {
  std::vector<GemmCase> cases = {
      // attention's products: ViT (50 tokens, head dim 32), a Swin window (49), BERT (128, 64)
      {false, true, 50, 50, 32, 6, 1.0f, 0.0f, false, 0},   // Q K^T
      {false, false, 50, 32, 50, 6, 1.0f, 0.0f, false, 0},  // P V
      {true, false, 32, 49, 49, 5, 1.0f, 0.0f, false, 0},   // dS^T Q, read transposed
      {true, false, 49, 32, 49, 5, 1.0f, 0.0f, false, 0},   // P^T dO
      {false, true, 128, 128, 64, 2, 1.0f, 0.0f, false, 0},
      {true, true, 13, 29, 31, 3, 0.5f, 1.0f, false, 3},    // alpha, beta, padded strides
      {false, false, 7, 40, 3, 4, -1.0f, 0.5f, true, 1},    // one B for the batch
      {true, false, 6, 16, 1, 2, 2.0f, 0.0f, false, 2},     // k = 1
      {false, false, 1, 24, 5, 3, 1.0f, 0.0f, false, 0},    // a single row
      // fewer items than threads: each item's columns cut among them (a decoding step)
      {false, true, 32, 256, 64, 1, 1.0f, 0.0f, false, 0},
      {false, false, 5, 100, 7, 1, 0.5f, 1.0f, false, 3},   // parts packed, alpha, beta
      {true, false, 9, 70, 12, 2, 1.0f, 0.0f, true, 1},
      // cache blocks: k in equal blocks (1,100 as 367 + 367 + 366), the later ones adding to
      // C; op(B) in blocks of columns, copied or (rows of whole vectors) read in place; a
      // transposed A copied 128 rows at a time
      {false, false, 40, 70, 1100, 1, 0.5f, 1.0f, false, 1},
      {false, false, 33, 512, 600, 1, 1.0f, 0.0f, false, 0},
      {true, true, 300, 90, 700, 1, 1.0f, 0.5f, false, 2},  // rows cut among threads (m > n)
      {true, false, 19, 600, 620, 2, -1.0f, 0.0f, true, 0},
      {true, false, 150, 100, 1024, 1, 1.0f, 0.5f, false, 0},  // A copied in blocks of 512
      // a large transposed A read where it lies under parts of C at most 64 columns wide: 40
      // columns; 128 cut in two parts of 64 (2 threads) or three of 48 (3 threads)
      {true, false, 150, 40, 1024, 1, 1.0f, 0.5f, false, 0},
      {true, false, 128, 128, 520, 1, -1.0f, 1.0f, false, 1},
      // a small transposed A (at most 16K floats) read where it lies, over blocks of k, with
      // op(B) read in place (rows of whole vectors) or copied
      {true, false, 16, 96, 1000, 2, 1.0f, 0.5f, false, 1},
      {true, false, 15, 50, 1000, 1, -1.0f, 0.0f, false, 0},
      // B read in place: each row block of a transposed A copied once, passed over 2 column
      // blocks of 96
      {true, false, 300, 192, 600, 1, 0.5f, 1.0f, false, 1},
      {false, true, 150, 530, 64, 1, 1.0f, 0.0f, false, 3},
      // rows of op(B) a multiple of 4 KiB apart (1024 floats) copied though they are whole
      // vectors and more than 128 rows pass over them: A read in place over k in 2 blocks; a
      // transposed A of 140 rows copied in one block (op(B)'s blocks then copied once); one of
      // 300 rows in 3 blocks of at most 128, each passed over op(B)'s blocks copied again
      {false, false, 136, 992, 520, 1, 1.0f, 0.5f, false, 32},
      {true, false, 140, 1024, 130, 1, 0.5f, 1.0f, false, 0},
      {true, false, 300, 1024, 130, 1, 0.5f, 1.0f, false, 0},
      // at most 128 rows of A over a large op(B) of whole-vector rows: op(B) copied as well
      // (read about once), under a copied transposed A and under an A read in place
      {true, false, 100, 256, 700, 1, 1.0f, 0.5f, false, 0},
      {false, false, 128, 64, 300, 2, 1.0f, 0.0f, false, 1},
      // one product of a small C over a long k (a weight's gradient over many tokens; a few
      // outputs' gradient over many positions): its blocks of k cut among the threads
      {true, false, 64, 64, 3000, 1, 1.0f, 0.5f, false, 0},
      {false, true, 9, 40, 5000, 1, 1.0f, 0.0f, false, 1},
      {true, false, 40, 200, 2600, 1, 1.0f, 1.0f, false, 3},
      // a transposed A whose 4 blocks of k share out evenly on two threads: split there,
      // though moving the floats alone would keep its rows cut (a saved activation's gradient)
      {true, false, 384, 64, 2048, 1, 1.0f, 0.0f, false, 0},
      // a weight's gradient of three times more outputs than inputs over a long k, computed as
      // C^T and written transposed (edges of 8 x 8 blocks both ways; padded rows)
      {true, false, 213, 70, 2050, 1, 1.0f, 0.0f, false, 3},
      {true, false, 256, 64, 2048, 1, 1.0f, 0.0f, false, 0},
      {true, false, 600, 200, 2048, 1, 1.0f, 0.0f, false, 1},  // C^T's 200 rows in one block
      // a few rows times a transposed B (C^T computed, written transposed), A either way
      {true, true, 7, 61, 33, 3, 0.5f, 1.0f, false, 2},
      {false, true, 32, 300, 130, 1, -1.0f, 0.5f, true, 1},
      {false, true, 2, 8, 5, 1, 1.0f, 0.0f, false, 0},
  };
  // Every width of C from 2 to 40: whole vectors of 16 and of 8, and every tail; every count
  // of rows left after the kernel's tiles of 6.
  for (int64_t n = 2; n <= 40; ++n) cases.push_back({false, n % 3 == 0, 2 + n % 7, n, 9, 2,
                                                      1.0f, 0.0f, false, n % 2});
  return cases;
}

// cpu::gemm takes loom's register-tiled kernel only where it is built with 16-float vectors
// (tiled_gemm.h); it is called directly here, so every build tests it.
TEST_CASE("cpu gemm_tiled (loom's own product kernel) matches the definition") {
  const int threads = get_num_threads();
  for (int t = 1; t <= 3; ++t)
    for (const GemmCase& c : tiled_gemm_cases()) {
      set_num_threads(t);
      check_gemm_case(c, cpu::gemm_tiled, "gemm_tiled");
    }
  set_num_threads(threads);
}

// One product whose C is small and whose k is long has its blocks of k cut among the threads
// (gemm_tiled_splits_k): each element of C must still add the same blocks in the same order,
// so the product is the same to the bit as on one thread, where nothing is cut.
TEST_CASE("cpu gemm_tiled cutting k among threads gives the bits of one thread") {
  const int threads = get_num_threads();
  int64_t split = 0;
  for (const GemmCase& c : tiled_gemm_cases()) {
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    GemmArgs g = gemm_geometry(c);
    const GemmOperands x = random_operands(c, g, 93);
    g.a = x.a.data(), g.b = x.b.data(), g.bias = x.bias.data();
    std::vector<std::vector<float>> results;
    for (int t : {1, 2, 3}) {
      set_num_threads(t);
      std::vector<float> out = x.c0;
      g.c = out.data();
      if (t == 1) CHECK_FALSE(cpu::gemm_tiled_splits_k(g));
      split += cpu::gemm_tiled_splits_k(g);
      cpu::gemm_tiled(g);
      results.push_back(std::move(out));
    }
    for (size_t t = 1; t < results.size(); ++t)
      CHECK(std::memcmp(results[t].data(), results[0].data(), results[0].size() * sizeof(float)) ==
            0);
  }
  set_num_threads(threads);
  CHECK(split >= 7);  // the three long products above on two threads and on three, one more on two
}

// Which products split k: a transposed A (the activation of a weight's gradient dW = X^T dY)
// whenever its blocks of k share out evenly among the threads, the longest run at most 1/12
// over the mean; any other where the floats each thread moves say so.
TEST_CASE("cpu gemm_tiled splits k for a transposed A whose blocks share out evenly") {
  const int threads = get_num_threads();
  const auto splits = [](bool trans_a, int64_t m, int64_t n, int64_t k, int t) {
    set_num_threads(t);
    GemmArgs g;
    g.trans_a = trans_a, g.m = m, g.n = n, g.k = k;
    g.lda = trans_a ? m : k, g.ldb = n, g.ldc = n;
    return cpu::gemm_tiled_splits_k(g);
  };
  CHECK(splits(true, 384, 64, 2048, 2));         // 4 blocks of 512: 2 and 2
  CHECK(splits(true, 384, 128, 6400, 2));        // 13 blocks of 493: 7 and 6 (vit-fmnist's)
  CHECK_FALSE(splits(true, 384, 64, 3136, 2));   // 7 blocks of 448: 4 and 3 (swin-fmnist's)
  CHECK_FALSE(splits(true, 384, 64, 2048, 3));   // 4 blocks on 3 threads: 2, 1 and 1
  CHECK_FALSE(splits(false, 384, 64, 2048, 2));  // A in rows: the floats moved decide
  CHECK_FALSE(splits(true, 384, 64, 2048, 1));
  set_num_threads(threads);
}

// A weight's gradient dW = dY^T X with three times more outputs than inputs, over a long k, is
// computed as C^T = X^T dY and transposed into C (gemm_tiled_transposes_c): the same products
// over the same blocks of k in the same order, so the same bits as C computed as it is, which a
// bias of zeros (no other path adds one) makes it: +0 added to a sum that is never -0.
TEST_CASE("cpu gemm_tiled computes a long weight gradient as C^T, to the same bits") {
  const auto geometry = [](int64_t m, int64_t n, int64_t k, int64_t pad) {
    return gemm_geometry({true, false, m, n, k, 1, 1.0f, 0.0f, false, pad});
  };
  CHECK(cpu::gemm_tiled_transposes_c(geometry(512, 128, 6400, 0)));  // vit-fmnist's MLP
  CHECK(cpu::gemm_tiled_transposes_c(geometry(256, 64, 12544, 0)));  // swin-fmnist's
  CHECK(cpu::gemm_tiled_transposes_c(geometry(213, 70, 2050, 3)));
  CHECK_FALSE(cpu::gemm_tiled_transposes_c(geometry(128, 512, 6400, 0)));  // fewer outputs
  CHECK_FALSE(cpu::gemm_tiled_transposes_c(geometry(128, 64, 6400, 0)));   // not three times
  CHECK(cpu::gemm_tiled_transposes_c(geometry(1024, 256, 4096, 0)));        // GPT-2's MLP
  CHECK_FALSE(cpu::gemm_tiled_transposes_c(geometry(2048, 512, 4096, 0)));  // C^T too tall
  CHECK_FALSE(cpu::gemm_tiled_transposes_c(geometry(512, 128, 1024, 0)));   // k short
  GemmArgs beta = geometry(512, 128, 6400, 0), alpha = beta, rows = beta;
  beta.beta = 1.0f, alpha.alpha = 0.5f, rows.trans_a = false, rows.lda = 6400;
  CHECK_FALSE(cpu::gemm_tiled_transposes_c(beta));
  CHECK_FALSE(cpu::gemm_tiled_transposes_c(alpha));
  CHECK_FALSE(cpu::gemm_tiled_transposes_c(rows));

  const int threads = get_num_threads();
  for (const auto& [m, n, k, pad] : std::vector<std::array<int64_t, 4>>{
           {213, 70, 2050, 3}, {256, 64, 2048, 0}, {384, 128, 2100, 1}, {600, 200, 2048, 1}}) {
    CAPTURE(m);
    CAPTURE(n);
    GemmArgs g = geometry(m, n, k, pad);
    const GemmOperands x = random_operands({true, false, m, n, k, 1, 1.0f, 0.0f, false, pad}, g,
                                           57);
    const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
    g.a = x.a.data(), g.b = x.b.data();
    for (int t : {1, 2, 3}) {
      set_num_threads(t);
      std::vector<float> transposed = x.c0, direct = x.c0;
      g.c = transposed.data(), g.bias = nullptr;
      REQUIRE(cpu::gemm_tiled_transposes_c(g));
      cpu::gemm_tiled(g);
      g.c = direct.data(), g.bias = zeros.data();
      REQUIRE_FALSE(cpu::gemm_tiled_transposes_c(g));
      cpu::gemm_tiled(g);
      CHECK(std::memcmp(transposed.data(), direct.data(), direct.size() * sizeof(float)) == 0);
    }
  }
  set_num_threads(threads);
}

// A batch in groups (GemmArgs::group): attention's heads split out of a projection, item
// (o, h) of `heads` at o * rows * heads * cols + h * cols, its rows heads * cols apart. The
// register tiles read the groups where they lie in one call; with an activation (a path that
// does not take groups) Backend::gemm hands them over one group at a time.
TEST_CASE("cpu gemm reads a batch in groups of two strides (split heads) where it lies") {
  struct Case {
    bool ta, tb;
    int64_t m, n, k, outer, heads;
  };
  const std::vector<Case> cases = {
      {false, true, 50, 50, 32, 3, 4},   // Q K^T
      {false, false, 50, 32, 50, 2, 3},  // P V
      {true, false, 49, 32, 49, 2, 2},   // P^T dO, A read transposed in place
      {true, false, 32, 49, 49, 3, 2},
      {false, true, 7, 300, 16, 2, 3},   // a few rows times a transposed B (C^T computed)
      {true, false, 150, 40, 1024, 2, 2},  // a transposed A copied, k in blocks
  };
  const int threads = get_num_threads();
  for (int t = 1; t <= 3; ++t)
    for (const Case& c : cases)
      for (const bool relu : {false, true}) {
        set_num_threads(t);
        GemmArgs g;
        g.trans_a = c.ta, g.trans_b = c.tb;
        g.m = c.m, g.n = c.n, g.k = c.k, g.batch = c.outer * c.heads, g.group = c.heads;
        g.alpha = 1.0f, g.beta = 0.5f;
        // An operand of rows x cols per item, stored as a (outer, rows, heads, cols) projection.
        const auto place = [&](int64_t rows, int64_t cols, int64_t& ld, int64_t& stride,
                               int64_t& group_stride) {
          ld = c.heads * cols, stride = cols, group_stride = rows * ld;
          return c.outer * rows * ld;
        };
        const int64_t a_size = place(c.ta ? c.k : c.m, c.ta ? c.m : c.k, g.lda, g.stride_a,
                                     g.group_stride_a);
        const int64_t b_size = place(c.tb ? c.n : c.k, c.tb ? c.k : c.n, g.ldb, g.stride_b,
                                     g.group_stride_b);
        g.ldc = c.n, g.stride_c = c.m * c.n, g.group_stride_c = c.heads * c.m * c.n;
        const std::vector<float> a = uniform_values(a_size, -1, 1, 90);
        const std::vector<float> b = uniform_values(b_size, -1, 1, 91);
        std::vector<float> out = uniform_values(g.batch * g.stride_c, -1, 1, 92);
        g.a = a.data(), g.b = b.data(), g.c = out.data();
        std::vector<double> want = ref_gemm(g, out);
        if (relu) {
          g.activation = UnaryOp::Relu;
          for (double& v : want) v = std::max(v, 0.0);
        }
        CHECK(cpu::gemm_takes_groups(g) == (!relu && cpu::use_tiled_gemm(c.m, c.n)));
        kernels().gemm(g);
        expect_close(out, want, 1e-4, 1e-4,
                     "groups ta=" + std::to_string(c.ta) + " tb=" + std::to_string(c.tb) +
                         " m=" + std::to_string(c.m) + " relu=" + std::to_string(relu) +
                         " threads=" + std::to_string(t));
      }
  set_num_threads(threads);
  // Groups that do not divide the batch are refused.
  GemmArgs g;
  g.m = g.n = g.k = 2, g.batch = 5, g.group = 2, g.lda = g.ldb = g.ldc = 2;
  g.stride_a = g.stride_b = g.stride_c = 4, g.group_stride_c = 8;
  std::vector<float> x(64);
  g.a = x.data(), g.b = x.data(), g.c = x.data();
  expect_error([&] { kernels().gemm(g); }, {"gemm", "5 batch items do not make groups of 2"});
}

// gemm_tiled adds GemmArgs::bias as it writes each tile (in the first block of k only), where
// the other paths first write C = beta C + bias and then add the product (beta 1). The two
// must agree to the bit, on every path of the kernel: a model's numbers do not depend on which
// path computed its Linear layers.
TEST_CASE("cpu gemm_tiled adds a bias as it writes C, to the bit as a pass before the product") {
  const int threads = get_num_threads();
  for (int t = 1; t <= 3; ++t)
    for (const GemmCase& c : tiled_gemm_cases()) {
      set_num_threads(t);
      CAPTURE(t);
      CAPTURE(c.m);
      CAPTURE(c.n);
      CAPTURE(c.k);
      CAPTURE(c.ta);
      CAPTURE(c.tb);
      GemmArgs g = gemm_geometry(c);
      const GemmOperands x = random_operands(c, g, 83);
      const std::vector<float>& bias = x.bias;
      const std::vector<float>& c0 = x.c0;
      g.a = x.a.data(), g.b = x.b.data();
      // C started from the bias, then the product added to it.
      std::vector<float> two_passes = c0;
      for (int64_t i = 0; i < c.batch; ++i)
        for (int64_t r = 0; r < c.m; ++r)
          for (int64_t j = 0; j < c.n; ++j) {
            float& x = two_passes[static_cast<size_t>(i * g.stride_c + r * g.ldc + j)];
            x = (c.beta == 0.0f ? 0.0f : c.beta * x) + bias[static_cast<size_t>(j)];
          }
      GemmArgs first = g;
      first.beta = 1.0f, first.c = two_passes.data();
      cpu::gemm_tiled(first);
      // The bias added by the kernel.
      std::vector<float> one_pass = c0;
      GemmArgs fused = g;
      fused.c = one_pass.data(), fused.bias = bias.data();
      cpu::gemm_tiled(fused);
      int64_t differ = 0;
      for (size_t i = 0; i < one_pass.size(); ++i)
        differ += std::memcmp(&one_pass[i], &two_passes[i], sizeof(float)) != 0;
      CHECK(differ == 0);
    }
  set_num_threads(threads);
}

TEST_CASE("cpu gemm accepts degenerate strides: one-row operands, broadcast rows, k = 0") {
  // m = 1 with lda = 1 (the stride a size-1 dim may have): BLAS would reject lda < k.
  std::vector<float> a = uniform_values(4, -1, 1, 90), b = uniform_values(4 * 3, -1, 1, 91);
  std::vector<float> c(3, 0.0f);
  GemmArgs g;
  g.m = 1, g.n = 3, g.k = 4, g.a = a.data(), g.lda = 1, g.b = b.data(), g.ldb = 3;
  g.c = c.data(), g.ldc = 1;
  GemmArgs dense = g;  // the same product with textbook strides, for the reference
  dense.lda = 4, dense.ldc = 3;
  const std::vector<double> want = ref_gemm(dense, c);
  kernels().gemm(g);
  expect_close(c, want, 1e-5, 1e-6, "one-row A with lda 1");
  // A whose rows are all the same row (lda = 0, an expanded vector).
  std::vector<float> c2(5 * 3, 0.0f);
  GemmArgs g2 = g;
  g2.m = 5, g2.lda = 0, g2.c = c2.data(), g2.ldc = 3;
  kernels().gemm(g2);
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 3; ++j) CHECK(c2[i * 3 + j] == doctest::Approx(want[j]).epsilon(1e-5));
  // k = 0: C = beta C, and beta = 0 overwrites even NaN.
  std::vector<float> c3 = {1.0f, kNaN, 3.0f, 4.0f};
  GemmArgs g3;
  g3.m = 2, g3.n = 2, g3.k = 0, g3.beta = 0.0f, g3.c = c3.data(), g3.ldc = 2;
  g3.a = a.data(), g3.b = b.data(), g3.lda = 1, g3.ldb = 2;
  kernels().gemm(g3);
  CHECK(c3 == std::vector<float>(4, 0.0f));
  // beta = 0 also overwrites NaN on the matrix-vector paths (one row, one column).
  std::vector<float> c5 = {kNaN, kNaN, kNaN};
  g.c = c5.data(), g.beta = 0.0f;
  kernels().gemm(g);
  expect_close(c5, want, 1e-5, 1e-6, "one-row A over a NaN output with beta 0");
  std::vector<float> col = {kNaN, kNaN, kNaN};
  GemmArgs g5;  // [3, 4] @ [4, 1], C a column with row stride 1
  g5.m = 3, g5.n = 1, g5.k = 4, g5.a = b.data(), g5.lda = 4, g5.b = a.data(), g5.ldb = 1;
  g5.c = col.data(), g5.ldc = 1;
  const std::vector<double> col_want = ref_gemm(g5, col);
  kernels().gemm(g5);
  for (float v : col) CHECK(std::isfinite(v));
  expect_close(col, col_want, 1e-5, 1e-6, "one-column B over a NaN output with beta 0");
  std::vector<float> c4 = {1.0f, 2.0f, 3.0f, 4.0f};
  g3.beta = 0.5f, g3.c = c4.data();
  kernels().gemm(g3);
  expect_close(c4, {0.5, 1.0, 1.5, 2.0}, 0, 0, "k = 0 scales C by beta");
}

TEST_CASE("cpu gemm starts from GemmArgs::bias: every row of every batch item, any beta") {
  // C = alpha A B^T + beta C + bias, the bias added to each row (a Linear's y = x W^T + b).
  const int64_t m = 3, n = 5, k = 7, batch = 2;
  const std::vector<float> a = uniform_values(batch * m * k, -1, 1, 95);
  const std::vector<float> b = uniform_values(n * k, -1, 1, 96);
  const std::vector<float> bias = uniform_values(n, -2, 2, 97);
  for (const float beta : {0.0f, 2.0f}) {
    for (const int64_t rows : {m, int64_t{1}}) {  // a product and a matrix-vector product
      GemmArgs g;
      g.trans_b = true;
      g.m = rows, g.n = n, g.k = k, g.batch = batch, g.alpha = 0.5f, g.beta = beta;
      g.lda = k, g.ldb = k, g.ldc = n + 1;  // C's rows padded by one
      g.stride_a = m * k, g.stride_b = 0, g.stride_c = m * g.ldc;
      std::vector<float> c = uniform_values(batch * g.stride_c, -1, 1, 98);
      if (beta == 0.0f) std::fill(c.begin(), c.end(), kNaN);  // beta 0 does not read C
      g.a = a.data(), g.b = b.data(), g.c = c.data(), g.bias = bias.data();
      std::vector<double> want = ref_gemm(g, c);
      for (int64_t bt = 0; bt < batch; ++bt)
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < n; ++j) want[bt * g.stride_c + i * g.ldc + j] += bias[j];
      kernels().gemm(g);
      for (int64_t bt = 0; bt < batch; ++bt)
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < n; ++j) {
            const size_t at = static_cast<size_t>(bt * g.stride_c + i * g.ldc + j);
            CAPTURE(beta);
            CAPTURE(rows);
            CHECK(c[at] == doctest::Approx(want[at]).epsilon(1e-5));
          }
    }
  }
  // A bfloat16 C takes the bias rounded to bfloat16, then the product, rounded once.
  std::vector<BFloat16> ab(k), bb(n * k), cb(n);
  for (int64_t p = 0; p < k; ++p) ab[p] = BFloat16(a[p]);
  for (int64_t p = 0; p < n * k; ++p) bb[p] = BFloat16(b[p]);
  GemmArgs g;
  g.trans_b = true, g.m = 1, g.n = n, g.k = k, g.lda = k, g.ldb = k, g.ldc = n;
  g.ab_type = DType::BFloat16, g.c_type = DType::BFloat16;
  g.a = ab.data(), g.b = bb.data(), g.c = cb.data(), g.bias = bias.data();
  kernels().gemm(g);
  for (int64_t j = 0; j < n; ++j) {
    float product = 0.0f;
    for (int64_t p = 0; p < k; ++p)
      product += static_cast<float>(ab[p]) * static_cast<float>(bb[j * k + p]);
    const float want =
        static_cast<float>(BFloat16(static_cast<float>(BFloat16(bias[j])) + product));
    CHECK(static_cast<float>(cb[j]) == doctest::Approx(want).epsilon(1e-2));
  }
}

TEST_CASE("cpu gemm applies GemmArgs::activation after the bias, before a bfloat16 C rounds") {
  const int64_t m = 4, n = 6, k = 5;
  const std::vector<float> a = uniform_values(m * k, -1, 1, 99),
                           b = uniform_values(n * k, -1, 1, 100);
  const std::vector<float> bias = uniform_values(n, -1, 1, 101);
  auto gelu_tanh_ref = [](double v) {
    return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  };
  for (const UnaryOp act : {UnaryOp::Relu, UnaryOp::GeluTanh}) {
    GemmArgs g;
    g.trans_b = true, g.m = m, g.n = n, g.k = k, g.lda = k, g.ldb = k, g.ldc = n;
    std::vector<float> c(m * n, kNaN);
    g.a = a.data(), g.b = b.data(), g.c = c.data(), g.bias = bias.data(), g.activation = act;
    std::vector<double> want = ref_gemm(g, c);
    for (int64_t i = 0; i < m * n; ++i) {
      const double v = want[i] + bias[i % n];
      want[i] = act == UnaryOp::Relu ? std::max(v, 0.0) : gelu_tanh_ref(v);
    }
    kernels().gemm(g);
    expect_close(c, want, 1e-5, 1e-5, "gemm with an activation");
  }
  GemmArgs g;
  g.m = 1, g.n = 1, g.k = 1, g.lda = 1, g.ldb = 1, g.ldc = 1;
  float one = 1.0f, out = 0.0f;
  g.a = &one, g.b = &one, g.c = &out, g.activation = UnaryOp::Exp;
  expect_error([&] { kernels().gemm(g); }, {"gemm", "Exp", "Relu, Gelu or GeluTanh"});
}

// GemmArgs::activation_out: C keeps the product, and activation_out gets op(C + activation_bias)
// (a training step's Linear and activation, autograd's linear_activation). The tiles write it as
// they finish each band of C's rows; a product split along k, computed as C^T, of a few rows, or
// not by tiles at all (a single row, k = 0) writes it in a pass over C afterwards. Every path
// must give the bits of the product alone followed by bias_unary (unary without a bias), and
// leave C and the padding of activation_out's rows as they would be.
TEST_CASE("cpu gemm writes GemmArgs::activation_out as the product's bias_unary, to the bit") {
  const int threads = get_num_threads();
  std::vector<GemmCase> cases;
  for (const GemmCase& c : tiled_gemm_cases())
    if (c.batch == 1) cases.push_back(c);
  cases.push_back({false, true, 3, 100, 40, 1, 1.0f, 0.0f, false, 0});    // a few rows
  cases.push_back({true, false, 768, 128, 2048, 1, 1.0f, 0.0f, false, 0});  // C^T
  cases.push_back({false, true, 1, 50, 30, 1, 1.0f, 0.0f, false, 0});     // one row: gemv
  cases.push_back({false, false, 20, 1, 30, 1, 1.0f, 0.0f, false, 2});    // one column
  cases.push_back({false, true, 9, 30, 0, 1, 1.0f, 0.5f, false, 1});      // k = 0
  cases.push_back({false, true, 200, 300, 128, 1, 1.0f, 0.0f, false, 0});  // a Linear's
  const UnaryOp ops[] = {UnaryOp::Relu, UnaryOp::Gelu, UnaryOp::GeluTanh};
  int64_t index = 0, transposed = 0, split = 0;
  for (const GemmCase& c : cases) {
    for (int t : {1, 2, 3}) {
      set_num_threads(t);
      const UnaryOp op = ops[index % 3];
      // (no bias into C for the long products, which C^T's product would then not take)
      const bool with_bias = index % 2 == 0, c_bias = index % 4 < 2 && c.k < 2048;
      ++index;
      CAPTURE(c.m);
      CAPTURE(c.n);
      CAPTURE(c.k);
      CAPTURE(t);
      CAPTURE(unary_op_name(op));
      GemmArgs g = gemm_geometry(c);
      const GemmOperands x = random_operands(c, g, 200 + index);
      const std::vector<float> act_bias = uniform_values(c.n, -1, 1, 300 + index);
      g.a = x.a.data(), g.b = x.b.data(), g.bias = c_bias ? x.bias.data() : nullptr;
      std::vector<float> product = x.c0;  // the product alone
      g.c = product.data();
      kernels().gemm(g);
      if (c.k > 0 && cpu::use_tiled_gemm(c.m, c.n)) {  // (what gemm_tiled computes)
        transposed += cpu::gemm_tiled_transposes_c(g);
        split += cpu::gemm_tiled_splits_k(g);
      }
      // op(C + bias) by the activation's own kernel, over C's rows as a [m, n] tensor
      std::vector<float> rows(c.m * c.n);
      for (int64_t r = 0; r < c.m; ++r)
        std::copy_n(product.data() + r * g.ldc, c.n, rows.data() + r * c.n);
      const Tensor product_rows = tensor(rows, {c.m, c.n});
      Tensor want = Tensor::empty({c.m, c.n});
      if (with_bias) {
        const Tensor bias = tensor(act_bias, {1, c.n}).expand({c.m, c.n});
        kernels().bias_unary(op, product_rows, bias, want);
      } else {
        kernels().unary(op, product_rows, want, 0.0f, 0.0f);
      }
      // The same product with the activation written too, into rows 3 floats longer.
      const int64_t ldo = c.n + 3;
      std::vector<float> both = x.c0, out(c.m * ldo, -7.0f);
      g.c = both.data();
      g.activation = op;
      g.activation_out = out.data(), g.ld_activation_out = ldo;
      g.activation_bias = with_bias ? act_bias.data() : nullptr;
      kernels().gemm(g);
      CHECK(std::memcmp(both.data(), product.data(), both.size() * sizeof(float)) == 0);
      const std::vector<float> w = want.to_vector();
      int64_t wrong = 0, padding = 0;
      for (int64_t r = 0; r < c.m; ++r) {
        wrong += std::memcmp(out.data() + r * ldo, w.data() + r * c.n, c.n * sizeof(float)) != 0;
        for (int64_t j = c.n; j < ldo; ++j) padding += out[r * ldo + j] != -7.0f;
      }
      CHECK(wrong == 0);
      CHECK(padding == 0);
    }
  }
  set_num_threads(threads);
  CHECK(transposed >= 3);  // the C^T case on every thread count
  CHECK(split >= 4);       // the long products' split of k, on 2 and 3 threads
  // Where activation_out cannot go, and a bias for it without it.
  std::vector<float> one(64, 1.0f), c(64), out(64);
  GemmArgs g;
  g.m = 2, g.n = 4, g.k = 2, g.a = one.data(), g.lda = 2, g.b = one.data(), g.ldb = 4;
  g.c = c.data(), g.ldc = 4, g.activation = UnaryOp::Gelu;
  g.activation_out = out.data(), g.ld_activation_out = 4;
  g.batch = 2, g.stride_a = 4, g.stride_b = 8, g.stride_c = 8;
  expect_error([&] { kernels().gemm(g); }, {"gemm", "activation_out", "batch 2"});
  g.batch = 1, g.ld_activation_out = 3;
  expect_error([&] { kernels().gemm(g); }, {"gemm", "ld_activation_out 3"});
  g.ld_activation_out = 4, g.activation.reset();
  expect_error([&] { kernels().gemm(g); }, {"gemm", "activation none"});
  g.activation_out = nullptr, g.activation_bias = one.data();
  expect_error([&] { kernels().gemm(g); }, {"gemm", "activation_bias without activation_out"});
}

TEST_CASE("cpu gemm rejects overlapping outputs") {
  std::vector<float> a(16, 1.0f), c(16, 0.0f);
  GemmArgs g;
  g.m = 2, g.n = 4, g.k = 2, g.a = a.data(), g.lda = 2, g.b = a.data(), g.ldb = 4;
  g.c = c.data(), g.ldc = 2;
  expect_error([&] { kernels().gemm(g); }, {"gemm", "row stride 2", "4 columns"});
  g.ldc = 4, g.batch = 2, g.stride_c = 0;
  expect_error([&] { kernels().gemm(g); }, {"gemm", "stride_c"});
}

// =================================================================== indexing

TEST_CASE("cpu index_select and index_add match reference loops, with repeated indices") {
  struct Extent {
    int64_t outer, n, inner, k;
  };
  for (const Extent& e :
       std::vector<Extent>{{2, 5, 3, 4}, {1, 1000, 256, 3000}, {8, 50, 40, 120}, {3, 6, 1, 10}}) {
    const Tensor x = uniform_tensor({e.outer, e.n, e.inner}, -1, 1, 100);
    std::vector<int64_t> iv(e.k);
    const std::vector<float> r = uniform_values(e.k, 0, static_cast<float>(e.n), 101);
    for (int64_t j = 0; j < e.k; ++j) iv[j] = static_cast<int64_t>(r[j]);
    const Tensor index = tensor_i64(iv, {e.k});
    const std::vector<float> xv = x.to_vector();
    Tensor out = Tensor::empty({e.outer, e.k, e.inner});
    kernels().index_select(x, e.outer, e.n, e.inner, index, out);
    std::vector<double> want(e.outer * e.k * e.inner);
    for (int64_t o = 0; o < e.outer; ++o)
      for (int64_t j = 0; j < e.k; ++j)
        for (int64_t i = 0; i < e.inner; ++i)
          want[(o * e.k + j) * e.inner + i] = xv[(o * e.n + iv[j]) * e.inner + i];
    expect_close(out.to_vector(), want, 0, 0, "index_select");
    // index_add: scatter the selected rows back, summing duplicates.
    Tensor acc = uniform_tensor({e.outer, e.n, e.inner}, -1, 1, 102);
    std::vector<double> acc_want = to_double(acc.to_vector());
    const std::vector<float> src = out.to_vector();
    for (int64_t o = 0; o < e.outer; ++o)
      for (int64_t j = 0; j < e.k; ++j)
        for (int64_t i = 0; i < e.inner; ++i)
          acc_want[(o * e.n + iv[j]) * e.inner + i] += src[(o * e.k + j) * e.inner + i];
    kernels().index_add(out, e.outer, e.n, e.inner, index, acc);
    expect_close(acc.to_vector(), acc_want, 1e-5, 1e-5, "index_add");
  }
}

// A KV cache's reorder (nn/kv_cache.cpp) moves the filled prefix of each row: x and out are
// matrices whose rows lie further apart than they are long, read and written where they lie;
// what lies between the rows is not touched.
TEST_CASE("cpu index_select picks rows of padded matrices in place") {
  const Tensor x_storage = uniform_tensor({6, 10}, -1, 1, 103);
  const Tensor x = x_storage.narrow(1, 0, 7);  // 6 rows of 7, 10 apart
  Tensor out_storage = full({4, 12}, 5.0f);
  Tensor out = out_storage.narrow(1, 0, 7);  // 4 rows of 7, 12 apart
  kernels().index_select(x, 1, 6, 7, tensor_i64({5, 0, 5, 2}, {4}), out);
  const std::vector<float> xv = x_storage.to_vector(), ov = out_storage.to_vector();
  const int64_t picked[] = {5, 0, 5, 2};
  for (int64_t j = 0; j < 4; ++j)
    for (int64_t i = 0; i < 12; ++i)
      CHECK(ov[j * 12 + i] == (i < 7 ? xv[picked[j] * 10 + i] : 5.0f));
  // A padded out that is not a matrix of the rows asked for is refused, as any wrong out.
  Tensor short_rows = out_storage.narrow(1, 0, 6);
  expect_error([&] { kernels().index_select(x, 1, 6, 7, tensor_i64({0}, {1}), short_rows); },
               {"index_select", "out"});
}

// index_copy writes rows into a padded matrix where they lie (a KV cache's reorder, in place).
// Distinct indices are written in parallel; with a repeated index the last row still wins.
TEST_CASE("cpu index_copy writes rows of padded matrices in place, in parallel when distinct") {
  const Tensor src = uniform_tensor({3, 7}, -1, 1, 107);
  const std::vector<float> sv = src.to_vector();
  for (const std::vector<int64_t>& rows : {std::vector<int64_t>{4, 0, 2},
                                           std::vector<int64_t>{1, 3, 1}}) {
    Tensor out_storage = full({5, 10}, 5.0f);
    Tensor out = out_storage.narrow(1, 0, 7);  // 5 rows of 7, 10 apart
    kernels().index_copy(src, 1, 5, 7, tensor_i64(rows, {3}), out);
    const std::vector<float> ov = out_storage.to_vector();
    for (int64_t r = 0; r < 5; ++r) {
      int64_t written = -1;  // the last j with rows[j] == r
      for (int64_t j = 0; j < 3; ++j)
        if (rows[static_cast<size_t>(j)] == r) written = j;
      for (int64_t i = 0; i < 10; ++i)
        CHECK(ov[r * 10 + i] == (written >= 0 && i < 7 ? sv[written * 7 + i] : 5.0f));
    }
  }
  // Many rows, so that the parallel loop splits them: each lands where its index says.
  const Tensor many = uniform_tensor({4000, 9}, -1, 1, 109);
  std::vector<int64_t> reversed(4000);
  for (int64_t j = 0; j < 4000; ++j) reversed[static_cast<size_t>(j)] = 3999 - j;
  Tensor wide = zeros({4000, 16});
  Tensor into = wide.narrow(1, 0, 9);
  kernels().index_copy(many, 1, 4000, 9, tensor_i64(reversed, {4000}), into);
  check_close(into, index_select(many, 0, tensor_i64(reversed, {4000})), 0.0f, 0.0f, "reversed");
  CHECK(wide.narrow(1, 9, 7).abs().max().item() == 0.0f);  // the padding untouched
  Tensor short_rows = full({5, 10}, 5.0f).narrow(1, 0, 6);
  expect_error([&] { kernels().index_copy(src, 1, 5, 7, tensor_i64({0}, {1}), short_rows); },
               {"index_copy"});
}

// move_rows moves rows of a matrix in place as index_select and then index_copy would: a source
// that is itself overwritten is read as it was (a cycle, a chain), one source serves several
// rows, a row moved onto itself stays, and with a repeated destination the last move wins; in a
// matrix of padded rows (a KV cache's filled prefixes) the padding is untouched.
TEST_CASE("cpu move_rows equals index_select then index_copy, in place, padded rows too") {
  struct Moves {
    std::vector<int64_t> from, to;
  };
  const int64_t n = 6, inner = 5;
  const auto index = [](const std::vector<int64_t>& v) {
    return tensor_i64(v, {static_cast<int64_t>(v.size())});
  };
  for (const Moves& m : {Moves{{1, 2, 0}, {0, 1, 2}},          // a cycle
                         Moves{{0, 0, 3}, {1, 2, 4}},          // beams continuing others
                         Moves{{3, 5, 1, 4}, {3, 1, 0, 5}},    // a chain, a row onto itself
                         Moves{{1, 4, 5, 0}, {2, 5, 2, 3}}}) {  // destination 2 twice
    for (const bool padded : {false, true}) {
      CAPTURE(padded);
      Tensor storage = uniform_tensor({n, padded ? 8 : inner}, -1, 1, 113);
      Tensor out = padded ? storage.narrow(1, 0, inner) : storage;
      const Tensor before = out.clone(), padding = storage.narrow(1, inner, padded ? 3 : 0).clone();
      Tensor expected = before.clone();
      expected.index_copy_(0, index(m.to), index_select(before, 0, index(m.from)));
      kernels().move_rows(index(m.from), index(m.to), n, inner, out);
      check_close(out, expected, 0.0f, 0.0f, "moved");
      check_close(storage.narrow(1, inner, padded ? 3 : 0), padding, 0.0f, 0.0f, "padding");
    }
  }
  // Many rows, so that the parallel loops split them: every row reversed (each source written,
  // all through the copy aside), every other row taking its neighbour's (none aside), and every
  // row but the first taking the one before it (a chain longer than the waves go: the rest
  // through the copy aside); and bfloat16 rows, moved as bytes.
  const int64_t many = 4000;
  std::vector<int64_t> reversed(many), all(many), odd, even;
  for (int64_t j = 0; j < many; ++j) {
    reversed[static_cast<size_t>(j)] = many - 1 - j;
    all[static_cast<size_t>(j)] = j;
    (j % 2 ? odd : even).push_back(j);
  }
  const std::vector<int64_t> head(all.begin(), all.end() - 1), tail(all.begin() + 1, all.end());
  for (const DType type : {DType::Float32, DType::BFloat16}) {
    for (const auto& [from, to] :
         {std::pair{all, reversed}, std::pair{even, odd}, std::pair{head, tail}}) {
      Tensor wide = uniform_tensor({many, 16}, -1, 1, 127).to(type);
      Tensor rows = wide.narrow(1, 0, 9);
      const Tensor before = rows.to(DType::Float32);  // exact: the reference moves floats
      Tensor expected = before.clone();
      expected.index_copy_(0, index(to), index_select(before, 0, index(from)));
      kernels().move_rows(index(from), index(to), many, 9, rows);
      check_close(rows.to(DType::Float32), expected, 0.0f, 0.0f, "many");
    }
  }
  Tensor out = zeros({6, 5});
  expect_error([&] { kernels().move_rows(index({0, 6}), index({1, 2}), 6, 5, out); },
               {"move_rows", "index 6", "size 6"});
  expect_error([&] { kernels().move_rows(index({0, 1, 2}), index({3, 4}), 6, 5, out); },
               {"move_rows", "3 rows to move from but 2"});
  expect_error([&] { kernels().move_rows(index({0}), index({1}), 7, 5, out); },
               {"move_rows", "out"});
}

TEST_CASE("cpu gather and scatter_add match reference loops") {
  struct Extent {
    int64_t outer, n, inner, k;
  };
  for (const Extent& e :
       std::vector<Extent>{{2, 5, 3, 4}, {1, 20, 3000, 30}, {6000, 10, 1, 12}, {4, 7, 2, 7}}) {
    const Tensor x = uniform_tensor({e.outer, e.n, e.inner}, -1, 1, 110);
    const int64_t count = e.outer * e.k * e.inner;
    std::vector<int64_t> iv(count);
    const std::vector<float> r = uniform_values(count, 0, static_cast<float>(e.n), 111);
    for (int64_t j = 0; j < count; ++j) iv[j] = static_cast<int64_t>(r[j]);
    const Tensor index = tensor_i64(iv, {e.outer, e.k, e.inner});
    const std::vector<float> xv = x.to_vector();
    Tensor out = Tensor::empty({e.outer, e.k, e.inner});
    kernels().gather(x, e.outer, e.n, e.inner, index, out);
    std::vector<double> want(count);
    for (int64_t o = 0; o < e.outer; ++o)
      for (int64_t j = 0; j < e.k; ++j)
        for (int64_t i = 0; i < e.inner; ++i) {
          const int64_t p = (o * e.k + j) * e.inner + i;
          want[p] = xv[(o * e.n + iv[p]) * e.inner + i];
        }
    expect_close(out.to_vector(), want, 0, 0, "gather");
    Tensor acc = Tensor::empty({e.outer, e.n, e.inner});
    kernels().fill(acc, 0.0);
    std::vector<double> acc_want(e.outer * e.n * e.inner, 0.0);
    const std::vector<float> src = out.to_vector();
    for (int64_t o = 0; o < e.outer; ++o)
      for (int64_t j = 0; j < e.k; ++j)
        for (int64_t i = 0; i < e.inner; ++i) {
          const int64_t p = (o * e.k + j) * e.inner + i;
          acc_want[(o * e.n + iv[p]) * e.inner + i] += src[p];
        }
    kernels().scatter_add(out, e.outer, e.n, e.inner, index, acc);
    expect_close(acc.to_vector(), acc_want, 1e-5, 1e-5, "scatter_add");
  }
}

TEST_CASE("cpu index kernels reject out-of-range indices, naming op, value and range") {
  const Tensor x = uniform_tensor({2, 5, 3}, -1, 1, 120);
  Tensor out = Tensor::empty({2, 2, 3});
  expect_error(
      [&] {
        kernels().index_select(x, 2, 5, 3, tensor_i64({1, 7}, {2}), out);
      },
      {"index_select", "index 7", "[0, 5)"});
  Tensor acc = Tensor::empty({2, 5, 3});
  expect_error(
      [&] {
        kernels().index_add(out, 2, 5, 3, tensor_i64({-1, 0}, {2}), acc);
      },
      {"index_add", "index -1", "[0, 5)"});
  std::vector<int64_t> bad(12, 0);
  bad[5] = 5;
  const Tensor bad_index = tensor_i64(bad, {2, 2, 3});
  expect_error([&] { kernels().gather(x, 2, 5, 3, bad_index, out); },
               {"gather", "index 5", "[0, 5)"});
  expect_error([&] { kernels().scatter_add(out, 2, 5, 3, bad_index, acc); },
               {"scatter_add", "index 5", "[0, 5)"});
}

// =================================================================== random numbers

TEST_CASE("cpu rand_uniform/rand_normal give element i the Philox value of counter offset + i") {
  const int64_t n = 50001;
  const uint64_t seed = 1234, offset = 77;
  Tensor u = Tensor::empty({n}), z = Tensor::empty({n});
  kernels().rand_uniform(u, seed, offset);
  kernels().rand_normal(z, seed, offset);
  const std::vector<float> uv = u.to_vector(), zv = z.to_vector();
  bool same_u = true, same_z = true, in_range = true;
  double mean = 0, var = 0;
  for (int64_t i = 0; i < n; ++i) {
    same_u = same_u && uv[i] == philox_uniform(offset + i, seed);
    same_z = same_z && zv[i] == philox_normal(offset + i, seed);
    in_range = in_range && uv[i] >= 0.0f && uv[i] < 1.0f;
    mean += zv[i] / n;
  }
  for (int64_t i = 0; i < n; ++i) var += (zv[i] - mean) * (zv[i] - mean) / n;
  CHECK(same_u);
  CHECK(same_z);
  CHECK(in_range);
  CHECK(std::fabs(mean) < 0.02);
  CHECK(std::fabs(var - 1.0) < 0.03);
}

// rand_uniform draws 64 counters at a time in vector lanes where the build has AVX-512 (those
// that share their high 32 bits). Every length, start and thread count gives each element
// philox_uniform of its own counter, a block that crosses 2^32 or 2^33 included.
TEST_CASE("cpu rand_uniform is philox_uniform of offset + i across high-word boundaries") {
  const uint64_t seed = 0x0123456789ABCDEFull;
  const int threads = get_num_threads();
  for (const uint64_t offset : {uint64_t{0}, uint64_t{5}, (uint64_t{1} << 32) - 100,
                                (uint64_t{2} << 32) - 63, (uint64_t{1} << 32) - 1})
    for (const int64_t n : {int64_t{1}, int64_t{63}, int64_t{64}, int64_t{65}, int64_t{300},
                            int64_t{20000}})
      for (int t = 1; t <= 3; ++t) {
        set_num_threads(t);
        Tensor u = Tensor::empty({n});
        kernels().rand_uniform(u, seed, offset);
        const std::vector<float> uv = u.to_vector();
        int64_t wrong = 0;
        for (int64_t i = 0; i < n; ++i)
          wrong += uv[static_cast<size_t>(i)] != philox_uniform(offset + i, seed);
        CHECK_MESSAGE(wrong == 0, "offset ", offset, " n ", n, " threads ", t);
      }
  set_num_threads(threads);
}

// =================================================================== fused nn kernels

TEST_CASE("cpu layer_norm forward and backward match the reference and its numerical gradient") {
  const double eps = 1e-5;
  for (bool affine : {true, false}) {
    const int64_t rows = 6, cols = 11;
    const Tensor x = uniform_tensor({rows, cols}, -3, 5, 130);
    const Tensor w = uniform_tensor({cols}, 0.5f, 1.5f, 131);
    const Tensor b = uniform_tensor({cols}, -1, 1, 132);
    const Tensor dy = uniform_tensor({rows, cols}, -1, 1, 133);
    const std::vector<double> xd = to_double(x.to_vector()), dyd = to_double(dy.to_vector());
    const std::vector<double> wd = affine ? to_double(w.to_vector()) : std::vector<double>{};
    const std::vector<double> bd = affine ? to_double(b.to_vector()) : std::vector<double>{};
    Tensor y = Tensor::empty({rows, cols}), mean = Tensor::empty({rows}),
           rstd = Tensor::empty({rows});
    const Tensor wt = affine ? w : Tensor(), bt = affine ? b : Tensor();
    kernels().layer_norm(x, wt, bt, static_cast<float>(eps), y, mean, rstd);
    expect_close(y.to_vector(), ref_layer_norm(xd, wd, bd, rows, cols, eps), 1e-5, 1e-5,
                 "layer_norm forward");
    std::vector<double> mean_want(rows), rstd_want(rows);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) mean_want[r] += xd[r * cols + c] / cols;
      double var = 0;
      for (int64_t c = 0; c < cols; ++c) var += std::pow(xd[r * cols + c] - mean_want[r], 2) / cols;
      rstd_want[r] = 1 / std::sqrt(var + eps);
    }
    expect_close(mean.to_vector(), mean_want, 1e-6, 1e-6, "layer_norm mean");
    expect_close(rstd.to_vector(), rstd_want, 1e-5, 0, "layer_norm rstd");

    // L = sum dy * y; its gradients by finite differences of the double reference.
    Tensor dx = Tensor::empty({rows, cols}), dw = Tensor::empty({cols}), db = Tensor::empty({cols});
    Tensor dw_arg = affine ? dw : Tensor(), db_arg = affine ? db : Tensor();
    kernels().layer_norm_backward(dy, x, wt, mean, rstd, dx, dw_arg, db_arg);
    expect_close(dx.to_vector(),
                 numeric_grad(
                     [&](const std::vector<double>& v) {
                       return dot(dyd, ref_layer_norm(v, wd, bd, rows, cols, eps));
                     },
                     xd),
                 1e-3, 1e-4, "layer_norm dx");
    if (!affine) continue;
    expect_close(dw.to_vector(),
                 numeric_grad(
                     [&](const std::vector<double>& v) {
                       return dot(dyd, ref_layer_norm(xd, v, bd, rows, cols, eps));
                     },
                     wd),
                 1e-4, 1e-5, "layer_norm dweight");
    expect_close(db.to_vector(),
                 numeric_grad(
                     [&](const std::vector<double>& v) {
                       return dot(dyd, ref_layer_norm(xd, wd, v, rows, cols, eps));
                     },
                     bd),
                 1e-4, 1e-5, "layer_norm dbias");
  }
}

TEST_CASE("cpu layer_norm_backward sums dweight/dbias race-free over many rows") {
  // Several threads, each with its own partial sums on cache lines of its own: rows of whole
  // lines (64, 128 floats) and of a part of one (37: each thread's sums padded to whole lines);
  // dweight alone gives the same values as with dbias.
  for (const int64_t cols : {64, 37, 128}) {
    CAPTURE(cols);
    const int64_t rows = 3000;
    const Tensor x = uniform_tensor({rows, cols}, -2, 2, 140);
    const Tensor w = uniform_tensor({cols}, 0.5f, 1.5f, 141);
    const Tensor b = uniform_tensor({cols}, -1, 1, 142);
    const Tensor dy = uniform_tensor({rows, cols}, -1, 1, 143);
    Tensor y = Tensor::empty({rows, cols}), mean = Tensor::empty({rows}),
           rstd = Tensor::empty({rows});
    kernels().layer_norm(x, w, b, 1e-5f, y, mean, rstd);
    Tensor dx = Tensor::empty({rows, cols}), dw = Tensor::empty({cols}),
           db = Tensor::empty({cols});
    kernels().layer_norm_backward(dy, x, w, mean, rstd, dx, dw, db);
    const std::vector<float> xv = x.to_vector(), dyv = dy.to_vector(), mv = mean.to_vector(),
                             rv = rstd.to_vector();
    std::vector<double> dw_want(cols, 0), db_want(cols, 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        dw_want[c] += dyv[r * cols + c] * (xv[r * cols + c] - mv[r]) * rv[r];
        db_want[c] += dyv[r * cols + c];
      }
    expect_close(dw.to_vector(), dw_want, 1e-4, 1e-3, "dweight over 3000 rows");
    expect_close(db.to_vector(), db_want, 1e-4, 1e-3, "dbias over 3000 rows");
    Tensor dx_alone = Tensor::empty({rows, cols}), dw_alone = Tensor::empty({cols}), no_db;
    kernels().layer_norm_backward(dy, x, w, mean, rstd, dx_alone, dw_alone, no_db);
    CHECK(dw_alone.to_vector() == dw.to_vector());
    CHECK(dx_alone.to_vector() == dx.to_vector());
  }
}

TEST_CASE("cpu cross_entropy matches PyTorch's smoothed loss, ignores ignore_index rows") {
  const int64_t rows = 7, classes = 5, ignore = -100;
  const std::vector<int64_t> t = {0, 4, ignore, 2, 2, 1, 3};
  const Tensor logits = uniform_tensor({rows, classes}, -4, 4, 150);
  const Tensor target = tensor_i64(t, {rows});
  const std::vector<double> xd = to_double(logits.to_vector());
  for (double ls : {0.0, 0.1}) {
    Tensor losses = Tensor::empty({rows}), lse = Tensor::empty({rows});
    kernels().cross_entropy(logits, target, ignore, static_cast<float>(ls), losses, lse);
    expect_close(losses.to_vector(), ref_cross_entropy(xd, t, classes, ignore, ls), 1e-5, 1e-6,
                 "cross_entropy loss, label_smoothing " + std::to_string(ls));
    const float scale = 1.0f / 6.0f;  // mean over the 6 non-ignored rows
    Tensor dlogits = Tensor::empty({rows, classes});
    kernels().cross_entropy_backward(logits, target, lse, ignore, static_cast<float>(ls), scale,
                                     dlogits);
    const std::vector<double> want = numeric_grad(
        [&](const std::vector<double>& v) {
          double s = 0;
          for (double l : ref_cross_entropy(v, t, classes, ignore, ls)) s += scale * l;
          return s;
        },
        xd);
    expect_close(dlogits.to_vector(), want, 1e-3, 1e-5,
                 "cross_entropy gradient, label_smoothing " + std::to_string(ls));
    for (int64_t c = 0; c < classes; ++c) CHECK(dlogits.to_vector()[2 * classes + c] == 0.0f);
  }
  // An ignored row is not read: NaN logits there change nothing, and its loss and lse are 0.
  std::vector<float> with_nan = logits.to_vector();
  for (int64_t c = 0; c < classes; ++c) with_nan[2 * classes + c] = kNaN;
  for (double ls : {0.0, 0.1}) {
    Tensor clean_losses = Tensor::empty({rows}), clean_lse = Tensor::empty({rows});
    kernels().cross_entropy(logits, target, ignore, static_cast<float>(ls), clean_losses,
                            clean_lse);
    Tensor nan_losses = Tensor::empty({rows}), nan_lse = Tensor::empty({rows});
    kernels().cross_entropy(tensor(with_nan, {rows, classes}), target, ignore,
                            static_cast<float>(ls), nan_losses, nan_lse);
    CHECK(nan_losses.to_vector() == clean_losses.to_vector());
    CHECK(nan_lse.to_vector() == clean_lse.to_vector());
    CHECK(clean_losses.to_vector()[2] == 0.0f);
    CHECK(clean_lse.to_vector()[2] == 0.0f);
  }
  Tensor losses = Tensor::empty({rows}), lse = Tensor::empty({rows});
  expect_error(
      [&] {
        kernels().cross_entropy(logits, tensor_i64({0, 5, 0, 0, 0, 0, 0}, {rows}), ignore, 0,
                                losses, lse);
      },
      {"cross_entropy", "target 5", "5 classes"});
}

TEST_CASE("cpu cross_entropy over many rows matches the reference (parallel path)") {
  const int64_t rows = 2000, classes = 50;
  const Tensor logits = uniform_tensor({rows, classes}, -10, 10, 160);
  std::vector<int64_t> t(rows);
  const std::vector<float> r = uniform_values(rows, 0, classes, 161);
  for (int64_t i = 0; i < rows; ++i) t[i] = static_cast<int64_t>(r[i]);
  Tensor losses = Tensor::empty({rows}), lse = Tensor::empty({rows});
  kernels().cross_entropy(logits, tensor_i64(t, {rows}), -100, 0.0f, losses, lse);
  expect_close(losses.to_vector(),
               ref_cross_entropy(to_double(logits.to_vector()), t, classes, -100, 0.0), 1e-5, 1e-5,
               "cross_entropy over 2000 rows");
}

TEST_CASE("cpu adam_step follows torch.optim.Adam and AdamW over several steps") {
  for (bool decoupled : {false, true}) {
    const int64_t n = 40001;
    Tensor p = uniform_tensor({n}, -1, 1, 170), m = Tensor::empty({n}), v = Tensor::empty({n});
    kernels().fill(m, 0.0);
    kernels().fill(v, 0.0);
    std::vector<double> pr = to_double(p.to_vector()), mr(n, 0), vr(n, 0);
    AdamArgs args;
    args.lr = 1e-2f, args.weight_decay = 0.1f, args.decoupled = decoupled;
    for (int step = 1; step <= 3; ++step) {
      const Tensor g = uniform_tensor({n}, -1, 1, 171 + step);
      const std::vector<float> gv = g.to_vector();
      args.bias1 = 1.0f - std::pow(args.beta1, static_cast<float>(step));
      args.bias2 = 1.0f - std::pow(args.beta2, static_cast<float>(step));
      kernels().adam_step(args, p, g, m, v);
      for (int64_t i = 0; i < n; ++i) {
        double gi = gv[i];
        if (decoupled)
          pr[i] *= 1.0 - args.lr * args.weight_decay;
        else
          gi += args.weight_decay * pr[i];
        mr[i] = args.beta1 * mr[i] + (1 - args.beta1) * gi;
        vr[i] = args.beta2 * vr[i] + (1 - args.beta2) * gi * gi;
        pr[i] -= args.lr * (mr[i] / args.bias1) / (std::sqrt(vr[i] / args.bias2) + args.eps);
      }
    }
    expect_close(p.to_vector(), pr, 1e-5, 1e-6, decoupled ? "AdamW param" : "Adam param");
    expect_close(m.to_vector(), mr, 1e-5, 1e-7, "exp_avg");
    expect_close(v.to_vector(), vr, 1e-5, 1e-9, "exp_avg_sq");
  }
}

TEST_CASE("cpu kernels reject mismatched shapes and dtypes with the op's name") {
  Tensor a = Tensor::empty({2, 3}), b = Tensor::empty({3, 2}), out = Tensor::empty({2, 3});
  expect_error([&] { kernels().binary(BinaryOp::Add, a, b, out); }, {"binary", "[3,2]", "[2,3]"});
  expect_error([&] { kernels().copy(b, out); }, {"copy", "[3,2]", "[2,3]"});
  Tensor ints = Tensor::empty({2, 3}, DType::Int64);
  expect_error([&] { kernels().binary(BinaryOp::Mul, ints, ints, out); },
               {"binary", "int64", "float32"});
  expect_error([&] { kernels().unary(UnaryOp::Exp, ints, out, 0, 0); }, {"unary", "int64"});
  expect_error([&] { kernels().softmax(a, 2, 4, 1, false, out); }, {"softmax", "6 elements", "8"});
}

// jemalloc's control interface, declared weak as backends/config.cpp declares it: null in a
// program without jemalloc.
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen)
    __attribute__((weak));

TEST_CASE("show_config names the process's malloc; with jemalloc linked, malloc is jemalloc's") {
  // LOOM_LINKS_JEMALLOC (tests/CMakeLists.txt): CMake's LOOM_JEMALLOC, which links jemalloc
  // into every program that links loom, this one included.
  const bool linked = mallctl != nullptr;
  CHECK(linked == static_cast<bool>(LOOM_LINKS_JEMALLOC));
  const std::string config = show_config();
  if (!linked) {  // a build without jemalloc (LOOM_JEMALLOC off, or sanitised)
    CHECK(config.find("  - malloc: the C library's\n") != std::string::npos);
    return;
  }
  CHECK(config.find("  - malloc: jemalloc ") != std::string::npos);
  // jemalloc counts the bytes each thread allocates: a block from malloc shows there only when
  // this program's malloc is jemalloc's, not merely loaded beside the C library's.
  uint64_t before = 0, after = 0;
  size_t size = sizeof before;
  REQUIRE(mallctl("thread.allocated", &before, &size, nullptr, 0) == 0);
  char* block = static_cast<char*>(std::malloc(size_t{1} << 20));
  REQUIRE(block != nullptr);
  *static_cast<volatile char*>(block) = 1;  // used, so that the compiler keeps the call
  REQUIRE(mallctl("thread.allocated", &after, &size, nullptr, 0) == 0);
  std::free(block);
  CHECK(after - before >= (uint64_t{1} << 20));
}

TEST_CASE("show_config names the build, its threads and BLAS, and ends with numerics_config") {
  const std::string numerics = numerics_config();
  // "COMPILER VERSION, BUILD TYPE, -MARCH, VECTORS, BLAS VERSION KERNELS": five parts.
  CHECK(std::count(numerics.begin(), numerics.end(), ',') == 4);
  CHECK(numerics.find("OpenBLAS ") != std::string::npos);
  CHECK(numerics.find('\n') == std::string::npos);
  const int threads = get_num_threads();
  set_num_threads(3);
  const std::string config = show_config();
  set_num_threads(threads);
  CHECK(config.starts_with("loom "));
  CHECK(config.find("  - OpenMP: 3 threads\n") != std::string::npos);
  CHECK(config.find("  - BLAS: OpenBLAS ") != std::string::npos);
  CHECK(config.find(", 3 threads)") != std::string::npos);  // OpenBLAS's follow
  // Where the products run: loom's tiles with 16-float vectors (an AVX-512 build), else BLAS.
  // (use_tiled_gemm is the library's answer: this file may be built for narrower vectors.)
  CHECK(config.find(cpu::use_tiled_gemm(2, 2)
                        ? "  - float32 products: loom's register tiles, 16-float vectors"
                        : "  - float32 products: BLAS") != std::string::npos);
  CHECK(config.ends_with("  - numerics: " + numerics + "\n"));
  if (cuda_available()) {
    CHECK(config.find("  - CUDA: built in; a device is available\n") != std::string::npos);
  } else {
    CHECK((config.find("  - CUDA: not built in\n") != std::string::npos ||
           config.find("  - CUDA: built in; no device\n") != std::string::npos));
  }
}
