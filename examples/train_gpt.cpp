// Trains a GPT language model on the Debian fortune cookies, top to bottom like nanoGPT's
// train.py: options, data, model, optimizer, the training loop (progress, evaluation,
// checkpoints), and samples at the end.
//
//   train_gpt                           the README demo: gpt-mini with a 512-token BPE, ~10 min
//                                       on 2 cores
//   train_gpt --tokenizer byte          byte-level, as ../shared/bench/torch_train_ref.py
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
  // bits/byte on the validation text of torch_train_ref.py, where bytes reach 2.56. The
  // default 1600 steps take about 9 minutes on 2 cores and reach 2.30 bits/byte.
  std::string tokenizer = "bpe";
  int64_t bpe_vocab = 512;
  std::string fortunes = data::kFortunesDir;
  std::string data_dir;  // train.bin / val.bin / val_windows.txt (torch_train_ref.py --dump-data)
  // optimisation (torch_train_ref.py's gpt-fortunes settings)
  int64_t steps = 1600, batch = 16, warmup = 200;
  double minutes = 0;  // > 0: plan the steps to fill this much training time
  float lr = 1e-3f, min_lr = 1e-4f, weight_decay = 0.1f, beta1 = 0.9f, beta2 = 0.95f;
  float grad_clip = 1.0f;
  // progress, evaluation, checkpoints
  int64_t log_every = 20, eval_every = 200, eval_windows = 200, checkpoint_every = 200;
  std::string out = "out-gpt";
  bool resume = false;
  int64_t stop_at = 0;  // > 0: end this run after that step, as an interruption would
  // samples at the end
  std::string prompt = "The meaning of life is";
  int64_t sample_tokens = 200;
  float temperature = 0.8f;
  int64_t top_k = 0;
  // machine
  std::string device = "cpu";
  int64_t threads = 0;  // 0 = OpenMP's default
  uint64_t seed = 0;
};

