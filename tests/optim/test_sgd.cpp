// SGD follows torch.optim.SGD's trajectory for ten steps (plain, momentum, Nesterov, weight
// decay with dampening, parameter groups, with gradient clipping), skips parameters without a
// gradient, and zero_grad clears or zeroes gradients as documented.
#include "optim_fixture.h"

using namespace loom;
using namespace loom::testing;

// Each configuration is the one of the same case in tests/golden/gen_optim.py.
TEST_CASE("SGD without momentum follows PyTorch for 10 steps") {
  Mlp mlp;
  optim::SGD opt(mlp.params(), 0.1f);
  check_trajectory("sgd_plain", mlp, opt);
}

TEST_CASE("SGD with momentum follows PyTorch for 10 steps") {
  Mlp mlp;
  optim::SGD opt(mlp.params(), 0.1f, /*momentum=*/0.9f);
  check_trajectory("sgd_momentum", mlp, opt);
}

TEST_CASE("SGD with Nesterov momentum follows PyTorch for 10 steps") {
  Mlp mlp;
  optim::SGD opt(mlp.params(), 0.05f, /*momentum=*/0.9f, /*dampening=*/0.0f,
                 /*weight_decay=*/0.0f, /*nesterov=*/true);
  check_trajectory("sgd_nesterov", mlp, opt);
}

TEST_CASE("SGD with weight decay and dampening follows PyTorch for 10 steps") {
  Mlp mlp;
  optim::SGD opt(mlp.params(), 0.1f, /*momentum=*/0.5f, /*dampening=*/0.25f,
                 /*weight_decay=*/0.05f);
  check_trajectory("sgd_weight_decay", mlp, opt);
}

TEST_CASE("SGD with two parameter groups follows PyTorch for 10 steps") {
  Mlp mlp;
  optim::SGD opt({{mlp.weights(), 0.1f, 0.01f}, {mlp.biases(), 0.05f, 0.0f}}, /*momentum=*/0.9f);
  CHECK(opt.param_groups().size() == 2);
  CHECK(opt.lr() == 0.1f);
  check_trajectory("sgd_groups", mlp, opt);
}

TEST_CASE("SGD with clip_grad_norm follows PyTorch for 10 steps") {
  Mlp mlp;
  optim::SGD opt(mlp.params(), 0.1f, /*momentum=*/0.9f);
  check_trajectory("sgd_clip", mlp, opt, nullptr, /*max_norm=*/0.3f);
}

TEST_CASE("SGD computes one momentum step by its formula") {
  // p = 1, grads g1 then g2: buf1 = g1, p1 = p - lr*buf1; buf2 = m*buf1 + (1-d)*g2, p2 = p1 -
  // lr*buf2.
  const float lr = 0.5f, m = 0.9f, d = 0.1f;
  Tensor p = tensor({1.0f, -2.0f}, {2});
  p.requires_grad_(true);
  optim::SGD opt({p}, lr, m, d);
  const std::vector<float> g1 = {0.5f, 1.0f}, g2 = {-1.0f, 0.25f};
  p.set_grad(tensor(g1, {2}));
  opt.step();
  p.set_grad(tensor(g2, {2}));
  opt.step();
  const std::vector<float> start = {1.0f, -2.0f};
  std::vector<float> expected(2);
  for (size_t i = 0; i < 2; ++i) {
    const float buf2 = m * g1[i] + (1 - d) * g2[i];
    expected[i] = start[i] - lr * g1[i] - lr * buf2;
  }
  check_close(p, tensor(expected, {2}), 1e-6f, 1e-7f, "two momentum steps");
}

