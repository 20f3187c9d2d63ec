// Trains DETR (Carion et al. 2020) to detect the clothing items of multi-object Fashion-MNIST
// scenes (data/fashion_mnist_scenes.h), top to bottom like nanoGPT's train.py: options, data,
// model, optimizer, the training loop (progress with the loss terms, COCO AP on held-out scenes
// every N steps, checkpoints), and a final report with AP, curves and pictures of the boxes.
//
//   train_detr                              detr-fmnist for 10 minutes (the --minutes plan)
//   train_detr --steps 2000 --out run1      a fixed number of steps; `--resume` continues exactly
//   train_detr --overfit-one --steps 300    one fixed 4-item scene: the loss must go to ~0
//   train_detr --dump 8                     8 training scenes with their boxes as PNG, and exit
//   train_detr --help                       every option
//
// Files written to --out: ckpt.safetensors (model + AdamW state + DETR config + where the run is,
// one file written atomically; examples/detect reads it), log.csv (loss, its terms, lr and AP per
// step), curves.png (loss and AP curves) and detections_<i>.png: held-out scenes with the ground
// truth (green) and the predictions scoring >= --draw-threshold (orange).
//
// Recipe and evaluation: those of bench/reference/train.py's detr-fmnist task (PyTorch), whose
// defaults are this trainer's: peak lr 5e-4 after a 200-step warm-up for everything (DETR's 1e-4
// without warm-up, `--lr 1e-4 --backbone-lr 1e-4 --warmup 0` on both sides, learns about a third
// as fast). Batch 32; AdamW (betas .9/.999, weight decay 1e-4 on
// every parameter); gradient norm clipped to 0.1; cosine decay to 1e-6 at the last step; DETR's
// set loss (Hungarian matching, 1 CE + 5 L1 + 2 GIoU) on every decoder layer, summed (auxiliary
// losses); dropout 0.1 and BatchNorm batch statistics in training. Evaluation in eval mode (no
// dropout, BatchNorm running statistics) with DETR's PostProcess (examples/detr_postprocess.h),
// all queries as detections, COCO AP on the fixed 1000 held-out t10k scenes (default_rng([0,
// 0]), whatever --seed); the periodic evaluations use the first --curve-scenes of them (200, as
// the reference's curve).
// One difference: training scene i (the run's i-th, over every rank) comes from its own stream
// default_rng([3, seed, i]) rather than from one sequential stream, so that a resumed run draws
// the same scenes without replaying the stream; the scenes are distributed identically.
//
// `mpirun -np N train_detr` (as train_gpt): rank r trains a DDP replica on scenes [rB, (r+1)B)
// of each global batch of N x B, box terms over SetCriterion's num_boxes (the global batch's / N).
// Not exactly one process at N x B: BatchNorm uses each rank's batch statistics (as PyTorch DDP
// without SyncBatchNorm) and CE is each rank's weighted mean (as the reference). Running stats
// are broadcast from rank 0 at the start only (PyTorch's broadcast_buffers: every forward); the
// model rank 0 evaluates and saves has rank 0's either way. Rank 0 alone prints and writes;
// the checkpoint counts scenes, so --resume takes any N.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "detr_postprocess.h"
#include "loom.h"

using namespace loom;
namespace fs = std::filesystem;
using detr_example::ImageDetections;
using detr_example::average_precision;
using detr_example::detect;

