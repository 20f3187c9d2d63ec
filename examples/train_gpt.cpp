// Trains a GPT language model on the Debian fortune cookies, top to bottom like nanoGPT's
// train.py: options, data, model, optimizer, the training loop (progress, evaluation,
// checkpoints), and samples at the end.
//
//   train_gpt                           the README demo: gpt-mini with a 512-token BPE, ~10 min
//                                       on 2 cores
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
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "data/text_file.h"
#include "loom.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

// ============================================================================ options

// Validation windows are held in memory for the whole run: 100,000 windows of a 1024-token
// context are 800 MB of int64, so more is refused rather than allocated.
constexpr int64_t kMaxEvalWindows = 100000;

struct Options {
  // model
  std::string model = "gpt-mini";                             // a GPTConfig preset
  int64_t n_layer = 0, n_head = 0, d_model = 0, context = 0;  // 0 = the preset's
  float dropout = 0.0f;
  // data
  // byte | bpe. A small BPE (512 tokens, trained on the training split in a fraction of a
  // second) gives each step about twice the text of bytes: after 1400 steps it reaches 2.32
  // bits/byte on the validation text, where bytes reach 2.56. The
  // default 1600 steps take about 9 minutes on 2 cores and reach 2.30 bits/byte.
  std::string tokenizer = "bpe";
  int64_t bpe_vocab = 512;
  std::string fortunes = data::kFortunesDir;
  // train.bin / val.bin / val_windows.txt (bench/reference/train.py gpt-fortunes --dump-data)
  std::string data_dir;
  // optimisation (the PyTorch twin, bench/reference/train.py gpt-fortunes, has the same
  // defaults); --steps 1600 in `run`
  int64_t batch = 16, warmup = 200;
  float lr = 1e-3f, min_lr = 1e-4f, weight_decay = 0.1f, beta1 = 0.9f, beta2 = 0.95f;
  float grad_clip = 1.0f;
  // evaluation (the steps, checkpoints, --out, --resume, threads, seed: nn::RunOptions)
  int64_t eval_every = 200, eval_windows = 200;
  nn::RunOptions run{.out = "out-gpt", .steps = 1600, .checkpoint_every = 200};
  // samples at the end
  std::string prompt = "The meaning of life is";
  int64_t sample_tokens = 200;
  float temperature = 0.8f;
  int64_t top_k = 0;
};

