// Chapter 12 (docs/learn/12-optimizers.md): optimizers and warmup.
// Plots the three learning-rate schedules of optim/schedule.h into one PNG, prints their
// landmarks, and checks one AdamW step against Algorithm 2 of Loshchilov & Hutter written out.
//   learn_12_schedules [out.png]   (default learn_12_schedules.png)
#include <cmath>
#include <cstdio>
#include <string>

#include "examples/learn/learn.h"
#include "loom.h"
using namespace loom;

int main(int argc, char** argv) try {
  const std::string out = learn::picture_path(
      argc, argv,
      "Chapter 12 (docs/learn/12-optimizers.md): learning-rate schedules and one AdamW step.");
  // nanoGPT-like: 100 warmup steps to 1e-3, cosine down to 1e-4 at step 1000; BERT-like linear.
  const int64_t warmup = 100, total = 1000;
  data::Series cosine{"warmup_cosine_lr", {}, {}}, linear{"warmup_linear_lr", {}, {}};
  for (int64_t step = 0; step <= 1100; step += 5) {
    cosine.x.push_back(static_cast<double>(step));
    cosine.y.push_back(optim::warmup_cosine_lr(step, warmup, total, 1e-3f, 1e-4f));
    linear.x.push_back(static_cast<double>(step));
    linear.y.push_back(optim::warmup_linear_lr(step, warmup, total, 1e-3f));
  }
  // Vaswani et al.'s base model: d_model 512, 4000 warmup steps.
  data::Series noam{"noam_lr(d_model 512, warmup 4000)", {}, {}};
  for (int64_t step = 0; step <= 40000; step += 100) {
    noam.x.push_back(static_cast<double>(step));
    noam.y.push_back(optim::noam_lr(step, 512, 4000));
  }
  data::save_plots(out, {{{cosine, linear},
                          {.title = "warmup, then decay",
                           .x_label = "step",
                           .y_label = "learning rate",
                           .width = 600,
                           .height = 400}},
                         {{noam},
                          {.title = "Noam (Transformer, sec. 5.3)",
                           .x_label = "step",
                           .y_label = "learning rate",
                           .width = 600,
                           .height = 400}}});
  std::printf("warmup_cosine_lr: step 0 %.2e, 50 %.2e, 100 %.2e, 550 %.2e, 1000 %.2e\n",
              optim::warmup_cosine_lr(0, warmup, total, 1e-3f, 1e-4f),
              optim::warmup_cosine_lr(50, warmup, total, 1e-3f, 1e-4f),
              optim::warmup_cosine_lr(100, warmup, total, 1e-3f, 1e-4f),
              optim::warmup_cosine_lr(550, warmup, total, 1e-3f, 1e-4f),
              optim::warmup_cosine_lr(1000, warmup, total, 1e-3f, 1e-4f));
  std::printf("noam_lr peak at step 4000: %.3e = 512^-0.5 * 4000^-0.5 = %.3e\n",
              optim::noam_lr(4000, 512, 4000), 1.0 / std::sqrt(512.0 * 4000.0));
  std::printf("wrote %s\n", out.c_str());

  // One AdamW step on a single weight, by the optimizer and by the formulas of optim/adam.h.
  const float lr = 0.1f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f, theta = 2.0f, g = 0.5f;
  Tensor w = full({1}, theta).requires_grad_();
  optim::AdamW opt({w}, lr, b1, b2, eps, wd);
  w.set_grad(full({1}, g));
  opt.step();
  const float m = (1 - b1) * g, v = (1 - b2) * g * g;      // from m = v = 0, t = 1
  const float m_hat = m / (1 - b1), v_hat = v / (1 - b2);  // bias corrections
  const float by_hand = theta * (1 - lr * wd) - lr * m_hat / (std::sqrt(v_hat) + eps);
  std::printf("\nAdamW step 1 on w = %.1f with gradient %.1f: optimizer %.6f, by hand %.6f\n",
              theta, g, w.item(), by_hand);
  return std::fabs(w.item() - by_hand) < 1e-6f ? 0 : 1;
} catch (const std::exception& e) {
  return learn::fail(e);
}
