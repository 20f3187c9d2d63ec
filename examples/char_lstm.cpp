// A character-level LSTM language model on the Debian fortune cookies (Karpathy's char-rnn, with
// loom's nn::LSTM): bytes in, the next byte's logits out. It trains, evaluates the validation
// loss, saves and resumes its checkpoint exactly, and samples text at the end.
//
//   char_lstm                       2 layers of 256, 2000 steps of 32 x 128 bytes
//   char_lstm --minutes 3           as many steps as fit in 3 minutes (the README's comparison
//                                   with a Transformer of the same size, train_gpt)
//   char_lstm --steps 200 --out r1  a shorter run; `--resume` continues it exactly
//   char_lstm --help                every option
#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "cli.h"
#include "loom.h"

using namespace loom;

namespace {

// The model's sizes; the vocabulary is the 256 byte values.
#define CHAR_LSTM_FIELDS(F)                                                   \
  F(int64_t, embed, 64, positive, "width of the byte embedding")              \
  F(int64_t, hidden, 256, positive, "hidden size of each LSTM layer")         \
  F(int64_t, layers, 2, positive, "stacked LSTM layers")                      \
  F(float, dropout, 0.0f, probability, "dropout between the LSTM layers")     \
  F(int64_t, context, 128, positive, "bytes per training sequence")

LOOM_FIELDS_STRUCT(CharLSTMConfig, CHAR_LSTM_FIELDS);

// bytes [B, T] -> embedding [B, T, embed] -> LSTM [B, T, hidden] -> logits [B, T, 256].
class CharLSTM : public nn::Module {
 public:
  using State = std::tuple<Tensor, Tensor>;  // (h, c), each [layers, B, hidden]

  explicit CharLSTM(const CharLSTMConfig& c) {
    embed = register_module("embed", std::make_shared<nn::Embedding>(256, c.embed));
    lstm = register_module("lstm", std::make_shared<nn::LSTM>(c.embed, c.hidden, c.layers,
                                                              true, true, c.dropout));
    head = register_module("head", std::make_shared<nn::Linear>(c.hidden, 256));
  }

  // The logits of every next byte, and the state after the last one (to continue from).
  std::pair<Tensor, State> forward(const Tensor& bytes,
                                   const std::optional<State>& state = std::nullopt) const {
    auto [h, final_state] = lstm->forward(embed->forward(bytes), state);
    return {head->forward(h), final_state};
  }

