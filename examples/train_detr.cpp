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
// as fast). Batch 32; AdamW (betas .9/.999, weight decay 1e-4 on every parameter); gradient norm
// clipped to 0.1; cosine decay to 1e-6 at the last step; DETR's set loss (Hungarian matching,
// 1 CE + 5 L1 + 2 GIoU) on every decoder layer, summed (auxiliary losses); dropout 0.1 and
// BatchNorm batch statistics in training. Evaluation in eval mode (no dropout, BatchNorm running
// statistics) with DETR's PostProcess (examples/detr_postprocess.h), all queries as detections,
// COCO AP on the fixed 1000 held-out t10k scenes (default_rng([0, 0]), whatever --seed); the
// periodic evaluations use the first --curve-scenes of them (200, as the reference's curve).
// One difference, in the training scenes (examples/detr_scenes.h): each from its own stream.
//
// `mpirun -np N train_detr` (as train_gpt): rank r trains a DDP replica on scenes [rB, (r+1)B)
// of each global batch of N x B, box terms over SetCriterion's num_boxes (the global batch's / N).
// Not exactly one process at N x B: BatchNorm uses each rank's batch statistics (as PyTorch DDP
// without SyncBatchNorm) and CE is each rank's weighted mean (as the reference). Running stats
// are broadcast from rank 0 at the start only (PyTorch's broadcast_buffers: every forward); the
// model rank 0 evaluates and saves has rank 0's either way. Rank 0 alone prints and writes;
// the checkpoint counts scenes, so --resume takes any N.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"
#include "detr_postprocess.h"
#include "detr_scenes.h"
#include "loom.h"
#include "train/minutes_plan.h"

using namespace loom;