// Every field of Options as a --flag, in groups for --help; returns --steps (a resumed run keeps
// its planned total unless --steps is given).
CLI::Option* add_options(CLI::App& app, Options& o) {
  cli::show_defaults(app);
  const auto positive = CLI::PositiveNumber;
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
  m->add_option("--dropout", o.dropout, "dropout probability")->check(CLI::Range(0.0, 1.0));
  CLI::App* d = app.add_option_group("Data");
  d->add_option("--tokenizer", o.tokenizer,
                "byte | bpe (byte-level BPE trained on the training split)")
      ->check(CLI::IsMember({"byte", "bpe"}));
  d->add_option("--bpe-vocab", o.bpe_vocab, "vocabulary size of the BPE tokenizer")
      ->check(CLI::Range(int64_t{256}, int64_t{1} << 20));
  d->add_option("--fortunes", o.fortunes, "directory of fortune files");
  CLI::App* t = app.add_option_group("Optimisation");
  CLI::Option* steps =
      t->add_option("--steps", o.steps, "optimizer steps in total")->check(positive);
  t->add_option("--batch", o.batch, "sequences per batch")->check(positive);
  t->add_option("--lr", o.lr, "peak learning rate")->check(cli::finite_non_negative);
  t->add_option("--min-lr", o.min_lr, "learning rate at the end of the cosine decay")
      ->check(cli::finite_non_negative);
  t->add_option("--warmup", o.warmup, "linear warm-up steps")->check(cli::non_negative_integer);
  t->add_option("--weight-decay", o.weight_decay,
                "AdamW weight decay of matrices (not biases/gains)");
  t->add_option("--beta1", o.beta1, "AdamW beta1")->check(CLI::Range(0.0, 1.0));
  t->add_option("--beta2", o.beta2, "AdamW beta2")->check(CLI::Range(0.0, 1.0));
  t->add_option("--grad-clip", o.grad_clip, "clip the global gradient norm to this (0 = off)")
      ->check(cli::finite_non_negative);
  CLI::App* p = app.add_option_group("Progress, evaluation, checkpoints");
  p->add_option("--log-every", o.log_every, "steps between progress lines")->check(positive);
  p->add_option("--eval-every", o.eval_every, "steps between validation evaluations")
      ->check(positive);
  p->add_option("--eval-windows", o.eval_windows, "validation windows per evaluation")
      ->check(CLI::Range(int64_t{1}, kMaxEvalWindows));
  p->add_option("--checkpoint-every", o.checkpoint_every,
                "steps between checkpoints (0 = only at the end)")
      ->check(cli::non_negative_integer);
  p->add_option("--out", o.out, "directory for the checkpoint and the tokenizer");
  p->add_flag("--resume", o.resume, "continue from <out>/ckpt.safetensors (bare flag, or 1/0)")
      ->expected(0, 1);
  p->add_option("--stop-at", o.stop_at,
                "end this run after that step with a checkpoint, as if interrupted (0 = run to "
                "--steps); --resume then continues exactly");
  CLI::App* s = app.add_option_group("Samples at the end");
  s->add_option("--prompt", o.prompt, "prompt of the samples printed at the end");
  s->add_option("--sample-tokens", o.sample_tokens, "tokens per sample")
      ->check(cli::non_negative_integer);
  s->add_option("--temperature", o.temperature, "temperature of the sampled continuation")
      ->check(cli::finite_non_negative);
  s->add_option("--top-k", o.top_k, "top-k of the sampled continuation (0 = off)")
      ->check(cli::non_negative_integer);
  CLI::App* machine = app.add_option_group("Machine");
  cli::add_device(*machine, o.device);
  machine->add_option("--threads", o.threads, "CPU threads (0 = OpenMP's default)")
      ->check(cli::non_negative_integer);
  machine->add_option("--seed", o.seed,
                      "seed of the weights, the batch order, dropout and sampling")
      ->check(cli::non_negative_integer);
  CLI::App* r = app.add_option_group(
      "Reference plumbing", "for runs side by side with ../shared/bench/torch_train_ref.py");
  r->add_option("--data-dir", o.data_dir,
                "use train.bin/val.bin/val_windows.txt written by torch_train_ref.py --dump-data "
                "instead of --fortunes (identical data to the PyTorch reference)");
  r->add_option("--minutes", o.minutes,
                "plan the steps so that training takes this long, from the speed of steps 2-21, "
                "as torch_train_ref.py does (0 = use --steps)")
      ->check(cli::finite_non_negative);
  return steps;
}

// ============================================================================ data

struct Corpus {
  std::string train, val;
  std::vector<int64_t> val_offsets;  // byte offsets of the validation windows, if fixed
};

// torch_train_ref.py --dump-data: the exact bytes and validation windows of the reference.
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
  const std::string path = o.out + "/tokenizer.txt";
  if (o.resume && fs::exists(path)) return data::load_tokenizer(path);
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

// Model, optimizer and, as metadata, the model config, the tokenizer kind and where the run is.
void save_checkpoint(const std::string& path, const models::GPT& model, const optim::Optimizer& opt,
                     const nn::TrainerState& state, const Options& o) {
  nn::Metadata meta = model.config().to_metadata();
  meta.merge(state.to_metadata());
  meta.insert({{"tokenizer", o.tokenizer}, {"seed", std::to_string(o.seed)}});
  nn::save_checkpoint(path, {{"model", &model}}, &opt, meta);
}

