// The PyTorch-style reductions, elementwise functions and linear algebra on CUDA against the
// CPU: values and the gradients of sum(f(inputs) * w), through .to(Device::CUDA); and the scan
// kernels (backends/scan) called directly, forward and reverse, along each axis of a block.
// Without a GPU the cases return at once (test_cuda.cpp's first case reports that once);
// tests/cuda/emulator/run_emulated.sh runs them on the CPU emulator.
#include <cmath>
#include <string>
#include <vector>

#include "cuda_parity.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

using Op = ParityFn;

// A one-tensor function as an Op.
Op of(Tensor (*f)(const Tensor&)) {
  return [f](const std::vector<Tensor>& x) { return f(x[0]); };
}

}  // namespace

TEST_CASE("cuda: the unary table's functions and clamp's forms through .to(Device::CUDA)") {
  LOOM_REQUIRE_GPU();
  manual_seed(31);
  const Tensor x = randn({7, 9}) * 2.0f, p = abs(randn({7, 9})) + 0.1f, u = rand({7, 9});
  compare_op("reciprocal", of(reciprocal), {p});
  compare_op("square", of(square), {x});
  compare_op("log1p", of(log1p), {p});
  compare_op("expm1", of(expm1), {x});
  compare_op("log2", of(log2), {p});
  compare_op("exp2", of(exp2), {x});
  compare_op("erf", of(erf), {x});
  compare_op("round", of(round), {x * 2.0f});
  compare_op("floor", of(floor), {x});
  compare_op("ceil", of(ceil), {x});
  compare_op("trunc", of(trunc), {x});
  compare_op("silu", of(silu), {x});
  compare_op("mish", of(mish), {x});
  compare_op("hardswish", of(hardswish), {x});
  compare_op("relu6", of(relu6), {x * 3.0f});
  compare_op("softplus", [](const auto& t) { return softplus(t[0], 2.0f, 3.0f); }, {x});
  compare_op("leaky_relu", [](const auto& t) { return leaky_relu(t[0], 0.1f); }, {x});
  compare_op("elu", [](const auto& t) { return elu(t[0], 0.5f); }, {x});
  compare_op("logit", [](const auto& t) { return logit(t[0], 0.1f); }, {u});
  compare_op("clamp_min", [](const auto& t) { return clamp_min(t[0], 0.2f); }, {x});
  compare_op("clamp_max", [](const auto& t) { return clamp(t[0], std::nullopt, 0.2f); }, {x});
}

TEST_CASE("cuda: reductions over dims, prod, var/std, logsumexp, norm and the scans") {
  LOOM_REQUIRE_GPU();
  manual_seed(32);
  const Tensor x = randn({4, 5, 6}), t = randn({6, 5}).t();
  Tensor z = randn({3, 8});
  z.narrow(1, 2, 1).zero_();  // a zero in every row, and two in the last
  z.narrow(0, 2, 1).narrow(1, 5, 1).zero_();
  compare_op("sum dims", [](const auto& a) { return sum(a[0], {0, 2}); }, {x});
  compare_op("mean dims", [](const auto& a) { return mean(a[0], {-1, -2}, true); }, {x});
  compare_op("var dims", [](const auto& a) { return var(a[0], {0, 2}, 0); }, {x});
  compare_op("std dims", [](const auto& a) { return loom::std(a[0], {1}, 1, true); }, {t});
  compare_op("prod", [](const auto& a) { return prod(a[0], 1); }, {z});
  compare_op("prod all", [](const auto& a) { return prod(a[0] * 0.5f); }, {t});
  compare_op("logsumexp", [](const auto& a) { return logsumexp(a[0] * 20.0f, {0, 2}); }, {x});
  compare_op("norm 2", [](const auto& a) { return norm(a[0], 2, {1, 2}); }, {x});
  compare_op("norm inf", [](const auto& a) { return norm(a[0], INFINITY, 0); }, {t});
  compare_op("norm 3", [](const auto& a) { return norm(a[0], 3); }, {x});
  compare_op("cumsum last", [](const auto& a) { return cumsum(a[0], -1); }, {x});
  compare_op("cumsum middle", [](const auto& a) { return cumsum(a[0], 1); }, {x});
  compare_op("cumsum transposed", [](const auto& a) { return cumsum(a[0], 1); }, {t});
  compare_op("cumprod zeros", [](const auto& a) { return cumprod(a[0], 1); }, {z});
  compare_op("cumprod dim 0", [](const auto& a) { return cumprod(a[0], 0); }, {z});
  // A row longer than one CUDA block's tile, and rows of one element.
  compare_op("cumsum long rows", [](const auto& a) { return cumsum(a[0], 1); }, {randn({3, 700})});
  compare_op("cumsum single", [](const auto& a) { return cumsum(a[0], 1); }, {randn({5, 1})});
}

