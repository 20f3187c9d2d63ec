// Vision benchmark, side by side with bench/reference/bench.py: the same models, the same
// data, timed the same way (median of N steps after 3 warm-ups), one JSON line with the same keys.
//
//   vision vit-fmnist    training step of models.py's ViT (patch 4, d 128, 6 layers, 4 heads,
//                        MLP 512; 1,199,882 parameters) on batch 128 of random 1x28x28 images
//   vision swin-fmnist   training step of models.py's Swin (patch 2, d 64, stages 2+4,
//                        window 7, drop-path 0.1 in training mode; 931,710 parameters), batch 64
//   one step = forward + cross-entropy + backward + AdamW(lr 1e-3, wd 0.05) step + zero_grad
//   options: --steps N (default 10)  --threads T (default 2)  --device cpu|cuda  --profile
//   idle OpenMP workers spin briefly, then sleep (cli::use_short_omp_spin)
#include <string>
#include <vector>

#include "bench_cli.h"
#include "bench_util.h"
#include "loom.h"

using namespace loom;

namespace {

using bench::Args;

// bench.py's training_step(): random images U[0,1) and labels, generated once; the same batch every
// step; AdamW over every parameter; gradients zeroed in place (PyTorch 1.13's default).
template <typename Model, typename Config>
void train_case(const Args& args, const Config& config, int64_t batch, double flops) {
  manual_seed(0);
  Model model(config);
  model.to(args.device);
  model.train();
  const Tensor images = rand({batch, config.in_channels, config.image_size, config.image_size})
                            .to(args.device);                                     // (B, C, H, W)
  const Tensor labels = randint(0, config.num_classes, {batch}).to(args.device);  // (B,)
  optim::AdamW opt(model.parameters(), 1e-3f, 0.9f, 0.999f, 1e-8f, 0.05f);
  std::vector<float> losses;
  auto step = [&] { bench::update(cross_entropy(model.forward(images), labels), opt, losses); };
  const bench::Timing t = bench::time_case(step, args, args.case_name);
  bench::JsonLine(args.case_name)
      .add("batch", batch)
      .add("images_per_s", static_cast<double>(batch) / t.median_s, 2)
      .common(t, args.steps, model.num_parameters(), args.device)
      .achieved(flops, t, args.sgemm_gflops)
      .losses(losses)
      .print();
}

// The cases `vision CASE` names, each with its --help line and the function that runs it.
const std::vector<bench::Case> kCases = {
    {"vit-fmnist", "ViT training step, batch 128 (1,199,882 parameters)",
     [](const bench::Args& args) {
       const auto config = models::ViTConfig::preset("vit-fmnist");
       train_case<models::ViT>(args, config, 128, bench::vit_training_flops(config, 128));
     }},
    {"swin-fmnist", "Swin training step, batch 64 (931,710 parameters)",
     [](const bench::Args& args) {
       const auto config = models::SwinConfig::preset("swin-fmnist");
       train_case<models::Swin>(args, config, 64, bench::swin_training_flops(config, 64));
     }}};

}  // namespace

int main(int argc, char** argv) {
  return bench::run_cases(argc, argv, "vision", "one ViT/Swin benchmark case", kCases);
}
