// Invalid optimizer arguments are loom::Errors naming the optimizer and the bad value; the
// learning-rate accessors and weight_decay_groups behave as documented.
#include <cmath>

#include "test_util.h"

using namespace loom;

namespace {

Tensor param(Shape shape) {
  Tensor p = zeros(shape);
  p.requires_grad_(true);
  return p;
}

}  // namespace

TEST_CASE("optimizers reject a negative learning rate and accept zero") {
  const std::vector<Tensor> ps = {param({2})};
  CHECK_THROWS_WITH_AS(
      optim::SGD(ps, -0.5f),
      doctest::Contains("SGD: learning rate -0.5 of param group 0 must be non-negative"), Error);
  CHECK_NOTHROW(optim::SGD(ps, 0.0f));
  CHECK_THROWS_WITH_AS(optim::Adam(ps, -1e-3f), doctest::Contains("Adam: learning rate -0.001"),
                       Error);
  CHECK_THROWS_WITH_AS(optim::AdamW({{ps, 1e-3f, 0.0f}, {{param({3})}, -1.0f, 0.0f}}),
                       doctest::Contains("AdamW: learning rate -1 of param group 1"), Error);
  CHECK_THROWS_WITH_AS(optim::SGD(ps, std::nanf("")), doctest::Contains("SGD: learning rate nan"),
                       Error);
}

TEST_CASE("Adam and AdamW reject betas outside 0 <= beta < 1 and a negative eps") {
  const std::vector<Tensor> ps = {param({2})};
  CHECK_THROWS_WITH_AS(optim::Adam(ps, 1e-3f, 1.0f),
                       doctest::Contains("Adam: beta1 1 must be in [0, 1)"), Error);
  CHECK_THROWS_WITH_AS(optim::Adam(ps, 1e-3f, -0.1f), doctest::Contains("Adam: beta1 -0.1"), Error);
  CHECK_THROWS_WITH_AS(optim::AdamW(ps, 1e-3f, 0.9f, 1.5f),
                       doctest::Contains("AdamW: beta2 1.5 must be in [0, 1)"), Error);
  CHECK_THROWS_WITH_AS(optim::Adam(ps, 1e-3f, 0.9f, 0.999f, -1e-8f),
                       doctest::Contains("Adam: eps -1e-08"), Error);
  CHECK_THROWS_WITH_AS(
      optim::Adam(ps, 1e-3f, 0.9f, 0.999f, 1e-8f, -0.1f),
      doctest::Contains("Adam: weight_decay -0.1 of param group 0 must be non-negative"), Error);
}

TEST_CASE("SGD rejects negative momentum and Nesterov without plain momentum") {
  const std::vector<Tensor> ps = {param({2})};
  CHECK_THROWS_WITH_AS(optim::SGD(ps, 0.1f, -0.5f), doctest::Contains("SGD: momentum -0.5"), Error);
  CHECK_THROWS_WITH_AS(optim::SGD(ps, 0.1f, 0.0f, 0.0f, 0.0f, true),
                       doctest::Contains("SGD: nesterov requires a positive momentum and zero "
                                         "dampening (got momentum 0, dampening 0)"),
                       Error);
  CHECK_THROWS_WITH_AS(optim::SGD(ps, 0.1f, 0.9f, 0.1f, 0.0f, true),
                       doctest::Contains("dampening 0.1"), Error);
  CHECK_THROWS_WITH_AS(optim::SGD(ps, 0.1f, 0.9f, 0.0f, -1.0f),
                       doctest::Contains("SGD: weight_decay -1"), Error);
}

TEST_CASE("optimizers reject parameters that cannot be optimized") {
  // A parameter that does not require grad is accepted (a backbone frozen before or after the
  // optimizer is built); step() skips it (test_optim_api.cpp).
  CHECK_NOTHROW(optim::SGD({zeros({2, 3})}, 0.1f));
  Tensor leaf = param({3});
  Tensor derived = leaf * 2.0f;
  CHECK_THROWS_WITH_AS(optim::Adam({leaf, derived}, 0.1f),
                       doctest::Contains("Adam: parameter 1 of group 0 ([3]) is not a leaf tensor"),
                       Error);
  Tensor ids = tensor_i64({1, 2}, {2});
  CHECK_THROWS_WITH_AS(optim::SGD({ids}, 0.1f),
                       doctest::Contains("SGD: parameter 0 of group 0 ([2]) is int64, not float32"),
                       Error);
  CHECK_THROWS_WITH_AS(optim::SGD({Tensor()}, 0.1f),
                       doctest::Contains("SGD: parameter 0 of group 0 is an undefined tensor"),
                       Error);
  CHECK_THROWS_WITH_AS(optim::AdamW(std::vector<Tensor>{}, 0.1f),
                       doctest::Contains("AdamW: got an empty parameter list"), Error);
}

TEST_CASE("optimizers reject a parameter listed twice, in one group or across groups") {
  Tensor w = param({4, 2}), b = param({4});
  CHECK_THROWS_WITH_AS(
      optim::SGD({w, b, w}, 0.1f),
      doctest::Contains("SGD: parameter 2 of group 0 ([4,2]) is also parameter 0 of group 0"),
      Error);
  CHECK_THROWS_WITH_AS(
      optim::AdamW({{{w, b}, 0.1f, 0.01f}, {{b}, 0.1f, 0.0f}}),
      doctest::Contains("AdamW: parameter 0 of group 1 ([4]) is also parameter 1 of group 0"),
      Error);
}

TEST_CASE("set_lr sets every group, lr() reads the first, zero is allowed, negatives are not") {
  Tensor w = param({2, 2}), b = param({2});
  optim::AdamW opt({{{w}, 1e-3f, 0.1f}, {{b}, 2e-3f, 0.0f}});
  CHECK(opt.lr() == 1e-3f);
  opt.set_lr(5e-4f);
  CHECK(opt.param_groups()[0].lr == 5e-4f);
  CHECK(opt.param_groups()[1].lr == 5e-4f);
  opt.set_lr(1, 1e-4f);
  CHECK(opt.param_groups()[1].lr == 1e-4f);
  CHECK(opt.lr() == 5e-4f);
  opt.set_lr(0.0f);  // warmup schedules start at 0
  CHECK(opt.lr() == 0.0f);
  CHECK_THROWS_WITH_AS(opt.set_lr(-1.0f), doctest::Contains("AdamW: set_lr: learning rate -1"),
                       Error);
  CHECK_THROWS_WITH_AS(
      opt.set_lr(2, 1.0f),
      doctest::Contains("AdamW: set_lr: group 2 out of range (the optimizer has 2)"), Error);
}

TEST_CASE("weight_decay_groups decays matrices and leaves biases and norm gains undecayed") {
  Tensor weight = param({4, 3}), bias = param({4}), embedding = param({10, 4}), gain = param({4});
  const auto groups = optim::weight_decay_groups({weight, bias, embedding, gain}, 3e-4f, 0.1f);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].weight_decay == 0.1f);
  CHECK(groups[1].weight_decay == 0.0f);
  CHECK(groups[0].lr == 3e-4f);
  CHECK(groups[1].lr == 3e-4f);
  REQUIRE(groups[0].params.size() == 2);
  CHECK(groups[0].params[0].impl() == weight.impl());
  CHECK(groups[0].params[1].impl() == embedding.impl());
  REQUIRE(groups[1].params.size() == 2);
  CHECK(groups[1].params[0].impl() == bias.impl());
  CHECK(groups[1].params[1].impl() == gain.impl());
  optim::AdamW opt(groups);  // builds without error
  CHECK(opt.param_groups().size() == 2);
}
