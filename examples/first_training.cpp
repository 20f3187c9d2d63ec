// A first training program, the one docs/guide/first-program.md reads line by line beside
// its PyTorch twin: a dataset and two DataLoaders, a model written as an nn::Module, AdamW
// under a cosine schedule, the loop, an evaluation on held-out points, and a checkpoint that
// a second run resumes from. The task: which of three rings around the origin a point lies in.
//   first_training [--stop-after N] [--resume]    (checkpoint: first_training.safetensors)
// --stop-after N ends the run after epoch N, as an interruption would; --resume continues it.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "loom.h"
using namespace loom;
namespace F = nn::functional;

// class Classifier(nn.Module): two hidden layers, one logit per ring.
struct Classifier : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2, out;
  explicit Classifier(int64_t hidden) {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(2, hidden));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(hidden, hidden));
    out = register_module("out", std::make_shared<nn::Linear>(hidden, 3));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = relu(fc1->forward(x));
    h = relu(fc2->forward(h));
    return out->forward(h);
  }
};

// The share of `loader`'s points that `model` puts in the right ring.
float accuracy(Classifier& model, data::DataLoader& loader) {
  model.eval();                                   // dropout off, BatchNorm's running statistics
  NoGradGuard no_grad;                            // with torch.no_grad():
  int64_t correct = 0, total = 0;
  for (data::Batch& batch : loader) {
    Tensor predicted = argmax(model.forward(batch[0]), 1);
    correct += (predicted == batch[1]).sum().item<int64_t>();
    total += batch[1].size(0);
  }
  model.train();
  return static_cast<float>(correct) / static_cast<float>(total);
}

int main(int argc, char** argv) try {
  const int64_t epochs = 20;
  int64_t stop_after = epochs;
  bool resume = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--stop-after") && i + 1 < argc)
      stop_after = std::stoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--resume"))
      resume = true;
    else
      return std::fprintf(stderr, "usage: %s [--stop-after N] [--resume]\n", argv[0]), 2;
  }
  const std::string checkpoint = "first_training.safetensors";
  manual_seed(0);

  // Data: 1,200 points, labelled by ring (radius below 0.8, below 1.5, beyond), split 1000/200.
  Tensor points = randn({1200, 2});
  Tensor radius2 = (points * points).sum(1);
  Tensor labels = (radius2 > 0.64f).to(DType::Int64) + (radius2 > 2.25f).to(DType::Int64);
  auto dataset = std::make_shared<data::TensorDataset>(std::vector<Tensor>{points, labels});
  auto split = data::random_split(dataset, {1000, 200}, /*seed=*/0);
  data::DataLoader train_loader(split[0], {.batch_size = 50, .shuffle = true, .seed = 0});
  data::DataLoader test_loader(split[1], {.batch_size = 200});

  // Model, optimizer, schedule (stepped once per epoch).
  Classifier model(32);
  optim::AdamW opt(model.parameters(), 1e-2f, 0.9f, 0.999f, 1e-8f, 1e-4f);
  optim::CosineAnnealingLR sched(opt, epochs);

  int64_t start = 0;
  if (resume && std::filesystem::exists(checkpoint)) {  // model, optimizer and schedule
    nn::Metadata meta = nn::load_checkpoint(checkpoint, {{"model", &model}}, &opt, &sched);
    start = std::stoll(meta.at("epoch"));
    std::printf("resumed from %s after epoch %lld\n", checkpoint.c_str(), (long long)start);
  }

  for (int64_t epoch = start; epoch < std::min(epochs, stop_after); ++epoch) {
    train_loader.set_epoch(epoch);                // this epoch's order, resumed or not
    float total_loss = 0;
    for (data::Batch& batch : train_loader) {
      Tensor loss = F::cross_entropy(model.forward(batch[0]), batch[1]);
      opt.zero_grad();
      loss.backward();
      opt.step();
      total_loss += loss.item();
    }
    sched.step();
    nn::save_checkpoint(checkpoint, {{"model", &model}}, &opt, &sched,
                        {{"epoch", std::to_string(epoch + 1)}});
    if (epoch % 5 == 4 || epoch + 1 == epochs)
      std::printf("epoch %2lld  loss %.4f  lr %.5f  test accuracy %.1f%%\n", (long long)epoch + 1,
                  total_loss / static_cast<float>(train_loader.size()), opt.lr(),
                  100 * accuracy(model, test_loader));
  }
  if (stop_after < epochs)
    std::printf("stopped after epoch %lld; --resume continues from %s\n", (long long)stop_after,
                checkpoint.c_str());
  return 0;
} catch (const std::exception& e) {               // a loom::Error names the op and the values
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
