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
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "loom.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

// ============================================================================ options

// Bounds of the flags that would otherwise overflow or do nothing useful: a crop padded by 28
// pixels or more can cut a 28x28 image to nothing but padding, a batch cannot hold more than the
// 60,000 training images, and a million epochs are more steps than any run takes.
constexpr int64_t kMaxCropPadding = 27, kTrainingImages = 60000, kMaxEpochs = 1000000;

struct Options {
  // model
  std::string model = "vit-tiny-fmnist";  // a ViTConfig or SwinConfig preset
  float dropout = 0.0f, drop_path = -1.0f;  // drop_path < 0: the preset's (Swin)
  // data (test_images 0 = all 10,000)
  std::string data = data::kFashionMnistDir;
  int64_t crop_padding = -1, test_images = 0;  // < 0 here and below: the family's default
  bool flip = true;
  // optimisation (--steps, --minutes: in `run`; 0 = the family's default)
  int64_t epochs = 0, batch = 0, warmup = 200;
  float lr = 0, min_lr = 1e-5f, weight_decay = 0.05f, label_smoothing = -1, grad_clip = -1;
  // evaluation and pictures (steps, checkpoints, --out, --resume, machine: nn::RunOptions)
  int64_t eval_every = 0, attention_images = 4;  // eval_every 0: every epoch
  nn::RunOptions run{.checkpoint_every = 500, .log_every = 50};  // --out: the family's
};

bool is_vit(const std::string& model) { return model.rfind("vit", 0) == 0; }

// The defaults that differ between the families: Swin's are the official Swin's recipe (lr 1e-3,
// clipping at 5), ViT's are lr 2e-3 and no clipping with the recipe above (90.90% after 42.7
// epochs: docs/guide/models.md).
void apply_family_defaults(Options& o) {
  const bool vit = is_vit(o.model);
  if (o.batch == 0) o.batch = 64;
  if (o.lr == 0) o.lr = vit ? 2e-3f : 1e-3f;
  if (o.grad_clip < 0) o.grad_clip = vit ? 0.0f : 5.0f;
  if (o.label_smoothing < 0) o.label_smoothing = vit ? 0.1f : 0.0f;
  if (o.crop_padding < 0) o.crop_padding = vit ? 1 : 0;
  if (o.run.out.empty()) o.run.out = vit ? "out-vit" : "out-swin";
  if (o.epochs == 0 && o.run.steps == 0 && o.run.minutes == 0) o.epochs = vit ? 40 : 10;
}

void add_options(CLI::App& app, Options& o) {
  cli::show_defaults(app);
  const auto non_negative = cli::non_negative_integer;
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
      ->check(non_negative);
  const cli::RunGroups g = cli::add_run_options(
      app, o.run,
      {.seed = "seed of the weights, batch order, augmentation, dropout",
       .steps = "optimizer steps in total (overrides --epochs)",
       .steps_may_be_zero = true,
       .minutes_note = "overrides --epochs/--steps",
       .minutes_group = "Reference plumbing"});
  CLI::App* t = g.optimisation;
  t->add_option("--epochs", o.epochs, "epochs of 60,000 images (default 40 ViT, 10 Swin)")
      ->check(cli::range(int64_t{0}, kMaxEpochs));
  t->add_option("--batch", o.batch, "images per batch (default 64; the reference's ViT: 128)")
      ->check(cli::range(int64_t{0}, kTrainingImages));
  t->add_option("--lr", o.lr, "peak learning rate (default 2e-3 ViT, 1e-3 Swin)")
      ->check(cli::finite_non_negative);
  t->add_option("--min-lr", o.min_lr, "learning rate at the end of the cosine decay")
      ->check(cli::finite_non_negative);
  t->add_option("--warmup", o.warmup, "linear warm-up steps")->check(non_negative);
  t->add_option("--weight-decay", o.weight_decay, "AdamW weight decay")
      ->check(cli::finite_non_negative);
  t->add_option("--label-smoothing", o.label_smoothing, "label smoothing (default 0.1 ViT, 0 Swin)")
      ->check(cli::range(0.0, 0.99));
  t->add_option("--grad-clip", o.grad_clip,
                "clip the gradient norm (0 = off; default off for ViT, 5 for Swin)")
      ->check(cli::finite_non_negative);
  g.progress->add_option("--eval-every", o.eval_every,
                         "steps between test evaluations (0 = at the end of every epoch)")
      ->check(non_negative);
  g.progress->add_option("--attention-images", o.attention_images,
                         "ViT: test images whose class-token attention maps are drawn at the end")
      ->check(non_negative);
}