namespace {

// ============================================================================ options

// Scenes a batch (or --dump) may hold: 128 times the default batch, 64 MB of 64x64 images; a
// scene is drawn into memory, so --batch 1000000000 is refused rather than allocated.
constexpr int64_t kMaxScenes = 4096;

struct Options {
  std::string model = "detr-fmnist";  // a DETRConfig preset with a one-channel small backbone
  float dropout = 0.1f;
  std::string data = data::kFashionMnistDir;
  int64_t eval_scenes = 1000, curve_scenes = 200;  // held-out t10k scenes: final, periodic
  int64_t batch = 32, warmup = 200;  // DETR's main.py: lr 1e-4 and no warm-up
  float lr = 5e-4f, backbone_lr = 5e-4f, min_lr = 1e-6f, weight_decay = 1e-4f, grad_clip = 0.1f;
  bool overfit_one = false;
  int64_t eval_every = 200, dump = 0, draw_scenes = 6;
  float draw_threshold = 0.5f;
  // --steps (0: --minutes plans them, 10 by default), checkpoints, --out, --resume, machine
  nn::RunOptions run{.out = "out-detr", .checkpoint_every = 200};
};

void add_options(CLI::App& app, Options& o) {
  cli::show_defaults(app);
  CLI::App* m = app.add_option_group("Model");
  m->add_option("--model", o.model, "DETR preset (one-channel scenes: detr-fmnist)")
      ->check(CLI::IsMember({"detr-fmnist"}));
  m->add_option("--dropout", o.dropout, "dropout probability in the transformer")
      ->check(cli::range(0.0, 0.99));
  CLI::App* d = app.add_option_group("Data");
  d->add_option("--data", o.data, "directory of the Fashion-MNIST IDX files (.gz)");
  d->add_option("--eval-scenes", o.eval_scenes,
                "held-out t10k scenes of the final evaluation (the reference's 1000)")
      ->check(cli::range(int64_t{1}, int64_t{10000}));
  d->add_option("--curve-scenes", o.curve_scenes,
                "the first N of them evaluated every --eval-every steps")
      ->check(cli::range(int64_t{1}, int64_t{10000}));
  d->add_option("--dump", o.dump, "write N training scenes with their boxes as PNG and exit")
      ->check(cli::range(int64_t{0}, kMaxScenes));
  const cli::RunGroups g = cli::add_run_options(
      app, o.run,
      {.seed = "seed of the weights, the training scenes and dropout",
       .steps = "optimizer steps (0 = plan --minutes)",
       .steps_may_be_zero = true,
       .minutes_note = "default 10 when --steps is 0"});
  CLI::App* t = g.optimisation;
  t->add_option("--batch", o.batch, "scenes per batch")->check(cli::range(int64_t{1}, kMaxScenes));
  t->add_option("--lr", o.lr, "peak learning rate of the transformer and heads")
      ->check(cli::positive);
  t->add_option("--backbone-lr", o.backbone_lr, "learning rate of the CNN backbone")
      ->check(cli::positive);
  t->add_option("--warmup", o.warmup, "linear warm-up steps before the cosine decay (0 = none)")
      ->check(cli::non_negative_integer);
  t->add_option("--min-lr", o.min_lr, "learning rate at the end of the cosine decay")
      ->check(cli::finite_non_negative);
  t->add_option("--weight-decay", o.weight_decay, "AdamW weight decay (every parameter)")
      ->check(cli::finite_non_negative);
  t->add_option("--grad-clip", o.grad_clip, "clip the gradient norm (0 = off)")
      ->check(cli::finite_non_negative);
  t->add_flag("--overfit-one", o.overfit_one,
              "train on one fixed 4-item training scene (batch 1, constant lr, 1e-4 unless --lr "
              "is given, no warm-up): the loss must go to ~0, DETR users' first sanity check");
  CLI::App* p = g.progress;
  p->add_option("--eval-every", o.eval_every, "steps between AP evaluations (0 = only at the end)")
      ->check(cli::non_negative_integer);
  p->add_option("--draw-scenes", o.draw_scenes,
                "held-out scenes drawn with their predicted boxes at the end")
      ->check(cli::range(int64_t{0}, int64_t{10000}));
  p->add_option("--draw-threshold", o.draw_threshold, "smallest score of a drawn prediction")
      ->check(cli::range(0.0, 1.0));
}

// ============================================================================ data

// The scenes the model is trained on: a stream of random training scenes, or (--overfit-one)
// one fixed scene, default_rng([2, seed]) with 4 items drawn, in every batch.
struct TrainingScenes {
  std::optional<data::FashionMnistScenes> stream;
  std::optional<data::Scene> one;