TEST_CASE("step skips parameters without a gradient and keeps no state for them") {
  Mlp mlp;
  Tensor unused = ones({3});
  unused.requires_grad_(true);
  std::vector<Tensor> params = mlp.params();
  params.push_back(unused);
  optim::SGD opt(params, 0.1f, /*momentum=*/0.9f);
  for (int64_t k = 0; k < 3; ++k) train_step(mlp, opt, k);
  check_close(unused, ones({3}), 0.0f, 0.0f, "unused parameter");
  const optim::StateDict state = opt.state_dict();
  CHECK(state.count("state.0.4.momentum_buffer") == 0);
  CHECK(state.count("state.0.4.step") == 0);
  CHECK(state.at("state.0.0.step").to_vector_i64()[0] == 3);
  // The other parameters still follow PyTorch's momentum trajectory (which has no extra param).
  Mlp reference;
  optim::SGD reference_opt(reference.params(), 0.1f, 0.9f);
  for (int64_t k = 0; k < 3; ++k) train_step(reference, reference_opt, k);
  check_close(mlp.w1, reference.w1, 0.0f, 0.0f, "w1 with an extra gradient-less parameter");
}

TEST_CASE("zero_grad clears gradients by default and zeroes them with set_to_none = false") {
  Mlp mlp;
  optim::SGD opt(mlp.params(), 0.1f);
  mlp.loss().backward();
  REQUIRE(mlp.w1.grad().defined());
  opt.zero_grad(/*set_to_none=*/false);
  REQUIRE(mlp.w1.grad().defined());
  check_close(mlp.w1.grad(), zeros({4, 3}), 0.0f, 0.0f, "zeroed gradient");
  opt.zero_grad();
  CHECK_FALSE(mlp.w1.grad().defined());
  CHECK_FALSE(mlp.b2.grad().defined());
}

TEST_CASE("zero_grad(false) zeroes strided gradients too, bumping every version") {
  // The contiguous gradients go through one Backend::zero_multi, a strided one through zero_();
  // a parameter without a gradient keeps none.
  std::vector<Tensor> params = {philox_tensor({4, 3}, 1), philox_tensor({5, 4}, 2),
                                philox_tensor({20000}, 3), philox_tensor({6}, 4)};
  for (Tensor& p : params) p.requires_grad_(true);
  params[0].set_grad(philox_tensor({4, 3}, 11));
  params[1].set_grad(philox_tensor({4, 5}, 12).t());  // strided
  params[2].set_grad(philox_tensor({20000}, 13));
  REQUIRE_FALSE(params[1].grad().is_contiguous());
  std::vector<uint64_t> versions;
  for (size_t i : {0, 1, 2}) versions.push_back(params[i].grad().version());
  optim::SGD opt(params, 0.1f);
  opt.zero_grad(/*set_to_none=*/false);
  size_t k = 0;
  for (size_t i : {0, 1, 2}) {
    const Tensor g = params[i].grad();
    REQUIRE(g.defined());
    check_close(g, zeros(params[i].shape()), 0.0f, 0.0f, "gradient " + std::to_string(i));
    CHECK(g.version() > versions[k++]);
  }
  CHECK_FALSE(params[3].grad().defined());
}

TEST_CASE("a zeroed (not cleared) gradient still moves a parameter through momentum") {
  // PyTorch 1.13 semantics with set_to_none = false: a zero gradient is a gradient.
  Tensor p = tensor({1.0f}, {1});
  p.requires_grad_(true);
  optim::SGD opt({p}, 0.5f, /*momentum=*/0.5f);
  p.set_grad(tensor({1.0f}, {1}));
  opt.step();  // buf = 1, p = 0.5
  opt.zero_grad(/*set_to_none=*/false);
  opt.step();  // buf = 0.5, p = 0.25
  check_close(p, tensor({1.0f - 0.5f * 1.0f - 0.5f * 0.5f}, {1}), 0.0f, 0.0f, "p");
  const std::vector<float> before = p.to_vector();
  opt.zero_grad();
  opt.step();  // no gradient: skipped
  CHECK(p.to_vector() == before);
  CHECK(opt.step_count() == 3);
}