// ============================================================================ model

// The model behind --model: a ViT or a Swin, both image [B, C, H, W] -> logits [B, classes].
struct Classifier {
  std::shared_ptr<models::ViT> vit;
  std::shared_ptr<models::Swin> swin;

  static Classifier create(const Options& o) {
    Classifier c;
    if (is_vit(o.model)) {
      models::ViTConfig config = models::ViTConfig::preset(o.model);
      config.dropout = o.dropout;
      c.vit = std::make_shared<models::ViT>(config);
    } else {
      models::SwinConfig config = models::SwinConfig::preset(o.model);
      config.dropout = o.dropout;
      if (o.drop_path >= 0) config.drop_path = o.drop_path;
      c.swin = std::make_shared<models::Swin>(config);
    }
    return c;
  }
  std::shared_ptr<nn::Module> shared() const {
    return vit ? std::static_pointer_cast<nn::Module>(vit) : swin;
  }
  nn::Module& module() { return *shared(); }
  Tensor forward(const Tensor& x) { return vit ? vit->forward(x) : swin->forward(x); }
  nn::Metadata metadata() const {
    nn::Metadata meta = vit ? vit->config().to_metadata() : swin->config().to_metadata();
    meta["family"] = vit ? "vit" : "swin";
    return meta;
  }
  std::string description() const {
    return vit ? vit->config().to_string() : swin->config().to_string();
  }
  int64_t image_size() const { return vit ? vit->config().image_size : swin->config().image_size; }
};

// Decayed: matrices and convolution kernels. Not decayed: biases, norms, position embeddings,
// the class token and Swin's relative position bias table (timm's no_weight_decay lists).
std::vector<optim::ParamGroup> param_groups(nn::Module& model, float lr, float weight_decay) {
  optim::ParamGroup decay{{}, lr, weight_decay}, no_decay{{}, lr, 0.0f};
  for (auto& [name, p] : model.named_parameters()) {
    const bool skip = p.dim() < 2 || name == "pos_embed" || name == "cls_token" ||
                      name.ends_with("relative_position_bias_table");
    (skip ? no_decay : decay).params.push_back(p);
  }
  return {decay, no_decay};
}

// ============================================================================ evaluation

// The predicted class of the first `count` test images (0 = all), in evaluation mode, in chunks.
std::vector<int64_t> predict(Classifier& model, const data::FashionMNIST& test, int64_t count,
                             Device device) {
  NoGradGuard no_grad;
  model.module().eval();
  std::vector<int64_t> predictions;
  const int64_t chunk = 500, end = count > 0 ? std::min(count, test.size()) : test.size();
  for (int64_t s = 0; s < end; s += chunk) {
    const int64_t n = std::min(chunk, end - s);
    const Tensor logits = model.forward(test.images(s, n).to(device));  // (n, 10)
    for (int64_t p : argmax(logits, 1).to_vector_i64()) predictions.push_back(p);
  }
  model.module().train();
  return predictions;
}

// Over the predictions given (the first labels).
double accuracy(const std::vector<int64_t>& predictions, const std::vector<int64_t>& labels) {
  int64_t correct = 0;
  for (size_t i = 0; i < predictions.size(); ++i) correct += predictions[i] == labels[i];
  return static_cast<double>(correct) / static_cast<double>(predictions.size());
}

