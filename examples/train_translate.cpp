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
//   train_translate --dump-data DIR          writes the data, batches and initial weights of
//                                            this run and exits, for the PyTorch reference
//                                            bench/reference/train.py translation
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
#include "translate_dump.h"

using namespace loom;
using namespace loom::translate_example;
namespace fs = std::filesystem;

namespace {

// ============================================================================ options

struct Options {
  // model
  std::string model = "seq2seq-mini";
  int64_t d_model = 0, n_head = 0, layers = 0, d_ff = 0;  // 0 = the preset's
  float dropout = 0.1f;
  bool norm_first = false;
  // data
  std::string dict = data::kFreedictEngDeu;
  std::string pairs = "examples";  // which pairs of the dictionary: examples, headwords, both
  int64_t max_words = 12, bpe_vocab = 4000, max_tokens = 48;
  double valid_fraction = 0.01, test_fraction = 0.01;
  std::string dump_data;
  // optimisation (--steps 1200 and --minutes in `run`)
  int64_t batch_tokens = 2500, warmup = 400;
  float lr_factor = 1.0f, label_smoothing = 0.1f, grad_clip = 1.0f;
  // evaluation (checkpoints, --out, --resume, machine: nn::RunOptions)
  int64_t eval_every = 200, eval_pairs = 400, samples = 4, beam = 4;
  int64_t bleu_pairs = 200, test_pairs = 1000;  // sentences translated for BLEU
  nn::RunOptions run{.out = "out-translate", .steps = 1200, .checkpoint_every = 200};
};

void add_options(CLI::App& app, Options& o) {
  cli::show_defaults(app);
  const auto positive_integer = cli::positive_integer;
  CLI::App* m = app.add_option_group("Model");
  m->add_option("--model", o.model, "Transformer preset")
      ->check(CLI::IsMember(models::TransformerConfig::preset_names()));
  m->add_option("--d-model", o.d_model, "override the width (0 = keep)")
      ->check(cli::non_negative_integer);
  m->add_option("--n-head", o.n_head, "override the heads (0 = keep)")
      ->check(cli::non_negative_integer);
  m->add_option("--layers", o.layers, "override encoder and decoder layers (0 = keep)")
      ->check(cli::non_negative_integer);
  m->add_option("--d-ff", o.d_ff, "override the feed-forward width (0 = keep)")
      ->check(cli::non_negative_integer);
  m->add_option("--dropout", o.dropout, "dropout (the paper's P_drop)")
      ->check(cli::range(0.0, 0.9));
  m->add_flag("--norm-first", o.norm_first, "pre-norm layers instead of the paper's post-norm");
  CLI::App* d = app.add_option_group("Data");
  d->add_option("--dict", o.dict, "dictd files PREFIX.index and PREFIX.dict.dz");
  d->add_option("--pairs", o.pairs,
                "the dictionary's quoted example phrases and sentences, its headword -> first "
                "translation pairs, or both (headword pairs are single rare words: a 10-minute "
                "run learns from the examples)")
      ->check(CLI::IsMember({"both", "examples", "headwords"}));
  d->add_option("--max-words", o.max_words, "longest pair kept, in words per side")
      ->check(positive_integer);
  d->add_option("--bpe-vocab", o.bpe_vocab, "shared BPE vocabulary (with <pad> <bos> <eos>)")
      ->check(cli::range(int64_t{260}, int64_t{1} << 16));
  d->add_option("--max-tokens", o.max_tokens, "longest tokenized side kept (with bos/eos)")
      ->check(cli::range(int64_t{4}, int64_t{512}));
  d->add_option("--valid-fraction", o.valid_fraction, "share of pairs for validation")
      ->check(cli::range(0.0, 0.5));
  d->add_option("--test-fraction", o.test_fraction, "share of pairs for the test split")
      ->check(cli::range(0.0, 0.5));
  d->add_option("--dump-data", o.dump_data,
                "write the splits, tokenized pairs, batches and initial weights here and exit "
                "(for bench/reference/train.py translation)")
      ->check(cli::output_directory);
  const cli::RunGroups g = cli::add_run_options(
      app, o.run,
      {.out = "directory for checkpoint, tokenizer, log.csv, loss.png",
       .seed = "seed of the weights, batch order and dropout",
       .steps = "optimizer steps",
       .minutes_note = "0 = use --steps; a resumed run keeps its plan"});
  CLI::App* t = g.optimisation;
  t->add_option("--batch-tokens", o.batch_tokens, "target tokens (padding included) per batch")
      ->check(positive_integer);
  t->add_option("--warmup", o.warmup, "Noam warmup steps (the paper: 4000 of 100k)")
      ->check(positive_integer);
  t->add_option("--lr-factor", o.lr_factor, "Noam factor: lr = f d^-0.5 min(s^-0.5, s w^-1.5)")
      ->check(cli::positive);
  t->add_option("--label-smoothing", o.label_smoothing, "label smoothing (the paper: 0.1)")
      ->check(cli::range(0.0, 0.9));
  t->add_option("--grad-clip", o.grad_clip, "global gradient norm clip (0 = off)")
      ->check(cli::finite_non_negative);
  CLI::App* p = g.progress;
  p->add_option("--eval-every", o.eval_every, "steps between validations")->check(positive_integer);
  p->add_option("--eval-pairs", o.eval_pairs, "validation pairs per evaluation")
      ->check(positive_integer);
  p->add_option("--samples", o.samples, "sample translations printed per evaluation")
      ->check(cli::non_negative_integer);
  p->add_option("--beam", o.beam, "beam width of the translations (samples and BLEU)")
      ->check(cli::range(int64_t{1}, int64_t{1000}));
  p->add_option("--bleu-pairs", o.bleu_pairs, "validation pairs translated for BLEU per evaluation")
      ->check(positive_integer);
  p->add_option("--test-pairs", o.test_pairs, "test pairs translated for the final BLEU (0 = all)")
      ->check(cli::non_negative_integer);
}

// The model the flags configure, for a shared vocabulary of `vocab_size` tokens whose <pad> is
// `pad_id`.
models::TransformerConfig model_config(const Options& o, int64_t vocab_size, int64_t pad_id) {
  models::TransformerConfig c = models::TransformerConfig::preset(o.model);
  c.src_vocab_size = c.tgt_vocab_size = vocab_size;
  c.pad_id = pad_id;
  c.dropout = o.dropout;
  c.norm_first = o.norm_first;
  if (o.d_model) c.d_model = o.d_model;
  if (o.n_head) c.n_head = o.n_head;
  if (o.layers) c.n_encoder_layers = c.n_decoder_layers = o.layers;
  if (o.d_ff) c.d_ff = o.d_ff;
  c.max_len = std::max<int64_t>(c.max_len, o.max_tokens);
  return c;
}

// ============================================================================ evaluation

// A decoded translation as text: byte-level BPE can produce any bytes, and BLEU (metrics/text.h)
// takes UTF-8 only, so each maximal ill-formed subsequence becomes one U+FFFD (Unicode's
// recommended practice, which Python's bytes.decode("utf-8", "replace") follows).
std::string replace_invalid_utf8(const std::string& bytes) {
  const std::string_view text(bytes);
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const data::Utf8Sequence seq = data::utf8_sequence(text.substr(i));
    if (seq.valid()) {
      out.append(text.substr(i, seq.length));
      i += seq.length;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD for the ill-formed prefix (at least the lead byte)
      i += std::max<size_t>(seq.well_formed, 1);
    }
  }
  return out;
}

