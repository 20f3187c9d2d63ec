// Trains a GPT language model on the Debian fortune cookies, top to bottom like nanoGPT's
// train.py: options, data, model, optimizer, the training loop (progress, evaluation,
// checkpoints), and samples at the end.
//
//   train_gpt                           the README demo: gpt-mini, 512-token BPE, 10 min, 2 cores
//   train_gpt --tokenizer byte          byte-level, as bench/reference/train.py gpt-fortunes
//   train_gpt --steps 200 --out run1    a shorter run; `--resume` continues it exactly
//   train_gpt --help                    every option
//   mpirun -np 2 train_gpt              data parallel: 2 processes, --batch sequences each
//
// The checkpoint (nn::save_checkpoint) holds the model, the optimizer state and, as metadata, the
// model config, the step, loom's random-number state and the position in the data, in one
// safetensors file written atomically, so a resumed run computes exactly the losses the
// uninterrupted run would have.
//
// Under mpirun (or srun) every process trains a replica of the model on its own rows of each
// global batch of --batch x processes sequences (nn::DistributedDataParallel averages the
// gradients), and only rank 0 prints, evaluates, samples and writes files. The checkpoint
// counts the data position in sequences, so --resume works with any number of processes.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "cli.h"
#include "loom.h"

using namespace loom;

