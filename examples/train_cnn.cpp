// A small CNN learns Fashion-MNIST: the program a PyTorch user copies first. A dataset with
// transforms, a DataLoader with workers, AdamW with a one-cycle schedule, a checkpoint to resume
// from, a progress line with its ETA and the test accuracy after every epoch.
//   train_cnn [--epochs N | --minutes M] [--batch B] [--lr X] [--workers W] [--threads T]
//             [--seed S] [--data DIR] [--out DIR] [--resume]
// Its PyTorch twin: bench/reference/train.py cnn-fmnist (scripts/reproduce.sh runs both).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "cli.h"
#include "loom.h"
using namespace loom;
namespace T = data::transforms;

// Two conv blocks (28x28 -> 14x14 -> 7x7), then a two-layer classifier: 0.42M parameters.
std::shared_ptr<nn::Sequential> make_cnn() {
  auto block = [](int64_t in, int64_t out) {  // conv 3x3, batch norm, ReLU, 2x2 max pool
    return std::make_shared<nn::Sequential>(
        std::make_shared<nn::Conv2d>(in, out, 3, 1, 1), std::make_shared<nn::BatchNorm2d>(out),
        std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2));
  };
  return std::make_shared<nn::Sequential>(
      block(1, 32), block(32, 64), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(64 * 7 * 7, 128), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(128, 10));
}

// The share of the test images the model classifies correctly.
double accuracy(nn::Sequential& model, data::DataLoader& test) {
  nn::EvalGuard eval(model);  // batch norm on its running statistics, no graph
  int64_t correct = 0, seen = 0;
  for (const data::Batch& batch : test) {
    Tensor predicted = argmax(model.forward(batch["image"]), 1);
    correct += static_cast<int64_t>(sum(eq(predicted, batch["label"])).item());
    seen += batch["label"].size(0);
  }
  return static_cast<double>(correct) / static_cast<double>(seen);
}