  TrainingScenes(const data::FashionMNIST& train, const Options& o) {
    if (!o.overfit_one) {
      stream.emplace(train, std::numeric_limits<int64_t>::max(), o.run.seed);
      return;
    }
    std::vector<uint32_t> entropy{2};
    for (uint32_t w : data::numpy_int_words(o.run.seed)) entropy.push_back(w);
    data::NumpyPCG64 rng(entropy);
    data::SceneConfig four;
    four.min_items = four.max_items = 4;  // n forced to 4: integers(4, 5) draws nothing
    one = data::draw_scene(train, rng, four);
  }
  // Scenes first .. first + count - 1.
  data::SceneBatch batch(int64_t first, int64_t count) const {
    if (one) return {stack({one->image}, 0), {{one->labels, one->boxes}}};
    std::vector<int64_t> indices;
    for (int64_t j = 0; j < count; ++j) indices.push_back(first + j);
    return stream->batch(indices);
  }
};

// ============================================================================ loss

struct StepLoss {
  Tensor loss;        // summed over the decoder layers: what is minimised
  float ce, l1, giou;  // the last layer's terms, unweighted
};

// DETR's set loss on every decoder layer (sec. 3.2's auxiliary losses), summed; the box terms
// normalised by SetCriterion's num_boxes: the global batch's boxes / processes, at least 1.
StepLoss set_loss(models::DETR& model, const data::SceneBatch& batch, Device device) {
  std::vector<models::DETRTarget> targets;
  int64_t boxes = 0;
  for (const data::SceneTarget& t : batch.targets) {
    targets.push_back({t.labels.to(device), t.boxes.to(device)});
    boxes += t.labels.size(0);
  }
  const float num_boxes = std::max(1.0f, static_cast<float>(distributed::all_reduce_count(boxes)) /
                                             static_cast<float>(distributed::world_size()));
  const models::DETRLossConfig config{model.config().num_classes};
  const models::DETROutput out = model.forward(batch.images.to(device));  // (B, Q, C+1), (B, Q, 4)
  const models::DETRLossTerms last =
      models::detr_loss_terms(out.logits, out.boxes, targets, config, num_boxes);
  Tensor loss = last.loss;
  for (size_t i = 0; i < out.aux_logits.size(); ++i)
    loss =
        loss + models::detr_loss(out.aux_logits[i], out.aux_boxes[i], targets, config, num_boxes);
  return {loss, last.loss_ce.item(), last.loss_bbox.item(), last.loss_giou.item()};
}

// ============================================================================ evaluation

metrics::APResult evaluate(models::DETR& model, const std::vector<data::Scene>& scenes,
                           int64_t count, Device device) {
  return average_precision(detect(model, scenes, count, device), scenes);
}

std::string format_ap(const metrics::APResult& r) {
  return fmt::format("AP {:.4f} | AP50 {:.4f} | AP75 {:.4f}", r.ap, r.ap50, r.ap75);
}

// Loss and its terms, and AP / AP50 / AP75 against the step, from the CSV log.
void plot_curves(const std::string& csv, const std::string& png, const std::string& title) {
  const data::CsvTable log = data::read_csv(csv);
  auto curve = [&](const std::string& column, double scale = 1) {
    return log.series("step", column, column, scale);
  };
  data::save_plots(
      png, {{{curve("loss")}, {title + ": training loss (all layers)", "step", "loss"}},
            {{curve("loss_ce"), curve("loss_bbox"), curve("loss_giou")},
             {"last layer's terms (unweighted)", "step", "loss"}},
            {{curve("ap50", 100), curve("ap", 100), curve("ap75", 100)},
             {"held-out scenes: COCO AP", "step", "%"}}});
}

// ============================================================================ checkpoints

// The checkpoint must be of this preset, trained the same way (--overfit-one or not).
void check_checkpoint(const nn::Metadata& meta, const std::string& path, const Options& o) {
  const auto preset = meta.find("model_preset");
  LOOM_CHECK(preset != meta.end() && preset->second == o.model,
             "train_detr: checkpoint '{}' was written for --model {}, not --model {}", path,
             preset == meta.end() ? "(unknown)" : preset->second, o.model);
  const auto overfit = meta.find("overfit_one");
  LOOM_CHECK(overfit != meta.end() && (overfit->second == "1") == o.overfit_one,
             "train_detr: checkpoint '{}' was written {} --overfit-one; resume it the same way",
             path, o.overfit_one ? "without" : "with");
}

}  // namespace

// ============================================================================ main