// Every field of Options as a --flag, in groups for --help.
void add_options(CLI::App& app, Options& o) {
  cli::show_defaults(app);
  CLI::App* m = app.add_option_group("Model");
  m->add_option("--model", o.model, "GPT preset")
      ->check(CLI::IsMember(models::GPTConfig::preset_names()));
  m->add_option("--n-layer", o.n_layer, "override the preset's number of blocks (0 = keep)")
      ->check(cli::non_negative_integer);
  m->add_option("--n-head", o.n_head, "override the preset's attention heads (0 = keep)")
      ->check(cli::non_negative_integer);
  m->add_option("--d-model", o.d_model, "override the preset's width (0 = keep)")
      ->check(cli::non_negative_integer);
  m->add_option("--context", o.context, "override the preset's context length (0 = keep)")
      ->check(cli::non_negative_integer);
  m->add_option("--dropout", o.dropout, "dropout probability")->check(cli::range(0.0, 1.0, "[)"));
  CLI::App* d = app.add_option_group("Data");
  d->add_option("--tokenizer", o.tokenizer,
                "byte | bpe (byte-level BPE trained on the training split)")
      ->check(CLI::IsMember({"byte", "bpe"}));
  d->add_option("--bpe-vocab", o.bpe_vocab, "vocabulary size of the BPE tokenizer")
      ->check(cli::range(int64_t{256}, int64_t{1} << 20));
  d->add_option("--fortunes", o.fortunes, "directory of fortune files");
  const cli::RunGroups g = cli::add_run_options(
      app, o.run,
      {.out = "directory for the checkpoint and the tokenizer",
       .seed = "seed of the weights, the batch order, dropout and sampling",
       .minutes_group = "Reference plumbing",
       .stop_at = "end this run after that step with a checkpoint, as if interrupted (0 = run to "
                  "--steps); --resume then continues exactly"});
  CLI::App* t = g.optimisation;
  t->add_option("--batch", o.batch, "sequences per batch")->check(cli::positive_integer);
  t->add_option("--lr", o.lr, "peak learning rate")->check(cli::positive);
  t->add_option("--min-lr", o.min_lr, "learning rate at the end of the cosine decay")
      ->check(cli::finite_non_negative);
  t->add_option("--warmup", o.warmup, "linear warm-up steps")->check(cli::non_negative_integer);
  t->add_option("--weight-decay", o.weight_decay,
                "AdamW weight decay of matrices (not biases/gains)")
      ->check(cli::finite_non_negative);
  t->add_option("--beta1", o.beta1, "AdamW beta1")->check(cli::range(0.0, 1.0, "[)"));
  t->add_option("--beta2", o.beta2, "AdamW beta2")->check(cli::range(0.0, 1.0, "[)"));
  t->add_option("--grad-clip", o.grad_clip, "clip the global gradient norm to this (0 = off)")
      ->check(cli::finite_non_negative);
  g.progress->add_option("--eval-every", o.eval_every, "steps between validation evaluations")
      ->check(cli::positive_integer);
  g.progress->add_option("--eval-windows", o.eval_windows, "validation windows per evaluation")
      ->check(cli::range(int64_t{1}, kMaxEvalWindows));
  CLI::App* s = app.add_option_group("Samples at the end");
  s->add_option("--prompt", o.prompt, "prompt of the samples printed at the end");
  s->add_option("--sample-tokens", o.sample_tokens, "tokens per sample")
      ->check(cli::non_negative_integer);
  s->add_option("--temperature", o.temperature, "temperature of the sampled continuation")
      ->check(cli::finite_non_negative);
  s->add_option("--top-k", o.top_k, "top-k of the sampled continuation (0 = off)")
      ->check(cli::non_negative_integer);
  g.reference->add_option(
      "--data-dir", o.data_dir,
      "use train.bin/val.bin/val_windows.txt written by bench/reference/train.py gpt-fortunes "
      "--dump-data instead of --fortunes (identical data to the PyTorch reference)");
}

// The model the flags configure, for a vocabulary of `vocab_size` tokens.
models::GPTConfig model_config(const Options& o, int64_t vocab_size) {
  models::GPTConfig c = models::GPTConfig::preset(o.model);
  c.vocab_size = vocab_size;
  if (o.n_layer) c.n_layer = o.n_layer;
  if (o.n_head) c.n_head = o.n_head;
  if (o.d_model) c.d_model = o.d_model;
  if (o.context) c.context = o.context;
  c.dropout = o.dropout;
  return c;
}

// ============================================================================ data

struct Corpus {
  std::string train, val;
  std::vector<int64_t> val_offsets;  // byte offsets of the validation windows, if fixed
};

// bench/reference/train.py --dump-data: the exact bytes and validation windows of the reference.
Corpus read_dumped(const std::string& dir) {
  Corpus c{data::read_file_bytes(dir + "/train.bin", "train_gpt"),
           data::read_file_bytes(dir + "/val.bin", "train_gpt"),
           {}};
  std::istringstream in(data::read_file_bytes(dir + "/val_windows.txt", "train_gpt"));
  for (int64_t offset; in >> offset;) c.val_offsets.push_back(offset);
  return c;
}

// Every fortune, split 95/5 into training and validation entries (fixed seed: the split never
// changes with --seed), each part joined with blank lines.
Corpus read_corpus(const Options& o) {
  if (!o.data_dir.empty()) return read_dumped(o.data_dir);
  const data::TrainValSplit split = data::split_train_val(data::read_fortunes(o.fortunes), 0.05, 0);
  return {data::join_entries(split.train, "\n\n"), data::join_entries(split.val, "\n\n"), {}};
}