// The confusion matrix (rows = true class, columns = predicted), printed with per-class
// accuracy, and drawn as a heat map of row-normalised counts.
void report_confusion(const std::vector<int64_t>& predictions, const std::vector<int64_t>& labels,
                      const std::string& png) {
  const std::vector<std::string>& names = data::fashion_mnist_classes();
  const int64_t k = static_cast<int64_t>(names.size());
  std::vector<int64_t> counts(static_cast<size_t>(k * k), 0), totals(static_cast<size_t>(k), 0);
  for (size_t i = 0; i < predictions.size(); ++i) {
    ++counts[static_cast<size_t>(labels[i] * k + predictions[i])];
    ++totals[static_cast<size_t>(labels[i])];
  }
  fmt::print("\nconfusion matrix (rows: true class, columns: predicted)\n{:>12}", "");
  for (int64_t j = 0; j < k; ++j) fmt::print(" {:>5}", j);
  fmt::print("  accuracy\n");
  std::vector<float> rates(static_cast<size_t>(k * k));
  for (int64_t i = 0; i < k; ++i) {
    fmt::print("{:>12}", names[static_cast<size_t>(i)]);
    const auto total = static_cast<float>(std::max<int64_t>(totals[static_cast<size_t>(i)], 1));
    for (int64_t j = 0; j < k; ++j) {
      const auto c = counts[static_cast<size_t>(i * k + j)];
      fmt::print(" {:5d}", c);
      rates[static_cast<size_t>(i * k + j)] = static_cast<float>(c) / total;
    }
    fmt::print("  {:6.2f}%\n", 100.0 * rates[static_cast<size_t>(i * k + i)]);
  }
  data::write_png(data::labelled_heatmap(tensor(rates, {k, k}), names, names,
                                         "confusion (true x predicted)", 24),
                  png);
}

// ViT: where the class token looks in the last block, per head: its attention to the N patches,
// [heads, N] -> a grid of patches, upsampled and laid over the image (the figure of the seed
// lectures). One PNG per image: the image, then one panel per head.
void draw_attention_maps(models::ViT& vit, const data::FashionMNIST& test, int64_t count,
                         Device device, const std::string& dir) {
  NoGradGuard no_grad;
  vit.eval();
  const int64_t side = vit.config().image_size / vit.config().patch_size, scale = 8;
  const float black = test.black_value(), white = data::normalize_fashion_mnist_pixel(255);
  for (int64_t i = 0; i < count && i < test.size(); ++i) {
    std::vector<Tensor> attentions;
    vit.forward(test.images(i, 1).to(device), &attentions);
    const Tensor last = attentions.back().to(Device::CPU);  // (1, heads, 1+N, 1+N)
    const int64_t heads = last.size(1);
    const Tensor cls_row = last.narrow(2, 0, 1).narrow(3, 1, side * side);  // (1, h, 1, N)
    const Tensor image = test.images(i, 1).reshape({test.rows(), test.cols()});  // normalised
    const data::Image base = data::resize_nearest(data::to_rgb(data::to_image(image, black, white)),
                                                  test.cols() * scale, test.rows() * scale);
    std::vector<data::Image> panels{base};
    for (int64_t h = 0; h < heads; ++h) {
      const Tensor grid = cls_row.narrow(1, h, 1).reshape({side, side});
      const data::Image heat = data::resize_nearest(
          data::heatmap(grid, 0.0f, max(grid).item()), base.width, base.height);
      panels.push_back(data::blend(base, heat, 0.6f));
      data::draw_text(panels.back(), 4, 4, fmt::format("head {}", h), {255, 255, 255});
    }
    data::draw_text(panels.front(), 4, 4,
                    data::fashion_mnist_classes()[static_cast<size_t>(test.label_vector()[i])],
                    {255, 255, 255});
    data::write_png(data::tile(panels, heads + 1), fmt::format("{}/attention_{}.png", dir, i));
  }
  vit.train();
}

// Loss and test accuracy against the step, from the CSV log.
void plot_curves(const std::string& csv, const std::string& png, const std::string& title) {
  const data::CsvTable log = data::read_csv(csv);
  data::save_plots(png, {{{log.series("step", "loss", "train loss")},
                          {title + ": training loss", "step", "loss"}},
                         {{log.series("step", "test_accuracy", "test accuracy", 100)},
                          {title + ": test accuracy", "step", "%"}}});
}

}  // namespace

