// Adam and AdamW follow torch.optim.Adam/AdamW's trajectories for ten steps (L2 weight decay,
// decoupled weight decay with decay/no-decay parameter groups, under warmup+cosine and Noam
// schedules, with gradient clipping), and one step matches the algorithm written out.
#include <cmath>
#include <memory>

#include "optim_fixture.h"

using namespace loom;
using namespace loom::testing;

// Each configuration is the one of the same case in tests/golden/gen_optim.py.
TEST_CASE("Adam with weight decay follows PyTorch for 10 steps") {
  Mlp mlp;
  optim::Adam opt(mlp.params(), 0.01f, 0.9f, 0.999f, 1e-8f, /*weight_decay=*/0.1f);
  check_trajectory("adam", mlp, opt);
}

TEST_CASE("Adam with two parameter groups follows PyTorch for 10 steps") {
  Mlp mlp;
  optim::Adam opt({{mlp.weights(), 0.02f, 0.05f}, {mlp.biases(), 0.01f, 0.0f}}, 0.8f, 0.99f);
  check_trajectory("adam_groups", mlp, opt);
}

TEST_CASE("AdamW with decay and no-decay groups follows PyTorch for 10 steps") {
  Mlp mlp;
  optim::AdamW opt({{mlp.weights(), 0.01f, 0.1f}, {mlp.biases(), 0.02f, 0.0f}});
  check_trajectory("adamw_groups", mlp, opt);
}

TEST_CASE("AdamW under warmup_cosine_lr follows PyTorch for 10 steps") {
  Mlp mlp;
  optim::AdamW opt(mlp.params(), 0.02f, 0.9f, 0.999f, 1e-8f, /*weight_decay=*/0.01f);
  auto schedule = [](int64_t k) { return optim::warmup_cosine_lr(k, 3, 8, 0.02f, 0.002f); };
  check_trajectory("adamw_cosine", mlp, opt, schedule);
}

TEST_CASE("Adam under noam_lr follows PyTorch for 10 steps") {
  Mlp mlp;
  optim::Adam opt(mlp.params(), 1.0f, 0.9f, 0.98f, 1e-9f);
  auto schedule = [](int64_t k) { return optim::noam_lr(k, 16, 4, 0.5f); };
  check_trajectory("adam_noam", mlp, opt, schedule);
}

TEST_CASE("AdamW with clip_grad_norm follows PyTorch for 10 steps") {
  Mlp mlp;
  optim::AdamW opt(mlp.params(), 0.01f, 0.9f, 0.999f, 1e-8f, /*weight_decay=*/0.1f);
  check_trajectory("adamw_clip", mlp, opt, nullptr, /*max_norm=*/0.1f);
}

namespace {

// Kingma & Ba, Algorithm 1 (with Loshchilov & Hutter's decoupled decay), in double.
std::vector<float> adam_reference(std::vector<float> p,
                                  const std::vector<std::vector<float>>& grads, double lr,
                                  double b1, double b2, double eps, double wd, bool decoupled) {
  std::vector<double> m(p.size(), 0.0), v(p.size(), 0.0);
  for (size_t t = 1; t <= grads.size(); ++t) {
    for (size_t i = 0; i < p.size(); ++i) {
      double g = grads[t - 1][i], x = p[i];
      if (decoupled)
        x *= 1 - lr * wd;
      else
        g += wd * x;
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double m_hat = m[i] / (1 - std::pow(b1, t)), v_hat = v[i] / (1 - std::pow(b2, t));
      p[i] = static_cast<float>(x - lr * m_hat / (std::sqrt(v_hat) + eps));
    }
  }
  return p;
}

}  // namespace

TEST_CASE("Adam and AdamW take the steps of the algorithm written out") {
  const std::vector<float> start = {0.5f, -1.5f, 2.0f};
  const std::vector<std::vector<float>> grads = {
      {0.1f, -0.3f, 2.0f}, {-0.2f, 0.4f, 1.0f}, {0.3f, 0.0f, -0.5f}};
  for (bool decoupled : {false, true}) {
    CAPTURE(decoupled);
    Tensor p = tensor(start, {3});
    p.requires_grad_(true);
    std::unique_ptr<optim::Optimizer> opt;
    if (decoupled)
      opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{p}, 0.1f, 0.8f, 0.9f, 1e-6f, 0.2f);
    else
      opt = std::make_unique<optim::Adam>(std::vector<Tensor>{p}, 0.1f, 0.8f, 0.9f, 1e-6f, 0.2f);
    for (const auto& g : grads) {
      p.set_grad(tensor(g, {3}));
      opt->step();
    }
    const std::vector<float> expected =
        adam_reference(start, grads, 0.1, 0.8, 0.9, 1e-6, 0.2, decoupled);
    check_close(p, tensor(expected, {3}), 1e-5f, 1e-7f, decoupled ? "AdamW" : "Adam");
  }
}

TEST_CASE("AdamW without weight decay is Adam") {
  Mlp a, b;
  optim::Adam adam(a.params(), 0.01f);
  optim::AdamW adamw(b.params(), 0.01f, 0.9f, 0.999f, 1e-8f, /*weight_decay=*/0.0f);
  for (int64_t k = 0; k < 5; ++k) {
    train_step(a, adam, k);
    train_step(b, adamw, k);
  }
  for (size_t i = 0; i < a.params().size(); ++i)
    check_close(a.params()[i], b.params()[i], 0.0f, 0.0f, Mlp::names()[i]);
}

TEST_CASE("AdamW defaults follow PyTorch: weight_decay 0.01, betas (0.9, 0.999), eps 1e-8") {
  Mlp mlp;
  optim::AdamW opt(mlp.params(), 1e-3f);
  CHECK(opt.param_groups()[0].weight_decay == 0.01f);
  CHECK(opt.beta1() == 0.9f);
  CHECK(opt.beta2() == 0.999f);
  CHECK(opt.eps() == 1e-8f);
  CHECK(opt.name() == "AdamW");
  optim::Adam adam(Mlp().params(), 1e-3f);
  CHECK(adam.param_groups()[0].weight_decay == 0.0f);
  CHECK(adam.name() == "Adam");
}
