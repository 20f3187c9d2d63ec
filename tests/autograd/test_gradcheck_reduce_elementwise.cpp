// Finite-difference gradient checks of the PyTorch-style elementwise functions, reductions and
// linear algebra, each on a contiguous, a transposed and a narrowed (offset, strided) input.
#include <cmath>

#include "test_util.h"

using namespace loom;
using loom::testing::gradcheck;
using loom::testing::weighted;

namespace {

using Unary = std::function<Tensor(const Tensor&)>;

// Three layouts of a [3, 4] input drawn by `make` (called with the shape it should fill):
// contiguous, transposed and narrowed.
std::vector<Tensor> layouts(const std::function<Tensor(Shape)>& make) {
  return {make({3, 4}), make({4, 3}).transpose(0, 1), make({3, 7}).narrow(1, 2, 4)};
}

// randn moved away from the kinks a function has (finite differences are meaningless there).
Tensor away_from(Shape shape, std::vector<float> kinks) {
  Tensor x = randn(std::move(shape));
  for (float k : kinks) x = where(lt(abs(x - k), scalar_tensor(0.05f)), x + 0.2f, x);
  return x;
}

void check_unary(const char* name, const Unary& f, const std::function<Tensor(Shape)>& make) {
  for (const Tensor& x : layouts(make))
    gradcheck(weighted([f](const std::vector<Tensor>& in) { return f(in[0]); }), {x}, 1e-2f, 2e-2f,
              2e-3f, name);
}

// Input makers: any values, values away from some kinks, positive ones, ones inside (0, 1).
Tensor normal(Shape s) { return randn(std::move(s)); }
std::function<Tensor(Shape)> avoiding(std::vector<float> kinks) {
  return [kinks](Shape s) { return away_from(std::move(s), kinks); };
}
Tensor positive(Shape s) { return abs(randn(std::move(s))) + 0.5f; }
Tensor unit_interval(Shape s) { return rand(std::move(s)) * 0.8f + 0.1f; }

}  // namespace