namespace {

// ============================================================================ options

// The model: a GPTConfig preset (--model), its sizes overridden where not 0.
#define GPT_MODEL_FIELDS(F)                                                                 \
  F(int64_t, n_layer, 0, non_negative, "override the preset's number of blocks (0 = keep)") \
  F(int64_t, n_head, 0, non_negative, "override the preset's attention heads (0 = keep)")   \
  F(int64_t, d_model, 0, non_negative, "override the preset's width (0 = keep)")            \
  F(int64_t, context, 0, non_negative, "override the preset's context length (0 = keep)")   \
  F(float, dropout, 0.0f, probability, "dropout probability")

// The samples printed at the end.
#define GPT_SAMPLE_FIELDS(F)                                                           \
  F(std::string, prompt, "The meaning of life is", any,                                \
    "prompt of the samples printed at the end")                                        \
  F(int64_t, sample_tokens, 200, non_negative, "tokens per sample")                    \
  F(float, temperature, 0.8f, non_negative, "temperature of the sampled continuation") \
  F(int64_t, top_k, 0, non_negative, "top-k of the sampled continuation (0 = off)")

LOOM_FIELDS_STRUCT(ModelFlags, GPT_MODEL_FIELDS);
LOOM_FIELDS_STRUCT(SampleFlags, GPT_SAMPLE_FIELDS);

struct Options {
  std::string model = "gpt-mini";
  ModelFlags sizes;
  // data: byte | bpe. A small BPE (512 tokens, trained on the training split in a fraction of a
  // second) gives each step about twice the text of bytes: after 1400 steps it reaches 2.32
  // bits/byte on the validation text, where bytes reach 2.56. The
  // default 1600 steps take about 9 minutes on 2 cores and reach 2.30 bits/byte.
  std::string tokenizer = "bpe";
  int64_t bpe_vocab = 512;
  std::string fortunes = data::kFortunesDir;
  // optimisation, evaluation, checkpoints, machine: the PyTorch twin (bench/reference/train.py
  // gpt-fortunes) has the same defaults
  nn::TrainOptions train{
      .steps = 1600, .batch = 16, .min_lr = 1e-4f, .weight_decay = 0.1f, .out = "out-gpt"};
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  // Validation windows are held in memory for the whole run: 100,000 windows of a 1024-token
  // context are 800 MB of int64, so more are refused rather than allocated.
  int64_t eval_windows = 200;
  SampleFlags samples;
};

// Every field of Options as a --flag, in groups for --help.
void add_options(CLI::App& app, Options& o) {
  app.description("train_gpt: trains a GPT language model on the Debian fortune cookies");
  CLI::App* m = app.add_option_group("Model");
  m->add_option("--model", o.model, "GPT preset")
      ->check(CLI::IsMember(models::GPTConfig::preset_names()));
  cli::add_fields(*m, o.sizes);
  CLI::App* d = app.add_option_group("Data");
  d->add_option("--tokenizer", o.tokenizer,
                "byte | bpe (byte-level BPE trained on the training split)")
      ->check(CLI::IsMember({"byte", "bpe"}));
  d->add_option("--bpe-vocab", o.bpe_vocab, "vocabulary size of the BPE tokenizer")
      ->check(cli::range(int64_t{256}, int64_t{1} << 20));
  d->add_option("--fortunes", o.fortunes, "directory of fortune files");
  const cli::TrainGroups g =
      cli::add_train_options(app, o.train,
                             {.notes = {{"batch", "sequences"},
                                        {"weight_decay", "of matrices, not biases/gains"},
                                        {"out", "ckpt.safetensors and tokenizer.txt"},
                                        {"seed", "and of the samples"}}});
  g.optimisation->add_option("--beta1", o.beta1, "AdamW beta1")->check(cli::range(0.0, 1.0, "[)"));
  g.optimisation->add_option("--beta2", o.beta2, "AdamW beta2")->check(cli::range(0.0, 1.0, "[)"));
  g.progress->add_option("--eval-windows", o.eval_windows, "validation windows per evaluation")
      ->check(cli::range(int64_t{1}, int64_t{100000}));
  cli::add_fields(*app.add_option_group("Samples at the end"), o.samples);
}

// The model the flags configure, for a vocabulary of `vocab_size` tokens.
models::GPTConfig model_config(const Options& o, int64_t vocab_size) {
  models::GPTConfig c = models::GPTConfig::preset(o.model);
  c.vocab_size = vocab_size;
  if (o.sizes.n_layer) c.n_layer = o.sizes.n_layer;
  if (o.sizes.n_head) c.n_head = o.sizes.n_head;
  if (o.sizes.d_model) c.d_model = o.sizes.d_model;
  if (o.sizes.context) c.context = o.sizes.context;
  c.dropout = o.sizes.dropout;
  return c;
}

// ============================================================================ data

// On --resume the tokenizer saved beside the checkpoint (read back, not retrained), else the
// one asked for, saved there by rank 0.
std::unique_ptr<data::Tokenizer> make_tokenizer(const Options& o, const std::string& text) {
  const std::string path = o.train.out + "/tokenizer.txt";
  if (o.train.resume && std::filesystem::exists(path)) return data::load_tokenizer(path);
  std::unique_ptr<data::Tokenizer> tok = std::make_unique<data::ByteTokenizer>();
  if (o.tokenizer == "bpe") {
    const auto t0 = std::chrono::steady_clock::now();
    tok = std::make_unique<data::BPETokenizer>(data::BPETokenizer::train(text, o.bpe_vocab));
    fmt::print("trained a BPE tokenizer of {} tokens in {:.1f} s\n", tok->vocab_size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (distributed::is_main_process()) tok->save(path);
  return tok;
}

// Validation windows of context + 1 tokens, the same every evaluation: `count` of them evenly
// spaced over the validation tokens (bench/reference/train.py gpt-fortunes takes the same).
Tensor validation_windows(const std::vector<int64_t>& tokens, int64_t count, int64_t context) {
  const int64_t len = context + 1;
  const int64_t last = static_cast<int64_t>(tokens.size()) - len;
  LOOM_CHECK(last >= 0, "train_gpt: {} validation tokens are fewer than one window of {}",
             tokens.size(), len);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t start = last * i / std::max<int64_t>(count - 1, 1);
    ids.insert(ids.end(), tokens.begin() + start, tokens.begin() + start + len);
  }
  return tensor_i64(ids, {count, len});  // (N, context + 1)
}

// ============================================================================ evaluation

struct Eval {
  double loss = 0;           // nats per token
  double bits_per_byte = 0;  // of the text
};

// Mean cross-entropy over every position of the validation windows, and in bits per byte of
// the text the tokens stand for.
Eval evaluate(models::GPT& model, const Tensor& windows, const data::Tokenizer& tok,
              Device device) {
  nn::EvalGuard eval(model);
  const int64_t n = windows.size(0);
  const int64_t len = windows.size(1);
  const int64_t chunk = 50;
  double nats = 0;
  double bytes = 0;
  for (int64_t s = 0; s < n; s += chunk) {
    const int64_t m = std::min(chunk, n - s);
    const Tensor w = windows.narrow(0, s, m);
    const Tensor x = w.narrow(1, 0, len - 1).contiguous().to(device);  // (m, T)
    const Tensor y = w.narrow(1, 1, len - 1).contiguous();             // (m, T)
    const Tensor logits = model.forward(x);                            // (m, T, V)
    const Tensor loss =
        cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}).to(device));
    nats += loss.item() * static_cast<double>(m * (len - 1));
    for (int64_t id : y.to_vector_i64()) bytes += static_cast<double>(tok.decode({id}).size());
  }
  const double tokens = static_cast<double>(n * (len - 1));
  return {nats / tokens, nats / bytes / std::log(2.0)};
}

// ============================================================================ main

