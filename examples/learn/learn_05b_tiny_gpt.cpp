// Chapter 05b (docs/learn/05b-build-gpt.md): a GPT built up in six stages, in the order of
// Karpathy's lecture "Let's build GPT" (nanoGPT's gpt.py): bigram, averaging the past, one
// head, multi-head, a transformer block, the full GPT (the models: examples/learn/tiny_gpt.h).
// Each stage trains briefly on the fortunes, one byte per token, and prints its losses, the
// seconds it took and a sample. With no --stage all six run, and the program checks that the
// three ways of averaging the past agree and that the GPT predicts bytes better than the bigram.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "examples/learn/learn.h"
#include "examples/learn/tiny_gpt.h"
#include "loom.h"
using namespace loom;
using namespace loom::indexing;

namespace {

struct Options {
  int stage = 0;    // 1-6, or 0 for all of them
  int steps = 300;  // training steps per stage
};

const char* kUsage =
    "Chapter 05b (docs/learn/05b-build-gpt.md): a GPT built in six stages on the fortunes.\n"
    "usage: learn_05b_tiny_gpt [--stage N] [--steps N]\n"
    "  --stage N   run stage N only: 1 bigram, 2 averaging the past, 3 one attention head,\n"
    "              4 multi-head attention, 5 a transformer block, 6 the full GPT (default: all)\n"
    "  --steps N   training steps per stage (default 300)\n";

// Flags of its own, so not learn::parse_args, but its one thread (examples/learn/learn.h says
// why): the numbers printed repeat exactly, those docs/learn/05b-build-gpt.md shows.
Options parse_options(int argc, char** argv) {
  set_num_threads(1);
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--stage" && has_value) {
      o.stage = std::atoi(argv[++i]);
    } else if (arg == "--steps" && has_value) {
      o.steps = std::atoi(argv[++i]);
    } else {
      std::printf("%s", kUsage);
      std::exit(arg == "--help" || arg == "-h" ? 0 : 2);
    }
  }
  if (o.stage < 0 || o.stage > 6 || o.steps < 1) {
    std::printf("%s", kUsage);
    std::exit(2);
  }
  return o;
}

// ---------------------------------------------------------------------------- data
// The fortunes, split 90/10 by entries, each part one stream of bytes (int64 ids 0-255).
struct Streams {
  Tensor train, val;  // (N_train,), (N_val,)
};

Streams read_streams() {
  const data::TrainValSplit split = data::split_train_val(data::read_fortunes(), 0.1, 0);
  const data::ByteTokenizer bytes;
  auto stream = [&](const std::vector<std::string>& entries) {
    const std::vector<int64_t> ids = bytes.encode(data::join_entries(entries, "\n%\n"));
    return tensor_i64(ids, {static_cast<int64_t>(ids.size())});
  };
  return {stream(split.train), stream(split.val)};
}

// B windows of T + 1 bytes at random offsets (gpt.py's get_batch): the inputs x (B, T) and
// the targets y (B, T), the same bytes one later, so y[b, t] is the byte after x[b, 0..t].
std::pair<Tensor, Tensor> get_batch(const Tensor& data, int64_t B, int64_t T) {
  const std::vector<int64_t> starts = randint(0, data.size(0) - T, {B}).to_vector_i64();
  std::vector<Tensor> xs, ys;
  for (const int64_t i : starts) {
    xs.push_back(data.index({Slice(i, i + T)}));          // (T,)
    ys.push_back(data.index({Slice(i + 1, i + T + 1)}));  // (T,)
  }
  return {stack(xs), stack(ys)};  // (B, T) each
}

// The mean of -log p(next byte) over every position of every window: the logits (B, T, vocab)
// as B * T rows of one classification each.
Tensor lm_loss(const Tensor& logits, const Tensor& targets) {
  const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
  return cross_entropy(logits.reshape({B * T, V}), targets.reshape({B * T}));
}

// ---------------------------------------------------------------------------- the trick
// Stage 2's "mathematical trick" three ways on a small x (B, T, C): the mean of the past in a
// loop, as a product with a row-normalised lower-triangular matrix, and as masked_fill + softmax.
bool show_the_trick() {
  manual_seed(42);
  const int64_t B = 2, T = 4, C = 3;
  const Tensor x = randn({B, T, C});
  std::vector<Tensor> means;
  for (int64_t t = 0; t < T; ++t) means.push_back(x.index({Slice(), Slice(None, t + 1)}).mean(1));
  const Tensor xbow1 = stack(means, 1);  // (B, T, C): xbow1[b, t] = the mean of x[b, :t+1]
  Tensor wei = ones({T, T}).tril();      // (T, T)
  wei = wei / wei.sum(1, true);          // each row sums to 1
  const Tensor xbow2 = matmul(wei, x);   // (T, T) @ (B, T, C) -> (B, T, C)
  const Tensor wei3 = tiny_gpt::causal_softmax(zeros({T, T}));  // (T, T), the same weights
  const Tensor xbow3 = matmul(wei3, x);                          // (B, T, C)
  const bool agree = xbow1.allclose(xbow2, 1e-5, 1e-6) && xbow1.allclose(xbow3, 1e-5, 1e-6);
  std::printf("the weights of averaging the past, softmax(masked_fill(0, tril == 0, -inf)):\n");
  const std::vector<float> w = wei3.to_vector();
  for (int64_t i = 0; i < T; ++i) {
    std::printf("  ");
    for (int64_t j = 0; j < T; ++j) std::printf(" %.3f", w[i * T + j]);
    std::printf("\n");
  }
  std::printf("loop, tril / row sums and masked softmax give the same means: %s\n\n",
              agree ? "yes" : "NO");
  return agree;
}