std::unique_ptr<data::Tokenizer> make_tokenizer(const Options& o, const Corpus& corpus) {
  const std::string path = o.run.out + "/tokenizer.txt";
  if (o.run.resume && fs::exists(path)) return data::load_tokenizer(path);
  std::unique_ptr<data::Tokenizer> tok;
  if (o.tokenizer == "byte") {
    tok = std::make_unique<data::ByteTokenizer>();
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    tok =
        std::make_unique<data::BPETokenizer>(data::BPETokenizer::train(corpus.train, o.bpe_vocab));
    fmt::print("trained a BPE tokenizer of {} tokens in {:.1f} s\n", tok->vocab_size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (distributed::is_main_process()) tok->save(path);
  return tok;
}

// Validation windows of context + 1 tokens, the same every evaluation: the reference's fixed
// byte offsets when given (they are token offsets only for the byte tokenizer), else evenly
// spaced over the validation tokens.
Tensor validation_windows(const std::vector<int64_t>& tokens, const Corpus& corpus, int64_t count,
                          int64_t context) {
  const int64_t len = context + 1, last = static_cast<int64_t>(tokens.size()) - len;
  LOOM_CHECK(last >= 0, "train_gpt: {} validation tokens are fewer than one window of {}",
             tokens.size(), len);
  std::vector<int64_t> starts;
  if (tokens.size() == corpus.val.size()) starts = corpus.val_offsets;  // one token per byte
  if (starts.empty())
    for (int64_t i = 0; i < count; ++i)
      starts.push_back(last * i / std::max<int64_t>(count - 1, 1));
  starts.resize(std::min(static_cast<size_t>(count), starts.size()));
  std::vector<int64_t> ids;
  for (int64_t s : starts) {
    LOOM_CHECK(s >= 0 && s <= last, "train_gpt: validation window offset {} outside [0, {}]", s,
               last);
    ids.insert(ids.end(), tokens.begin() + s, tokens.begin() + s + len);
  }
  return tensor_i64(ids, {static_cast<int64_t>(starts.size()), len});  // (N, context + 1)
}

// ============================================================================ checkpoints

// What --resume can check before any work, beside nn::TrainingRun's checks (the trainer, the
// plan): the checkpoint holds a GPT, and its tokenizer is the one asked for.
void check_resumable(const nn::TrainingRun& run, const Options& o) {
  const std::string path = run.checkpoint_path();
  const nn::Metadata meta = nn::read_metadata(path);
  const auto type = meta.find("model_type");
  LOOM_CHECK(type != meta.end() && type->second == "gpt",
             "train_gpt: checkpoint '{}' holds a {} model, not a GPT", path,
             type == meta.end() ? "(unnamed)" : type->second);
  const auto tokenizer = meta.find("tokenizer");
  LOOM_CHECK(tokenizer != meta.end() && tokenizer->second == o.tokenizer,
             "train_gpt: checkpoint '{}' was trained with --tokenizer {}, not {}", path,
             tokenizer == meta.end() ? "(none recorded)" : tokenizer->second, o.tokenizer);
}

// The checkpoint must be this model's: the config it records is the one configured.
void check_model(const nn::Metadata& meta, const models::GPTConfig& config,
                 const std::string& path) {
  models::GPTConfig saved = models::GPTConfig::from_metadata(meta, path);
  saved.dropout = config.dropout;  // the only field a resumed run may change
  LOOM_CHECK(saved.to_string() == config.to_string(),
             "train_gpt: checkpoint '{}' was written for another model ({}) than the one "
             "configured ({})",
             path, saved.to_string(), config.to_string());
}

// ============================================================================ evaluation

struct Eval {
  double loss = 0, bits_per_byte = 0;  // nats per token; bits per byte of text
};

// Mean cross-entropy over every position of the validation windows, in evaluation mode.
Eval evaluate(models::GPT& model, const Tensor& windows, const std::vector<double>& token_bytes,
              Device device) {
  NoGradGuard no_grad;
  model.eval();
  const int64_t n = windows.size(0), len = windows.size(1), chunk = 50;
  double nats = 0, bytes = 0;
  for (int64_t s = 0; s < n; s += chunk) {
    const int64_t m = std::min(chunk, n - s);
    const Tensor w = windows.narrow(0, s, m);
    const Tensor x = w.narrow(1, 0, len - 1).contiguous().to(device);  // (m, T)
    const Tensor y = w.narrow(1, 1, len - 1).contiguous();             // (m, T)
    const Tensor logits = model.forward(x);                            // (m, T, V)
    nats +=
        cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}).to(device)).item() *
        static_cast<double>(m * (len - 1));
    for (int64_t id : y.to_vector_i64()) bytes += token_bytes[static_cast<size_t>(id)];
  }
  model.train();
  const double tokens = static_cast<double>(n * (len - 1));
  return {nats / tokens, nats / bytes / std::log(2.0)};
}

}  // namespace

