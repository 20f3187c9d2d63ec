// Trains the encoder-decoder Transformer (models/transformer.h) to translate English into German
// on the sentence pairs of Debian's FreeDict eng-deu dictionary, with the recipe of Vaswani et
// al. 2017, sec. 5: a shared byte-level BPE over both languages, batches of about
// --batch-tokens target tokens from length buckets, Adam (0.9, 0.98, 1e-9) on the Noam schedule,
// label smoothing 0.1, gradient clipping; validation loss, BLEU (sacreBLEU's, metrics/text.h) and
// sample translations every --eval-every steps; test BLEU at the end; checkpoint + exact resume;
// log.csv, loss.png and bleu.png.
//
//   train_translate --minutes 10             seq2seq-mini, steps planned to fill 10 minutes
//   train_translate --steps 200 --out run1   a shorter run; `--resume` continues it exactly
//   translate --out out-translate            then translates sentences of your own
//   train_translate --help                   every option
//
// `mpirun -np N train_translate` (as train_gpt): every process plans the same length-bucket
// batches of N x --batch-tokens and takes every N-th pair of each (balanced lengths); each rank's
// mean loss over its target tokens is weighted by its share of the batch's tokens
// (distributed::global_mean_loss), so N processes train what one process at N x --batch-tokens
// does, to float rounding (with --dropout 0: masks differ by rank). Rank 0 alone prints,
// evaluates and writes. The batches depend on their budget, so --resume takes any N whose
// N x --batch-tokens equals the checkpoint's.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "cli.h"
#include "data/dictd.h"
#include "loom.h"
#include "models/beam_search.h"
#include "models/transformer.h"
#include "translate_data.h"
#include "translate_eval.h"

using namespace loom;
using namespace loom::translate_example;