// ---------------------------------------------------------------------------- one stage
const char* kStageNames[] = {"", "bigram", "averaging the past", "one self-attention head",
                             "multi-head attention", "a transformer block", "the full GPT"};

using Batches = std::vector<std::pair<Tensor, Tensor>>;  // (x, y) pairs, (B, T) each

// Mean validation loss over fixed batches, without recording a graph.
float validation_loss(tiny_gpt::LanguageModel& model, const Batches& batches) {
  NoGradGuard no_grad;
  float total = 0.0f;
  for (const auto& [x, y] : batches) total += lm_loss(model.forward(x), y).item();
  return total / static_cast<float>(batches.size());
}

// n bytes drawn one at a time after a newline (gpt.py's generate): the model reads the last
// block_size bytes, and the next byte is drawn from the softmax of the last position's logits.
std::string sample(tiny_gpt::LanguageModel& model, int64_t block_size, int64_t n) {
  NoGradGuard no_grad;
  std::vector<int64_t> ids = {'\n'};
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = std::min<int64_t>(static_cast<int64_t>(ids.size()), block_size);
    const Tensor idx = tensor_i64({ids.end() - len, ids.end()}, {1, len});  // (1, t)
    const Tensor logits = model.forward(idx).index({0, -1});                 // (vocab,)
    ids.push_back(multinomial(logits.softmax(-1), 1).item<int64_t>());
  }
  std::string text = data::ByteTokenizer().decode(ids);
  for (char& ch : text)  // keep the terminal sane: control bytes and non-ASCII shown as '?'
    if (ch != '\n' && (ch < 32 || ch > 126)) ch = '?';
  return text;
}

// Trains stage `stage` for o.steps steps of AdamW; returns its validation loss.
float run_stage(int stage, const Options& o, const Streams& data, const Batches& val_batches) {
  const auto t0 = std::chrono::steady_clock::now();
  const tiny_gpt::Config config;  // vocab 256, block_size 32, n_embd 64, n_head 4, n_layer 2
  const int64_t B = 16, T = config.block_size;
  manual_seed(1337);
  const auto model = tiny_gpt::make_stage(stage, config);
  // The bigram's table, one row of logits per byte, learns at the lecture's 1e-2; the stacked
  // layers of the other stages at 3e-3 (at 1e-2 the GPT's loss ends higher after 300 steps).
  optim::AdamW opt(model->parameters(), stage == 1 ? 1e-2f : 3e-3f);
  std::printf("stage %d, %s: %lld parameters\n", stage, kStageNames[stage],
              static_cast<long long>(model->num_parameters()));
  float running = 0.0f;
  for (int step = 1; step <= o.steps; ++step) {
    const auto [x, y] = get_batch(data.train, B, T);  // (B, T) each
    const Tensor loss = lm_loss(model->forward(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    running += loss.item();
    if (step % 100 == 0 || step == o.steps) {
      const int n = step % 100 == 0 ? 100 : step % 100;
      std::printf("  step %4d  train loss %.3f\n", step, running / static_cast<float>(n));
      running = 0.0f;
    }
  }
  const float val = validation_loss(*model, val_batches);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  validation loss %.3f nats/byte (%.2f bits), %.1f s\n", val, val / std::log(2.0f),
              seconds);
  std::printf("  sample:%s\n\n", sample(*model, T, 80).c_str());  // it starts with a newline
  return val;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse_options(argc, argv);
  const Streams data = read_streams();
  std::printf("fortunes: %lld training bytes, %lld validation bytes\n"
              "a uniform guess costs ln 256 = %.3f nats/byte\n\n",
              static_cast<long long>(data.train.size(0)), static_cast<long long>(data.val.size(0)),
              std::log(256.0f));
  const bool with_trick = o.stage == 0 || o.stage == 2;
  bool ok = !with_trick || show_the_trick();
  // The same 20 validation windows for every stage, so their losses compare.
  manual_seed(0);
  Batches val_batches;
  for (int i = 0; i < 20; ++i) val_batches.push_back(get_batch(data.val, 16, 32));

  std::vector<float> losses(7, 0.0f);
  for (int stage = 1; stage <= 6; ++stage)
    if (o.stage == 0 || o.stage == stage) {
      losses[stage] = run_stage(stage, o, data, val_batches);
      ok = ok && losses[stage] < std::log(256.0f);  // every stage learns something
    }
  if (o.stage == 0) {
    std::printf("validation loss by stage:");
    for (int stage = 1; stage <= 6; ++stage) std::printf(" %d: %.3f", stage, losses[stage]);
    std::printf("\n");
    ok = ok && losses[6] < losses[1];  // context pays: the GPT beats the bigram
  }
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  return learn::fail(e);  // no fortunes installed, for one
}