// Token-weighted cross-entropy (no smoothing) of the first `count` validation examples.
double validation_loss(models::Transformer& model, const std::vector<Example>& valid, int64_t count,
                       int64_t pad, Device device) {
  NoGradGuard no_grad;
  model.eval();
  const size_t n = std::min(valid.size(), static_cast<size_t>(count));
  double nats = 0, tokens = 0;
  for (size_t s = 0; s < n; s += 64) {
    std::vector<size_t> rows;
    for (size_t i = s; i < std::min(n, s + 64); ++i) rows.push_back(i);
    const Batch b = collate(valid, rows, pad, device);
    nats += cross_entropy(model.forward(b.src, b.tgt_in), b.tgt_out, pad).item() *
            static_cast<double>(b.target_tokens);
    tokens += static_cast<double>(b.target_tokens);
  }
  model.train();
  return tokens > 0 ? nats / tokens : std::numeric_limits<double>::quiet_NaN();
}

// Corpus BLEU (sacreBLEU's defaults) of the first `count` examples of a split, translated with
// beam search in batches of 32 against the split's German sentences. `shown` of them go to
// `hypotheses` for printing.
double split_bleu(models::Transformer& model, const data::BPETokenizer& tok, const Specials& sp,
                  const std::vector<Example>& examples,
                  const std::vector<data::TranslationPair>& pairs, int64_t count, int64_t beam,
                  int64_t max_tokens, std::vector<std::string>* hypotheses = nullptr) {
  const size_t n = count > 0 ? std::min(examples.size(), static_cast<size_t>(count))
                             : examples.size();
  std::vector<std::string> hyps, refs;
  for (size_t s = 0; s < n; s += 32) {
    std::vector<std::vector<int64_t>> srcs;
    for (size_t i = s; i < std::min(n, s + 32); ++i) srcs.push_back(examples[i].src);
    for (const auto& ids :
         model.translate_batch(srcs, sp.bos, sp.eos, max_tokens, beam, kLengthPenalty))
      hyps.push_back(replace_invalid_utf8(tok.decode(ids)));
  }
  for (size_t i = 0; i < n; ++i) refs.push_back(pairs[examples[i].pair].german);
  if (hypotheses) *hypotheses = hyps;
  return metrics::corpus_bleu(hyps, refs);
}


}  // namespace