namespace {

// ============================================================================ options

struct Options {
  std::string model = "detr-fmnist";  // a DETRConfig preset with a one-channel small backbone
  float dropout = 0.1f;
  std::string data = data::kFashionMnistDir;
  int64_t eval_scenes = 1000;  // held-out t10k scenes: of the final evaluation
  int64_t curve_scenes = 200;  // and the first of them, of the periodic ones
  // optimisation (DETR's main.py: lr 1e-4, no warm-up), evaluation, checkpoints, machine
  nn::TrainOptions train{
      .lr = 5e-4f, .min_lr = 1e-6f, .weight_decay = 1e-4f, .grad_clip = 0.1f, .out = "out-detr"};
  float backbone_lr = 5e-4f;
  bool overfit_one = false;
  int64_t dump = 0;
  int64_t draw_scenes = 6;
  float draw_threshold = 0.5f;
};

void add_options(CLI::App& app, Options& o) {
  app.description("train_detr: trains DETR to detect the items of Fashion-MNIST scenes");
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
      ->check(cli::range(int64_t{0}, detr_example::kMaxScenes));
  const cli::TrainGroups g =
      cli::add_train_options(app, o.train,
                             {.notes = {{"steps", "0 = plan --minutes"},
                                        {"minutes", "default 10 when --steps is 0"},
                                        {"batch", "scenes"},
                                        {"lr", "of the transformer and heads"},
                                        {"weight_decay", "every parameter"},
                                        {"seed", "and of the training scenes"}},
                              .steps_may_be_zero = true});
  app.get_option("--batch")->check(cli::range(int64_t{1}, detr_example::kMaxScenes));
  g.optimisation->add_option("--backbone-lr", o.backbone_lr, "learning rate of the CNN backbone")
      ->check(cli::positive);
  g.optimisation->add_flag(
      "--overfit-one", o.overfit_one,
      "train on one fixed 4-item training scene (batch 1, constant lr, 1e-4 unless --lr is given, "
      "no warm-up): the loss must go to ~0, DETR users' first sanity check");
  CLI::App* p = g.progress;
  p->add_option("--draw-scenes", o.draw_scenes,
                "held-out scenes drawn with their predicted boxes at the end")
      ->check(cli::range(int64_t{0}, int64_t{10000}));
  p->add_option("--draw-threshold", o.draw_threshold, "smallest score of a drawn prediction")
      ->check(cli::range(0.0, 1.0));
}

// ============================================================================ loss

// DETR's set loss on every decoder layer (sec. 3.2's auxiliary losses), summed: what is
// minimised; the box terms normalised by SetCriterion's num_boxes: the global batch's boxes /
// processes, at least 1. With the last layer's terms, CE, L1 and GIoU, unweighted.
std::pair<Tensor, std::vector<double>> set_loss(models::DETR& model, const data::SceneBatch& batch,
                                                Device device) {
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
  return {loss, {last.loss_ce.item(), last.loss_bbox.item(), last.loss_giou.item()}};
}

// ============================================================================ main

// The run, once the flags are parsed (main, below).
int train(CLI::App& app, Options& o) {
  if (o.train.steps == 0 && o.train.minutes == 0) o.train.minutes = 10;
  if (o.overfit_one) {  // the reference: one scene, a constant lr (1e-4 unless --lr is given)
    o.train.batch = 1;
    if (app.count("--lr") == 0) o.train.lr = 1e-4f;
    o.backbone_lr = o.train.lr;
    o.train.min_lr = o.train.lr;
    o.train.warmup = 0;
    o.eval_scenes = 1;  // evaluated on the scene it learns
    o.curve_scenes = 1;
  }
  nn::TrainingRun run = cli::start_training(app, "train_detr", o.train);
  run.check_recorded("model_preset", o.model, "--model");  // on --resume: of this preset, and
  run.check_recorded("overfit_one", o.overfit_one ? "1" : "0", "--overfit-one");  // trained alike
  const Device device = run.device();
  const std::string& out = o.train.out;
  cli::check_at_most(o.curve_scenes, "--curve-scenes", o.eval_scenes, "--eval-scenes");
  if (o.train.steps == 0) nn::await_minutes_plan(run);  // at step 21; no --stop-at before
  cli::check_at_most(o.train.min_lr, "--min-lr", o.backbone_lr, "--backbone-lr");
  cli::create_directory(out, "--out");

  // ---- data: training scenes drawn on demand, the held-out scenes once
  const data::FashionMNIST train_set(o.data, "train", /*normalize=*/false);
  const detr_example::TrainingScenes train_scenes(train_set, o.train.seed, o.overfit_one);
  if (o.dump > 0) {
    for (int64_t i = 0; i < o.dump && run.main_process(); ++i)
      data::write_scene_png(fmt::format("{}/scene_{}.png", out, i), train_scenes.scene(i));
    fmt::print("wrote {} training scenes with their boxes to {}/scene_*.png\n", o.dump, out);
    return 0;
  }
  const data::FashionMNIST test_set(o.data, "test", /*normalize=*/false);
  const std::vector<data::Scene> eval_scenes =  // held out, or (--overfit-one) the one scene
      detr_example::evaluation_scenes(train_scenes, train_set, test_set, o.eval_scenes);

  // ---- model and optimizer: AdamW, weight decay on every parameter, the backbone's own lr
  manual_seed(o.train.seed);
  models::DETRConfig config = models::DETRConfig::preset(o.model);
  config.dropout = o.dropout;
  const auto model = run.make_model<models::DETR>(config);  // rank 0's weights, gradients averaged
  optim::ParamGroup rest{{}, o.train.lr, o.train.weight_decay};
  optim::ParamGroup backbone{{}, o.backbone_lr, o.train.weight_decay};
  for (const auto& [name, p] : model->named_parameters())
    (name.rfind("backbone.", 0) == 0 ? backbone : rest).params.push_back(p);
  optim::AdamW opt({rest, backbone}, 0.9f, 0.999f, 1e-8f);
  fmt::print("train_detr: {} | {} parameters | {} threads\n", config.to_string(),
             model->num_parameters(), get_num_threads());
  if (o.overfit_one)
    fmt::print("  data: one training scene, {}\n", detr_example::describe(*train_scenes.one));
  else
    fmt::print("  data: training scenes from {} train images, batch {}; {} held-out t10k scenes\n",
               train_set.size(), o.train.batch, eval_scenes.size());

  // ---- checkpoints (model, AdamW, config, and the scenes done) and resume
  const int64_t global_batch = o.train.batch * distributed::world_size();  // scenes a step
  int64_t index = 0;                     // the next batch of scenes
  run.keep_flags({{"--data", o.data}});  // a resume trains on the same scenes
  run.keep_config(config.to_metadata(), {"dropout"});
  run.set_checkpoint({{"model", model.get()}}, &opt, [&](int64_t) {
    const nn::Metadata meta = {{"model_preset", o.model},
                               {"seed", std::to_string(o.train.seed)},
                               {"overfit_one", o.overfit_one ? "1" : "0"}};
    return nn::CheckpointContent{meta, 0, index, global_batch};
  });
  if (o.train.resume) {
    const nn::TrainerState state =
        run.resume({{"model", model.get()}}, &opt, {}, /*print_position=*/false);
    index = state.batch_index_for(global_batch, std::numeric_limits<int64_t>::max(),
                                  run.source());  // scenes done / global_batch
  }
  data::CsvLog csv = run.open_log(
      {"step", "loss", "loss_ce", "loss_bbox", "loss_giou", "lr", "ap", "ap50", "ap75"});

  // ---- training loop
  model->train();
  run.begin(global_batch, "img/s", /*plan_minutes=*/o.train.steps == 0);
  std::vector<double> window(3, 0.0);  // the terms summed since the last progress line
  double window_steps = 0;
  const double nan = std::nan("");
  for (int64_t step = run.start(); step < run.total(); ++step) {
    // linear warm-up (cut to the run's length), then cosine from lr to min_lr at the planned end
    const float lr = run.warmup_cosine_lr(step);
    opt.set_lr(0, lr);
    opt.set_lr(1, run.warmup_cosine_lr(step, o.backbone_lr));
    const int64_t first = index++ * global_batch + distributed::rank() * o.train.batch;
    const auto [loss, last_terms] =  // this rank's scenes of the global batch
        set_loss(*model, train_scenes.batch(first, o.train.batch), device);
    run.backward_and_step(loss, opt, model->parameters());

    const int64_t done = step + 1;
    const float loss_value = run.step_done(done, loss.item());  // the global batch's
    const std::vector<double> terms =  // the last layer's terms, means over the ranks
        distributed::all_reduce_values(last_terms, distributed::ReduceOp::Mean);
    for (size_t i = 0; i < terms.size(); ++i) window[i] += terms[i];
    ++window_steps;
    if (run.log_due(done)) {
      run.log(done, lr,
              fmt::format(" | ce {:.4f} L1 {:.4f} GIoU {:.4f}", window[0] / window_steps,
                          window[1] / window_steps, window[2] / window_steps));
      window.assign(3, 0.0);
      window_steps = 0;
    }
    const bool stop = run.checkpoint(done);  // before the evaluation; --stop-at
    metrics::APResult ap{nan, nan, nan};
    if (run.eval_due(done)) {
      const double seconds = run.untimed(
          [&] { ap = detr_example::evaluate(*model, eval_scenes, o.curve_scenes, device); });
      fmt::print("eval step {} | {} held-out scenes | {} ({:.1f} s)\n", done, o.curve_scenes,
                 detr_example::format_ap(ap), seconds);
    }
    csv.row({static_cast<double>(done), loss_value, terms[0], terms[1], terms[2], lr, ap.ap,
             ap.ap50, ap.ap75});
    if (stop) return 0;
  }
  const double train_s = run.training_seconds();  // evaluations left out

  // ---- final report (rank 0's, the last step saved): AP on every held-out scene, curves, pictures
  if (!run.main_process()) return 0;
  const auto detections = detr_example::detect(*model, eval_scenes, o.eval_scenes, device);
  const metrics::APResult final_ap = detr_example::average_precision(detections, eval_scenes);
  csv.row({static_cast<double>(run.total()), nan, nan, nan, nan, nan, final_ap.ap, final_ap.ap50,
           final_ap.ap75});
  fmt::print("final (step {}, {} training) on {} {}: {}\n", run.total(),
             optim::format_duration(train_s), o.eval_scenes,
             o.overfit_one ? "training scene" : "held-out scenes",
             detr_example::format_ap(final_ap));
  // Loss and its terms, and AP / AP50 / AP75 against the step, from the CSV log.
  run.save_curves(
      "curves.png",
      {{o.model + ": training loss (all layers)", "loss", {{"loss", "loss"}}},
       {"last layer's terms (unweighted)",
        "loss",
        {{"loss_ce", "loss_ce"}, {"loss_bbox", "loss_bbox"}, {"loss_giou", "loss_giou"}}},
       {"held-out scenes: COCO AP",
        "%",
        {{"ap50", "ap50", 100}, {"ap", "ap", 100}, {"ap75", "ap75", 100}}}});
  const int64_t drawn = std::min<int64_t>(o.draw_scenes, static_cast<int64_t>(eval_scenes.size()));
  detr_example::write_detection_pngs(out, eval_scenes, detections, drawn, o.draw_threshold);
  fmt::print("saved {}, {}, {}/curves.png and {} detections_*.png\n", run.checkpoint_path(),
             run.log_path(), out, drawn);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cli::trainer_main(argc, argv, add_options, train); }
