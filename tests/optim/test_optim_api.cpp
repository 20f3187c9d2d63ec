// The torch.optim names: RMSprop, Adagrad and SGD's nesterov / dampening / weight_decay follow
// PyTorch step for step (tests/golden/gen_optim_api.py), resume exactly from a saved state; every
// optimizer skips frozen parameters and parameters without a gradient and accepts lr 0;
// clip_grad_value_ and clip_grad_norm_; invalid arguments are loom::Errors naming them.
#include "optim_api_fixture.h"

using namespace loom;
using namespace loom::testing;

TEST_CASE("SGD, RMSprop and Adagrad follow PyTorch for 5 steps") {
  for (const std::string& name : api_optimizer_cases()) {
    CAPTURE(name);
    Quadratic q;
    auto opt = make_api_optimizer(name, q.params);
    for (int64_t k = 1; k <= kApiSteps; ++k) {
      q.step(*opt);
      q.check(name, k);
    }
    CHECK(opt->step_count() == kApiSteps);
  }
}

TEST_CASE("3 steps, save, load into a new optimizer, 2 more steps == 5 steps straight") {
  TempDir dir;
  for (const std::string& name : api_optimizer_cases()) {
    CAPTURE(name);
    Quadratic q;
    auto opt = make_api_optimizer(name, q.params);
    for (int64_t k = 0; k < 3; ++k) q.step(*opt);
    opt->save(dir.file(name + ".safetensors"));
    const optim::StateDict state = opt->state_dict();

    // Through the file, and through the state dict in memory: fresh parameters holding the
    // values after step 3 and a fresh optimizer.
    for (bool through_file : {true, false}) {
      CAPTURE(through_file);
      Quadratic resumed;
      for (size_t i = 0; i < q.params.size(); ++i) {
        NoGradGuard no_grad;
        resumed.params[i].copy_(q.params[i]);
      }
      auto again = make_api_optimizer(name, resumed.params);
      if (through_file) {
        again->load(dir.file(name + ".safetensors"));
      } else {
        again->load_state_dict(state);
      }
      CHECK(again->step_count() == 3);
      resumed.step(*again);
      resumed.step(*again);
      // The same operations on the same numbers: equal to the last bit, and to PyTorch's.
      resumed.check(name, 5);
    }
  }
}

TEST_CASE("a training checkpoint holds RMSprop's state beside the model") {
  TempDir dir;
  manual_seed(0);
  nn::Linear model(3, 2);
  optim::RMSprop opt(model.parameters(), 0.01f, 0.9f, 1e-8f, 0.0f, 0.5f, true);
  const Tensor x = randn({4, 3});
  const auto train = [&](nn::Linear& m, optim::Optimizer& o) {
    o.zero_grad();
    sum(m.forward(x) * m.forward(x)).backward();
    o.step();
  };
  for (int k = 0; k < 3; ++k) train(model, opt);
  nn::save_checkpoint(dir.file("ckpt.safetensors"), {{"model", &model}}, &opt);

  nn::Linear restored(3, 2);
  optim::RMSprop restored_opt(restored.parameters(), 0.01f, 0.9f, 1e-8f, 0.0f, 0.5f, true);
  nn::load_checkpoint(dir.file("ckpt.safetensors"), {{"model", &restored}}, &restored_opt);
  for (int k = 0; k < 2; ++k) {
    train(model, opt);
    train(restored, restored_opt);
  }
  const std::vector<Tensor> expected = model.parameters(), actual = restored.parameters();
  for (size_t i = 0; i < expected.size(); ++i)
    check_close(actual[i], expected[i], 0.0f, 0.0f, "parameter " + std::to_string(i));

  // Another configuration refuses the state, naming the hyper-parameter.
  optim::RMSprop plain(restored.parameters(), 0.01f, 0.9f, 1e-8f, 0.0f, 0.5f, false);
  expect_error([&] { plain.load_state_dict(opt.state_dict()); },
               {"RMSprop: load_state_dict", "centered is 1 in the state dict but 0"});
}

