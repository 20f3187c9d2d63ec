// Selection, sorting and random sampling on CUDA against the CPU: the sort kernel (short rows
// in shared memory, long rows in global scratch, strided rows, ties, NaN, int64) must give the
// CPU's indices exactly, since both devices sort by the same total order; amax, scatter and
// one_hot values and gradients; the random functions' shapes and dtypes, the draws that both
// devices make from the same Philox counters (randperm, multinomial with replacement), and
// repeatability under manual_seed. Without a GPU the cases return at once (test_cuda.cpp's first
// case reports that once).
#include <cmath>
#include <vector>

#include "cuda_parity.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

// Values from a small set (ties everywhere), with NaN, -0 and infinities sprinkled in.
Tensor tied_values(const Shape& shape, uint64_t seed) {
  std::vector<float> v = philox_tensor(shape, seed).to_vector();
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::round(v[i] * 4.0f) / 2.0f;
    if (i % 29 == 3) v[i] = NAN;
    if (i % 31 == 5) v[i] = -0.0f;
    if (i % 37 == 7) v[i] = i % 2 ? INFINITY : -INFINITY;
  }
  return tensor(v, shape);
}

void check_same_sort(const Tensor& x, int64_t k, int64_t dim, bool descending) {
  INFO("shape " << shape_str(x.shape()) << " k " << k << " dim " << dim << " descending "
                << descending);
  const ValuesIndices cpu = topk(x, k, dim, descending);
  const ValuesIndices gpu = topk(x.to(Device::CUDA), k, dim, descending);
  CHECK(gpu.indices.device() == Device::CUDA);
  CHECK(gpu.indices.to_vector_i64() == cpu.indices.to_vector_i64());
  const std::vector<float> a = cpu.values.to_vector(), b = gpu.values.to_vector();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i)
    CHECK((a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))));
}

}  // namespace

TEST_CASE("sort and topk on CUDA give the CPU's values and indices") {
  if (!cuda_available()) return;
  const Tensor rows = tied_values({6, 300}, 1);
  for (bool descending : {false, true}) {
    check_same_sort(rows, 300, 1, descending);                 // shared memory, full sort
    check_same_sort(rows, 7, -1, descending);                  // topk
    check_same_sort(rows.t(), 4, 0, descending);               // strided rows (inner 6)
    check_same_sort(tied_values({2, 5000, 3}, 2), 50, 1, descending);  // global scratch
  }
  const Tensor ints = tensor_i64({5, -3, 9, -3, int64_t{1} << 40, 0}, {2, 3});
  CHECK(sort(ints.to(Device::CUDA), 0, true).indices.to_vector_i64() ==
        sort(ints, 0, true).indices.to_vector_i64());
  CHECK(argsort(rows.to(Device::CUDA), 1).to_vector_i64() == argsort(rows, 1).to_vector_i64());
}

TEST_CASE("topk, amax, scatter and one_hot on CUDA: values and gradients as on the CPU") {
  if (!cuda_available()) return;
  manual_seed(31);
  const Tensor x = randn({4, 6});
  const Tensor index = tensor_i64({0, 2, 1, 3, 1, 0, 2, 1}, {2, 4});
  const Tensor src = randn({2, 4});
  compare_op(
      "topk, amax, scatter",
      [](const std::vector<Tensor>& t) {
        const Tensor &a = t[0], &idx = t[1], &s = t[2];
        return topk(a, 3).values.sum() + amax(a, {0}).sum() * 2.0f +
               (scatter(a, 0, idx, s) * a).sum() + a.scatter(1, idx, 0.5f).amin({}).sum();
      },
      {x, index, src}, 1e-5f, 1e-6f);
  CHECK(one_hot(index.to(Device::CUDA), 5).to_vector_i64() == one_hot(index, 5).to_vector_i64());
}

TEST_CASE("random sampling on CUDA: the CPU's draws where both use the same counters") {
  if (!cuda_available()) return;
  manual_seed(41);
  const std::vector<int64_t> perm = randperm(500).to_vector_i64();
  manual_seed(41);
  const Tensor gperm = randperm(500, Device::CUDA);
  CHECK(gperm.device() == Device::CUDA);
  CHECK(gperm.to_vector_i64() == perm);

  const Tensor w = tensor({1.0f, 0.0f, 3.0f, 6.0f, 2.0f, 2.0f, 0.0f, 4.0f}, {2, 4});
  manual_seed(42);
  const std::vector<int64_t> draws = multinomial(w, 300, true).to_vector_i64();
  manual_seed(42);
  CHECK(multinomial(w.to(Device::CUDA), 300, true).to_vector_i64() == draws);
  manual_seed(43);
  const std::vector<int64_t> without = multinomial(w, 3).to_vector_i64();
  manual_seed(43);
  CHECK(multinomial(w.to(Device::CUDA), 3).to_vector_i64() == without);

  // bernoulli, normal_ and uniform_: dtype, shape, device and the uniforms' thresholds.
  const Tensor p = full({64}, 0.5f);
  manual_seed(44);
  const Tensor b = bernoulli(p.to(Device::CUDA));
  CHECK(b.device() == Device::CUDA);
  CHECK(b.dtype() == DType::Float32);
  manual_seed(44);
  CHECK(b.to_vector() == bernoulli(p).to_vector());
  Tensor g = zeros({1000}, Device::CUDA);
  g.normal_(1.0f, 2.0f);
  CHECK(g.device() == Device::CUDA);
  CHECK(std::abs(g.mean().item() - 1.0f) < 0.3f);
  uniform_(g, 2.0f, 3.0f);
  CHECK(g.amin().item() >= 2.0f);
  CHECK(g.amax().item() < 3.0f);
}
