// linear_sum_assignment: least total cost against brute force over every permutation of small
// matrices (random, integer ties, negative, huge, rectangular both ways, forbidden pairs),
// scipy's own test vectors, scipy's answers on larger matrices (lsa.safetensors, gen_lsa.py),
// and the error paths (NaN, -inf, infeasible, wrong rank or dtype).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>

#include "io/safetensors.h"
#include "optim/linear_sum_assignment.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double total_cost(const std::vector<double>& cost, int64_t m, const std::vector<int64_t>& rows,
                  const std::vector<int64_t>& cols) {
  double total = 0.0;
  for (size_t i = 0; i < rows.size(); ++i) total += cost[rows[i] * m + cols[i]];
  return total;
}

// The least total over every injective map of the smaller side into the larger one
// (+inf when each uses a forbidden pair).
double brute_force(const std::vector<double>& cost, int64_t n, int64_t m) {
  const bool transpose = m < n;
  const int64_t small = std::min(n, m), large = std::max(n, m);
  auto at = [&](int64_t s, int64_t l) { return transpose ? cost[l * m + s] : cost[s * m + l]; };
  std::vector<int64_t> perm(large);
  std::iota(perm.begin(), perm.end(), 0);
  double best = kInf;
  do {  // the first `small` entries of each permutation (repeats are harmless)
    double total = 0.0;
    for (int64_t s = 0; s < small; ++s) total += at(s, perm[s]);
    best = std::min(best, total);
  } while (std::next_permutation(perm.begin(), perm.end()));
  return best;
}

// Rows ascending and distinct, columns distinct and in range, min(n, m) pairs.
void check_valid(const std::vector<int64_t>& rows, const std::vector<int64_t>& cols, int64_t n,
                 int64_t m) {
  REQUIRE(rows.size() == static_cast<size_t>(std::min(n, m)));
  REQUIRE(cols.size() == rows.size());
  CHECK(std::is_sorted(rows.begin(), rows.end()));
  CHECK(std::set<int64_t>(rows.begin(), rows.end()).size() == rows.size());
  CHECK(std::set<int64_t>(cols.begin(), cols.end()).size() == cols.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    CHECK((rows[i] >= 0 && rows[i] < n));
    CHECK((cols[i] >= 0 && cols[i] < m));
  }
}

void check_against_brute_force(const std::vector<double>& cost, int64_t n, int64_t m,
                               const std::string& what) {
  const auto [rows, cols] = linear_sum_assignment(cost, n, m);
  check_valid(rows, cols, n, m);
  const double expected = brute_force(cost, n, m);
  const double got = total_cost(cost, m, rows, cols);
  CHECK_MESSAGE(std::fabs(got - expected) <= 1e-9 * std::max(1.0, std::fabs(expected)),
                what << " " << n << "x" << m << ": total " << got << ", brute force " << expected);
}

const std::map<std::string, Tensor>& lsa_golden() {
  static const std::map<std::string, Tensor> t =
      nn::read_safetensors(std::string(LOOM_TEST_DATA) + "/lsa.safetensors");
  return t;
}

}  // namespace

TEST_CASE("linear_sum_assignment: least total cost on every small shape, as brute force") {
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> small_int(0, 3);
  int cases = 0;
  for (int64_t n = 1; n <= 6; ++n)
    for (int64_t m = 1; m <= 6; ++m)
      for (int trial = 0; trial < 6; ++trial) {
        std::vector<double> cost(n * m);
        for (double& c : cost) {
          switch (trial) {
            case 0:
              c = uniform(gen);
              break;  // random
            case 1:
              c = small_int(gen);
              break;  // many ties
            case 2:
              c = -10.0 * uniform(gen);
              break;  // negative
            case 3:
              c = normal(gen) * 1e12;
              break;  // huge magnitudes
            case 4:
              c = std::round(normal(gen) * 3) * 1e-3;
              break;  // ties, both signs
            default:
              c = uniform(gen) < 0.3 ? kInf : uniform(gen);  // forbidden pairs
          }
        }
        if (trial == 5 && brute_force(cost, n, m) == kInf) continue;  // infeasible: see below
        check_against_brute_force(cost, n, m, "trial " + std::to_string(trial));
        ++cases;
      }
  CHECK(cases > 190);
}

TEST_CASE("linear_sum_assignment: scipy's test vectors (test_matching.py) both ways round") {
  struct Case {
    std::vector<std::vector<double>> cost;
    std::vector<double> expected;  // cost[rows[i], cols[i]] in row order
  };
  const std::vector<Case> cases = {
      {{{400, 150, 400}, {400, 450, 600}, {300, 225, 300}}, {150, 400, 300}},
      {{{400, 150, 400, 1}, {400, 450, 600, 2}, {300, 225, 300, 3}}, {150, 2, 300}},
      {{{10, 10, 8}, {9, 8, 1}, {9, 7, 4}}, {10, 1, 7}},
      {{{10, 10, 8, 11}, {9, 8, 1, 1}, {9, 7, 4, 10}}, {10, 1, 4}},
      {{{10, kInf, kInf}, {kInf, kInf, 1}, {kInf, 7, kInf}}, {10, 1, 7}},
  };
  for (const Case& c : cases) {
    const int64_t n = static_cast<int64_t>(c.cost.size()), m = c.cost[0].size();
    std::vector<double> flat, flat_t(n * m);
    for (const auto& row : c.cost) flat.insert(flat.end(), row.begin(), row.end());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) flat_t[j * n + i] = flat[i * m + j];
    auto [rows, cols] = linear_sum_assignment(flat, n, m);
    check_valid(rows, cols, n, m);
    for (size_t i = 0; i < rows.size(); ++i) CHECK(flat[rows[i] * m + cols[i]] == c.expected[i]);
    // Transposed: the same values, in another order.
    auto [rows_t, cols_t] = linear_sum_assignment(flat_t, m, n);
    check_valid(rows_t, cols_t, m, n);
    std::vector<double> got;
    for (size_t i = 0; i < rows_t.size(); ++i) got.push_back(flat_t[rows_t[i] * n + cols_t[i]]);
    std::vector<double> expected = c.expected;
    std::sort(got.begin(), got.end());
    std::sort(expected.begin(), expected.end());
    CHECK(got == expected);
  }
  // scipy's test_constant_cost_matrix (issue #11602): all ones -> the identity.
  const auto [rows, cols] = linear_sum_assignment(ones({8, 8}));
  for (int64_t i = 0; i < 8; ++i) {
    CHECK(rows[i] == i);
    CHECK(cols[i] == i);
  }
}

