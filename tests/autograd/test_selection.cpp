// Selection and sorting beyond the goldens (test_golden_select.cpp): finite-difference gradient
// checks on contiguous and strided inputs, the order's invariants on long rows (every selection
// path of the CPU kernel against a stable sort done here), dtypes and edge shapes.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "test_util.h"

using namespace loom;
using loom::testing::gradcheck;
using loom::testing::weighted;

namespace {

// Values at least 0.05 apart (a shuffled ramp), so that a finite-difference step of 1e-2 never
// reorders them: the sort's gradient is piecewise constant only between ties.
Tensor spread(const Shape& shape) {
  const int64_t n = shape_numel(shape);
  Tensor ramp = arange_f(0.0f, static_cast<float>(n)) * 0.05f;
  return index_select(ramp, 0, randperm(n)).reshape(shape);
}

// Indices of a stable sort of v (the reference order: NaN largest, -0 == +0).
std::vector<int64_t> stable_order(const std::vector<float>& v, bool descending) {
  std::vector<int64_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  auto key = [](float x) { return std::isnan(x) ? INFINITY : x; };
  auto before = [&](int64_t a, int64_t b) {
    const float x = v[a], y = v[b];
    if (std::isnan(x) != std::isnan(y)) return descending ? std::isnan(x) : std::isnan(y);
    return descending ? key(x) > key(y) : key(x) < key(y);
  };
  std::stable_sort(order.begin(), order.end(), before);
  return order;
}

}  // namespace

TEST_CASE("gradcheck: topk and sort values on contiguous and strided inputs") {
  manual_seed(11);
  for (Tensor x : {spread({3, 7}), spread({7, 3}).t(), spread({3, 9}).narrow(1, 1, 7)}) {
    gradcheck(weighted([](const std::vector<Tensor>& in) { return topk(in[0], 3).values; }),
              {x.detach()}, 1e-2f, 2e-2f, 2e-3f, "topk");
    gradcheck(weighted([](const std::vector<Tensor>& in) {
                return in[0].topk(2, 0, false).values;
              }),
              {x.detach()}, 1e-2f, 2e-2f, 2e-3f, "topk smallest dim 0");
    gradcheck(weighted([](const std::vector<Tensor>& in) { return sort(in[0], 1, true).values; }),
              {x.detach()}, 1e-2f, 2e-2f, 2e-3f, "sort");
  }
}

TEST_CASE("gradcheck: amax, amin and min over lists of dims") {
  manual_seed(12);
  Tensor x = spread({2, 3, 4});
  for (const Shape& dims : {Shape{}, Shape{1}, Shape{0, 2}, Shape{-1, 0}}) {
    gradcheck(weighted([dims](const std::vector<Tensor>& in) { return amax(in[0], dims); }),
              {x.detach()}, 1e-2f, 2e-2f, 2e-3f, "amax");
    gradcheck(weighted([dims](const std::vector<Tensor>& in) { return amin(in[0], dims, true); }),
              {x.permute({2, 0, 1}).detach()}, 1e-2f, 2e-2f, 2e-3f, "amin keepdim");
  }
  gradcheck([](const std::vector<Tensor>& in) { return min(in[0]) * 3.0f; }, {x.detach()}, 1e-2f,
            2e-2f, 2e-3f, "min");
}

TEST_CASE("gradcheck: scatter with src, with a value, and with src larger than index") {
  manual_seed(13);
  const Tensor index = tensor_i64({0, 2, 1, 1, 0, 2}, {2, 3});  // distinct down each column
  gradcheck(weighted([&](const std::vector<Tensor>& in) {
              return scatter(in[0], 0, index, in[1]);
            }),
            {randn({3, 3}), randn({2, 3})}, 1e-2f, 2e-2f, 2e-3f, "scatter src");
  gradcheck(weighted([&](const std::vector<Tensor>& in) { return in[0].scatter(0, index, -1.5f); }),
            {randn({4, 5}).narrow(1, 1, 3)}, 1e-2f, 2e-2f, 2e-3f, "scatter value");
  // src [3, 4] of which index [2, 3] uses the top-left block: the rest gets zero gradient.
  gradcheck(weighted([&](const std::vector<Tensor>& in) {
              return scatter(in[0], 0, index, in[1]);
            }),
            {randn({4, 3}), randn({3, 4})}, 1e-2f, 2e-2f, 2e-3f, "scatter large src");
}

TEST_CASE("sort and topk follow a stable order with NaN largest on long rows") {
  // Rows long enough for every selection of the CPU kernel: partial_sort (k * 64 <= n),
  // nth_element + sort, and a full sort; values from a small set, so ties are everywhere.
  manual_seed(14);
  const int64_t n = 3000;
  Tensor x = (randint(-4, 5, {3, n}).to(DType::Float32)) * 0.5f;
  std::vector<float> v = x.to_vector();
  for (int64_t i = 0; i < 3 * n; i += 37) v[static_cast<size_t>(i)] = NAN;
  for (int64_t i = 5; i < 3 * n; i += 53) v[static_cast<size_t>(i)] = -0.0f;
  x = tensor(v, {3, n});
  for (bool descending : {false, true}) {
    const Tensor sorted_indices = argsort(x, 1, descending);
    for (int64_t k : {int64_t{1}, int64_t{40}, int64_t{1000}, n}) {
      const ValuesIndices top = topk(x, k, 1, descending);
      for (int64_t r = 0; r < 3; ++r) {
        const std::vector<float> row(v.begin() + r * n, v.begin() + (r + 1) * n);
        const std::vector<int64_t> want = stable_order(row, descending);
        const std::vector<int64_t> got = top.indices.select(0, r).to_vector_i64();
        CHECK(std::equal(got.begin(), got.end(), want.begin()));
        if (k == n) CHECK(sorted_indices.select(0, r).to_vector_i64() == want);
      }
    }
  }
}

