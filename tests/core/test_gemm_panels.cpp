// A B in panels (GemmArgs::b_panel, what a PackedWeightsGuard keeps of a weight): cpu::gemm
// reads it as the same product with B in rows, to the bit, on any number of threads; pack_panels
// lays W^T out as the panels say; Backend::gemm rejects panels its kernels cannot read.
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "backends/backend.h"
#include "backends/gemm/tiled_gemm.h"
#include "core/rng.h"
#include "test_util.h"

using namespace loom;

namespace {

// n deterministic values uniform in [lo, hi).
std::vector<float> uniform_values(int64_t n, float lo, float hi, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = lo + (hi - lo) * philox_uniform(static_cast<uint64_t>(i), seed);
  return v;
}

// y = alpha x W^T + beta y0 + bias (then the activation): x [m, k], W [n, k].
struct LinearCase {
  int64_t m, n, k;
  float alpha, beta;
  bool bias;
  std::optional<UnaryOp> activation;
};

// The case's product with B = W^T read from W's rows (trans_b), or from W's panels.
std::vector<float> product(const LinearCase& c, const std::vector<float>& x,
                           const std::vector<float>& w, const std::vector<float>& panels,
                           const std::vector<float>& bias, const std::vector<float>& y0,
                           bool in_panels) {
  std::vector<float> y = y0;
  GemmArgs g;
  g.m = c.m, g.n = c.n, g.k = c.k, g.alpha = c.alpha, g.beta = c.beta;
  g.a = x.data(), g.lda = c.k;
  if (in_panels) {
    g.b = panels.data(), g.ldb = c.k * cpu::panel_columns(), g.b_panel = cpu::panel_columns();
  } else {
    g.b = w.data(), g.ldb = c.k, g.trans_b = true;
  }
  g.c = y.data(), g.ldc = c.n;
  if (c.bias) g.bias = bias.data();
  g.activation = c.activation;
  cpu_backend().gemm(g);
  return y;
}

}  // namespace

TEST_CASE("cpu gemm reads a B in panels as the same product with B in rows, to the bit") {
  const std::vector<LinearCase> cases = {
      // a few rows (gemm_few_rows with B in rows): all of k summed at once, 1,100 too
      {2, 64, 40, 1.0f, 0.0f, true, std::nullopt},
      {8, 100, 99, 0.5f, 1.0f, true, std::nullopt},
      {32, 256, 1100, 1.0f, 0.0f, true, std::nullopt},
      {32, 1000, 256, 1.0f, 0.0f, false, std::nullopt},
      {32, 200, 64, 1.0f, 0.0f, true, UnaryOp::Gelu},
      // more rows, or too few columns for gemm_few_rows: k in blocks (1,024 as 512 + 512),
      // C's rows cut among the threads (m > n), k cut among them (C small, k long)
      {33, 100, 300, 1.0f, 0.0f, true, std::nullopt},
      {32, 100, 64, 2.0f, 0.5f, true, std::nullopt},
      {128, 256, 1024, 1.0f, 0.0f, true, std::nullopt},
      {300, 70, 130, -1.0f, 0.5f, false, std::nullopt},
      {64, 64, 3000, 1.0f, 0.5f, true, std::nullopt},
  };
  const int threads = get_num_threads();
  for (const LinearCase& c : cases) {
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    const std::vector<float> x = uniform_values(c.m * c.k, -1, 1, 11);
    const std::vector<float> w = uniform_values(c.n * c.k, -1, 1, 12);
    const std::vector<float> bias = uniform_values(c.n, -2, 2, 13);
    const std::vector<float> y0 = uniform_values(c.m * c.n, -1, 1, 14);
    const int64_t floats = cpu::panel_count(c.n) * c.k * cpu::panel_columns();
    std::vector<float> panels(static_cast<size_t>(floats));
    cpu::pack_panels(w.data(), c.k, c.n, c.k, panels.data());
    if (!cpu::use_tiled_gemm(c.m, c.n)) {  // a build without AVX-512 (BLAS) reads no panels
      CHECK_THROWS_AS(product(c, x, w, panels, bias, y0, true), Error);
      continue;
    }
    for (int t = 1; t <= 3; ++t) {
      CAPTURE(t);
      set_num_threads(t);
      const std::vector<float> rows = product(c, x, w, panels, bias, y0, false);
      const std::vector<float> in_panels = product(c, x, w, panels, bias, y0, true);
      CHECK(std::memcmp(rows.data(), in_panels.data(), rows.size() * sizeof(float)) == 0);
    }
  }
  set_num_threads(threads);
}

TEST_CASE("cpu pack_panels lays W^T out in panels of two vectors, zeros past the last column") {
  // 100 x 99: a last panel of 4 columns, and neither side a whole number of 8 x 8 blocks.
  const int64_t n = 100, k = 99, width = cpu::panel_columns();
  const std::vector<float> w = uniform_values(n * k, -1, 1, 21);
  const int64_t count = cpu::panel_count(n);
  REQUIRE(count == (n + width - 1) / width);  // 100 columns: the last panel part padding
  std::vector<float> panels(static_cast<size_t>(count * k * width), 7.0f);
  cpu::pack_panels(w.data(), k, n, k, panels.data());
  int64_t wrong = 0;
  for (int64_t j = 0; j < count; ++j)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t col = 0; col < width; ++col) {
        const int64_t column = j * width + col;  // W's row, W^T's column
        const float want = column < n ? w[static_cast<size_t>(column * k + p)] : 0.0f;
        wrong += panels[static_cast<size_t>(j * k * width + p * width + col)] != want;
      }
  CHECK(wrong == 0);
}

TEST_CASE("Backend::gemm rejects a B in panels that the CPU's tiles cannot read, naming it") {
  const int64_t floats = cpu::panel_count(64) * 64 * cpu::panel_columns();
  std::vector<float> x(8 * 64, 1.0f), panels(static_cast<size_t>(floats), 1.0f);
  std::vector<float> y(8 * 64, 0.0f);
  const auto args = [&] {
    GemmArgs g;
    g.m = 8, g.n = 64, g.k = 64;
    g.a = x.data(), g.lda = 64;
    g.b = panels.data(), g.ldb = 64 * cpu::panel_columns(), g.b_panel = cpu::panel_columns();
    g.c = y.data(), g.ldc = 64;
    return g;
  };
  const auto rejected = [&](GemmArgs g) {
    CHECK_THROWS_WITH_AS(cpu_backend().gemm(g), doctest::Contains("B in panels"), Error);
  };
  if (cpu::use_tiled_gemm(8, 64))
    CHECK_NOTHROW(cpu_backend().gemm(args()));
  else  // a build without AVX-512: the products are BLAS's, which read no panels
    rejected(args());
  GemmArgs g = args();
  g.trans_b = true;  // panels are op(B) as it is
  rejected(g);
  g = args();
  g.b_panel = cpu::panel_columns() / 2;  // another width
  rejected(g);
  g = args();
  g.ldb = 64 * cpu::panel_columns() - 1;  // panels overlapping
  rejected(g);
  g = args();
  g.batch = 2, g.stride_a = 8 * 64, g.stride_c = 8 * 64;  // one item only
  rejected(g);
  g = args();
  g.m = 1;  // a matrix-vector product (gemv) reads B in rows
  rejected(g);
  g = args();
  g.ab_type = DType::BFloat16;
  rejected(g);
}