int main(int argc, char** argv) try {
  cli::use_short_omp_spin(argv);  // idle OpenMP threads spin briefly, then sleep
  // ---- options
  Options o;
  CLI::App app{"train_detr: trains DETR to detect the items of Fashion-MNIST scenes"};
  add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  if (o.run.steps == 0 && o.run.minutes == 0) o.run.minutes = 10;
  if (o.overfit_one) {  // the reference: one scene, a constant lr (1e-4 unless --lr is given)
    o.batch = 1;
    if (app.count("--lr") == 0) o.lr = 1e-4f;
    o.backbone_lr = o.min_lr = o.lr;
    o.warmup = 0;
  }
  cli::init_distributed();  // a job of one unless started by mpirun/srun; rank 0 prints
  cli::print_config(app);
  nn::TrainingRun run("train_detr", o.run);  // threads; --resume finds its checkpoint
  const Device device = run.device();
  const std::string& out = o.run.out;
  LOOM_CHECK(o.curve_scenes <= o.eval_scenes,
             "train_detr: --curve-scenes {} is more than --eval-scenes {}", o.curve_scenes,
             o.eval_scenes);
  LOOM_CHECK(o.run.steps > 0 || o.run.resume || o.run.stop_at == 0 || o.run.stop_at > 21,
             "train_detr: --stop-at {} comes before --minutes has planned the run (at step 21); "
             "stop later or give --steps", o.run.stop_at);
  cli::check_at_most(o.min_lr, "--min-lr", o.lr, "--lr");
  cli::check_at_most(o.min_lr, "--min-lr", o.backbone_lr, "--backbone-lr");
  cli::create_directory(out, "--out");

  // ---- data: training scenes drawn on demand, the held-out scenes once
  const data::FashionMNIST train_set(o.data, "train", /*normalize=*/false);
  const TrainingScenes train_scenes(train_set, o);
  if (o.dump > 0) {
    for (int64_t i = 0; i < o.dump && run.main_process(); ++i) {
      const data::Scene s = o.overfit_one ? *train_scenes.one : train_scenes.stream->scene(i);
      data::write_scene_png(fmt::format("{}/scene_{}.png", out, i), s);
    }
    fmt::print("wrote {} training scenes with their boxes to {}/scene_*.png\n", o.dump, out);
    return 0;
  }
  const data::FashionMNIST test_set(o.data, "test", /*normalize=*/false);
  // Checked before the first step, not at the first evaluation: items of another size would be
  // scaled otherwise than the ones the model learns from.
  test_set.check_image_size(train_set.rows(), train_set.cols(), "train_detr",
                            "of the training images");
  std::vector<data::Scene> eval_scenes;
  if (o.overfit_one) {
    eval_scenes = {*train_scenes.one};  // evaluated on the scene it learns
    o.eval_scenes = o.curve_scenes = 1;
  } else {
    const auto held_out = data::FashionMnistScenes::pytorch_eval(test_set, o.eval_scenes);
    for (int64_t i = 0; i < o.eval_scenes; ++i) eval_scenes.push_back(held_out.scene(i));
  }

  // ---- model and optimizer
  manual_seed(o.run.seed);
  models::DETRConfig config = models::DETRConfig::preset(o.model);
  config.dropout = o.dropout;
  const auto model_ptr = std::make_shared<models::DETR>(config);
  models::DETR& model = *model_ptr;
  model.to(device);
  nn::DistributedDataParallel ddp(model_ptr);  // rank 0's weights; gradients averaged
  optim::ParamGroup rest{{}, o.lr, o.weight_decay}, backbone{{}, o.backbone_lr, o.weight_decay};
  for (const auto& [name, p] : model.named_parameters())
    (name.rfind("backbone.", 0) == 0 ? backbone : rest).params.push_back(p);
  optim::AdamW opt({rest, backbone}, 0.9f, 0.999f, 1e-8f);
  fmt::print("train_detr: {} | {} parameters | {} threads\n", config.to_string(),
             model.num_parameters(), get_num_threads());
  if (o.overfit_one) {
    fmt::print("  data: one training scene, labels {} and boxes (x0 y0 x1 y1 px)",
               fmt::join(train_scenes.one->labels.to_vector_i64(), " "));
    for (const auto& b : train_scenes.one->pixel_boxes)
      fmt::print(" [{} {} {} {}]", b[0], b[1], b[2], b[3]);
    fmt::print("\n");
  } else {
    fmt::print("  data: training scenes from {} train images, batch {}; {} held-out t10k scenes\n",
               train_set.size(), o.batch, eval_scenes.size());
  }

  // ---- checkpoints (model, AdamW, config, and the scenes done) and resume
  const int64_t global_batch = o.batch * distributed::world_size();  // scenes a step
  int64_t index = 0;  // the next batch of scenes
  if (o.run.steps == 0) run.set_total(nn::TrainingRun::kUnplanned);  // planned at step 21
  run.keep_flags({{"--data", o.data}});  // a resume trains on the same scenes
  run.set_checkpoint({{"model", &model}}, &opt, [&](int64_t) {
    nn::Metadata meta = config.to_metadata();
    meta.insert({{"model_preset", o.model},
                 {"seed", std::to_string(o.run.seed)},
                 {"overfit_one", o.overfit_one ? "1" : "0"}});
    return nn::CheckpointContent{meta, 0, index, global_batch};
  });
  if (o.run.resume) {
    const nn::TrainerState state = run.resume(
        {{"model", &model}}, &opt,
        [&](const nn::Metadata& meta, const nn::TrainerState&) {
          check_checkpoint(meta, run.checkpoint_path(), o);
        },
        /*print_position=*/false);
    index = state.batch_index_for(global_batch, std::numeric_limits<int64_t>::max(),
                                  run.source());  // scenes done / global_batch
  }
  data::CsvLog csv = run.open_log(
      {"step", "loss", "loss_ce", "loss_bbox", "loss_giou", "lr", "ap", "ap50", "ap75"});

  // ---- training loop
  model.train();
  run.begin(global_batch, "img/s", /*plan_minutes=*/o.run.steps == 0);
  double window_ce = 0, window_l1 = 0, window_giou = 0;
  int64_t window = 0;
  const double nan = std::nan("");
  for (int64_t step = run.start(); step < run.total(); ++step) {
    // linear warm-up (cut to the run's length), then cosine from lr to min_lr at the planned end
    const int64_t warmup = std::min(o.warmup, run.total());
    const float lr = optim::warmup_cosine_lr(step + 1, warmup, run.total(), o.lr, o.min_lr);
    opt.set_lr(0, lr);
    opt.set_lr(1, optim::warmup_cosine_lr(step + 1, warmup, run.total(), o.backbone_lr, o.min_lr));
    const StepLoss l = set_loss(  // this rank's scenes of the global batch
        model, train_scenes.batch(index++ * global_batch + distributed::rank() * o.batch, o.batch),
        device);
    opt.zero_grad();
    l.loss.backward();
    if (o.grad_clip > 0) optim::clip_grad_norm(model.parameters(), o.grad_clip);
    opt.step();

    const int64_t done = step + 1;
    const float loss_value = run.step_done(done, l.loss.item());  // the global batch's
    const std::vector<double> terms =  // the last layer's terms, means over the ranks
        distributed::all_reduce_values({l.ce, l.l1, l.giou}, distributed::ReduceOp::Mean);
    window_ce += terms[0], window_l1 += terms[1], window_giou += terms[2], ++window;
    if (run.log_due(done)) {
      const double n = static_cast<double>(window);
      run.log(done, lr, fmt::format(" | ce {:.4f} L1 {:.4f} GIoU {:.4f}", window_ce / n,
                                    window_l1 / n, window_giou / n));
      window_ce = window_l1 = window_giou = 0, window = 0;
    }
    const bool stop = run.checkpoint(done);  // before the evaluation; --stop-at
    metrics::APResult ap{nan, nan, nan};
    if (o.eval_every > 0 && done % o.eval_every == 0 && done != run.total() &&
        run.main_process()) {
      const double seconds =
          run.untimed([&] { ap = evaluate(model, eval_scenes, o.curve_scenes, device); });
      fmt::print("eval step {} | {} held-out scenes | {} ({:.1f} s)\n", done, o.curve_scenes,
                 format_ap(ap), seconds);
    }
    csv.row({static_cast<double>(done), loss_value, terms[0], terms[1], terms[2], lr, ap.ap,
             ap.ap50, ap.ap75});
    if (stop) return 0;
  }
  const double train_s = run.training_seconds();  // evaluations left out

  // ---- final report (rank 0's; the last step is saved): AP on every held-out scene, curves,
  // pictures
  if (!run.main_process()) return 0;
  const int64_t total = run.total();
  const std::vector<ImageDetections> detections =
      detect(model, eval_scenes, o.eval_scenes, device);
  const metrics::APResult final_ap = average_precision(detections, eval_scenes);
  csv.row({static_cast<double>(total), nan, nan, nan, nan, nan, final_ap.ap, final_ap.ap50,
           final_ap.ap75});
  fmt::print("final (step {}, {} training) on {} {}: {}\n", total,
             optim::format_duration(train_s), o.eval_scenes,
             o.overfit_one ? "training scene" : "held-out scenes", format_ap(final_ap));
  plot_curves(run.log_path(), out + "/curves.png", o.model);
  const int64_t drawn = std::min<int64_t>(o.draw_scenes, static_cast<int64_t>(eval_scenes.size()));
  for (int64_t i = 0; i < drawn; ++i)
    data::write_scene_png(fmt::format("{}/detections_{}.png", out, i),
                          eval_scenes[static_cast<size_t>(i)],
                          detections[static_cast<size_t>(i)].for_drawing(o.draw_threshold));
  fmt::print("saved {}, {}, {}/curves.png and {} detections_*.png\n", run.checkpoint_path(),
             run.log_path(), out, drawn);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