namespace {

// The five optimizers, each over `params` with lr `lr` and some weight decay and momentum, so
// that a skipped parameter would move if it were not skipped.
std::vector<std::unique_ptr<optim::Optimizer>> every_optimizer(const std::vector<Tensor>& params,
                                                               float lr) {
  std::vector<std::unique_ptr<optim::Optimizer>> out;
  out.push_back(std::make_unique<optim::SGD>(params, lr, 0.9f, 0.0f, 0.1f));
  out.push_back(std::make_unique<optim::Adam>(params, lr, 0.9f, 0.999f, 1e-8f, 0.1f));
  out.push_back(std::make_unique<optim::AdamW>(params, lr));
  out.push_back(std::make_unique<optim::RMSprop>(params, lr, 0.99f, 1e-8f, 0.1f, 0.9f));
  out.push_back(std::make_unique<optim::Adagrad>(params, lr, 0.0f, 0.1f));
  return out;
}

Tensor leaf(Shape shape, float value) { return full(shape, value).requires_grad_(); }

}  // namespace

TEST_CASE("every optimizer skips frozen parameters and parameters without a gradient") {
  Tensor moving = leaf({3}, 1.0f), frozen = leaf({2, 2}, 1.0f), unused = leaf({4}, 1.0f);
  Tensor never = full({2}, 1.0f);  // never required grad: accepted at construction
  for (auto& opt : every_optimizer({moving, frozen, unused, never}, 0.1f)) {
    CAPTURE(opt->name());
    NoGradGuard no_grad;
    for (Tensor* p : {&moving, &frozen, &unused, &never}) p->fill_(1.0f);
    // The backbone is frozen after the optimizer was built; it still holds a gradient from
    // before, which must not move it.
    frozen.requires_grad_(false);
    moving.set_grad(full({3}, 0.5f));
    frozen.set_grad(full({2, 2}, 0.5f));
    unused.set_grad(Tensor());
    never.set_grad(full({2}, 0.5f));
    opt->step();
    opt->step();
    CHECK(moving.to_vector()[0] != 1.0f);
    check_close(frozen, full({2, 2}, 1.0f), 0.0f, 0.0f, "frozen");
    check_close(unused, full({4}, 1.0f), 0.0f, 0.0f, "unused");
    check_close(never, full({2}, 1.0f), 0.0f, 0.0f, "never required grad");
    const optim::StateDict state = opt->state_dict();
    CHECK(state.at("state.0.0.step").to_vector_i64()[0] == 2);
    for (const char* key : {"state.0.1.step", "state.0.2.step", "state.0.3.step"})
      CHECK_MESSAGE(!state.count(key), key);
    // Unfrozen, it takes its first step.
    frozen.requires_grad_(true);
    opt->step();
    CHECK(frozen.to_vector()[0] != 1.0f);
    CHECK(opt->state_dict().at("state.0.1.step").to_vector_i64()[0] == 1);
    frozen.set_grad(Tensor());
    moving.set_grad(Tensor());
    never.set_grad(Tensor());
  }
}

TEST_CASE("every optimizer accepts lr 0 at construction and in set_lr, and then moves nothing") {
  Tensor p = leaf({3}, 1.0f);
  for (auto& opt : every_optimizer({p}, 0.0f)) {
    CAPTURE(opt->name());
    CHECK(opt->lr() == 0.0f);
    p.set_grad(full({3}, 0.5f));
    opt->step();
    check_close(p, full({3}, 1.0f), 0.0f, 0.0f, "lr 0");
    opt->set_lr(0.1f);
    opt->step();
    CHECK(p.to_vector()[0] < 1.0f);
    opt->set_lr(0.0f);
    CHECK(opt->lr() == 0.0f);
    NoGradGuard no_grad;
    p.fill_(1.0f);
  }
}

