// Pre-trains BERT (Devlin et al. 2018) on the Debian fortune cookies with its two tasks, masked
// language modelling and next-sentence prediction, top to bottom like nanoGPT's train.py:
// options, data (a WordPiece vocabulary learned from the training fortunes, sentence pairs,
// masking redrawn every epoch), model, optimizer, the training loop (progress, held-out MLM and
// NSP accuracy, checkpoints), and a final report.
//
//   train_bert --minutes 10                bert-mini (H 256, 4 layers), 8192-token WordPiece
//   train_bert --steps 200 --out run1      a shorter run; `--resume` continues it exactly
//   train_bert --dump-data DIR             writes the tokenized pairs for a reference trainer
//   train_bert --help                      every option
//
// Files written to --out: tokenizer.txt, ckpt.safetensors (model + AdamW state + config + where
// the run is, one file written atomically), bert.safetensors (Hugging Face's BertForPreTraining
// layout), log.csv and curves.png. fill_mask and finetune_bert read the directory.
//
// Recipe (Devlin et al. 2018, A.2): AdamW (eps 1e-6, weight decay 0.01 on every weight but
// LayerNorms and biases), linear warm-up then linear decay, gradient norm clipped to 1, dropout
// 0.1; loss = MLM cross-entropy over the predicted positions + NSP cross-entropy, the MLM head
// applied at those positions only (Bert::pretraining_loss, as google-research/bert's code).
//
// `mpirun -np N train_bert` (as train_gpt): every process plans the same length-grouped batches
// of N x --batch pairs and takes every N-th pair of each (--batch each, balanced lengths); the
// MLM mean is weighted by the rank's share of the batch's predicted positions
// (distributed::global_mean_loss), NSP is a mean over equal shares, so N processes train what one
// process at N x --batch does, to float rounding (with --dropout 0: masks differ by rank). Rank 0
// alone prints, evaluates (in chunks of the global batch) and writes. The batches depend on their
// size, so --resume takes any N whose N x --batch equals the checkpoint's.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "bert_dump.h"
#include "bert_files.h"
#include "cli.h"
#include "loom.h"

using namespace loom;
using examples::dump_data;
namespace fs = std::filesystem;