// The run, once the flags are parsed (main, below).
int train(CLI::App& app, Options& o) {
  nn::TrainingRun run = cli::start_training(app, "train_gpt", o.train);
  run.check_recorded("tokenizer", o.tokenizer, "--tokenizer");
  const Device device = run.device();
  // The model is checked before any work, with the largest vocabulary its tokenizer may have.
  models::GPTConfig config = model_config(o, o.tokenizer == "byte" ? 256 : o.bpe_vocab);
  cli::check_model_flags(app, "Model", config);
  cli::create_directory(o.train.out, "--out");

  // ---- data: the fortunes split 95/5 (fixed seed: the split never changes with --seed), each
  // part joined with blank lines -> tokens -> windows of context + 1
  const data::TrainValSplit split = data::split_train_val(data::read_fortunes(o.fortunes), 0.05, 0);
  const std::string train_text = data::join_entries(split.train, "\n\n");
  const std::string val_text = data::join_entries(split.val, "\n\n");
  const std::unique_ptr<data::Tokenizer> tok = make_tokenizer(o, train_text);
  const std::vector<int64_t> train_ids = tok->encode(train_text);
  const std::vector<int64_t> val_ids = tok->encode(val_text);
  config.vocab_size = tok->vocab_size();
  auto train_set = std::make_shared<data::LanguageModelDataset>(train_ids, config.context, 1);
  const int64_t global_batch = run.global_batch(
      train_set->size(), fmt::format("training windows of {} tokens", config.context + 1));
  data::BatchStream batches(data::DataLoader(train_set, global_batch, /*shuffle=*/true,
                                             o.train.seed, /*drop_last=*/true));
  const Tensor val_windows = validation_windows(val_ids, o.eval_windows, config.context);

  // ---- model and optimizer: AdamW, weight decay on matrices only (nanoGPT's)
  manual_seed(o.train.seed);
  const auto model = run.make_model<models::GPT>(config);  // rank 0's weights, gradients averaged
  optim::AdamW opt(nn::weight_decay_groups(*model, o.train.lr, o.train.weight_decay), o.beta1,
                   o.beta2, 1e-8f);
  fmt::print("train_gpt: {} | tokenizer {} ({} tokens) | {} parameters | {} threads\n",
             config.to_string(), o.tokenizer, tok->vocab_size(), model->num_parameters(),
             get_num_threads());
  fmt::print("  data: train {} bytes -> {} tokens, val {} bytes -> {} tokens ({} windows)\n",
             train_text.size(), train_ids.size(), val_text.size(), val_ids.size(),
             val_windows.size(0));

  // ---- checkpoints: model, optimizer, config, tokenizer kind and where the run is (in sequences:
  // a resume takes any number of processes). A resumed run must keep the text and the tokenizer
  // (tokenizer.txt is read back), and the model, whose dropout alone may change.
  run.keep_flags({{"--fortunes", o.fortunes},
                  {"--bpe-vocab", o.tokenizer == "bpe" ? std::to_string(o.bpe_vocab) : ""}});
  run.keep_config(config.to_metadata(), {"dropout"});
  run.set_checkpoint({{"model", model.get()}}, &opt,
                     {{"tokenizer", o.tokenizer}, {"seed", std::to_string(o.train.seed)}});
  run.follow(batches, global_batch, train_set->size());
  if (o.train.resume) run.resume({{"model", model.get()}}, &opt);

  // ---- training loop
  model->train();
  run.begin(global_batch * config.context, "tok/s");
  for (int64_t step = run.start(); step < run.total(); ++step) {
    const float lr = run.warmup_cosine_lr(step);
    opt.set_lr(lr);
    const data::Batch batch = batches.next();  // (global_batch, T) each; this rank's rows:
    const Tensor x = distributed::rank_chunk(batch[0]).to(device);  // (B, T)
    const Tensor y = distributed::rank_chunk(batch[1]).to(device);  // (B, T)
    const Tensor logits = model->forward(x);                        // (B, T, V)
    const Tensor loss = cross_entropy(logits.reshape({-1, config.vocab_size}), y.reshape({-1}));
    run.backward_and_step(loss, opt, model->parameters());

    const int64_t done = step + 1;
    run.step_done(done, loss.item());  // the global batch's loss, into the progress line
    run.log(done, lr);
    const bool stop = run.checkpoint(done);  // before the evaluation; --stop-at
    if (run.eval_due(done)) {
      Eval e;
      const double seconds = run.untimed([&] { e = evaluate(*model, val_windows, *tok, device); });
      fmt::print(
          "eval step {} | val loss {:.4f} | perplexity {:.2f} | {:.3f} bits/byte ({:.1f} s)\n",
          done, e.loss, std::exp(e.loss), e.bits_per_byte, seconds);
    }
    if (stop) return 0;
  }
  const double train_s = run.training_seconds();  // evaluations left out

  // ---- final report (rank 0's; the last step is saved): validation, samples
  if (!run.main_process()) return 0;
  const Eval e = evaluate(*model, val_windows, *tok, device);
  fmt::print(
      "final (step {}, {} training): val loss {:.4f} | perplexity {:.2f} | {:.3f} bits/byte\n",
      run.total(), optim::format_duration(train_s), e.loss, std::exp(e.loss), e.bits_per_byte);
  fmt::print("saved {} and {}/tokenizer.txt\n", run.checkpoint_path(), o.train.out);

  const SampleFlags& s = o.samples;
  const std::vector<int64_t> prompt = tok->encode(s.prompt);
  if (!prompt.empty() && s.sample_tokens > 0) {
    fmt::print("\n--- greedy ---\n{}\n", tok->decode(model->generate(prompt, s.sample_tokens)));
    manual_seed(o.train.seed + 1);
    fmt::print("\n--- temperature {} ---\n{}\n", s.temperature,
               tok->decode(model->generate(prompt, s.sample_tokens, s.temperature, s.top_k)));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cli::trainer_main(argc, argv, add_options, train); }
