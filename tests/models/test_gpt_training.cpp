// GPT training: a run resumed from a checkpoint (model, optimizer, RNG state, data position)
// continues bit-exactly like the uninterrupted run, and a short run on real text learns more
// than byte frequencies.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <optional>

#include "gpt_fixture.h"

using namespace loom;
using namespace loom::testing;
using models::GPT;
using models::GPTConfig;
namespace fs = std::filesystem;

namespace {

GPTConfig small_byte_config(float dropout) {
  GPTConfig config;
  config.vocab_size = 256;
  config.context = 32;
  config.n_layer = 2;
  config.n_head = 2;
  config.d_model = 64;
  config.dropout = dropout;
  return config;
}

// The training step of examples/train_gpt.cpp: AdamW with decay on matrices only, linear
// warm-up + cosine decay, gradient clipping. Returns the loss before the update.
struct Trainer {
  Trainer(const GPTConfig& config, uint64_t seed, int64_t total_steps)
      : model((manual_seed(seed), config)),
        opt(optim::weight_decay_groups(model.parameters(), 3e-3f, 0.1f), 0.9f, 0.95f),
        total(total_steps) {}

  float step(const data::Batch& batch) {
    opt.set_lr(optim::warmup_cosine_lr(opt.step_count() + 1, total / 5, total, 3e-3f, 3e-4f));
    const Tensor logits = model.forward(batch[0]);  // (B, T, 256)
    const Tensor loss = cross_entropy(logits.reshape({-1, 256}), batch[1].reshape({-1}));
    opt.zero_grad();
    loss.backward();
    optim::clip_grad_norm(model.parameters(), 1.0f);
    opt.step();
    return loss.item();
  }

  GPT model;
  optim::AdamW opt;
  int64_t total;
};

// A deterministic byte stream with structure to learn (a repeating phrase with varying digits).
std::vector<int64_t> synthetic_text() {
  std::string text;
  for (int i = 0; i < 400; ++i) text += "step " + std::to_string(i * 7919 % 1000) + " of the run; ";
  return data::ByteTokenizer().encode(text);
}

}  // namespace

TEST_CASE("GPT training resumes exactly: same losses and weights as the uninterrupted run") {
  const GPTConfig config = small_byte_config(0.1f);  // dropout: the RNG state matters too
  auto dataset = std::make_shared<data::LanguageModelDataset>(synthetic_text(), config.context, 1);
  const int64_t total = 8, interrupt = 4;

  // Uninterrupted.
  std::vector<float> straight;
  Trainer a(config, 1, total);
  data::DataLoader loader_a(dataset, 4, true, 17, true);
  for (auto it = loader_a.begin(); static_cast<int64_t>(straight.size()) < total; ++it)
    straight.push_back(a.step(*it));

  // Interrupted after `interrupt` steps: checkpoint, then a new process would start over.
  const std::string dir =
      (fs::temp_directory_path() / ("loom_test_resume_" + std::to_string(getpid()))).string();
  fs::create_directories(dir);
  uint64_t rng_seed = 0, rng_offset = 0;
  {
    Trainer b(config, 1, total);
    data::DataLoader loader_b(dataset, 4, true, 17, true);
    auto it = loader_b.begin();
    for (int64_t s = 0; s < interrupt; ++s, ++it)
      CHECK(b.step(*it) == straight[static_cast<size_t>(s)]);
    nn::save(b.model, dir + "/model.safetensors");
    b.opt.save(dir + "/optim.safetensors");
    rng_seed = default_generator().seed();
    rng_offset = default_generator().offset();
  }
  manual_seed(12345);            // whatever happened in between
  Trainer c(config, 99, total);  // different initial weights, overwritten by the checkpoint
  nn::load(c.model, dir + "/model.safetensors");
  c.opt.load(dir + "/optim.safetensors");
  default_generator().set_state(rng_seed, rng_offset);
  data::DataLoader loader_c(dataset, 4, true, 17, true);
  auto it = loader_c.begin();
  for (int64_t s = 0; s < interrupt; ++s) ++it;  // the data position: skip the batches seen
  for (int64_t s = interrupt; s < total; ++s, ++it)
    CHECK_MESSAGE(c.step(*it) == straight[static_cast<size_t>(s)], "step " << s);
  const auto pa = a.model.named_parameters(), pc = c.model.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    check_close(pc[i].second, pa[i].second, 0.0f, 0.0f, "resumed " + pa[i].first);
  fs::remove_all(dir);
}

TEST_CASE("A short GPT run on fortunes learns more than byte frequencies") {
  // About 40 kB of real text (the first fortunes of the collection), byte-level.
  const std::vector<std::string> entries = data::read_fortunes();
  std::vector<std::string> slice;
  size_t bytes = 0;
  for (size_t i = 0; i < entries.size() && bytes < 40000; ++i) {
    slice.push_back(entries[i]);
    bytes += entries[i].size() + 2;
  }
  const std::vector<int64_t> tokens =
      data::ByteTokenizer().encode(data::join_entries(slice, "\n\n"));
  // The bound: the entropy of the slice's byte frequencies, the loss of the best model that
  // ignores context. Beating it by 0.5 nats/byte means the model uses the context.
  std::vector<double> freq(256, 0.0);
  for (int64_t t : tokens) freq[static_cast<size_t>(t)] += 1.0;
  double unigram = 0;
  for (double f : freq)
    if (f > 0) unigram -= f / tokens.size() * std::log(f / tokens.size());
  MESSAGE("unigram entropy of the slice: " << unigram << " nats/byte");
  REQUIRE(unigram > 2.5);  // English text: about 3 nats (4.3 bits) per byte

  const GPTConfig config = small_byte_config(0.0f);
  const int64_t steps = 300;
  Trainer trainer(config, 0, steps);
  auto dataset = std::make_shared<data::LanguageModelDataset>(tokens, config.context, 1);
  data::DataLoader loader(dataset, 16, true, 0, true);
  std::vector<float> losses;
  for (auto it = loader.begin(); static_cast<int64_t>(losses.size()) < steps; ++it)
    losses.push_back(trainer.step(*it));
  const double first = losses.front();
  double last = 0;
  for (size_t i = losses.size() - 10; i < losses.size(); ++i) last += losses[i] / 10.0;
  MESSAGE("loss: first " << first << ", mean of the last 10 steps " << last);
  CHECK(first == doctest::Approx(std::log(256.0)).epsilon(0.05));  // uniform over bytes at init
  CHECK(last < unigram - 0.5);
}