namespace {

// ============================================================================ options

struct Options {
  // model (0 = the preset's)
  std::string model = "bert-mini";
  int64_t hidden = 0, layers = 0, heads = 0, intermediate = 0;
  float dropout = 0.1f;
  // data
  std::string fortunes = data::kFortunesDir;
  int64_t vocab_size = 8192, max_seq_len = 128;
  double val_fraction = 0.05;
  std::string dump_data;
  // optimisation (--steps 3000 and --minutes in `run`)
  int64_t batch = 32, warmup = 300;
  float lr = 5e-4f, weight_decay = 0.01f, grad_clip = 1.0f;
  // evaluation (checkpoints, --out, --resume, machine: nn::RunOptions)
  int64_t eval_every = 250, eval_pairs = 512;
  nn::RunOptions run{.out = "out-bert", .steps = 3000, .checkpoint_every = 500};
};

void add_options(CLI::App& app, Options& o) {
  cli::show_defaults(app);
  const auto non_negative = cli::non_negative_integer;
  CLI::App* m = app.add_option_group("Model");
  m->add_option("--model", o.model, "BertConfig preset")
      ->check(CLI::IsMember(models::BertConfig::preset_names()));
  m->add_option("--hidden", o.hidden, "hidden width H (0 = the preset's)")->check(non_negative);
  m->add_option("--layers", o.layers, "encoder layers (0 = the preset's)")->check(non_negative);
  m->add_option("--heads", o.heads, "attention heads (0 = the preset's)")->check(non_negative);
  m->add_option("--intermediate", o.intermediate, "feed-forward width (0 = the preset's)")
      ->check(non_negative);
  m->add_option("--dropout", o.dropout, "dropout probability")->check(cli::range(0.0, 0.99));
  CLI::App* d = app.add_option_group("Data");
  d->add_option("--fortunes", o.fortunes, "directory of the fortune files");
  d->add_option("--vocab-size", o.vocab_size, "WordPiece vocabulary learned from the fortunes")
      ->check(cli::range(int64_t{64}, int64_t{1} << 20));
  d->add_option("--max-seq-len", o.max_seq_len, "[CLS] A [SEP] B [SEP] at most this long")
      ->check(cli::range(int64_t{8}, int64_t{4096}));
  d->add_option("--val-fraction", o.val_fraction, "fortunes held out for evaluation")
      ->check(cli::range(0.001, 0.5));
  d->add_option("--dump-data", o.dump_data,
                "write the tokenizer and the tokenized pairs to this directory and exit")
      ->check(cli::output_directory);
  const cli::RunGroups g = cli::add_run_options(
      app, o.run,
      {.out = "directory for tokenizer, checkpoint, log and curves",
       .seed = "seed of the split, pairs, masking, weights, dropout",
       .minutes_note = "overrides --steps; bench/reference/train.py bert plans alike"});
  CLI::App* t = g.optimisation;
  t->add_option("--batch", o.batch, "sentence pairs per batch")->check(cli::positive_integer);
  t->add_option("--lr", o.lr, "peak learning rate")->check(cli::positive);
  t->add_option("--warmup", o.warmup, "linear warm-up steps")->check(non_negative);
  t->add_option("--weight-decay", o.weight_decay, "AdamW weight decay (not on LayerNorm, biases)")
      ->check(cli::finite_non_negative);
  t->add_option("--grad-clip", o.grad_clip, "clip the gradient norm (0 = off)")
      ->check(cli::finite_non_negative);
  g.progress
      ->add_option("--eval-every", o.eval_every, "steps between held-out evaluations (0 = end)")
      ->check(non_negative);
  g.progress->add_option("--eval-pairs", o.eval_pairs, "held-out pairs evaluated")
      ->check(cli::range(int64_t{1}, int64_t{100000}));
}

models::BertConfig model_config(const Options& o, int64_t vocab_size) {
  models::BertConfig c = models::BertConfig::preset(o.model);
  c.vocab_size = vocab_size;
  if (o.hidden > 0) c.hidden = o.hidden;
  if (o.layers > 0) c.n_layer = o.layers;
  if (o.heads > 0) c.n_head = o.heads;
  if (o.intermediate > 0) c.intermediate = o.intermediate;
  c.dropout = o.dropout;
  LOOM_CHECK(o.max_seq_len <= c.max_position,
             "train_bert: --max-seq-len {} is longer than the model's {} positions", o.max_seq_len,
             c.max_position);
  return c;
}

// ============================================================================ data

// The batches of every epoch, a pure function of (seed, epoch), so a resumed run sees the same
// ones: the pairs in a random order, cut into groups of kGroupBatches batches; within a group
// sorted by length (stable) and cut into batches, so that a batch holds pairs of similar length
// and little padding (Hugging Face's group_by_length); then the batches in a random order.
// An epoch has size / batch batches (the remainder waits for another epoch's order).
class BatchPlanner {
 public:
  static constexpr int64_t kGroupBatches = 50;

  BatchPlanner(const data::BertPretrainingData& pairs, int64_t batch, uint64_t seed)
      : batch_(batch), per_epoch_(pairs.size() / batch), seed_(seed) {
    LOOM_CHECK(per_epoch_ > 0, "train_bert: --batch {} is larger than the {} training pairs", batch,
               pairs.size());
    for (int64_t i = 0; i < pairs.size(); ++i)
      lengths_.push_back(static_cast<int64_t>(pairs.unmasked_ids(i).size()));
  }
  // The mean of batch x (longest pair) over the batches of epoch 0: the tokens a step computes
  // on average, padding included, for planning --minutes.
  double mean_padded_tokens() {
    plan_epoch(0);
    double sum = 0;
    for (int64_t k = 0; k < per_epoch_; ++k) {
      int64_t longest = 0;
      for (int64_t j = k * batch_; j < (k + 1) * batch_; ++j)
        longest =
            std::max(longest, lengths_[static_cast<size_t>(batches_[static_cast<size_t>(j)])]);
      sum += static_cast<double>(batch_ * longest);
    }
    return sum / static_cast<double>(per_epoch_);
  }
  // The indices of the step's batch and its epoch (which draws the masking).
  std::pair<std::vector<int64_t>, int64_t> operator()(int64_t step) {
    const int64_t epoch = step / per_epoch_;
    if (epoch != epoch_) plan_epoch(epoch);
    const int64_t k = order_[static_cast<size_t>(step % per_epoch_)];
    return {{batches_.begin() + k * batch_, batches_.begin() + (k + 1) * batch_}, epoch};
  }

