// Optimizer-step benchmark over the parameters of a GPT preset (gpt2: GPT-2 small, 148 tensors,
// 124M values, in nanoGPT's decay / no-decay groups), one JSON line per case:
//   adamw_multi        optim::AdamW::step(): one Backend::adam_step_multi per group (on CUDA
//                      ceil(tensors / 92) launches per group)
//   adamw_per_tensor   one Backend::adam_step per parameter, the same arithmetic (the path
//                      before the multi-tensor kernels: one launch per parameter)
//   clip_grad_norm     optim::clip_grad_norm with a max_norm that clips (the norm's launches,
//                      its one wait for the host, the scaling)
//   optim --device cuda [--preset gpt2] [--steps N]      (meant for a GPU)
//   optim --preset gpt-mini                              (CPU)
// Each timed call ends with the device synchronised, so a CUDA time is the kernels' and the
// launches' both.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "bench_util.h"
#include "examples/cli.h"
#include "loom.h"

using namespace loom;
using loom::bench::time_steps;

int main(int argc, char** argv) {
  std::string preset = "gpt2", device_name = "cpu";
  int steps = 20, threads = 2;
  CLI::App app{"optim: AdamW step (multi-tensor vs per tensor) and clip_grad_norm"};
  cli::show_defaults(app);
  app.add_option("--preset", preset, "GPT preset whose parameters are updated")
      ->check(CLI::IsMember({"gpt-mini", "gpt2", "gpt2-medium"}));
  cli::add_device(app, device_name);
  app.add_option("--steps", steps, "timed steps")->check(cli::positive);
  app.add_option("--threads", threads, "CPU threads")
      ->check(cli::range(int64_t{1}, cli::kMaxThreads));
  CLI11_PARSE(app, argc, argv);
  set_num_threads(threads);
  const Device device = cli::device_of(device_name);

  manual_seed(0);
  models::GPT model(models::GPTConfig::preset(preset));
  model.to(device);
  std::vector<Tensor> params = model.parameters();
  int64_t values = 0;
  for (Tensor& p : params) {
    values += p.numel();
    p.set_grad(randn(p.shape(), device) * 1e-3f);
  }
  Backend& be = backend(device);
  optim::AdamW opt(optim::weight_decay_groups(params, 3e-4f, 0.1f), 0.9f, 0.95f, 1e-8f);

  // The per-tensor baseline: the state and arguments AdamW would use, one call per parameter.
  std::vector<Tensor> ms, vs;
  for (const Tensor& p : params) {
    ms.push_back(zeros_like(p));
    vs.push_back(zeros_like(p));
  }
  AdamArgs args;
  args.lr = 3e-4f, args.beta1 = 0.9f, args.beta2 = 0.95f, args.weight_decay = 0.1f;
  args.decoupled = true;
  args.bias1 = 1.0f - std::pow(args.beta1, 10.0f);
  args.bias2 = 1.0f - std::pow(args.beta2, 10.0f);

  NoGradGuard no_grad;
  const auto multi = time_steps(
      [&] {
        opt.step();
        be.synchronize();
      },
      steps);
  const auto per_tensor = time_steps(
      [&] {
        for (size_t i = 0; i < params.size(); ++i)
          be.adam_step(args, params[i], params[i].grad(), ms[i], vs[i]);
        be.synchronize();
      },
      steps);
  // max_norm half the norm: the first call halves the gradients, every later one finds the norm
  // at max_norm and still scales, by max_norm / (max_norm + 1e-6).
  const float max_norm = 0.5f * optim::clip_grad_norm(params, std::numeric_limits<float>::max());
  const auto clip = time_steps([&] { optim::clip_grad_norm(params, max_norm); }, steps);

  auto line = [&](const char* name, const bench::Timing& t) {
    bench::JsonLine(name)
        .add("preset", preset)
        .add("tensors", params.size())
        .add("values", values)
        .add("device", device_name)
        .times(t)
        .add("steps", steps)
        .print();
  };
  line("adamw_multi", multi);
  line("adamw_per_tensor", per_tensor);
  line("clip_grad_norm", clip);
  return 0;
}
