// Trains a vision transformer, ViT (Dosovitskiy et al. 2020) or Swin (Liu et al. 2021), to
// classify Fashion-MNIST, top to bottom like nanoGPT's train.py: options, data, model, optimizer,
// the training loop (progress, test accuracy every epoch, checkpoints), and a final report with
// the confusion matrix, curves and (ViT) the attention maps of the class token.
//
//   train_vision                            ViT-tiny (patch 7, d 64, 4 layers), 40 epochs
//   train_vision --minutes 10               as many epochs as 10 minutes of training allow
//   train_vision --model swin-fmnist        Swin (patch 2, d 64, stages 2+4, window 7)
//   train_vision --epochs 1 --out run1      a shorter run; `--resume` continues it exactly
//   train_vision --help                     every option
//
// Files written to --out: ckpt.safetensors (model, AdamW, config, data position; atomic), log.csv,
// curves.png, confusion.png and, for ViT, attention_<i>.png (the class token's attention).
//
// Recipe: AdamW with linear warm-up and cosine decay and horizontal flips; for ViT also label
// smoothing 0.1 (Szegedy et al. 2016) and random crops after padding by one pixel, which pay off
// over 40+ epochs (the plain recipe: --batch 128 --label-smoothing 0 --crop-padding 0). Weight
// decay on matrices and convolutions, not on biases, norms, positions, the class token or Swin's
// relative position bias table (timm's and the official Swin's rule). bench/reference/train.py
// trains the same recipe in PyTorch from the same flags.
//
// `mpirun -np N train_vision` (as train_gpt): each process trains a DDP replica on its --batch
// rows of each global batch of --batch x N images (augmented whole, then split), which trains what
// one process at --batch N x B does (to float rounding, with --dropout 0 and --drop-path 0). Rank 0
// alone prints, evaluates and writes; --resume takes any N.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "cli.h"
#include "loom.h"
#include "vit_attention.h"

using namespace loom;