TEST_CASE("linear_sum_assignment: scipy's assignments on larger matrices (gen_lsa.py)") {
  int checked = 0;
  for (const auto& [name, cost] : lsa_golden()) {
    if (name.size() < 5 || name.substr(name.size() - 5) != ".cost") continue;
    const std::string base = name.substr(0, name.size() - 5);
    const auto [rows, cols] = linear_sum_assignment(cost);
    const int64_t n = cost.size(0), m = cost.size(1);
    check_valid(rows, cols, n, m);
    const std::vector<float> c = cost.to_vector();
    const std::vector<double> c64(c.begin(), c.end());
    const double expected = lsa_golden().at(base + ".total").item();
    const double got = total_cost(c64, m, rows, cols);
    CHECK_MESSAGE(std::fabs(got - expected) <= 1e-6 * std::max(1.0, std::fabs(expected)),
                  base << ": total " << got << ", scipy " << expected);
    // The same pairs as scipy, ties included: the search order and tie-breaking are scipy's.
    CHECK_MESSAGE(rows == lsa_golden().at(base + ".rows").to_vector_i64(), base);
    CHECK_MESSAGE(cols == lsa_golden().at(base + ".cols").to_vector_i64(), base);
    ++checked;
  }
  CHECK(checked == 10);
}

TEST_CASE("linear_sum_assignment: empty matrices give empty results") {
  for (const Shape& s : {Shape{0, 0}, Shape{2, 0}, Shape{0, 3}}) {
    const auto [rows, cols] = linear_sum_assignment(zeros(s));
    CHECK(rows.empty());
    CHECK(cols.empty());
  }
}

TEST_CASE("linear_sum_assignment: NaN, -inf, infeasible, wrong rank or dtype are loom::Errors") {
  const float inf = std::numeric_limits<float>::infinity();
  expect_error(
      [] {
        linear_sum_assignment(tensor({NAN, 1, 1, 1}, {2, 2}));
      },
      {"linear_sum_assignment", "invalid numeric entries", "row 0, column 0"});
  expect_error(
      [&] {
        linear_sum_assignment(tensor({1, 1, 1, -inf}, {2, 2}));
      },
      {"linear_sum_assignment", "invalid numeric entries", "-inf"});
  // scipy's test_linear_sum_assignment_input_inf: a column all +inf.
  expect_error(
      [&] {
        linear_sum_assignment(tensor({inf, 0, 0, inf, 1, 0, inf, 0, 1}, {3, 3}));
      },
      {"linear_sum_assignment", "infeasible", "[3, 3]"});
  // Two rows that can only use the same column.
  expect_error([&] { linear_sum_assignment(tensor({1, inf, 2, inf}, {2, 2})); }, {"infeasible"});
  expect_error([] { linear_sum_assignment(zeros({3})); },
               {"linear_sum_assignment", "[n, m]", "[3]"});
  expect_error([] { linear_sum_assignment(zeros({2, 2, 2})); }, {"[2,2,2]"});
  expect_error(
      [] {
        linear_sum_assignment(tensor_i64({1, 2, 3, 4}, {2, 2}));
      },
      {"linear_sum_assignment", "int64"});
  expect_error([] { linear_sum_assignment(Tensor()); }, {"undefined"});
  expect_error([] { linear_sum_assignment(std::vector<double>(5), 2, 3); },
               {"linear_sum_assignment", "5 costs", "[2, 3]"});
}

TEST_CASE("linear_sum_assignment: on 120x120 no swap of two pairs helps, shuffled rows agree") {
  // Too large for brute force: a necessary condition of optimality (no exchange of the columns
  // of two matched rows lowers the total) and invariance of the total under a row shuffle.
  std::mt19937_64 gen(11);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const int64_t n = 120;
  std::vector<double> cost(n * n);
  for (double& c : cost) c = uniform(gen);
  const auto [rows, cols] = linear_sum_assignment(cost, n, n);
  check_valid(rows, cols, n, n);
  const double total = total_cost(cost, n, rows, cols);
  int improving = 0;
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = a + 1; b < n; ++b)
      if (cost[a * n + cols[b]] + cost[b * n + cols[a]] <
          cost[a * n + cols[a]] + cost[b * n + cols[b]] - 1e-12)
        ++improving;
  CHECK(improving == 0);
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), gen);
  std::vector<double> shuffled(n * n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) shuffled[i * n + j] = cost[perm[i] * n + j];
  const auto [rows_s, cols_s] = linear_sum_assignment(shuffled, n, n);
  CHECK(std::fabs(total_cost(shuffled, n, rows_s, cols_s) - total) < 1e-9);
}