 private:
  void plan_epoch(int64_t epoch) {
    const uint64_t seed = data::mix_seeds(seed_, static_cast<uint64_t>(epoch));
    std::vector<int64_t> perm =
        data::random_permutation(static_cast<int64_t>(lengths_.size()), seed);
    perm.resize(static_cast<size_t>(per_epoch_ * batch_));
    const int64_t group = kGroupBatches * batch_;
    for (size_t g = 0; g < perm.size(); g += static_cast<size_t>(group))
      std::stable_sort(perm.begin() + g, perm.begin() + std::min(perm.size(), g + group),
                       [&](int64_t a, int64_t b) { return lengths_[a] < lengths_[b]; });
    batches_ = std::move(perm);
    order_ = data::random_permutation(per_epoch_, data::mix_seeds(seed, 0x62617463));  // "batc"
    epoch_ = epoch;
  }

  int64_t batch_, per_epoch_;
  uint64_t seed_;
  std::vector<int64_t> lengths_, batches_, order_;  // batches_: batch k = [k * batch, +batch)
  int64_t epoch_ = -1;
};

// ============================================================================ model

// Decayed: weight matrices and embeddings; not decayed: LayerNorm parameters and biases
// (Hugging Face's no_decay = ["bias", "LayerNorm.weight"]).
std::vector<optim::ParamGroup> param_groups(nn::Module& model, float lr, float weight_decay) {
  optim::ParamGroup decay{{}, lr, weight_decay}, no_decay{{}, lr, 0.0f};
  for (auto& [name, p] : model.named_parameters()) {
    const bool skip = name.find("LayerNorm") != std::string::npos || name.ends_with("bias");
    (skip ? no_decay : decay).params.push_back(p);
  }
  return {decay, no_decay};
}

struct Eval {
  double mlm_accuracy, nsp_accuracy, loss;
};

// Held-out MLM accuracy (argmax = label at the predicted positions) and NSP accuracy on the
// first `count` validation pairs, always masked as in epoch 0.
Eval evaluate(models::Bert& model, const data::BertPretrainingData& val, int64_t count,
              int64_t batch, Device device) {
  NoGradGuard no_grad;
  model.eval();
  int64_t mlm_right = 0, mlm_total = 0, nsp_right = 0, pairs = 0;
  double loss = 0;
  for (int64_t s = 0; s < std::min(count, val.size()); s += batch) {
    std::vector<int64_t> indices;
    for (int64_t i = s; i < std::min({s + batch, count, val.size()}); ++i) indices.push_back(i);
    const data::BertBatch b = val.batch(indices, 0, device);
    // The MLM head at the predicted positions only, as in training.
    const models::BertMaskedOutput out =
        model.forward_masked(b.ids, b.token_type_ids, b.attention_mask, b.mlm_labels);
    loss += (cross_entropy(out.mlm_logits, out.mlm_targets, -100) +
             cross_entropy(out.nsp_logits, b.nsp_labels))
                .item() *
            static_cast<double>(indices.size());
    const std::vector<int64_t> predicted = argmax(out.mlm_logits, 1).to_vector_i64();  // (n)
    const std::vector<int64_t> labels = out.mlm_targets.to_vector_i64();
    for (size_t i = 0; i < labels.size(); ++i) {
      if (labels[i] == -100) continue;
      ++mlm_total;
      mlm_right += predicted[i] == labels[i];
    }
    const std::vector<int64_t> nsp = argmax(out.nsp_logits, 1).to_vector_i64();
    const std::vector<int64_t> nsp_labels = b.nsp_labels.to_vector_i64();
    for (size_t i = 0; i < nsp.size(); ++i) nsp_right += nsp[i] == nsp_labels[i];
    pairs += static_cast<int64_t>(indices.size());
  }
  model.train();
  return {static_cast<double>(mlm_right) / static_cast<double>(std::max<int64_t>(mlm_total, 1)),
          static_cast<double>(nsp_right) / static_cast<double>(pairs),
          loss / static_cast<double>(pairs)};
}

void plot_curves(const std::string& csv, const std::string& png) {
  const data::CsvTable log = data::read_csv(csv);
  data::save_plots(
      png, {{{log.series("step", "loss", "train loss (MLM + NSP)")},
             {"BERT pre-training: loss", "step", "loss"}},
            {{log.series("step", "val_mlm_accuracy", "held-out MLM accuracy", 100),
              log.series("step", "val_nsp_accuracy", "held-out NSP accuracy", 100)},
             {"BERT pre-training: held-out accuracy", "step", "%"}}});
}

}  // namespace

