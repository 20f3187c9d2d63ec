// Pre-trains BERT (Devlin et al. 2018) on the Debian fortune cookies with its two tasks, masked
// language modelling and next-sentence prediction, top to bottom like nanoGPT's train.py:
// options, data (a WordPiece vocabulary learned from the training fortunes, sentence pairs,
// masking redrawn every epoch), model, optimizer, the training loop (progress, held-out MLM and
// NSP accuracy, checkpoints), and a final report.
//
//   train_bert --minutes 10                bert-mini (H 256, 4 layers), 8192-token WordPiece
//   train_bert --steps 200 --out run1      a shorter run; `--resume` continues it exactly
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
#include <numeric>
#include <string>
#include <vector>

#include "bert_data.h"
#include "bert_files.h"
#include "cli.h"
#include "loom.h"
#include "train/minutes_plan.h"

using namespace loom;
using examples::epoch_batches;

namespace {

// ============================================================================ options

struct Options {
  // model (0 = the preset's)
  std::string model = "bert-mini";
  int64_t hidden = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t intermediate = 0;
  float dropout = 0.1f;
  examples::BertDataFlags corpus;  // data: --fortunes, --vocab-size, --max-seq-len, --val-fraction
  // optimisation (--minutes plans the steps per padded token), evaluation, checkpoints, machine
  nn::TrainOptions train{.steps = 3000,
                         .lr = 5e-4f,
                         .warmup = 300,
                         .weight_decay = 0.01f,
                         .eval_every = 250,
                         .checkpoint_every = 500,
                         .out = "out-bert"};
  int64_t eval_pairs = 512;
};

void add_options(CLI::App& app, Options& o) {
  app.description("train_bert: pre-trains BERT (masked LM + next sentence) on the fortunes");
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
  examples::add_data_flags(*app.add_option_group("Data"), o.corpus);
  const cli::TrainGroups g = cli::add_train_options(
      app, o.train,
      {.without = {"min_lr"},
       .notes = {{"minutes", "overrides --steps; bench/reference/train.py bert plans alike"},
                 {"batch", "sentence pairs"},
                 {"weight_decay", "not on LayerNorm, biases"},
                 {"out", "tokenizer, checkpoint, log and curves"},
                 {"seed", "and of the split, pairs and masking"}}});
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
  LOOM_CHECK(o.corpus.max_seq_len <= c.max_position,
             "train_bert: --max-seq-len {} is longer than the model's {} positions",
             o.corpus.max_seq_len, c.max_position);
  return c;
}

// ============================================================================ evaluation

struct Eval {
  double mlm_accuracy = std::nan("");
  double nsp_accuracy = std::nan("");
  double loss = std::nan("");
};

// Held-out MLM accuracy (argmax = label at the predicted positions) and NSP accuracy on the
// first `count` validation pairs, always masked as in epoch 0.
Eval evaluate(models::Bert& model, const data::BertPretrainingData& val, int64_t count,
              int64_t batch, Device device) {
  nn::EvalGuard eval(model);
  const int64_t pairs = std::min(count, val.size());
  double mlm_right = 0;
  double mlm_total = 0;
  double nsp_right = 0;
  double loss = 0;
  for (int64_t s = 0; s < pairs; s += batch) {
    std::vector<int64_t> indices;
    for (int64_t i = s; i < std::min(s + batch, pairs); ++i) indices.push_back(i);
    const data::BertBatch b = val.batch(indices, 0, device);
    // The MLM head at the predicted positions only, as in training: (n, V) logits, (n) labels.
    const models::BertMaskedOutput out =
        model.forward_masked(b.ids, b.token_type_ids, b.attention_mask, b.mlm_labels);
    const Tensor pair_loss = cross_entropy(out.mlm_logits, out.mlm_targets, -100) +
                             cross_entropy(out.nsp_logits, b.nsp_labels);
    loss += pair_loss.item() * static_cast<double>(indices.size());
    mlm_right += sum(eq(argmax(out.mlm_logits, 1), out.mlm_targets)).item();
    mlm_total += static_cast<double>(out.mlm_targets.size(0));
    nsp_right += sum(eq(argmax(out.nsp_logits, 1), b.nsp_labels)).item();
  }
  const auto n = static_cast<double>(pairs);
  return {mlm_right / std::max(mlm_total, 1.0), nsp_right / n, loss / n};
}

// ============================================================================ main

// The run, once the flags are parsed (main, below).
int train(CLI::App& app, Options& o) {
  nn::TrainingRun run = cli::start_training(app, "train_bert", o.train);
  const Device device = run.device();
  const uint64_t seed = o.train.seed;
  models::BertConfig config = model_config(o, o.corpus.vocab_size);
  cli::check_model_flags(app, "Model", config);          // before any work
  if (o.train.minutes > 0) nn::await_minutes_plan(run);  // at step 21; no --stop-at before
  cli::create_directory(o.train.out, "--out");

  // ---- data: fortunes split, a WordPiece vocabulary from the training part, sentence pairs
  const data::TrainValSplit split =
      data::split_train_val(data::read_fortunes(o.corpus.fortunes), o.corpus.val_fraction, seed);
  const std::string tok_path = examples::tokenizer_path(o.train.out);
  const data::WordPieceTokenizer tok =
      o.train.resume ? data::WordPieceTokenizer::load(tok_path)
                     : data::WordPieceTokenizer::train(split.train, o.corpus.vocab_size);
  if (!o.train.resume && run.main_process()) tok.save(tok_path);
  const examples::SentencePairs pairs =
      examples::sentence_pairs(split, tok, o.corpus.max_seq_len, seed);  // masked anew every epoch
  const std::vector<int64_t> lengths = examples::pair_lengths(pairs.train);
  const int64_t tokens = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  fmt::print(
      "  data: {} training fortunes -> {} pairs ({:.1f} tokens each), {} held-out pairs; "
      "WordPiece vocabulary {}\n",
      split.train.size(), pairs.train.size(),
      static_cast<double>(tokens) / static_cast<double>(pairs.train.size()), pairs.val.size(),
      tok.vocab_size());

  // ---- model and optimizer: AdamW, no weight decay on LayerNorms and biases (Hugging Face's)
  manual_seed(seed);
  config.vocab_size = tok.vocab_size();  // train() stops early if the text runs out of pairs
  const auto model = run.make_model<models::Bert>(config);  // rank 0's weights, gradients averaged
  optim::AdamW opt(nn::weight_decay_groups(*model, o.train.lr, o.train.weight_decay), 0.9f, 0.999f,
                   1e-6f);
  fmt::print("train_bert: {} | {} parameters | {} threads\n", config.to_string(),
             model->num_parameters(), get_num_threads());

  // ---- checkpoints (model, AdamW, config, the fortune split, the step) and resume
  const int64_t global_batch = run.global_batch(pairs.train.size(), "training pairs");
  const int64_t per_epoch = pairs.train.size() / global_batch;  // batches an epoch
  // The fortunes, their split and the pairs a resumed run must keep (tokenizer.txt is read back).
  run.keep_flags({{"--fortunes", o.corpus.fortunes},
                  {"--val-fraction", fmt::format("{}", o.corpus.val_fraction)},
                  {"--vocab-size", std::to_string(o.corpus.vocab_size)},
                  {"--max-seq-len", std::to_string(o.corpus.max_seq_len)}});
  run.keep_config(config.to_metadata());  // and the model
  run.set_checkpoint({{"model", model.get()}}, &opt, [&](int64_t step) {
    // The fortune split, so that finetune_bert can test on fortunes pre-training never saw.
    const nn::Metadata split_meta = {{"fortunes", o.corpus.fortunes},
                                     {"val_fraction", fmt::format("{}", o.corpus.val_fraction)},
                                     {"split_seed", std::to_string(seed)}};
    return nn::CheckpointContent{split_meta, step / per_epoch, 0, global_batch};
  });
  if (o.train.resume) {
    const auto same_batch = [&](const nn::Metadata&, const nn::TrainerState& state) {
      state.check_global_batch(global_batch, "pairs", run.source());
    };
    run.resume({{"model", model.get()}}, &opt, same_batch, /*print_position=*/false);
  }
  data::CsvLog csv = run.open_log(
      {"step", "epoch", "loss", "lr", "val_loss", "val_mlm_accuracy", "val_nsp_accuracy"});

  // ---- training loop
  model->train();
  // The batches of the current epoch, the same on every rank.
  int64_t epoch = run.start() / per_epoch;
  std::vector<std::vector<int64_t>> batches = epoch_batches(lengths, global_batch, seed, epoch);
  // --minutes plans from the time per padded token: batches of short and of long pairs differ up
  // to 10x in time, so the expected step is the epoch's mean (this rank's share of it).
  if (o.train.minutes > 0 && !o.train.resume) {
    const double mean = examples::mean_padded_tokens(lengths, global_batch, seed);
    run.plan_by_work(mean / distributed::world_size(), " expected");
  }
  run.begin(global_batch * tokens / pairs.train.size(), "tok/s");
  for (int64_t step = run.start(); step < run.total(); ++step) {
    const int64_t total = run.total();
    const int64_t warmup = std::min(o.train.warmup, total);
    const float lr = optim::warmup_linear_lr(step + 1, warmup, total, o.train.lr);
    opt.set_lr(lr);
    if (step / per_epoch != epoch) {
      epoch = step / per_epoch;
      batches = epoch_batches(lengths, global_batch, seed, epoch);
    }
    const std::vector<int64_t>& indices = batches[static_cast<size_t>(step % per_epoch)];
    const data::BertBatch b =  // (B, T): every N-th pair of the global batch; epoch's masking
        pairs.train.batch(distributed::rank_stride(indices), epoch, device);
    // The MLM head only at the predicted positions (as google-research/bert's run_pretraining.py);
    // the loss of Bert::pretraining_loss, its MLM mean weighted by this rank's share.
    const models::BertMaskedOutput out =
        model->forward_masked(b.ids, b.token_type_ids, b.attention_mask, b.mlm_labels);
    const Tensor mlm = cross_entropy(out.mlm_logits, out.mlm_targets, -100);  // mean over (n)
    const Tensor loss = distributed::global_mean_loss(mlm, out.mlm_targets.size(0)) +
                        cross_entropy(out.nsp_logits, b.nsp_labels);
    run.backward_and_step(loss, opt, model->parameters());

    const int64_t done = step + 1;
    const float loss_value =  // the global batch's; the step's work: its padded tokens
        run.step_done(done, loss.item(), static_cast<double>(b.ids.numel()));
    run.log(done, lr, fmt::format(" | epoch {}", epoch));
    const bool stop = run.checkpoint(done);  // before the evaluation; --stop-at, the last step
    Eval eval;
    if (run.eval_due(done, /*at_last=*/true)) {
      const double seconds = run.untimed(
          [&] { eval = evaluate(*model, pairs.val, o.eval_pairs, global_batch, device); });
      fmt::print(
          "eval step {} | held-out loss {:.4f} | MLM accuracy {:.2f}% | NSP accuracy "
          "{:.2f}% ({:.1f} s)\n",
          done, eval.loss, 100 * eval.mlm_accuracy, 100 * eval.nsp_accuracy, seconds);
    }
    csv.row({static_cast<double>(done), static_cast<double>(epoch), loss_value, lr, eval.loss,
             eval.mlm_accuracy, eval.nsp_accuracy});
    if (stop) return 0;
  }

  // ---- final report (rank 0's; the last step is saved and evaluated)
  if (!run.main_process()) return 0;
  const std::string& out = o.train.out;
  models::save_bert_hf(*model, out + "/bert.safetensors");
  const std::string curves = run.save_curves(
      "curves.png", {{"BERT pre-training: loss", "loss", {{"loss", "train loss (MLM + NSP)"}}},
                     {"BERT pre-training: held-out accuracy",
                      "%",
                      {{"val_mlm_accuracy", "held-out MLM accuracy", 100},
                       {"val_nsp_accuracy", "held-out NSP accuracy", 100}}}});
  fmt::print(
      "final (step {}, {} training): see the last eval line; saved {}, {}/bert.safetensors, "
      "{}, {}, {}\n",
      run.total(), optim::format_duration(run.training_seconds()), run.checkpoint_path(), out,
      run.log_path(), curves, tok_path);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cli::trainer_main(argc, argv, add_options, train); }