// ============================================================================ main

int main(int argc, char** argv) try {
  cli::use_short_omp_spin(argv);  // idle OpenMP threads spin briefly, then sleep
  // ---- options
  Options o;
  CLI::App app{"train_vision: trains ViT or Swin on Fashion-MNIST"};
  add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  apply_family_defaults(o);
  cli::show_resolved(app, {{"--batch", o.batch}, {"--lr", o.lr}, {"--epochs", o.epochs},
                           {"--grad-clip", o.grad_clip}, {"--label-smoothing", o.label_smoothing},
                           {"--crop-padding", o.crop_padding}});
  cli::init_distributed();  // a job of one unless started by mpirun/srun; rank 0 prints
  cli::print_config(app);
  nn::TrainingRun run("train_vision", o.run);  // threads; --resume finds its checkpoint
  const Device device = run.device();
  cli::check_at_most(o.min_lr, "--min-lr", o.lr, "--lr");
  cli::create_directory(o.run.out, "--out");

  // ---- data: 60,000 training and 10,000 test images, normalised
  const auto train_set = std::make_shared<data::FashionMNIST>(o.data, "train");
  const data::FashionMNIST test_set(o.data, "test");
  const std::vector<int64_t>& labels = test_set.label_vector();
  const int64_t global_batch = o.batch * distributed::world_size();  // every rank draws it
  LOOM_CHECK(global_batch <= train_set->size(),
             "train_vision: --batch {} x {} processes is more than the {} training images", o.batch,
             distributed::world_size(), train_set->size());
  data::BatchStream batches(
      data::DataLoader(train_set, global_batch, /*shuffle=*/true, o.run.seed, /*drop_last=*/true));
  const int64_t steps_per_epoch = train_set->size() / global_batch;
  const auto per_epoch = static_cast<double>(steps_per_epoch);
  auto epochs = [&](int64_t steps) { return static_cast<double>(steps) / per_epoch; };
  // A padded pixel is black: the normalised value of 0.
  const data::AugmentOptions augment{o.crop_padding, o.flip, train_set->black_value()};

  // ---- model and optimizer
  manual_seed(o.run.seed);
  Classifier model = Classifier::create(o);
  model.module().to(device);
  // Both splits fit the model, checked before the first step rather than at the first
  // evaluation (a t10k file of another size would fail there, after the training).
  const int64_t side = model.image_size();
  train_set->check_image_size(side, side, "train_vision", "of --model " + o.model);
  test_set.check_image_size(side, side, "train_vision", "of --model " + o.model);
  nn::DistributedDataParallel ddp(model.shared());  // rank 0's weights; gradients averaged
  optim::AdamW opt(param_groups(model.module(), o.lr, o.weight_decay), 0.9f, 0.999f, 1e-8f);
  fmt::print("train_vision: {} | {} parameters | {} threads\n", model.description(),
             model.module().num_parameters(), get_num_threads());
  fmt::print("  data: {} training images ({} batches of {} an epoch), {} test images\n",
             train_set->size(), steps_per_epoch, global_batch, test_set.size());

  // ---- checkpoints (model, AdamW, config and where the run is) and resume
  run.set_total(o.run.minutes > 0 ? nn::TrainingRun::kUnplanned  // planned at step 21
                : o.run.steps > 0 ? o.run.steps
                                  : o.epochs * steps_per_epoch);
  // A resume keeps the data and the plan: --epochs is compared when it sets the length.
  const bool by_epochs = o.run.minutes == 0 && o.run.steps == 0;
  run.keep_flags({{"--data", o.data}, {"--epochs", by_epochs ? std::to_string(o.epochs) : ""}});
  run.set_checkpoint({{"model", &model.module()}}, &opt, [&](int64_t) {
    nn::Metadata meta = model.metadata();
    meta.insert({{"model_preset", o.model}, {"seed", std::to_string(o.run.seed)}});
    return nn::CheckpointContent{meta, batches.epoch(), batches.index(), global_batch};
  });
  if (o.run.resume) {
    const nn::TrainerState state = run.resume(
        {{"model", &model.module()}}, &opt, [&](const nn::Metadata& meta, const nn::TrainerState&) {
          const auto preset = meta.find("model_preset");
          LOOM_CHECK(preset != meta.end() && preset->second == o.model,
                     "train_vision: checkpoint '{}' was written for --model {}, not --model {}",
                     run.checkpoint_path(), preset == meta.end() ? "(unknown)" : preset->second,
                     o.model);
        });
    batches.seek(state.epoch, state.batch_index_for(global_batch, train_set->size(), run.source()));
  }
  data::CsvLog csv = run.open_log({"step", "epoch", "loss", "lr", "test_accuracy"});

  // ---- training loop
  model.module().train();
  run.plan_note = [&](int64_t total) { return fmt::format(", {:.1f} epochs", epochs(total)); };
  run.begin(global_batch, "img/s");
  for (int64_t step = run.start(); step < run.total(); ++step) {
    const float lr = optim::warmup_cosine_lr(step + 1, std::min(o.warmup, run.total()),
                                             run.total(), o.lr, o.min_lr);
    opt.set_lr(lr);
    const data::Batch batch = batches.next();  // the global batch; this rank's rows of it:
    const Tensor x = distributed::rank_chunk(data::augment_images(batch[0], augment, o.run.seed,
                                                                  static_cast<uint64_t>(step)))
                         .to(device);                               // (B, 1, 28, 28)
    const Tensor y = distributed::rank_chunk(batch[1]).to(device);  // (B,)
    const Tensor logits = model.forward(x);                         // (B, 10)
    const Tensor loss = cross_entropy(logits, y, -100, o.label_smoothing);
    opt.zero_grad();
    loss.backward();
    if (o.grad_clip > 0) optim::clip_grad_norm(model.module().parameters(), o.grad_clip);
    opt.step();

    const int64_t done = step + 1;
    const float loss_value = run.step_done(done, loss.item());  // the global batch's
    run.log(done, lr, fmt::format(" | epoch {:.2f}", epochs(done)));
    const bool stop = run.checkpoint(done);  // before the evaluation; --stop-at
    double test_accuracy = std::nan("");
    const bool eval_now = o.eval_every > 0 ? done % o.eval_every == 0 : done % steps_per_epoch == 0;
    if (eval_now && done != run.total() && run.main_process()) {
      const double seconds = run.untimed([&] {
        test_accuracy = accuracy(predict(model, test_set, o.test_images, device), labels);
      });
      fmt::print("eval step {} (epoch {:.2f}) | test accuracy {:.2f}% ({:.1f} s)\n", done,
                 epochs(done), 100 * test_accuracy, seconds);
    }
    csv.row({static_cast<double>(done), static_cast<double>(batches.epoch()), loss_value, lr,
             test_accuracy});
    if (stop) return 0;
  }
  const double train_s = run.training_seconds();  // evaluations left out

  // ---- final report (rank 0's; the last step is saved): test accuracy, confusion matrix,
  // pictures
  if (!run.main_process()) return 0;
  const int64_t total = run.total();
  const std::vector<int64_t> predictions = predict(model, test_set, o.test_images, device);
  const double final_accuracy = accuracy(predictions, labels);
  csv.row({static_cast<double>(total), static_cast<double>(batches.epoch()), std::nan(""),
           std::nan(""), final_accuracy});
  fmt::print("final (step {}, {:.2f} epochs, {} training): test accuracy {:.2f}%\n", total,
             epochs(total), optim::format_duration(train_s), 100 * final_accuracy);
  report_confusion(predictions, labels, o.run.out + "/confusion.png");
  plot_curves(run.log_path(), o.run.out + "/curves.png", o.model);
  const bool maps = model.vit && o.attention_images > 0;
  if (maps) draw_attention_maps(*model.vit, test_set, o.attention_images, device, o.run.out);
  fmt::print("saved {}, {}, {}/curves.png, {}/confusion.png{}\n", run.checkpoint_path(),
             run.log_path(), o.run.out, o.run.out, maps ? " and attention_*.png" : "");
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