// What --resume can check before any work: the checkpoint's metadata is readable, its
// tokenizer is the one asked for, and its step is not beyond --steps (running on would save
// an earlier step over the later checkpoint).
void check_resumable(const std::string& path, const Options& o, bool steps_given) {
  const nn::Metadata meta = nn::read_metadata(path);
  const nn::TrainerState state = nn::TrainerState::from_metadata(meta, "train_gpt: " + path);
  const auto tokenizer = meta.find("tokenizer");
  LOOM_CHECK(tokenizer != meta.end() && tokenizer->second == o.tokenizer,
             "train_gpt: checkpoint '{}' was trained with --tokenizer {}, not {}", path,
             tokenizer == meta.end() ? "(none recorded)" : tokenizer->second, o.tokenizer);
  LOOM_CHECK(!steps_given || state.step <= o.steps,
             "train_gpt: checkpoint '{}' is at step {}, beyond --steps {}; resuming would save "
             "an earlier step over it",
             path, state.step, o.steps);
  LOOM_CHECK(state.step <= state.total_steps || steps_given,
             "train_gpt: checkpoint '{}' is at step {}, beyond its planned {} steps", path,
             state.step, state.total_steps);
}

// Checks that the checkpoint is this model's and that its trainer state is readable, then
// restores model and optimizer (nn::load_checkpoint changes nothing if the file is bad).
nn::TrainerState load_checkpoint(const std::string& path, models::GPT& model,
                                 optim::Optimizer& opt) {
  const nn::Metadata meta = nn::read_metadata(path);
  models::GPTConfig saved = models::GPTConfig::from_metadata(meta, path);
  saved.dropout = model.config().dropout;  // the only field a resumed run may change
  LOOM_CHECK(saved.to_string() == model.config().to_string(),
             "train_gpt: checkpoint '{}' was written for another model ({}) than the one "
             "configured ({})",
             path, saved.to_string(), model.config().to_string());
  const nn::TrainerState state = nn::TrainerState::from_metadata(meta, "train_gpt: " + path);
  nn::load_checkpoint(path, {{"model", &model}}, &opt);
  return state;
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
  cli::use_passive_omp_wait(argv);  // idle OpenMP threads sleep instead of spinning
  // ---- options
  Options o;
  CLI::App app{"train_gpt: trains a GPT language model on the Debian fortune cookies"};
  const CLI::Option* steps_flag = add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  cli::init_distributed();  // a job of one unless started by mpirun/srun; rank 0 prints
  cli::print_config(app);
  if (o.threads > 0) set_num_threads(static_cast<int>(o.threads));
  const Device device = cli::device_of(o.device);
  fs::create_directories(o.out);
  const std::string ckpt_path = o.out + "/ckpt.safetensors";
  LOOM_CHECK(!o.resume || fs::exists(ckpt_path), "train_gpt: --resume but there is no '{}'",
             ckpt_path);
  if (o.resume) check_resumable(ckpt_path, o, steps_flag->count() > 0);
  // ---- data: text -> tokens -> windows of context + 1
  Corpus corpus = read_corpus(o);
  std::unique_ptr<data::Tokenizer> tok = make_tokenizer(o, corpus);
  const std::vector<int64_t> train_ids = tok->encode(corpus.train),
                             val_ids = tok->encode(corpus.val);
  std::vector<double> token_bytes(static_cast<size_t>(tok->vocab_size()));  // for bits per byte
  for (int64_t id = 0; id < tok->vocab_size(); ++id)
    token_bytes[static_cast<size_t>(id)] = static_cast<double>(tok->decode({id}).size());

  // ---- model
  models::GPTConfig config = models::GPTConfig::preset(o.model);
  config.vocab_size = tok->vocab_size();
  if (o.n_layer) config.n_layer = o.n_layer;
  if (o.n_head) config.n_head = o.n_head;
  if (o.d_model) config.d_model = o.d_model;
  if (o.context) config.context = o.context;
  config.dropout = o.dropout;
  manual_seed(o.seed);
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
  const data::DataLoader loader(train_set, global_batch, /*shuffle=*/true, o.seed,
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

  // ---- resume
  int64_t start = 0, total = o.steps;
  if (o.resume) {
    const nn::TrainerState state = load_checkpoint(ckpt_path, model, opt);
    start = state.step;
    if (steps_flag->count() == 0) total = state.total_steps;  // the run's plan, unless overridden
    // The position in sequences of the epoch, whatever global batch the checkpoint's run had.
    batches.seek(state.epoch,
                 state.batch_index_for(global_batch, train_set->size(), "train_gpt: " + ckpt_path));
    state.restore_rng();
    fmt::print("resumed from {} at step {} (epoch {}, batch {})\n", ckpt_path, start, state.epoch,
               state.batch_index);
  }
  auto checkpoint = [&](int64_t step) {
    const auto state =
        nn::TrainerState::capture(step, total, batches.epoch(), batches.index(), global_batch);
    if (distributed::is_main_process()) save_checkpoint(ckpt_path, model, opt, state, o);
  };

  // ---- training loop
  model.train();
  optim::ProgressMeter progress(global_batch * config.context);
  optim::TimeBudget budget(o.resume ? 0.0 : o.minutes);  // a resumed run keeps its plan
  for (int64_t step = start; step < total; ++step) {
    const int64_t warmup = std::min(o.warmup, total);  // a short run still gets its decay
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
    const auto loss_value =  // the global batch's: the mean over the ranks
        static_cast<float>(distributed::all_reduce_value(loss.item(), distributed::ReduceOp::Mean));
    LOOM_CHECK(std::isfinite(loss_value), "train_gpt: the loss became {} at step {}", loss_value,
               step);
    progress.add(loss_value);

    const int64_t done = step + 1;
    if (const auto planned = budget.observe(done, progress.elapsed())) {
      total = distributed::broadcast_value(*planned);  // every process stops at the same step
      fmt::print("planned steps: {} ({:.1f} ms/step)\n", total, budget.seconds_per_step() * 1e3);
    }
    if (done % o.log_every == 0 || done == total) {
      fmt::print("{}\n", progress.line(done, total, lr));
      std::fflush(stdout);
    }
    if (done % o.eval_every == 0 && done != total && distributed::is_main_process()) {
      const double t0 = progress.elapsed();
      const Eval e = evaluate(model, val_windows, token_bytes, device);
      fmt::print(
          "eval step {} | val loss {:.4f} | perplexity {:.2f} | {:.3f} bits/byte ({:.1f} s)\n",
          done, e.loss, std::exp(e.loss), e.bits_per_byte, progress.elapsed() - t0);
      progress.exclude(progress.elapsed() - t0);  // keep evaluation out of the tokens/s figure
    }
    if (o.checkpoint_every > 0 && done % o.checkpoint_every == 0 && done != total) checkpoint(done);
    if (done == o.stop_at && done != total) {
      checkpoint(done);
      fmt::print("stopped at step {} as asked (--stop-at); --resume continues from {}\n", done,
                 ckpt_path);
      return 0;
    }
  }
  const double train_s = progress.elapsed();

  // ---- final report: validation, checkpoint, samples (rank 0's)
  if (!distributed::is_main_process()) return 0;
  const Eval e = evaluate(model, val_windows, token_bytes, device);
  fmt::print(
      "final (step {}, {} training): val loss {:.4f} | perplexity {:.2f} | {:.3f} bits/byte\n",
      total, optim::format_duration(train_s), e.loss, std::exp(e.loss), e.bits_per_byte);
  checkpoint(total);
  fmt::print("saved {} and {}/tokenizer.txt\n", ckpt_path, o.out);

  const std::vector<int64_t> prompt = tok->encode(o.prompt);
  if (!prompt.empty() && o.sample_tokens > 0) {
    fmt::print("\n--- greedy ---\n{}\n", tok->decode(model.generate(prompt, o.sample_tokens)));
    manual_seed(o.seed + 1);
    fmt::print("\n--- temperature {} ---\n{}\n", o.temperature,
               tok->decode(model.generate(prompt, o.sample_tokens, o.temperature, o.top_k)));
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