// ============================================================================ main

int main(int argc, char** argv) try {
  cli::use_short_omp_spin(argv);  // idle OpenMP threads spin briefly, then sleep
  Options o;
  CLI::App app{"train_translate: trains an English -> German Transformer on FreeDict eng-deu"};
  add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  cli::init_distributed();  // a job of one unless started by mpirun/srun; rank 0 prints
  cli::print_config(app);
  nn::TrainingRun run("train_translate", o.run);  // threads; --resume finds its checkpoint
  const Device device = run.device();
  const std::string& out = o.run.out;
  // The model is checked before any work, with the largest vocabulary its tokenizer may have.
  cli::check_model_flags(app, "Model", model_config(o, o.bpe_vocab, /*pad_id=*/0));
  const bool dumping = !o.dump_data.empty();  // --dump-data writes DIR only, never --out
  if (!dumping) cli::create_directory(out, "--out");
  const std::string tok_path = out + "/tokenizer.txt";

  // ---- data: dictionary -> pairs -> splits
  const auto t0 = std::chrono::steady_clock::now();
  const data::Dictd dict = data::Dictd::open(o.dict);
  check_utf8(dict, o.dict, "train_translate");
  const data::PairSplits splits = data::split_pairs(
      data::extract_pairs(dict, {.headwords = o.pairs != "examples",
                                 .examples = o.pairs != "headwords",
                                 .max_words = o.max_words}),
      o.valid_fraction, o.test_fraction);
  fmt::print("read {} dictionary entries in {:.1f} s\n{}", dict.entries().size(),
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
             data::corpus_statistics(splits));
  // ---- tokenizer: one byte-level BPE over both languages, saved beside the checkpoint
  data::BPETokenizer tok;
  if (o.run.resume && fs::exists(tok_path)) {
    tok = data::BPETokenizer::load(tok_path);
  } else {
    std::string text;
    for (const auto& p : splits.train) text += p.english + "\n" + p.german + "\n";
    tok = data::BPETokenizer::train(text, o.bpe_vocab, {"<pad>", "<bos>", "<eos>"});
    if (run.main_process() && !dumping) tok.save(tok_path);
  }
  const Specials sp{tok.special_token_id("<pad>"), tok.special_token_id("<bos>"),
                    tok.special_token_id("<eos>")};
  const std::vector<Example> train = encode_split(tok, sp, splits.train, o.max_tokens),
                             valid = encode_split(tok, sp, splits.valid, o.max_tokens),
                             test = encode_split(tok, sp, splits.test, o.max_tokens);
  LOOM_CHECK(!train.empty() && !valid.empty(), "train_translate: no training or validation pairs");
  const int64_t global_tokens = o.batch_tokens * distributed::world_size();  // every rank's plan
  const auto batches = make_batches(train, global_tokens);
  fmt::print("tokenizer: {} tokens | train {} pairs in {} batches | valid {} pairs\n",
             tok.vocab_size(), train.size(), batches.size(), valid.size());

  // ---- model
  const models::TransformerConfig config = model_config(o, tok.vocab_size(), sp.pad);
  manual_seed(o.run.seed);
  const auto model_ptr = std::make_shared<models::Transformer>(config);
  models::Transformer& model = *model_ptr;
  if (dumping) {  // the data and initial weights of this run, for a reference
    if (run.main_process())
      dump_run(o, splits, tok, sp, {&train, &valid, &test}, batches, config, model);
    return 0;
  }
  model.to(device);
  nn::DistributedDataParallel ddp(model_ptr);  // rank 0's weights; gradients averaged
  // The paper's Adam (sec. 5.3); the Noam schedule sets the rate every step.
  optim::Adam opt(model.parameters(), 1e-4f, 0.9f, 0.98f, 1e-9f);
  fmt::print("model: {} | {} parameters | {} threads\n", config.to_string(), model.num_parameters(),
             get_num_threads());

  // ---- checkpoints (model, Adam, config, the batch position) and resume
  // The pairs, their split and the tokenizer a resumed run must keep (tokenizer.txt is read back).
  run.keep_flags({{"--dict", o.dict},
                  {"--pairs", o.pairs},
                  {"--max-words", std::to_string(o.max_words)},
                  {"--bpe-vocab", std::to_string(o.bpe_vocab)},
                  {"--max-tokens", std::to_string(o.max_tokens)},
                  {"--valid-fraction", fmt::format("{}", o.valid_fraction)},
                  {"--test-fraction", fmt::format("{}", o.test_fraction)}});
  int64_t epoch = 0, index = 0;  // the next batch: batches[order[index]] of epoch `epoch`
  run.set_checkpoint({{"model", &model}}, &opt, [&](int64_t) {
    return nn::CheckpointContent{config.to_metadata(), epoch, index, global_tokens};
  });
  if (o.run.resume) {
    const nn::TrainerState state = run.resume(
        {{"model", &model}}, &opt, [&](const nn::Metadata& meta, const nn::TrainerState& saved) {
          const auto c = models::TransformerConfig::from_metadata(meta, run.checkpoint_path());
          LOOM_CHECK(c.to_string() == config.to_string(),
                     "train_translate: checkpoint '{}' holds another model ({}) than configured "
                     "({})",
                     run.checkpoint_path(), c.to_string(), config.to_string());
          saved.check_global_batch(global_tokens, "tokens", run.source());
          LOOM_CHECK(saved.batch_index >= 0 &&
                         saved.batch_index <= static_cast<int64_t>(batches.size()),
                     "train_translate: checkpoint batch_index {} outside the {} batches",
                     saved.batch_index, batches.size());
        });
    epoch = state.epoch;
    index = state.batch_index;
  }
  data::CsvLog log = run.open_log({"step", "lr", "train_loss", "val_loss", "val_bleu"});

  // ---- training loop
  model.train();
  std::vector<size_t> order = epoch_order(batches.size(), o.run.seed, epoch);
  run.begin(global_tokens);
  bool stopped = false;
  for (int64_t step = run.start(); step < run.total() && !stopped; ++step) {
    if (index == static_cast<int64_t>(batches.size())) {
      ++epoch;
      index = 0;
      order = epoch_order(batches.size(), o.run.seed, epoch);
    }
    const std::vector<size_t>& pairs = batches[order[static_cast<size_t>(index++)]];
    const std::vector<size_t> rows = distributed::rank_stride(pairs);  // every N-th pair
    const bool idle = rows.empty();  // fewer pairs than processes: compute one, weighted 0
    const Batch b = collate(train, idle ? std::vector<size_t>{pairs[0]} : rows, sp.pad, device);
    const float lr = optim::noam_lr(step + 1, config.d_model, o.warmup, o.lr_factor);
    opt.set_lr(lr);
    const Tensor loss = distributed::global_mean_loss(  // the gradient of the batch's token mean
        cross_entropy(model.forward(b.src, b.tgt_in), b.tgt_out, sp.pad, o.label_smoothing),
        idle ? 0 : b.target_tokens);
    opt.zero_grad();
    loss.backward();
    if (o.grad_clip > 0) optim::clip_grad_norm(model.parameters(), o.grad_clip);
    opt.step();

    const int64_t done = step + 1;
    const float loss_value = run.step_done(done, loss.item());  // the global batch's
    run.log(done, lr);
    stopped = run.checkpoint(done);  // before the evaluation; --stop-at, the last step
    double val_loss = std::numeric_limits<double>::quiet_NaN(), bleu = val_loss;
    if ((done % o.eval_every == 0 || done == run.total()) && run.main_process()) {
      std::vector<std::string> hyps;
      run.untimed([&] {
        val_loss = validation_loss(model, valid, o.eval_pairs, sp.pad, device);
        bleu = split_bleu(model, tok, sp, valid, splits.valid, o.bleu_pairs, o.beam,
                          o.max_tokens, &hyps);
        model.train();  // translate_batch restores the mode; validation_loss leaves it in train
        fmt::print("eval step {} | val loss {:.4f} | perplexity {:.2f} | BLEU {:.2f} ({} pairs, "
                   "beam {})\n",
                   done, val_loss, std::exp(val_loss), bleu, hyps.size(), o.beam);
        for (size_t i = 0; i < std::min(hyps.size(), static_cast<size_t>(o.samples)); ++i) {
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
    const double test_bleu =
        split_bleu(model, tok, sp, test, splits.test, o.test_pairs, o.beam, o.max_tokens);
    fmt::print("test BLEU {:.2f} ({} pairs of the test split, beam {})\n", test_bleu,
               o.test_pairs > 0 ? std::min<int64_t>(o.test_pairs, static_cast<int64_t>(test.size()))
                                : static_cast<int64_t>(test.size()),
               o.beam);
  }
  const data::CsvTable table = data::read_csv(log.path());
  data::Series train_curve{"train (smoothed labels)", table.column("step"),
                           table.column("train_loss")},
      val_curve{"validation", table.column("step"), table.column("val_loss")};
  data::save_plot(
      out + "/loss.png", {train_curve, val_curve},
      {.title = "English -> German", .x_label = "step", .y_label = "loss (nats/token)"});
  data::save_plot(out + "/bleu.png",
                  {{"validation BLEU", table.column("step"), table.column("val_bleu")}},
                  {.title = "English -> German", .x_label = "step", .y_label = "BLEU"});
  fmt::print("wrote {}, {}/log.csv, {}/loss.png and {}/bleu.png\n", run.checkpoint_path(), out,
             out, out);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
