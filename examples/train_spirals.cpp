// The first trainer to read: an MLP learns to separate two interleaved spirals.
// Model, loop, AdamW, warmup + cosine schedule, checkpoint — the shape of every loom trainer.
//   train_spirals [--steps N] [--lr X] [--out PATH] [--resume]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cli.h"
#include "loom.h"
using namespace loom;

// Two spirals of `n` points each; label 0 or 1. Returns points [2n, 2] and labels [2n].
std::pair<Tensor, Tensor> make_spirals(int64_t n) {
  Tensor t = rand({n, 1}) * 3.0f * 3.14159265f + 0.5f;      // angle along the spiral
  Tensor noise = randn({2 * n, 2}) * 0.03f;
  Tensor arm = cat({t * cos(t), t * sin(t)}, 1) / 10.0f;     // (n, 2)
  Tensor points = cat({arm, -arm}, 0) + noise;               // second spiral = rotated by pi
  Tensor labels = cat({zeros({n}), ones({n})}, 0).to(DType::Int64);
  return {points, labels};
}

int main(int argc, char** argv) try {
  int64_t steps = 600;
  float lr = 1e-2f;
  std::string out = "spirals.safetensors";
  bool resume = false;
  CLI::App app{"train_spirals: an MLP learns to separate two interleaved spirals"};
  cli::show_defaults(app);
  app.add_option("--steps", steps, "optimizer steps")->check(cli::positive_integer);
  app.add_option("--lr", lr, "peak learning rate")->check(cli::positive);
  app.add_option("--out", out, "checkpoint: model and optimizer in one file");
  app.add_flag("--resume", resume, "continue from --out if it exists")->expected(0, 1);
  CLI11_PARSE(app, argc, argv);
  cli::print_config(app);

  manual_seed(0);
  auto [x, y] = make_spirals(500);

  nn::Sequential model(std::make_shared<nn::Linear>(2, 64), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::Linear>(64, 64), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::Linear>(64, 2));
  optim::AdamW opt(model.parameters(), lr, 0.9f, 0.999f, 1e-8f, 1e-4f);
  if (resume && std::filesystem::exists(out)) {  // model and optimizer state, in one file
    nn::load_checkpoint(out, {{"model", &model}}, &opt);
    std::printf("resumed from %s at step %lld\n", out.c_str(), (long long)opt.step_count());
  }
  const int64_t warmup = std::min<int64_t>(50, steps / 4);  // a short run warms up for less
  for (int64_t step = opt.step_count(); step < steps; ++step) {
    opt.set_lr(optim::warmup_cosine_lr(step, warmup, steps, lr));
    Tensor loss = nn::functional::cross_entropy(model.forward(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (step % 100 == 0 || step + 1 == steps)
      std::printf("step %4lld  loss %.4f  lr %.5f\n", (long long)step, loss.item(), opt.lr());
  }
  // Atomic: written to a temporary file, then renamed. "model.*" tensors, "optim.*" state.
  nn::save_checkpoint(out, {{"model", &model}}, &opt);

  NoGradGuard no_grad;
  const float accuracy = mean(eq(argmax(model.forward(x), 1), y).to(DType::Float32)).item();
  std::printf("training accuracy %.1f%% (%lld parameters); saved %s\n", 100 * accuracy,
              (long long)model.num_parameters(), out.c_str());
  return accuracy > 0.95f ? 0 : 1;
} catch (const std::exception& e) {  // a loom::Error names the op and the values at fault
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