TEST_CASE("clip_grad_value_ clamps every gradient in place; clip_grad_norm_ is clip_grad_norm") {
  Tensor a = leaf({4}, 0.0f), b = leaf({2, 2}, 0.0f), none = leaf({3}, 0.0f);
  a.set_grad(tensor({-3.0f, -0.5f, 0.25f, 2.0f}, {4}));
  const Tensor b_grad = tensor({1.5f, -1.5f, 0.0f, 1.0f}, {2, 2});
  b.set_grad(b_grad);
  optim::clip_grad_value_({a, b, none}, 1.0f);
  check_close(a.grad(), tensor({-1.0f, -0.5f, 0.25f, 1.0f}, {4}), 0.0f, 0.0f, "a");
  check_close(b.grad(), tensor({1.0f, -1.0f, 0.0f, 1.0f}, {2, 2}), 0.0f, 0.0f, "b");
  CHECK(b.grad().impl() == b_grad.impl());  // in place: the same gradient tensor
  CHECK(!none.grad().defined());
  expect_error([&] { optim::clip_grad_value_({a}, 0.0f); },
               {"clip_grad_value_: clip_value 0 must be positive"});

  a.set_grad(full({4}, 3.0f));
  const float norm = optim::clip_grad_norm_({a}, 1.0f);
  CHECK(norm == doctest::Approx(6.0f));
  check_close(a.grad(), full({4}, 0.5f), 1e-6f, 0.0f, "clipped to norm 1");
  expect_error([&] { optim::clip_grad_norm_({a}, -1.0f); },
               {"clip_grad_norm_: max_norm -1 must be positive"});
}

TEST_CASE("RMSprop and Adagrad reject invalid hyper-parameters, naming them") {
  const std::vector<Tensor> ps = {leaf({2}, 0.0f)};
  expect_error([&] { optim::RMSprop(ps, -0.1f); },
               {"RMSprop: learning rate -0.1 of param group 0 must be non-negative"});
  expect_error([&] { optim::RMSprop(ps, 0.01f, 1.5f); }, {"RMSprop: alpha 1.5 must be in [0, 1]"});
  expect_error([&] { optim::RMSprop(ps, 0.01f, -0.1f); }, {"RMSprop: alpha -0.1"});
  expect_error([&] { optim::RMSprop(ps, 0.01f, 0.99f, -1e-8f); },
               {"RMSprop: eps -1e-08 must be non-negative"});
  expect_error([&] { optim::RMSprop(ps, 0.01f, 0.99f, 1e-8f, -0.1f); },
               {"RMSprop: weight_decay -0.1 of param group 0 must be non-negative"});
  expect_error([&] { optim::RMSprop(ps, 0.01f, 0.99f, 1e-8f, 0.0f, -0.9f); },
               {"RMSprop: momentum -0.9 must be non-negative"});
  expect_error([&] { optim::Adagrad(ps, -1.0f); }, {"Adagrad: learning rate -1"});
  expect_error([&] { optim::Adagrad(ps, 0.01f, -0.1f); },
               {"Adagrad: lr_decay -0.1 must be non-negative"});
  expect_error([&] { optim::Adagrad(ps, 0.01f, 0.0f, 0.0f, -1.0f); },
               {"Adagrad: eps -1 must be non-negative"});
  expect_error([&] { optim::Adagrad(ps, 0.01f, 0.0f, 0.0f, 1e-10f, -0.5f); },
               {"Adagrad: initial_accumulator_value -0.5 must be non-negative"});
  expect_error(
      [&] {
        optim::Adagrad({{ps, 0.1f, 0.0f}, {{leaf({3}, 0.0f)}, -0.1f, 0.0f}});
      },
      {"Adagrad: learning rate -0.1 of param group 1"});
  // Non-leaf tensors and duplicates are still refused, by every optimizer.
  Tensor derived = ps[0] * 2.0f;
  expect_error(
      [&] {
        optim::Adagrad({ps[0], derived});
      },
      {"Adagrad: parameter 1 of group 0 ([2]) is not a leaf tensor"});
  expect_error(
      [&] {
        optim::RMSprop({ps[0], ps[0]});
      },
      {"RMSprop: parameter 1 of group 0 ([2]) is also parameter 0 of group 0"});
  optim::RMSprop opt(ps);
  expect_error([&] { opt.set_lr(-1.0f); }, {"RMSprop: set_lr: learning rate -1"});
}