TEST_CASE("cuda: scan kernels forward and reverse along rows and columns") {
  LOOM_REQUIRE_GPU();
  for (ScanOp op : {ScanOp::Sum, ScanOp::Prod})
    for (bool reverse : {false, true})
      for (const auto& [outer, n, inner] :
           {std::array<int64_t, 3>{3, 517, 1}, {2, 9, 37}, {1, 1, 5}}) {
        const Tensor x = rand({outer, n, inner}) + 0.5f;
        const Tensor g = randn({outer, n, inner});
        Tensor want = Tensor::empty(x.shape()),
               got = Tensor::empty(x.shape(), DType::Float32, Device::CUDA);
        cpu_backend().scan(op, x, outer, n, inner, reverse, want);
        backend(Device::CUDA).scan(op, x.to(Device::CUDA), outer, n, inner, reverse, got);
        const std::string what = std::string(op == ScanOp::Sum ? "cumsum" : "cumprod") +
                                 (reverse ? " reverse " : " ") + shape_str(x.shape());
        // Long products of numbers in [0.5, 1.5) underflow or overflow alike; compare loosely.
        check_close(got, want, 1e-3f, 1e-5f, what);
        if (op == ScanOp::Prod && !reverse) {
          cpu_backend().cumprod_backward(g, x, outer, n, inner, want);
          backend(Device::CUDA)
              .cumprod_backward(g.to(Device::CUDA), x.to(Device::CUDA), outer, n, inner, got);
          check_close(got, want, 1e-3f, 1e-5f, what + " backward");
        }
      }
}

TEST_CASE("cuda: einsum, outer, bmm, baddbmm and addmm through .to(Device::CUDA)") {
  LOOM_REQUIRE_GPU();
  manual_seed(33);
  compare_op("einsum attention",
             [](const auto& a) {
               return einsum("bhqd,bhkd->bhqk", {a[0], a[1]});
             },
             {randn({2, 3, 4, 5}), randn({2, 3, 6, 5})});
  compare_op("einsum diagonal",
             [](const auto& a) {
               return einsum("iij,jk->ki", {a[0], a[1]});
             },
             {randn({3, 3, 4}), randn({4, 2})});
  compare_op("einsum ellipsis",
             [](const auto& a) {
               return einsum("...ij,...jk->...ik", {a[0], a[1]});
             },
             {randn({2, 1, 3, 4}), randn({5, 4, 2})});
  compare_op("outer", [](const auto& a) { return outer(a[0], a[1]); }, {randn({3}), randn({4})});
  compare_op("baddbmm", [](const auto& a) { return baddbmm(a[0], a[1], a[2], 0.5f, 2.0f); },
             {randn({3, 5}), randn({2, 3, 4}), randn({2, 4, 5})});
  compare_op("addmm", [](const auto& a) { return addmm(a[0], a[1], a[2], 0.0f); },
             {randn({3, 5}), randn({3, 4}), randn({4, 5})});
}