namespace {

// ============================================================================ options

// What each evaluation translates and prints.
#define TRANSLATE_EVAL_FIELDS(F)                                                               \
  F(int64_t, eval_pairs, 400, positive, "validation pairs per evaluation")                     \
  F(int64_t, samples, 4, non_negative, "sample translations printed per evaluation")           \
  F(int64_t, bleu_pairs, 200, positive, "validation pairs translated for BLEU per evaluation") \
  F(int64_t, test_pairs, 1000, non_negative, "test pairs translated for the final BLEU (0 = all)")

LOOM_FIELDS_STRUCT(EvalFlags, TRANSLATE_EVAL_FIELDS);

// The model and the data: translate_data.h's flags, which bench/dump_data takes too.
struct Options {
  ModelFlags model;
  DataFlags data;
  // optimisation (the paper's Adam on the Noam schedule: no --lr), evaluation, checkpoints
  nn::TrainOptions train{.steps = 1200, .warmup = 400, .out = "out-translate"};
  int64_t batch_tokens = 2500;
  float lr_factor = 1.0f;
  float label_smoothing = 0.1f;
  EvalFlags eval;
  int64_t beam = 4;
};

void add_options(CLI::App& app, Options& o) {
  app.description("train_translate: trains an English -> German Transformer on FreeDict eng-deu");
  add_model_flags(*app.add_option_group("Model"), o.model);
  add_data_flags(*app.add_option_group("Data"), o.data);
  const cli::TrainGroups g = cli::add_train_options(
      app, o.train,
      {.without = {"batch", "lr", "min_lr", "weight_decay"},
       .notes = {{"warmup", "of the Noam schedule; the paper: 4000 of 100k"},
                 {"out", "ckpt.safetensors, tokenizer.txt, log.csv, loss.png, bleu.png"}},
       .checks = {{"warmup", cli::positive_integer}}});  // the Noam rate divides by it
  CLI::App* t = g.optimisation;
  t->add_option("--batch-tokens", o.batch_tokens, "target tokens (padding included) per batch")
      ->check(cli::positive_integer);
  t->add_option("--lr-factor", o.lr_factor, "Noam factor: lr = f d^-0.5 min(s^-0.5, s w^-1.5)")
      ->check(cli::positive);
  t->add_option("--label-smoothing", o.label_smoothing, "label smoothing (the paper: 0.1)")
      ->check(cli::range(0.0, 0.9));
  cli::add_fields(*g.progress, o.eval);
  g.progress->add_option("--beam", o.beam, "beam width of the translations (samples and BLEU)")
      ->check(cli::range(int64_t{1}, int64_t{1000}));
}

// ============================================================================ main

// The run, once the flags are parsed (main, below).
int train(CLI::App& app, Options& o) {
  nn::TrainingRun run = cli::start_training(app, "train_translate", o.train);
  const Device device = run.device();
  const std::string& out = o.train.out;
  // The model is checked before any work, with the largest vocabulary its tokenizer may have.
  cli::check_model_flags(app, "Model",
                         model_config(o.model, o.data.bpe_vocab, /*pad_id=*/0, o.data.max_tokens));
  cli::create_directory(out, "--out");

  // ---- data: dictionary -> pairs -> splits
  const auto t0 = std::chrono::steady_clock::now();
  const data::Dictd dict = data::Dictd::open(o.data.dict);
  check_utf8(dict, o.data.dict, "train_translate");
  const data::PairSplits splits = pair_splits(dict, o.data);
  fmt::print("read {} dictionary entries in {:.1f} s\n{}", dict.entries().size(),
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
             data::corpus_statistics(splits));
  // ---- tokenizer: one byte-level BPE over both languages, saved beside the checkpoint
  const std::string tok_path = out + "/tokenizer.txt";
  data::BPETokenizer tok;
  if (o.train.resume && std::filesystem::exists(tok_path)) {
    tok = data::BPETokenizer::load(tok_path);
  } else {
    tok = train_shared_bpe(splits.train, o.data.bpe_vocab);
    if (run.main_process()) tok.save(tok_path);
  }
  const Specials sp = specials_of(tok);
  const std::vector<Example> train = encode_split(tok, sp, splits.train, o.data.max_tokens);
  const std::vector<Example> valid = encode_split(tok, sp, splits.valid, o.data.max_tokens);
  const std::vector<Example> test = encode_split(tok, sp, splits.test, o.data.max_tokens);
  LOOM_CHECK(!train.empty() && !valid.empty(), "train_translate: no training or validation pairs");
  const int64_t global_tokens = o.batch_tokens * distributed::world_size();  // every rank's plan
  const auto batches = make_batches(train, global_tokens);
  fmt::print("tokenizer: {} tokens | train {} pairs in {} batches | valid {} pairs\n",
             tok.vocab_size(), train.size(), batches.size(), valid.size());

  // ---- model
  const models::TransformerConfig config =
      model_config(o.model, tok.vocab_size(), sp.pad, o.data.max_tokens);
  manual_seed(o.train.seed);
  // A data-parallel replica: rank 0's weights, gradients averaged.
  const auto model = run.make_model<models::Transformer>(config);
  // The paper's Adam (sec. 5.3); the Noam schedule sets the rate every step.
  optim::Adam opt(model->parameters(), 1e-4f, 0.9f, 0.98f, 1e-9f);
  fmt::print("model: {} | {} parameters | {} threads\n", config.to_string(),
             model->num_parameters(), get_num_threads());

  // ---- checkpoints (model, Adam, config, the batch position) and resume
  // The pairs, their split, the tokenizer (tokenizer.txt is read back) and the model a resumed
  // run must keep.
  run.keep_flags(cli::flag_values(o.data));
  run.keep_config(config.to_metadata());
  int64_t epoch = 0;  // the next batch: batches[order[index]] of epoch `epoch`
  int64_t index = 0;
  run.set_checkpoint({{"model", model.get()}}, &opt, [&](int64_t) {
    return nn::CheckpointContent{{}, epoch, index, global_tokens};
  });
  if (o.train.resume) {
    // The batches were planned for their budget: only the same global one resumes.
    const nn::TrainerState state = run.resume(
        {{"model", model.get()}}, &opt, [&](const nn::Metadata&, const nn::TrainerState& saved) {
          saved.check_global_batch(global_tokens, "tokens", run.source());
          LOOM_CHECK(saved.batch_index <= static_cast<int64_t>(batches.size()),
                     "train_translate: checkpoint batch_index {} outside the {} batches",
                     saved.batch_index, batches.size());
        });
    epoch = state.epoch;
    index = state.batch_index;
  }
  data::CsvLog log = run.open_log({"step", "lr", "train_loss", "val_loss", "val_bleu"});

  // ---- training loop
  model->train();
  std::vector<size_t> order = epoch_order(batches.size(), o.train.seed, epoch);
  run.begin(global_tokens);
  bool stopped = false;
  for (int64_t step = run.start(); step < run.total() && !stopped; ++step) {
    if (index == static_cast<int64_t>(batches.size())) {
      ++epoch;
      index = 0;
      order = epoch_order(batches.size(), o.train.seed, epoch);
    }
    const std::vector<size_t>& pairs = batches[order[static_cast<size_t>(index++)]];
    const std::vector<size_t> rows = distributed::rank_stride(pairs);  // every N-th pair
    const bool idle = rows.empty();  // fewer pairs than processes: compute one, weighted 0
    const Batch b = collate(train, idle ? std::vector<size_t>{pairs[0]} : rows, sp.pad, device);
    const float lr = optim::noam_lr(step + 1, config.d_model, o.train.warmup, o.lr_factor);
    opt.set_lr(lr);
    const Tensor loss = distributed::global_mean_loss(  // the gradient of the batch's token mean
        cross_entropy(model->forward(b.src, b.tgt_in), b.tgt_out, sp.pad, o.label_smoothing),
        idle ? 0 : b.target_tokens);
    run.backward_and_step(loss, opt, model->parameters());

    const int64_t done = step + 1;
    const float loss_value = run.step_done(done, loss.item());  // the global batch's
    run.log(done, lr);
    stopped = run.checkpoint(done);  // before the evaluation; --stop-at, the last step
    double val_loss = std::numeric_limits<double>::quiet_NaN();
    double bleu = val_loss;
    if (run.eval_due(done, /*at_last=*/true)) {
      std::vector<std::string> hyps;
      run.untimed([&] {
        val_loss = validation_loss(*model, valid, o.eval.eval_pairs, sp.pad, device);
        bleu = split_bleu(*model, tok, sp, valid, splits.valid, o.eval.bleu_pairs, o.beam,
                          o.data.max_tokens, &hyps);
        fmt::print(
            "eval step {} | val loss {:.4f} | perplexity {:.2f} | BLEU {:.2f} ({} pairs, "
            "beam {})\n",
            done, val_loss, std::exp(val_loss), bleu, hyps.size(), o.beam);
        for (size_t i = 0; i < std::min(hyps.size(), static_cast<size_t>(o.eval.samples)); ++i) {
          const auto& pair = splits.valid[valid[i].pair];
          fmt::print("  {}\n    -> {}   (reference: {})\n", pair.english, hyps[i], pair.german);
        }
      });
    }
    log.row({static_cast<double>(done), lr, loss_value, val_loss, bleu});
  }

  // ---- final report (rank 0's; the last step is saved): test BLEU, curves
  if (!run.main_process()) return 0;
  if (!stopped && !test.empty()) {
    const int64_t test_pairs = o.eval.test_pairs;
    const double test_bleu =
        split_bleu(*model, tok, sp, test, splits.test, test_pairs, o.beam, o.data.max_tokens);
    fmt::print("test BLEU {:.2f} ({} pairs of the test split, beam {})\n", test_bleu,
               test_pairs > 0 ? std::min<int64_t>(test_pairs, static_cast<int64_t>(test.size()))
                              : static_cast<int64_t>(test.size()),
               o.beam);
  }
  run.save_curves("loss.png",
                  {{"English -> German",
                    "loss (nats/token)",
                    {{"train_loss", "train (smoothed labels)"}, {"val_loss", "validation"}}}});
  run.save_curves("bleu.png", {{"English -> German", "BLEU", {{"val_bleu", "validation BLEU"}}}});
  fmt::print("wrote {}, {}, {}/loss.png and {}/bleu.png\n", run.checkpoint_path(), run.log_path(),
             out, out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return cli::trainer_main(argc, argv, add_options, train); }