TEST_CASE("sort and topk: int64, bfloat16, 0-d, empty and k = 0") {
  const Tensor ints = tensor_i64({5, -3, 9, -3, int64_t{1} << 40, 0}, {6});
  const ValuesIndices s = sort(ints);
  CHECK(s.values.dtype() == DType::Int64);
  CHECK(s.values.to_vector_i64() == std::vector<int64_t>{-3, -3, 0, 5, 9, int64_t{1} << 40});
  CHECK(s.indices.to_vector_i64() == std::vector<int64_t>{1, 3, 5, 0, 2, 4});
  CHECK(topk(ints, 2).values.to_vector_i64() == std::vector<int64_t>{int64_t{1} << 40, 9});

  const Tensor b = tensor({0.5f, -2.0f, 3.0f}, {3}).to(DType::BFloat16);
  const auto [bv, bi] = b.topk(2);
  CHECK(bv.dtype() == DType::BFloat16);
  CHECK(bv.to(DType::Float32).to_vector() == std::vector<float>{3.0f, 0.5f});
  CHECK(bi.to_vector_i64() == std::vector<int64_t>{2, 0});

  const auto [v0, i0] = sort(scalar_tensor(4.0f));
  CHECK(v0.dim() == 0);
  CHECK(v0.item() == 4.0f);
  CHECK(i0.to_vector_i64() == std::vector<int64_t>{0});
  CHECK(topk(randn({3, 4}), 0).values.shape() == Shape{3, 0});
  CHECK(sort(zeros({2, 0})).indices.shape() == Shape{2, 0});
  CHECK(argsort(zeros({0, 3}), 0).shape() == Shape{0, 3});
}

TEST_CASE("topk's gradient reaches the picked positions only, sort's every position once") {
  Tensor x = tensor({1.0f, 5.0f, 3.0f, 4.0f}, {4}).requires_grad_();
  topk(x, 2).values.sum().backward();
  CHECK(x.grad().to_vector() == std::vector<float>{0.0f, 1.0f, 0.0f, 1.0f});
  Tensor y = tensor({2.0f, 1.0f, 3.0f}, {3}).requires_grad_();
  (sort(y).values * tensor({1.0f, 10.0f, 100.0f}, {3})).sum().backward();
  CHECK(y.grad().to_vector() == std::vector<float>{10.0f, 1.0f, 100.0f});
  CHECK_FALSE(argsort(y).requires_grad());
  CHECK_FALSE(sort(y).indices.requires_grad());
}

TEST_CASE("amax and amin: NaN propagates; keepdim and dims as PyTorch") {
  const Tensor x = tensor({1.0f, NAN, 3.0f, -2.0f, 0.5f, 7.0f}, {2, 3});
  CHECK(std::isnan(amax(x).item()));
  const std::vector<float> rows = amax(x, {1}).to_vector();
  CHECK(std::isnan(rows[0]));
  CHECK(rows[1] == 7.0f);
  CHECK(amin(x, {0}, true).shape() == Shape{1, 3});
  CHECK(amin(x.narrow(1, 2, 1), {0, 1}).item() == 3.0f);
  CHECK(amax(randn({2, 3, 4}), {0, -1}, true).shape() == Shape{1, 3, 1});
  CHECK(amax(scalar_tensor(2.0f)).item() == 2.0f);
  CHECK(min(tensor({3.0f, -1.0f, 2.0f}, {3})).item() == -1.0f);
  CHECK(x.narrow(1, 2, 1).min().item() == 3.0f);
}

TEST_CASE("scatter writes src or a value at index; the last of repeated writes wins on the CPU") {
  const Tensor x = zeros({2, 4});
  const Tensor index = tensor_i64({1, 3, 0, 0}, {2, 2});
  const Tensor src = tensor({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2});
  CHECK(scatter(x, 1, index, src).to_vector() ==
        std::vector<float>{0.0f, 1.0f, 0.0f, 2.0f, 4.0f, 0.0f, 0.0f, 0.0f});
  CHECK(x.scatter(1, index, 9.0f).to_vector() ==
        std::vector<float>{0.0f, 9.0f, 0.0f, 9.0f, 9.0f, 0.0f, 0.0f, 0.0f});
  CHECK(x.sum().item() == 0.0f);  // out of place
  // On a strided self whose block the index covers only in part.
  const Tensor wide = zeros({3, 5}).narrow(1, 1, 4);
  const Tensor out = scatter(wide, 0, tensor_i64({2, 0}, {1, 2}), src);
  CHECK(out.to_vector() == std::vector<float>{0, 2, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0});
  const Tensor ints = scatter(zeros({3}, DType::Int64), 0, tensor_i64({2}, {1}), int64_t{7});
  CHECK(ints.to_vector_i64() == std::vector<int64_t>{0, 0, 7});
}

TEST_CASE("one_hot: classes from the data or given, any shape, empty input") {
  const Tensor h = one_hot(tensor_i64({2, 0, 1}, {3}));
  CHECK(h.dtype() == DType::Int64);
  CHECK(h.shape() == Shape{3, 3});
  CHECK(h.to_vector_i64() == std::vector<int64_t>{0, 0, 1, 1, 0, 0, 0, 1, 0});
  CHECK(one_hot(tensor_i64({1, 1}, {1, 2}), 4).shape() == Shape{1, 2, 4});
  CHECK(one_hot(scalar_tensor(3.0f).to(DType::Int64), 5).to_vector_i64() ==
        std::vector<int64_t>{0, 0, 0, 1, 0});
  CHECK(one_hot(zeros({0}, DType::Int64), 3).shape() == Shape{0, 3});
}
