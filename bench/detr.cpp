// DETR benchmark, side by side with bench/reference/bench.py detr-fmnist: the same model,
// the same kind of data, timed the same way (median of N steps after 3 warm-ups), one JSON line
// with the same keys.
//
//   detr detr-fmnist   training step of models.py's DETR (small CNN, d 128, 3 + 3 layers, 10
//                      queries; 1,682,159 parameters) in training mode on 32 random 1x64x64
//                      scenes of 1-4 boxes (models.py's detr_scenes); loss = SetCriterion
//                      (Hungarian matching by loom::linear_sum_assignment) summed over the 3
//                      decoder layers; AdamW (lr 1e-4, backbone 1e-5, wd 1e-4), grad-norm clip
//                      0.1. matcher_ms: median per step of the time inside the 3 matchings
//                      (cost matrices + assignment); matcher_share = matcher_ms / ms_per_step.
//   detr lsa           linear_sum_assignment alone: median ms of 100x100 and 300x300 solves of
//                      uniform random costs (scipy for comparison: see --help).
//   options: --steps N (default 10)  --threads T (default 2)  --device cpu|cuda  --profile
#include <fmt/format.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "bench_cli.h"
#include "bench_util.h"
#include "loom.h"

using namespace loom;
using loom::bench::time_steps;

namespace {

using bench::Args;

// models.py's detr_scenes: per image 1-4 boxes, w and h uniform in [0.15, 0.45) of the side,
// inside the image; box areas painted with uniform noise over a faint (0.1 x uniform) background.
std::pair<Tensor, std::vector<models::DETRTarget>> detr_scenes(int64_t B, int64_t size,
                                                               int64_t classes) {
  std::vector<float> pixels = (rand({B, 1, size, size}) * 0.1f).to_vector();
  std::vector<models::DETRTarget> targets;
  for (int64_t i = 0; i < B; ++i) {
    const int64_t n = randint(1, 5, {}).to_vector_i64()[0];
    const std::vector<float> wh = (rand({n, 2}) * 0.3f + 0.15f).to_vector();
    const std::vector<float> u = rand({n, 2}).to_vector();
    std::vector<float> boxes;
    for (int64_t k = 0; k < n; ++k) {
      const float w = wh[2 * k], h = wh[2 * k + 1];
      const float cx = w / 2 + u[2 * k] * (1 - w), cy = h / 2 + u[2 * k + 1] * (1 - h);
      boxes.insert(boxes.end(), {cx, cy, w, h});
      // Pixel bounds as torch.round (half to even, std::nearbyint in the default mode).
      const auto px = [&](float v) { return static_cast<int64_t>(std::nearbyint(v * size)); };
      const int64_t x0 = px(cx - w / 2), x1 = px(cx + w / 2), y0 = px(cy - h / 2),
                    y1 = px(cy + h / 2);
      const std::vector<float> noise = rand({(y1 - y0) * (x1 - x0)}).to_vector();
      for (int64_t y = y0; y < y1; ++y)
        for (int64_t x = x0; x < x1; ++x)
          pixels[(i * size + y) * size + x] = noise[(y - y0) * (x1 - x0) + (x - x0)];
    }
    targets.push_back({randint(0, classes, {n}), tensor(boxes, {n, 4})});
  }
  return {tensor(pixels, {B, 1, size, size}), targets};
}

void detr_fmnist(const Args& args) {
  const int64_t B = 32, classes = 10;
  manual_seed(0);
  const models::DETRConfig config = models::DETRConfig::preset("detr-fmnist");
  models::DETR model(config);  // training mode
  model.to(args.device);
  auto [images, targets] = detr_scenes(B, 64, classes);
  images = images.to(args.device);
  int64_t num_boxes = 0;
  for (auto& t : targets) {
    num_boxes += t.labels.size(0);
    t = {t.labels.to(args.device), t.boxes.to(args.device)};
  }
  // DETR's optimizer: the backbone at a tenth of the learning rate.
  optim::ParamGroup rest{{}, 1e-4f, 1e-4f}, backbone{{}, 1e-5f, 1e-4f};
  for (const auto& [name, p] : model.named_parameters())
    (name.rfind("backbone.", 0) == 0 ? backbone : rest).params.push_back(p);
  optim::AdamW opt({rest, backbone});
  const models::DETRLossConfig loss_config{classes};
  std::vector<float> losses;
  std::vector<double> match_seconds;
  auto step = [&] {
    const models::DETROutput out = model.forward(images);
    double matching = 0.0;
    auto layer_loss = [&](const Tensor& logits, const Tensor& boxes) {
      const auto terms = models::detr_loss_terms(logits, boxes, targets, loss_config);
      matching += terms.match_seconds;
      return terms.loss;
    };
    Tensor loss = layer_loss(out.logits, out.boxes);  // + aux losses: every decoder layer
    for (size_t i = 0; i < out.aux_logits.size(); ++i)
      loss = loss + layer_loss(out.aux_logits[i], out.aux_boxes[i]);
    loss.backward();
    {
      profiler::PassGuard optimizer(profiler::Pass::Optimizer);  // --profile's optimizer rows
      optim::clip_grad_norm(model.parameters(), 0.1f);
      opt.step();
      opt.zero_grad(false);
    }
    losses.push_back(loss.item());
    match_seconds.push_back(matching);
  };
  const bench::Timing t = bench::time_case(step, args, args.case_name);
  const double matcher_s =
      bench::median(std::vector<double>(match_seconds.begin() + 3, match_seconds.end()));
  bench::JsonLine(args.case_name)
      .add("batch", B)
      .add("boxes", num_boxes)
      .add("queries", model.config().num_queries)
      .add("matcher_ms", matcher_s * 1e3, 3)
      .add("matcher_share", matcher_s / t.median_s, 4)
      .add("images_per_s", static_cast<double>(B) / t.median_s, 2)
      .common(t, args.steps, model.num_parameters(), args.device)
      .achieved(bench::detr_training_flops(config, B, 64), t, args.sgemm_gflops)
      .losses(losses)
      .print();
}

void lsa(const Args& args) {
  manual_seed(0);
  bench::JsonLine line(args.case_name);
  for (int64_t n : {100, 300}) {
    const Tensor cost = rand({n, n});
    const bench::Timing t = time_steps([&] { linear_sum_assignment(cost); }, args.steps);
    line.add(fmt::format("n{}_ms", n), t.median_s * 1e3, 3)
        .add(fmt::format("n{}_ms_min", n), t.min_s * 1e3, 3);
  }
  line.add("steps", args.steps).add("warmup", bench::kWarmup).print();
}

// The cases `detr CASE` names, each with its --help line and the function that runs it.
const std::vector<bench::Case> kCases = {
    {"detr-fmnist", "DETR training step with matching and aux losses, batch 32", detr_fmnist},
    {"lsa",
     "linear_sum_assignment on 100x100 and 300x300 uniform costs (scipy: python3 -m timeit -s "
     "'import numpy as np; from scipy.optimize import linear_sum_assignment as f; c = "
     "np.random.rand(300, 300)' 'f(c)')",
     lsa}};

}  // namespace

int main(int argc, char** argv) {
  return bench::run_cases(argc, argv, "detr", "the DETR benchmark cases", kCases);
}