int main(int argc, char** argv) try {
  int64_t epochs = 4, batch_size = 128, workers = 2, threads = 0, seed = 0, limit = 0,
          stop_after = 0;
  double minutes = 0, lr = 4e-3;
  std::string data_dir = data::kFashionMnistDir, out = "out-cnn";
  bool resume = false;
  CLI::App app{"train_cnn: a small CNN classifies Fashion-MNIST"};
  cli::show_defaults(app);
  app.add_option("--epochs", epochs, "passes over the 60,000 training images")
      ->check(cli::positive_integer);
  app.add_option("--minutes", minutes, "train this long instead (steps planned at step 20)")
      ->check(cli::positive);
  app.add_option("--batch", batch_size, "images per step")->check(cli::positive_integer);
  app.add_option("--lr", lr, "peak learning rate of the one-cycle schedule")->check(cli::positive);
  app.add_option("--workers", workers, "DataLoader threads (0: in the training loop)");
  app.add_option("--threads", threads, "CPU threads of the model (0 = OpenMP's default)");
  app.add_option("--seed", seed, "seed of the weights, the batch order and the augmentations");
  app.add_option("--data", data_dir, "Fashion-MNIST's folder (apt-get install "
                                     "dataset-fashion-mnist)");
  app.add_option("--limit", limit, "train and test on N images of each split (0 = all)");
  app.add_option("--stop-after", stop_after, "stop after this epoch (then --resume)");
  app.add_option("--out", out, "folder of the checkpoint (ckpt.safetensors, every epoch)");
  app.add_flag("--resume", resume, "continue from the checkpoint in --out");
  CLI11_PARSE(app, argc, argv);
  cli::print_config(app);
  if (threads > 0) set_num_threads(static_cast<int>(threads));
  std::filesystem::create_directories(out);
  const std::string ckpt = out + "/ckpt.safetensors";

  // Pixels in [0, 1], augmented as torchvision would: pad 2 and crop, flip, then normalise.
  const T::Normalize normalize({data::kFashionMnistMean}, {data::kFashionMnistStd});
  std::shared_ptr<const data::Dataset> train_set = std::make_shared<data::TransformDataset>(
      std::make_shared<data::FashionMNIST>(data_dir, "train", /*normalize=*/false),
      T::Compose({T::RandomCrop(28, /*padding=*/2), T::RandomHorizontalFlip(), normalize}));
  std::shared_ptr<const data::Dataset> test_set = std::make_shared<data::TransformDataset>(
      std::make_shared<data::FashionMNIST>(data_dir, "test", false), normalize);
  if (limit > 0) {  // a quick try: at most `limit` images of each split, drawn at random
    for (auto* set : {&train_set, &test_set}) {
      const int64_t n = std::min(limit, (*set)->size());
      *set = data::random_split(*set, {n, (*set)->size() - n})[0];
    }
  }
  data::DataLoader train(train_set, {.batch_size = batch_size, .shuffle = true,
                                     .drop_last = true, .num_workers = workers,
                                     .seed = static_cast<uint64_t>(seed)});
  data::DataLoader test(test_set, {.batch_size = 500, .num_workers = workers});

  manual_seed(static_cast<uint64_t>(seed));
  auto model = make_cnn();
  optim::AdamW opt(model->parameters(), static_cast<float>(lr), 0.9f, 0.999f, 1e-8f, 5e-4f);
  int64_t total = epochs * train.size(), step = 0, epoch = 0;
  if (resume && std::filesystem::exists(ckpt)) {  // the plan first: the schedule is built on it
    const nn::Metadata meta = nn::read_metadata(ckpt);
    total = std::stoll(meta.at("total_steps")), step = std::stoll(meta.at("step"));
    epoch = std::stoll(meta.at("epoch"));
  }
  std::optional<optim::OneCycleLR> schedule(std::in_place, opt, lr, total);
  if (step > 0) {  // model, optimizer and schedule as they were after `step` steps
    nn::load_checkpoint(ckpt, {{"model", model.get()}}, &opt, &*schedule);
    fmt::print("resumed from {} at step {} (epoch {})\n", ckpt, step, epoch);
  }
  fmt::print("{} parameters, {} steps of {} images\n", model->num_parameters(), total,
             batch_size);

  optim::ProgressMeter meter(batch_size, "img/s");
  double eval_seconds = 0, test_accuracy = 0;
  for (; step < total; ++epoch) {
    train.set_epoch(epoch);  // this epoch's order and augmentations, also after a resume
    for (const data::Batch& batch : train) {
      Tensor loss = nn::functional::cross_entropy(model->forward(batch["image"]), batch["label"]);
      opt.zero_grad();
      loss.backward();
      opt.step();
      schedule->step();
      meter.add(loss.item());
      if (++step == 20 && minutes > 0) {  // --minutes: 20 steps tell the speed; plan anew
        total = static_cast<int64_t>(minutes * 60 / meter.elapsed() * 20);
        schedule.emplace(opt, lr, total);
        for (int i = 0; i < 20; ++i) schedule->step();
      }
      if (step % 100 == 0 || step == total) {
        fmt::print("{}\n", meter.line(step, total, schedule->get_last_lr()[0]));
        std::fflush(stdout);  // a piped run keeps what it printed
      }
      if (step == total) break;
    }
    const double start = meter.elapsed();
    test_accuracy = accuracy(*model, test);
    fmt::print("epoch {}: test accuracy {:.2f}%\n", epoch + 1, 100 * test_accuracy);
    std::fflush(stdout);
    eval_seconds += meter.elapsed() - start;
    meter.exclude(meter.elapsed() - start);  // speed and ETA count training only
    nn::save_checkpoint(ckpt, {{"model", model.get()}}, &opt, &*schedule,
                        {{"step", std::to_string(step)}, {"epoch", std::to_string(epoch + 1)},
                         {"total_steps", std::to_string(total)}});
    if (epoch + 1 == stop_after) break;
  }
  if (step < total) {
    fmt::print("stopped at step {} of {}; --resume continues\n", step, total);
    return 0;
  }
  fmt::print("final (step {}, {:.2f} epochs, {} training): test accuracy {:.2f}%\n", step,
             static_cast<double>(step) / static_cast<double>(train.size()),
             optim::format_duration(meter.elapsed() - eval_seconds), 100 * test_accuracy);
  return 0;
} catch (const std::exception& e) {  // a loom::Error names the op and the values at fault
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
