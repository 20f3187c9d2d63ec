// randperm, bernoulli, multinomial, normal_ and uniform_: statistics of many draws within
// tolerances of several standard errors (the seeds are fixed, so a pass is stable), the
// invariants that hold for every draw, and repeatability under manual_seed.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <utility>
#include <vector>

#include "test_util.h"

using namespace loom;

namespace {

// Counts of each value 0..k-1 among int64 draws.
std::vector<double> counts(const Tensor& draws, int64_t k) {
  std::vector<double> c(static_cast<size_t>(k), 0.0);
  for (int64_t v : draws.to_vector_i64()) c[static_cast<size_t>(v)] += 1.0;
  return c;
}

double mean_of(const std::vector<float>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double variance_of(const std::vector<float>& v) {
  const double m = mean_of(v);
  double s = 0.0;
  for (float x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size() - 1);
}

}  // namespace

// Random ops in several threads at once (a program's own threads, each sampling) take blocks of
// the one generator's counters that never overlap: each block's first counter is taken
// atomically. Two threads, a million blocks each, of 1 to 3 counters. (With the offset read
// and written back in two steps, most runs lost some of the updates.)
TEST_CASE("the global generator hands threads drawing at once blocks that never overlap") {
  manual_seed(5);
  constexpr int kBlocks = 2000000;
  std::vector<std::pair<uint64_t, uint64_t>> blocks(kBlocks);  // [first, first + n)
  Generator& generator = default_generator();
#pragma omp parallel for num_threads(2) schedule(static, 1)
  for (int i = 0; i < kBlocks; ++i) {
    const uint64_t n = 1 + static_cast<uint64_t>(i % 3);
    blocks[static_cast<size_t>(i)] = {generator.reserve(n), n};
  }
  std::sort(blocks.begin(), blocks.end());
  uint64_t next = 0, total = 0;  // sorted, the blocks tile [0, total): no gap, no overlap
  bool tiled = true;
  for (const auto& [first, n] : blocks) {
    tiled = tiled && first == next;
    next = first + n;
    total += n;
  }
  CHECK(tiled);
  CHECK(next == total);
  CHECK(generator.offset() == total);
}

TEST_CASE("randperm: a permutation, uniform over positions, repeatable under manual_seed") {
  manual_seed(21);
  const Tensor p = randperm(1000);
  CHECK(p.dtype() == DType::Int64);
  std::vector<int64_t> v = p.to_vector_i64();
  std::vector<int64_t> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> ramp(1000);
  std::iota(ramp.begin(), ramp.end(), 0);
  CHECK(sorted == ramp);
  CHECK(v != ramp);

  manual_seed(21);
  CHECK(randperm(1000).to_vector_i64() == v);
  CHECK(randperm(1000).to_vector_i64() != v);  // the generator moved on
  CHECK(randperm(0).shape() == Shape{0});

  // Where element 0 lands in 4000 permutations of 8: 500 expected per slot, sd ~ 21.
  std::vector<double> slot(8, 0.0);
  for (int i = 0; i < 4000; ++i) {
    const std::vector<int64_t> q = randperm(8).to_vector_i64();
    slot[static_cast<size_t>(std::find(q.begin(), q.end(), 0) - q.begin())] += 1.0;
  }
  for (double c : slot) CHECK(std::abs(c - 500.0) < 100.0);
}

TEST_CASE("bernoulli: 0/1 floats with the given probabilities") {
  manual_seed(22);
  const Tensor p = tensor({0.0f, 0.1f, 0.5f, 0.9f, 1.0f}, {5}).expand({20000, 5});
  const Tensor draws = bernoulli(p);
  CHECK(draws.dtype() == DType::Float32);
  CHECK(draws.shape() == Shape{20000, 5});
  const std::vector<float> means = mean(draws, 0).to_vector();
  const std::vector<float> want = {0.0f, 0.1f, 0.5f, 0.9f, 1.0f};
  for (size_t i = 0; i < 5; ++i) CHECK(std::abs(means[i] - want[i]) < 0.015f);  // ~4 sd
  const std::vector<float> all = draws.to_vector();
  CHECK(std::all_of(all.begin(), all.end(), [](float x) { return x == 0.0f || x == 1.0f; }));

  const Tensor q = zeros({40000}).bernoulli(0.25f);
  CHECK(std::abs(q.mean().item() - 0.25f) < 0.01f);
  CHECK(bernoulli(zeros({3}, DType::Int64), 1.0f).to_vector_i64() ==
        std::vector<int64_t>{1, 1, 1});
  manual_seed(5);
  const std::vector<float> first = p.bernoulli().to_vector();
  manual_seed(5);
  CHECK(bernoulli(p).to_vector() == first);
}

TEST_CASE("multinomial with replacement: frequencies follow unnormalised weights") {
  manual_seed(23);
  const Tensor w = tensor({1.0f, 0.0f, 3.0f, 6.0f, 2.0f, 2.0f, 0.0f, 4.0f}, {2, 4});
  const Tensor draws = multinomial(w, 20000, true);
  CHECK(draws.dtype() == DType::Int64);
  CHECK(draws.shape() == Shape{2, 20000});
  const std::vector<double> r0 = counts(draws.select(0, 0), 4), r1 = counts(draws.select(0, 1), 4);
  CHECK(r0[1] == 0.0);
  CHECK(r1[2] == 0.0);  // zero weights are never drawn
  const double expected0[] = {2000, 0, 6000, 12000}, expected1[] = {5000, 5000, 0, 10000};
  for (int c = 0; c < 4; ++c) {
    CHECK(std::abs(r0[c] - expected0[c]) < 400.0);  // sd at most ~70
    CHECK(std::abs(r1[c] - expected1[c]) < 400.0);
  }
  CHECK(multinomial(tensor({0.2f, 0.8f}, {2}), 5, true).shape() == Shape{5});
  manual_seed(7);
  const std::vector<int64_t> first = w.multinomial(50, true).to_vector_i64();
  manual_seed(7);
  CHECK(multinomial(w, 50, true).to_vector_i64() == first);
}

TEST_CASE("multinomial without replacement: no repeats, first draw in proportion") {
  manual_seed(24);
  const Tensor w = tensor({1.0f, 2.0f, 0.0f, 5.0f, 2.0f}, {5});
  std::vector<double> first(5, 0.0);
  for (int i = 0; i < 3000; ++i) {
    const std::vector<int64_t> d = multinomial(w, 4).to_vector_i64();
    CHECK(std::set<int64_t>(d.begin(), d.end()).size() == 4);
    CHECK(std::find(d.begin(), d.end(), 2) == d.end());
    first[static_cast<size_t>(d[0])] += 1.0;
  }
  // The first draw is from w / 10: 300, 600, 0, 1500, 600 expected, sd at most ~27.
  const double expected[] = {300, 600, 0, 1500, 600};
  for (int c = 0; c < 5; ++c) CHECK(std::abs(first[c] - expected[c]) < 120.0);
  // Every category, once each, when num_samples is the number of nonzero weights.
  const std::vector<int64_t> all = multinomial(randn({3, 6}).abs() + 0.1f, 6).to_vector_i64();
  for (int r = 0; r < 3; ++r) {
    std::vector<int64_t> row(all.begin() + r * 6, all.begin() + (r + 1) * 6);
    std::sort(row.begin(), row.end());
    CHECK(row == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  }
}

TEST_CASE("normal_ and uniform_: moments, in place on strided views, version bumped") {
  manual_seed(25);
  Tensor x = zeros({200, 300});
  const uint64_t before = x.version();
  x.normal_(2.0f, 3.0f);
  CHECK(x.version() > before);
  const std::vector<float> v = x.to_vector();
  CHECK(std::abs(mean_of(v) - 2.0) < 0.05);      // sd of the mean 0.0055
  CHECK(std::abs(variance_of(v) - 9.0) < 0.2);   // sd of the variance ~0.03
  uniform_(x, -1.0f, 3.0f);
  const std::vector<float> u = x.to_vector();
  CHECK(*std::min_element(u.begin(), u.end()) >= -1.0f);
  CHECK(*std::max_element(u.begin(), u.end()) < 3.0f);
  CHECK(std::abs(mean_of(u) - 1.0) < 0.02);
  CHECK(std::abs(variance_of(u) - 16.0 / 12.0) < 0.03);

  // A strided view is filled in place; the rest of its base stays as it was.
  Tensor base = zeros({4, 6});
  normal_(base.narrow(1, 2, 3), 10.0f, 0.1f);
  const std::vector<float> b = base.to_vector();
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 6; ++c)
      CHECK((c >= 2 && c < 5) == (b[static_cast<size_t>(r * 6 + c)] > 5.0f));

  // A leaf that requires grad takes them under a NoGradGuard (nn::init's use).
  Tensor w = zeros({3}).requires_grad_();
  {
    NoGradGuard guard;
    w.uniform_(0.5f, 0.75f);
  }
  CHECK(w.min().item() >= 0.5f);
  manual_seed(3);
  const std::vector<float> once = zeros({5}).normal_().to_vector();
  manual_seed(3);
  CHECK(zeros({5}).normal_().to_vector() == once);
}