// ============================================================================ main

int main(int argc, char** argv) try {
  cli::use_short_omp_spin(argv);
  // ---- options
  Options o;
  CLI::App app{"train_bert: pre-trains BERT (masked LM + next sentence) on the fortunes"};
  add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  cli::init_distributed();  // a job of one unless started by mpirun/srun; rank 0 prints
  cli::print_config(app);
  nn::TrainingRun run("train_bert", o.run);  // threads; --resume finds its checkpoint
  const Device device = run.device();
  const uint64_t seed = o.run.seed;
  models::BertConfig config = model_config(o, o.vocab_size);
  cli::check_model_flags(app, "Model", config);  // before any work
  const std::string dir = o.dump_data.empty() ? o.run.out : o.dump_data;
  cli::create_directory(dir, o.dump_data.empty() ? "--out" : "--dump-data");

  // ---- data: fortunes split, a WordPiece vocabulary from the training part, sentence pairs
  const data::TrainValSplit split =
      data::split_train_val(data::read_fortunes(o.fortunes), o.val_fraction, seed);
  const std::string tok_path = examples::tokenizer_path(dir);
  const data::WordPieceTokenizer tok =
      o.run.resume ? data::WordPieceTokenizer::load(tok_path)
                   : data::WordPieceTokenizer::train(split.train, o.vocab_size);
  if (!o.run.resume && run.main_process()) tok.save(tok_path);
  data::BertPretrainingConfig data_config{.max_seq_len = o.max_seq_len, .seed = seed};
  const data::BertPretrainingData train_pairs(split.train, tok, data_config);
  data_config.seed = seed + 1;
  const data::BertPretrainingData val_pairs(split.val, tok, data_config);
  int64_t tokens = 0;
  for (int64_t i = 0; i < train_pairs.size(); ++i)
    tokens += static_cast<int64_t>(train_pairs.unmasked_ids(i).size());
  fmt::print(
      "  data: {} training fortunes -> {} pairs ({:.1f} tokens each), {} held-out pairs; "
      "WordPiece vocabulary {}\n",
      split.train.size(), train_pairs.size(),
      static_cast<double>(tokens) / static_cast<double>(train_pairs.size()), val_pairs.size(),
      tok.vocab_size());
  if (!o.dump_data.empty()) {
    if (run.main_process()) dump_data(train_pairs, val_pairs, tok, dir);  // rank 0 writes
    return 0;
  }

  // ---- model and optimizer
  manual_seed(seed);
  config.vocab_size = tok.vocab_size();  // train() stops early if the text runs out of pairs
  const auto model_ptr = std::make_shared<models::Bert>(config);
  models::Bert& model = *model_ptr;
  model.to(device);
  nn::DistributedDataParallel ddp(model_ptr);  // rank 0's weights; gradients averaged
  optim::AdamW opt(param_groups(model, o.lr, o.weight_decay), 0.9f, 0.999f, 1e-6f);
  fmt::print("train_bert: {} | {} parameters | {} threads\n", config.to_string(),
             model.num_parameters(), get_num_threads());

  // ---- checkpoints (model, AdamW, config, the fortune split, the step) and resume
  const int64_t global_batch = o.batch * distributed::world_size();  // pairs a step
  if (o.run.minutes > 0) run.set_total(nn::TrainingRun::kUnplanned);  // planned at step 21
  // The fortunes, their split and the pairs a resumed run must keep (tokenizer.txt is read back).
  run.keep_flags({{"--fortunes", o.fortunes},
                  {"--val-fraction", fmt::format("{}", o.val_fraction)},
                  {"--vocab-size", std::to_string(o.vocab_size)},
                  {"--max-seq-len", std::to_string(o.max_seq_len)}});
  run.set_checkpoint({{"model", &model}}, &opt, [&](int64_t step) {
    nn::Metadata meta = config.to_metadata();
    // The fortune split, so that finetune_bert can test on fortunes pre-training never saw.
    meta.insert({{"fortunes", o.fortunes},
                 {"val_fraction", fmt::format("{}", o.val_fraction)},
                 {"split_seed", std::to_string(seed)}});
    return nn::CheckpointContent{meta, step / (train_pairs.size() / global_batch), 0, global_batch};
  });
  if (o.run.resume)
    run.resume(
        {{"model", &model}}, &opt,
        [&](const nn::Metadata& meta, const nn::TrainerState& state) {
          const auto saved = models::BertConfig::from_metadata(meta, run.checkpoint_path());
          LOOM_CHECK(saved.to_string() == config.to_string(),
                     "train_bert: '{}' holds a different model: {}", run.checkpoint_path(),
                     saved.to_string());
          state.check_global_batch(global_batch, "pairs", run.source());
        },
        /*print_position=*/false);
  data::CsvLog csv = run.open_log(
      {"step", "epoch", "loss", "lr", "val_loss", "val_mlm_accuracy", "val_nsp_accuracy"});

  // ---- training loop
  model.train();
  BatchPlanner planner(train_pairs, global_batch, seed);  // the same on every rank
  // --minutes plans from the time per padded token: batches of short and of long pairs differ up
  // to 10x in time, so the expected step is the epoch's mean (this rank's share of it).
  if (o.run.minutes > 0 && !o.run.resume)
    run.plan_by_work(planner.mean_padded_tokens() / distributed::world_size(), " expected");
  run.begin(global_batch * tokens / train_pairs.size(), "tok/s");
  for (int64_t step = run.start(); step < run.total(); ++step) {
    const int64_t total = run.total();
    const float lr = optim::warmup_linear_lr(step + 1, std::min(o.warmup, total), total, o.lr);
    opt.set_lr(lr);
    const auto [indices, epoch] = planner(step);
    const data::BertBatch b =  // (B, T): every N-th pair of the global batch
        train_pairs.batch(distributed::rank_stride(indices), epoch, device);
    // The MLM head only at the predicted positions (as google-research/bert's run_pretraining.py);
    // the loss of Bert::pretraining_loss, its MLM mean weighted by this rank's share.
    const models::BertMaskedOutput out =
        model.forward_masked(b.ids, b.token_type_ids, b.attention_mask, b.mlm_labels);
    const Tensor mlm = cross_entropy(out.mlm_logits, out.mlm_targets, -100);  // mean over (n)
    const Tensor loss = distributed::global_mean_loss(mlm, out.mlm_targets.size(0)) +
                        cross_entropy(out.nsp_logits, b.nsp_labels);
    opt.zero_grad();
    loss.backward();
    if (o.grad_clip > 0) optim::clip_grad_norm(model.parameters(), o.grad_clip);
    opt.step();

    const int64_t done = step + 1;
    const float loss_value =  // the global batch's; the step's work: its padded tokens
        run.step_done(done, loss.item(), static_cast<double>(b.ids.numel()));
    run.log(done, lr, fmt::format(" | epoch {}", epoch));
    const bool stop = run.checkpoint(done);  // before the evaluation; --stop-at, the last step
    Eval eval{std::nan(""), std::nan(""), std::nan("")};
    if (((o.eval_every > 0 && done % o.eval_every == 0) || done == run.total()) &&
        run.main_process()) {
      const double seconds = run.untimed(
          [&] { eval = evaluate(model, val_pairs, o.eval_pairs, global_batch, device); });
      fmt::print(
          "eval step {} | held-out loss {:.4f} | MLM accuracy {:.2f}% | NSP accuracy "
          "{:.2f}% ({:.1f} s)\n",
          done, eval.loss, 100 * eval.mlm_accuracy, 100 * eval.nsp_accuracy, seconds);
    }
    csv.row({static_cast<double>(done), static_cast<double>(epoch), loss_value, lr, eval.loss,
             eval.mlm_accuracy, eval.nsp_accuracy});
    if (stop) return 0;
  }

  // ---- final report (rank 0's; the last step is saved)
  if (!run.main_process()) return 0;
  const std::string& out = o.run.out;
  models::save_bert_hf(model, out + "/bert.safetensors");
  plot_curves(run.log_path(), out + "/curves.png");
  fmt::print(
      "final (step {}, {} training): see the last eval line; saved {}, {}/bert.safetensors, "
      "{}, {}/curves.png, {}\n",
      run.total(), optim::format_duration(run.training_seconds()), run.checkpoint_path(), out,
      run.log_path(), out, tok_path);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