namespace {

// ============================================================================ options

// Bounds of the flags that would otherwise overflow or do nothing useful: a crop padded by 28
// pixels or more can cut a 28x28 image to nothing but padding, a batch cannot hold more than the
// 60,000 training images, and a million epochs are more steps than any run takes.
constexpr int64_t kMaxCropPadding = 27;
constexpr int64_t kTrainingImages = 60000;
constexpr int64_t kMaxEpochs = 1000000;

// Values < 0 (and --lr 0, --out "", --epochs 0) stand for the family's default, resolved by
// apply_family_defaults.
struct Options {
  // model: a ViTConfig or SwinConfig preset
  std::string model = "vit-tiny-fmnist";
  float dropout = 0.0f;
  float drop_path = -1.0f;  // Swin's
  // data (test_images 0 = all 10,000)
  std::string data = data::kFashionMnistDir;
  int64_t crop_padding = -1;
  int64_t test_images = 0;
  bool flip = true;
  // optimisation, evaluation (0: every epoch), checkpoints, machine
  int64_t epochs = 0;
  float label_smoothing = -1;
  nn::TrainOptions train{.batch = 64,
                         .lr = 0.0f,
                         .min_lr = 1e-5f,
                         .weight_decay = 0.05f,
                         .grad_clip = -1.0f,
                         .log_every = 50,
                         .eval_every = 0,
                         .checkpoint_every = 500};
  int64_t attention_images = 4;  // ViT's pictures at the end
};

bool is_vit(const std::string& model) { return model.rfind("vit", 0) == 0; }

// The defaults that differ between the families: Swin's are the official Swin's recipe (lr 1e-3,
// clipping at 5), ViT's are lr 2e-3 and no clipping with the recipe above (90.90% after 42.7
// epochs: docs/guide/models.md).
void apply_family_defaults(Options& o) {
  const bool vit = is_vit(o.model);
  if (o.train.lr == 0) o.train.lr = vit ? 2e-3f : 1e-3f;
  if (o.train.grad_clip < 0) o.train.grad_clip = vit ? 0.0f : 5.0f;
  if (o.label_smoothing < 0) o.label_smoothing = vit ? 0.1f : 0.0f;
  if (o.crop_padding < 0) o.crop_padding = vit ? 1 : 0;
  if (o.train.out.empty()) o.train.out = vit ? "out-vit" : "out-swin";
  if (o.epochs == 0 && o.train.steps == 0 && o.train.minutes == 0) o.epochs = vit ? 40 : 10;
}

void add_options(CLI::App& app, Options& o) {
  app.description("train_vision: trains ViT or Swin on Fashion-MNIST");
  std::vector<std::string> presets = models::ViTConfig::preset_names();
  for (const std::string& name : models::SwinConfig::preset_names()) presets.push_back(name);
  CLI::App* m = app.add_option_group("Model");
  m->add_option("--model", o.model, "ViT or Swin preset")->check(CLI::IsMember(presets));
  m->add_option("--dropout", o.dropout, "dropout probability")->check(cli::range(0.0, 0.99));
  m->add_option("--drop-path", o.drop_path, "Swin's stochastic depth rate (-1 = the preset's)")
      ->check(cli::range(-1.0, 0.99));
  CLI::App* d = app.add_option_group("Data");
  d->add_option("--data", o.data, "directory of the Fashion-MNIST IDX files (.gz)");
  d->add_option("--crop-padding", o.crop_padding, "pad by N pixels, crop (default 1 ViT, 0 Swin)")
      ->check(cli::range(int64_t{0}, kMaxCropPadding));
  d->add_option("--flip", o.flip, "random horizontal flips (1/0)");
  d->add_option("--test-images", o.test_images, "evaluate on the first N test images (0 = all)")
      ->check(cli::non_negative_integer);
  const cli::TrainGroups g = cli::add_train_options(
      app, o.train,
      {.notes = {{"steps", "overrides --epochs"},
                 {"minutes", "overrides --epochs/--steps"},
                 {"batch", "images; the reference's ViT: 128"},
                 {"lr", "default 2e-3 ViT, 1e-3 Swin"},
                 {"grad_clip", "default off for ViT, 5 for Swin"},
                 {"seed", "and of the augmentation"}},
       .help = {{"eval_every", "steps between test evaluations (0 = at the end of every epoch)"}},
       .checks = {{"batch", cli::range(int64_t{1}, kTrainingImages)}},
       .steps_may_be_zero = true});
  CLI::App* t = g.optimisation;
  t->add_option("--epochs", o.epochs, "epochs of 60,000 images (default 40 ViT, 10 Swin)")
      ->check(cli::range(int64_t{0}, kMaxEpochs));
  t->add_option("--label-smoothing", o.label_smoothing, "label smoothing (default 0.1 ViT, 0 Swin)")
      ->check(cli::range(0.0, 0.99));
  g.progress
      ->add_option("--attention-images", o.attention_images,
                   "ViT: test images whose class-token attention maps are drawn at the end")
      ->check(cli::non_negative_integer);
}

// ============================================================================ training

// The predicted class of the first `count` test images (0 = all), in chunks.
template <class Model>
std::vector<int64_t> predict(Model& model, const data::FashionMNIST& test, int64_t count,
                             Device device) {
  nn::EvalGuard eval(model);
  std::vector<int64_t> predictions;
  const int64_t chunk = 500;
  const int64_t end = count > 0 ? std::min(count, test.size()) : test.size();
  for (int64_t s = 0; s < end; s += chunk) {
    const int64_t n = std::min(chunk, end - s);
    const Tensor logits = model.forward(test.images(s, n).to(device));  // (n, 10)
    for (int64_t p : argmax(logits, 1).to_vector_i64()) predictions.push_back(p);
  }
  return predictions;
}

// The run of a Model, models::ViT or models::Swin (images [B, C, H, W] -> logits [B, classes]),
// of `config`, the preset with the flags applied: data, model, optimizer, loop and report.
template <class Model, class Config>
int train(const Options& o, nn::TrainingRun& run, const Config& config) {
  constexpr bool vit = std::is_same_v<Model, models::ViT>;
  const Device device = run.device();

  // ---- data: 60,000 training and 10,000 test images, normalised
  const auto train_set = std::make_shared<data::FashionMNIST>(o.data, "train");
  const data::FashionMNIST test_set(o.data, "test");
  const std::vector<int64_t>& labels = test_set.label_vector();
  // Both splits fit the model, checked before the first step rather than at the first
  // evaluation (a t10k file of another size would fail there, after the training).
  const int64_t side = config.image_size;
  train_set->check_image_size(side, side, "train_vision", "of --model " + o.model);
  test_set.check_image_size(side, side, "train_vision", "of --model " + o.model);
  const int64_t global_batch = run.global_batch(train_set->size(), "training images");
  data::BatchStream batches(data::DataLoader(train_set, global_batch, /*shuffle=*/true,
                                             o.train.seed, /*drop_last=*/true));
  const int64_t steps_per_epoch = train_set->size() / global_batch;
  const auto per_epoch = static_cast<double>(steps_per_epoch);
  auto epochs = [&](int64_t steps) { return static_cast<double>(steps) / per_epoch; };
  // A padded pixel is black: the normalised value of 0.
  const data::AugmentOptions augment{o.crop_padding, o.flip, train_set->black_value()};

  // ---- model and optimizer
  manual_seed(o.train.seed);
  const auto model = run.make_model<Model>(config);  // rank 0's weights, gradients averaged
  optim::AdamW opt(nn::weight_decay_groups(*model, o.train.lr, o.train.weight_decay), 0.9f, 0.999f,
                   1e-8f);
  fmt::print("train_vision: {} | {} parameters | {} threads\n", config.to_string(),
             model->num_parameters(), get_num_threads());
  fmt::print("  data: {} training images ({} batches of {} an epoch), {} test images\n",
             train_set->size(), steps_per_epoch, global_batch, test_set.size());

  // ---- checkpoints (model, AdamW, config and where the run is) and resume
  const bool by_epochs = o.train.minutes == 0 && o.train.steps == 0;
  run.set_total(by_epochs ? o.epochs * steps_per_epoch : o.train.steps);
  if (o.train.minutes > 0) nn::await_minutes_plan(run);  // at step 21; no --stop-at before
  run.set_eval_every(o.train.eval_every > 0 ? o.train.eval_every : steps_per_epoch);
  // A resume keeps the data, the model (but its dropout and drop-path) and the plan: --epochs
  // is compared when it sets the length.
  run.keep_flags({{"--data", o.data}, {"--epochs", by_epochs ? std::to_string(o.epochs) : ""}});
  nn::Metadata meta = config.to_metadata();
  meta["family"] = vit ? "vit" : "swin";
  run.keep_config(meta, {"dropout", "drop_path"});
  run.set_checkpoint({{"model", model.get()}}, &opt,
                     {{"model_preset", o.model}, {"seed", std::to_string(o.train.seed)}});
  run.follow(batches, global_batch, train_set->size());
  if (o.train.resume) run.resume({{"model", model.get()}}, &opt);
  data::CsvLog csv = run.open_log({"step", "epoch", "loss", "lr", "test_accuracy"});

  // ---- training loop
  model->train();
  run.plan_note = [&](int64_t total) { return fmt::format(", {:.1f} epochs", epochs(total)); };
  run.begin(global_batch, "img/s");
  for (int64_t step = run.start(); step < run.total(); ++step) {
    const float lr = run.warmup_cosine_lr(step);
    opt.set_lr(lr);
    const data::Batch batch = batches.next();  // the global batch, augmented; this rank's rows:
    const Tensor images =
        data::augment_images(batch[0], augment, o.train.seed, static_cast<uint64_t>(step));
    const Tensor x = distributed::rank_chunk(images).to(device);    // (B, 1, 28, 28)
    const Tensor y = distributed::rank_chunk(batch[1]).to(device);  // (B,)
    const Tensor logits = model->forward(x);                        // (B, 10)
    const Tensor loss = cross_entropy(logits, y, -100, o.label_smoothing);
    run.backward_and_step(loss, opt, model->parameters());

    const int64_t done = step + 1;
    const float loss_value = run.step_done(done, loss.item());  // the global batch's
    run.log(done, lr, fmt::format(" | epoch {:.2f}", epochs(done)));
    const bool stop = run.checkpoint(done);  // before the evaluation; --stop-at
    double test_accuracy = std::nan("");
    if (run.eval_due(done)) {
      const double seconds = run.untimed([&] {
        test_accuracy = data::accuracy(predict(*model, test_set, o.test_images, device), labels);
      });
      fmt::print("eval step {} (epoch {:.2f}) | test accuracy {:.2f}% ({:.1f} s)\n", done,
                 epochs(done), 100 * test_accuracy, seconds);
    }
    csv.row({static_cast<double>(done), static_cast<double>(batches.epoch()), loss_value, lr,
             test_accuracy});
    if (stop) return 0;
  }
  const double train_s = run.training_seconds();  // evaluations left out

  // ---- final report (rank 0's; the last step is saved): test accuracy, confusion, pictures
  if (!run.main_process()) return 0;
  const int64_t total = run.total();
  const std::vector<int64_t> predictions = predict(*model, test_set, o.test_images, device);
  const double final_accuracy = data::accuracy(predictions, labels);
  csv.row({static_cast<double>(total), static_cast<double>(batches.epoch()), std::nan(""),
           std::nan(""), final_accuracy});
  fmt::print("final (step {}, {:.2f} epochs, {} training): test accuracy {:.2f}%\n", total,
             epochs(total), optim::format_duration(train_s), 100 * final_accuracy);
  data::report_confusion(predictions, labels, data::fashion_mnist_classes(),
                         o.train.out + "/confusion.png");
  const std::string curves = run.save_curves(
      "curves.png",
      {{o.model + ": training loss", "loss", {{"loss", "train loss"}}},
       {o.model + ": test accuracy", "%", {{"test_accuracy", "test accuracy", 100}}}});
  const bool maps = vit && o.attention_images > 0;
  if constexpr (vit)
    if (maps)
      vision_example::draw_attention_maps(*model, test_set, o.attention_images, device,
                                          o.train.out);
  fmt::print("saved {}, {}, {}, {}/confusion.png{}\n", run.checkpoint_path(), run.log_path(),
             curves, o.train.out, maps ? " and attention_*.png" : "");
  return 0;
}

// ============================================================================ main

// The run, once the flags are parsed (main, below): the family's defaults, then train() of the
// model --model names.
int train_model(CLI::App& app, Options& o) {
  apply_family_defaults(o);
  cli::show_resolved(app, {{"--lr", o.train.lr},
                           {"--epochs", o.epochs},
                           {"--grad-clip", o.train.grad_clip},
                           {"--label-smoothing", o.label_smoothing},
                           {"--crop-padding", o.crop_padding}});
  nn::TrainingRun run = cli::start_training(app, "train_vision", o.train);
  run.check_recorded("model_preset", o.model, "--model");
  cli::create_directory(o.train.out, "--out");

  // ---- model: the preset of --model with the flags applied
  if (is_vit(o.model)) {
    models::ViTConfig config = models::ViTConfig::preset(o.model);
    config.dropout = o.dropout;
    return train<models::ViT>(o, run, config);
  }
  models::SwinConfig config = models::SwinConfig::preset(o.model);
  config.dropout = o.dropout;
  if (o.drop_path >= 0) config.drop_path = o.drop_path;
  return train<models::Swin>(o, run, config);
}

}  // namespace

int main(int argc, char** argv) { return cli::trainer_main(argc, argv, add_options, train_model); }