// ============================================================================ main

int main(int argc, char** argv) try {
  cli::use_short_omp_spin(argv);  // idle OpenMP threads spin briefly, then sleep
  // ---- options
  Options o;
  CLI::App app{"train_gpt: trains a GPT language model on the Debian fortune cookies"};
  add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  cli::init_distributed();  // a job of one unless started by mpirun/srun; rank 0 prints
  cli::print_config(app);
  nn::TrainingRun run("train_gpt", o.run);  // threads; --resume finds its checkpoint
  const Device device = run.device();
  // The model and the schedule are checked before any work, the model with the largest
  // vocabulary its tokenizer may have.
  models::GPTConfig config = model_config(o, o.tokenizer == "byte" ? 256 : o.bpe_vocab);
  cli::check_model_flags(app, "Model", config);
  cli::check_at_most(o.min_lr, "--min-lr", o.lr, "--lr");
  cli::create_directory(o.run.out, "--out");
  if (o.run.resume) check_resumable(run, o);
  // ---- data: text -> tokens -> windows of context + 1
  Corpus corpus = read_corpus(o);
  std::unique_ptr<data::Tokenizer> tok = make_tokenizer(o, corpus);
  const std::vector<int64_t> train_ids = tok->encode(corpus.train),
                             val_ids = tok->encode(corpus.val);
  std::vector<double> token_bytes(static_cast<size_t>(tok->vocab_size()));  // for bits per byte
  for (int64_t id = 0; id < tok->vocab_size(); ++id)
    token_bytes[static_cast<size_t>(id)] = static_cast<double>(tok->decode({id}).size());

  // ---- model
  config.vocab_size = tok->vocab_size();
  manual_seed(o.run.seed);
  const auto model_ptr = std::make_shared<models::GPT>(config);
  models::GPT& model = *model_ptr;
  model.to(device);
  nn::DistributedDataParallel ddp(model_ptr);  // rank 0's weights; gradients averaged in backward

  auto train_set = std::make_shared<data::LanguageModelDataset>(train_ids, config.context, 1);
  // Every process walks the same global batches; each trains on its own rows of them.
  const int64_t global_batch = o.batch * distributed::world_size();
  LOOM_CHECK(train_set->size() >= global_batch,
             "train_gpt: --batch {} is larger than the {} training windows of {} tokens allow for "
             "{} process(es); use a smaller --batch or --context, or more data",
             o.batch, train_set->size(), config.context + 1, distributed::world_size());
  const data::DataLoader loader(train_set, global_batch, /*shuffle=*/true, o.run.seed,
                                /*drop_last=*/true);
  data::BatchStream batches(loader);
  const Tensor val_windows = validation_windows(val_ids, corpus, o.eval_windows, config.context);

  // ---- optimizer: AdamW, weight decay on matrices only (nanoGPT's configure_optimizers)
  optim::AdamW opt(optim::weight_decay_groups(model.parameters(), o.lr, o.weight_decay), o.beta1,
                   o.beta2, 1e-8f);

  fmt::print("train_gpt: {} | tokenizer {} ({} tokens) | {} parameters | {} threads\n",
             config.to_string(), o.tokenizer, tok->vocab_size(), model.num_parameters(),
             get_num_threads());
  fmt::print("  data: train {} bytes -> {} tokens, val {} bytes -> {} tokens ({} windows)\n",
             corpus.train.size(), train_ids.size(), corpus.val.size(), val_ids.size(),
             val_windows.size(0));

  // ---- checkpoints: model, optimizer, config, tokenizer kind and where the run is; resume
  run.set_checkpoint({{"model", &model}}, &opt, [&](int64_t) {
    nn::Metadata meta = config.to_metadata();
    meta.insert({{"tokenizer", o.tokenizer}, {"seed", std::to_string(o.run.seed)}});
    return nn::CheckpointContent{meta, batches.epoch(), batches.index(), global_batch};
  });
  // The text and the tokenizer a resumed run must keep (tokenizer.txt is read back, not retrained).
  run.keep_flags({{"--fortunes", o.data_dir.empty() ? o.fortunes : ""},
                  {"--data-dir", o.data_dir},
                  {"--bpe-vocab", o.tokenizer == "bpe" ? std::to_string(o.bpe_vocab) : ""}});
  if (o.run.resume) {
    const nn::TrainerState state = run.resume(
        {{"model", &model}}, &opt,
        [&](const nn::Metadata& meta, const nn::TrainerState&) {
          check_model(meta, config, run.checkpoint_path());
        });
    // The position in sequences of the epoch, whatever global batch the checkpoint's run had.
    batches.seek(state.epoch, state.batch_index_for(global_batch, train_set->size(), run.source()));
  }

  // ---- training loop
  model.train();
  run.begin(global_batch * config.context, "tok/s");
  for (int64_t step = run.start(); step < run.total(); ++step) {
    const int64_t total = run.total(), warmup = std::min(o.warmup, total);  // short runs decay too
    const float lr = optim::warmup_cosine_lr(step + 1, warmup, total, o.lr, o.min_lr);
    opt.set_lr(lr);
    const data::Batch batch = batches.next();  // (global_batch, T) each; this rank's rows:
    const Tensor x = distributed::rank_chunk(batch[0]).to(device);  // (B, T)
    const Tensor y = distributed::rank_chunk(batch[1]).to(device);  // (B, T)
    const Tensor logits = model.forward(x);                         // (B, T, V)
    const Tensor loss = cross_entropy(logits.reshape({-1, config.vocab_size}), y.reshape({-1}));
    opt.zero_grad();
    loss.backward();
    if (o.grad_clip > 0) optim::clip_grad_norm(model.parameters(), o.grad_clip);
    opt.step();

    const int64_t done = step + 1;
    run.step_done(done, loss.item());  // the global batch's loss, into the progress line
    run.log(done, lr);
    const bool stop = run.checkpoint(done);  // before the evaluation; --stop-at
    if (done % o.eval_every == 0 && done != run.total() && run.main_process()) {
      Eval e;
      const double seconds =
          run.untimed([&] { e = evaluate(model, val_windows, token_bytes, device); });
      fmt::print(
          "eval step {} | val loss {:.4f} | perplexity {:.2f} | {:.3f} bits/byte ({:.1f} s)\n",
          done, e.loss, std::exp(e.loss), e.bits_per_byte, seconds);
    }
    if (stop) return 0;
  }
  const double train_s = run.training_seconds();  // evaluations left out

  // ---- final report (rank 0's; the last step is saved): validation, samples
  if (!run.main_process()) return 0;
  const Eval e = evaluate(model, val_windows, token_bytes, device);
  fmt::print(
      "final (step {}, {} training): val loss {:.4f} | perplexity {:.2f} | {:.3f} bits/byte\n",
      run.total(), optim::format_duration(train_s), e.loss, std::exp(e.loss), e.bits_per_byte);
  fmt::print("saved {} and {}/tokenizer.txt\n", run.checkpoint_path(), o.run.out);

  const std::vector<int64_t> prompt = tok->encode(o.prompt);
  if (!prompt.empty() && o.sample_tokens > 0) {
    fmt::print("\n--- greedy ---\n{}\n", tok->decode(model.generate(prompt, o.sample_tokens)));
    manual_seed(o.run.seed + 1);
    fmt::print("\n--- temperature {} ---\n{}\n", o.temperature,
               tok->decode(model.generate(prompt, o.sample_tokens, o.temperature, o.top_k)));
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
