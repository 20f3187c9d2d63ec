// Data-loading benchmark: what the DataLoader costs beside the training step it feeds.
//
//   data [--batches N] [--batch B] [--threads T] [--data DIR]
//
// Loads Fashion-MNIST's training images through a DataLoader with train_cnn's augmentation
// (RandomCrop(28, padding 2), RandomHorizontalFlip, Normalize; shuffled, batch B = 64) with 0, 1
// and 2 workers, and times N batches (default 200, after 3) with nothing else running: the
// loader's time per batch. With 0 workers that time adds to every step; with workers the
// batches are prepared while the step runs, and they keep up as long as it is below the step's
// time. The step: a ViT-tiny training step on batch B (bench/vision's protocol: the
// vit-tiny-fmnist preset, AdamW, median of 10 after 3 warm-ups, T threads), measured here.
// Prints one JSON line: "batch", "loader_ms_per_batch" for 0/1/2 workers, "vit_ms_per_step"
// and "loader_share" (each loader time over the ViT step's).
#include <chrono>
#include <string>
#include <vector>

#include "bench_util.h"
#include "examples/cli.h"
#include "loom.h"

using namespace loom;
namespace T = data::transforms;

namespace {

// Mean milliseconds per batch over `batches` batches, after 3 untimed ones.
double loader_ms(std::shared_ptr<const data::Dataset> images, int64_t batch, int64_t workers,
                 int64_t batches) {
  data::DataLoader loader(std::move(images), {.batch_size = batch, .shuffle = true,
                                              .drop_last = true, .num_workers = workers});
  auto it = loader.begin();
  for (int i = 0; i < 3; ++i) ++it;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < batches; ++i) ++it;  // each ++ waits for (or builds) one batch
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return seconds * 1e3 / static_cast<double>(batches);
}

// Median milliseconds of a ViT-tiny training step on a batch of random images.
double vit_step_ms(int64_t batch) {
  manual_seed(0);
  const models::ViTConfig config = models::ViTConfig::preset("vit-tiny-fmnist");
  models::ViT model(config);
  model.train();
  const Tensor images = rand({batch, config.in_channels, config.image_size, config.image_size});
  const Tensor labels = randint(0, config.num_classes, {batch});
  optim::AdamW opt(model.parameters(), 1e-3f, 0.9f, 0.999f, 1e-8f, 0.05f);
  std::vector<float> losses;
  const auto step = [&] {
    bench::update(cross_entropy(model.forward(images), labels), opt, losses);
  };
  return bench::time_steps(step, 10).median_s * 1e3;
}

}  // namespace

int main(int argc, char** argv) try {
  cli::use_short_omp_spin(argv);
  int64_t batches = 200, batch = 64, threads = 2;
  std::string dir = data::kFashionMnistDir;
  CLI::App app{"data: DataLoader time per batch (0, 1, 2 workers) against a ViT-tiny step"};
  cli::show_defaults(app);
  app.add_option("--batches", batches, "timed batches per worker count")
      ->check(cli::positive_integer);
  app.add_option("--batch", batch, "images per batch")->check(cli::positive_integer);
  app.add_option("--threads", threads, "CPU threads of the ViT step")
      ->check(cli::range(int64_t{1}, cli::kMaxThreads));
  app.add_option("--data", dir, "Fashion-MNIST's folder");
  CLI11_PARSE(app, argc, argv);
  set_num_threads(static_cast<int>(threads));

  const auto images = std::make_shared<data::TransformDataset>(
      std::make_shared<data::FashionMNIST>(dir, "train", /*normalize=*/false),
      T::Compose({T::RandomCrop(28, 2), T::RandomHorizontalFlip(),
                  T::Normalize({data::kFashionMnistMean}, {data::kFashionMnistStd})}));
  std::vector<double> loader;
  for (int64_t workers : {0, 1, 2}) loader.push_back(loader_ms(images, batch, workers, batches));
  const double vit = vit_step_ms(batch);
  bench::JsonLine line("fashion-mnist-augmented");
  line.add("batch", batch).add("batches", batches);
  for (size_t w = 0; w < loader.size(); ++w)
    line.add("loader_ms_per_batch_" + std::to_string(w) + "_workers", loader[w], 3);
  line.add("vit_ms_per_step", vit, 3);
  for (size_t w = 0; w < loader.size(); ++w)
    line.add("loader_share_" + std::to_string(w) + "_workers", loader[w] / vit, 4);
  line.threads().print();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "data: %s\n", e.what());
  return 1;
}