  std::shared_ptr<nn::Embedding> embed;
  std::shared_ptr<nn::LSTM> lstm;
  std::shared_ptr<nn::Linear> head;
};

struct Options {
  CharLSTMConfig model;
  std::string fortunes = data::kFortunesDir;
  nn::TrainOptions train{.steps = 2000, .batch = 32, .lr = 2e-3f, .min_lr = 1e-4f,
                         .warmup = 100, .weight_decay = 0.0f, .out = "out-char-lstm"};
  int64_t eval_windows = 200;
  std::string prompt = "The meaning of life is";
  int64_t sample_bytes = 300;
  float temperature = 0.8f;
};

void add_options(CLI::App& app, Options& o) {
  app.description("char_lstm: a character-level LSTM language model on the fortune cookies");
  cli::add_fields(*app.add_option_group("Model"), o.model);
  app.add_option_group("Data")->add_option("--fortunes", o.fortunes, "directory of fortune files");
  const cli::TrainGroups g = cli::add_train_options(
      app, o.train, {.notes = {{"batch", "sequences"}, {"out", "ckpt.safetensors and log.csv"}}});
  g.progress->add_option("--eval-windows", o.eval_windows, "validation sequences per evaluation")
      ->check(cli::range(int64_t{1}, int64_t{100000}));
  CLI::App* s = app.add_option_group("Samples at the end");
  s->add_option("--prompt", o.prompt, "prompt of the sample printed at the end");
  s->add_option("--sample-bytes", o.sample_bytes, "bytes to sample")
      ->check(cli::range(int64_t{0}, int64_t{100000}));
  s->add_option("--temperature", o.temperature, "sampling temperature")
      ->check(cli::range(0.01, 100.0));
}

// Mean cross-entropy (nats per byte) over `count` validation windows evenly spaced over `ids`.
double evaluate(CharLSTM& model, const std::vector<int64_t>& ids, int64_t count, int64_t context,
                Device device) {
  nn::EvalGuard eval(model);
  NoGradGuard no_grad;
  const int64_t last = static_cast<int64_t>(ids.size()) - context - 1;
  LOOM_CHECK(last >= 0, "char_lstm: {} validation bytes are fewer than one window of {}",
             ids.size(), context + 1);
  std::vector<int64_t> x, y;
  for (int64_t i = 0; i < count; ++i) {
    const auto start = ids.begin() + last * i / std::max<int64_t>(count - 1, 1);
    x.insert(x.end(), start, start + context);
    y.insert(y.end(), start + 1, start + context + 1);
  }
  auto [logits, state] = model.forward(tensor_i64(x, {count, context}).to(device));
  return cross_entropy(logits.reshape({-1, 256}), tensor_i64(y, {count * context}).to(device))
      .item();
}

// Continues `prompt` byte by byte, each drawn from softmax(logits / temperature), the LSTM's
// state carried from one byte to the next (the whole prompt is read once).
std::string sample(CharLSTM& model, const std::string& prompt, int64_t n, float temperature,
                   Device device) {
  nn::EvalGuard eval(model);
  NoGradGuard no_grad;
  const std::vector<int64_t> ids = data::ByteTokenizer().encode(prompt);
  const int64_t length = static_cast<int64_t>(ids.size());
  auto [logits, state] = model.forward(tensor_i64(ids, {1, length}).to(device));
  std::string text = prompt;
  for (int64_t i = 0; i < n; ++i) {
    const Tensor last = logits.index({0, -1}) / temperature;             // [256]
    const int64_t byte = multinomial(softmax(last, 0), 1).item<int64_t>();
    text += static_cast<char>(byte);
    const Tensor next = full({1, 1}, static_cast<float>(byte), DType::Int64, device);
    std::tie(logits, state) = model.forward(next, state);
  }
  return text;
}

int train(CLI::App& app, Options& o) {
  nn::TrainingRun run = cli::start_training(app, "char_lstm", o.train);
  const Device device = run.device();
  cli::create_directory(o.train.out, "--out");

  // ---- data: the fortunes split 95/5 (the split of train_gpt), as bytes
  const data::TrainValSplit split = data::split_train_val(data::read_fortunes(o.fortunes), 0.05, 0);
  const std::string train_text = data::join_entries(split.train, "\n\n");
  const std::string val_text = data::join_entries(split.val, "\n\n");
  // Bytes 0..255 (ByteTokenizer reads them unsigned: a plain char above 127 would be negative).
  const std::vector<int64_t> train_ids = data::ByteTokenizer().encode(train_text);
  const std::vector<int64_t> val_ids = data::ByteTokenizer().encode(val_text);
  auto train_set = std::make_shared<data::LanguageModelDataset>(train_ids, o.model.context, 1);
  const int64_t global_batch = run.global_batch(train_set->size(), "training windows");
  data::BatchStream batches(data::DataLoader(train_set, global_batch, /*shuffle=*/true,
                                             o.train.seed, /*drop_last=*/true));

  // ---- model and optimizer
  manual_seed(o.train.seed);
  const auto model = run.make_model<CharLSTM>(o.model);
  optim::AdamW opt(model->parameters(), o.train.lr, 0.9f, 0.999f, 1e-8f, o.train.weight_decay);
  fmt::print("char_lstm: {} | {} parameters | {} threads | train {} bytes, val {} bytes\n",
             fields::to_string(o.model), model->num_parameters(), get_num_threads(),
             train_ids.size(), val_ids.size());

  // ---- checkpoints: model, optimizer, sizes and where the run is
  run.keep_flags({{"--fortunes", o.fortunes}});
  run.keep_config(fields::to_metadata(o.model, "char_lstm"), {"dropout"});
  run.set_checkpoint({{"model", model.get()}}, &opt, nn::Metadata{});
  run.follow(batches, global_batch, train_set->size());
  if (o.train.resume) run.resume({{"model", model.get()}}, &opt);

  // ---- training loop
  model->train();
  run.begin(global_batch * o.model.context, "bytes/s");
  for (int64_t step = run.start(); step < run.total(); ++step) {
    const float lr = run.warmup_cosine_lr(step);
    opt.set_lr(lr);
    const data::Batch batch = batches.next();
    const Tensor x = distributed::rank_chunk(batch[0]).to(device);  // (B, T) bytes
    const Tensor y = distributed::rank_chunk(batch[1]).to(device);  // (B, T) the next bytes
    const Tensor logits = model->forward(x).first;                  // (B, T, 256)
    const Tensor loss = cross_entropy(logits.reshape({-1, 256}), y.reshape({-1}));
    run.backward_and_step(loss, opt, model->parameters());

    const int64_t done = step + 1;
    run.step_done(done, loss.item());
    run.log(done, lr);
    const bool stop = run.checkpoint(done);
    if (run.eval_due(done)) {
      double val = 0;
      const double seconds = run.untimed([&] {
        val = evaluate(*model, val_ids, o.eval_windows, o.model.context, device);
      });
      fmt::print("eval step {} | val loss {:.4f} | {:.3f} bits/byte ({:.1f} s)\n", done, val,
                 val / std::log(2.0), seconds);
    }
    if (stop) return 0;
  }
  const double train_s = run.training_seconds();

  // ---- final report: validation and a sample
  if (!run.main_process()) return 0;
  const double val = evaluate(*model, val_ids, o.eval_windows, o.model.context, device);
  fmt::print("final (step {}, {} training): val loss {:.4f} | {:.3f} bits/byte\n", run.total(),
             optim::format_duration(train_s), val, val / std::log(2.0));
  fmt::print("saved {}\n", run.checkpoint_path());
  if (!o.prompt.empty() && o.sample_bytes > 0) {
    manual_seed(o.train.seed + 1);
    fmt::print("\n--- temperature {} ---\n{}\n", o.temperature,
               sample(*model, o.prompt, o.sample_bytes, o.temperature, device));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cli::trainer_main(argc, argv, add_options, train); }