TEST_CASE("gradcheck: the unary table's functions and clamp's forms, three layouts") {
  manual_seed(11);
  check_unary(
      "reciprocal", [](const Tensor& x) { return reciprocal(x); }, positive);
  check_unary(
      "square", [](const Tensor& x) { return square(x); }, normal);
  check_unary(
      "log1p", [](const Tensor& x) { return log1p(x); }, positive);
  check_unary(
      "expm1", [](const Tensor& x) { return expm1(x); }, normal);
  check_unary(
      "log2", [](const Tensor& x) { return log2(x); }, positive);
  check_unary(
      "exp2", [](const Tensor& x) { return exp2(x); }, normal);
  check_unary(
      "erf", [](const Tensor& x) { return erf(x); }, normal);
  check_unary(
      "silu", [](const Tensor& x) { return silu(x); }, normal);
  check_unary(
      "softplus", [](const Tensor& x) { return softplus(x, 2.0f); }, normal);
  check_unary(
      "leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.2f); }, avoiding({0}));
  check_unary(
      "elu", [](const Tensor& x) { return elu(x, 0.7f); }, avoiding({0}));
  check_unary(
      "mish", [](const Tensor& x) { return mish(x); }, normal);
  check_unary(
      "hardswish", [](const Tensor& x) { return hardswish(x * 3.0f); }, avoiding({1, -1}));
  check_unary(
      "logit", [](const Tensor& x) { return logit(x); }, unit_interval);
  check_unary(
      "logit_eps", [](const Tensor& x) { return logit(x, 0.05f); }, unit_interval);
  check_unary(
      "relu6", [](const Tensor& x) { return relu6(x * 4.0f); }, avoiding({0, 1.5f}));
  check_unary(
      "clamp_min", [](const Tensor& x) { return clamp_min(x, 0.3f); }, avoiding({0.3f}));
  check_unary(
      "clamp_max", [](const Tensor& x) { return x.clamp_max(-0.3f); }, avoiding({-0.3f}));
  check_unary(
      "clamp_upper", [](const Tensor& x) { return clamp(x, std::nullopt, 0.5f); },
      avoiding({0.5f}));
}

TEST_CASE("gradcheck: reductions over dims, prod, var/std, logsumexp, norm, cumsum/cumprod") {
  manual_seed(12);
  check_unary(
      "sum_dims",
      [](const Tensor& x) {
        return sum(x.unsqueeze(1), {0, 2});
      },
      normal);
  check_unary(
      "mean_dims",
      [](const Tensor& x) {
        return x.mean({0, 1}, true);
      },
      normal);
  check_unary(
      "var_dims",
      [](const Tensor& x) {
        return var(x, {0, 1}, 0);
      },
      normal);
  check_unary(
      "std_dims", [](const Tensor& x) { return x.std(Shape{1}, 2, true); }, normal);
  check_unary(
      "std_dim", [](const Tensor& x) { return loom::std(x, 0); }, normal);
  check_unary(
      "prod_dim", [](const Tensor& x) { return prod(x, 1); }, normal);
  check_unary(
      "prod_all", [](const Tensor& x) { return prod(x); }, normal);
  check_unary(
      "logsumexp",
      [](const Tensor& x) {
        return logsumexp(x, {0, 1});
      },
      normal);
  check_unary(
      "logsumexp_dim", [](const Tensor& x) { return x.logsumexp(-1, true); }, normal);
  check_unary(
      "norm_2", [](const Tensor& x) { return norm(x); }, normal);
  check_unary(
      "norm_1_dim", [](const Tensor& x) { return norm(x, 1, 1); }, avoiding({0}));
  check_unary(
      "norm_3_dims",
      [](const Tensor& x) {
        return norm(x, 3, {0, 1});
      },
      normal);
  check_unary(
      "norm_inf", [](const Tensor& x) { return norm(x, INFINITY, 0); }, normal);
  check_unary(
      "cumsum", [](const Tensor& x) { return cumsum(x, 1); }, normal);
  check_unary(
      "cumsum_dim0", [](const Tensor& x) { return x.cumsum(0); }, normal);
  check_unary(
      "cumprod", [](const Tensor& x) { return cumprod(x, 1); }, normal);
  check_unary(
      "cumprod_dim0", [](const Tensor& x) { return cumprod(x, 0); }, normal);
  // With an exact zero in every row: the gradient must not divide by it.
  check_unary(
      "cumprod_zero",
      [](const Tensor& x) {
        return cumprod(x * tensor({1, 0, 1, 1}, {4}), 1);
      },
      normal);
}

TEST_CASE("gradcheck: einsum, outer, bmm, baddbmm and addmm") {
  manual_seed(13);
  const Tensor a = randn({4, 3}).transpose(0, 1), b = randn({4, 5}), c = randn({5, 2});
  gradcheck(weighted([](const std::vector<Tensor>& x) {
              return einsum("ij,jk,kl->il", {x[0], x[1], x[2]});
            }),
            {a, b, c}, 1e-2f, 2e-2f, 2e-3f, "einsum_three");
  gradcheck(weighted([](const std::vector<Tensor>& x) {
              return einsum("iij,jk->ki", {x[0], x[1]});
            }),
            {randn({3, 3, 4}), randn({4, 2})}, 1e-2f, 2e-2f, 2e-3f, "einsum_diagonal");
  gradcheck(weighted([](const std::vector<Tensor>& x) {
              return einsum("...ij,...jk->...ik", {x[0], x[1]});
            }),
            {randn({2, 1, 3, 4}), randn({5, 4, 2})}, 1e-2f, 2e-2f, 2e-3f, "einsum_ellipsis");
  gradcheck(weighted([](const std::vector<Tensor>& x) { return outer(x[0], x[1]); }),
            {randn({3}), randn({6}).narrow(0, 1, 4)}, 1e-2f, 2e-2f, 2e-3f, "outer");
  gradcheck(weighted([](const std::vector<Tensor>& x) {
              return baddbmm(x[0], x[1], bmm(x[1].transpose(1, 2), x[2]), 0.5f, 2.0f);
            }),
            {randn({4, 3}), randn({2, 4, 3}), randn({2, 4, 3})}, 1e-2f, 2e-2f, 2e-3f, "baddbmm");
  gradcheck(weighted([](const std::vector<Tensor>& x) { return addmm(x[0], x[1], x[2], 2.0f); }),
            {randn({3}), randn({4, 3}).t(), randn({4, 5}).narrow(1, 1, 3)}, 1e-2f, 2e-2f, 2e-3f,
            "addmm");
}
