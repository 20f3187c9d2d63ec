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
//                                            bench/torch_translate_train_ref.py
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
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "cli.h"
#include "data/dictd.h"
#include "data/text_file.h"
#include "loom.h"
#include "models/beam_search.h"
#include "models/transformer.h"

using namespace loom;
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
  int64_t max_words = 12, bpe_vocab = 4000, max_tokens = 48;
  double valid_fraction = 0.01, test_fraction = 0.01;
  std::string dump_data;
  // optimisation
  int64_t steps = 1200, batch_tokens = 2500, warmup = 400;
  double minutes = 0;  // > 0: plan the steps to fill this much training time
  float lr_factor = 1.0f, label_smoothing = 0.1f, grad_clip = 1.0f;
  // progress, evaluation, checkpoints
  int64_t log_every = 20, eval_every = 200, eval_pairs = 400, samples = 4, beam = 4;
  int64_t bleu_pairs = 200, test_pairs = 1000;  // sentences translated for BLEU
  int64_t checkpoint_every = 200, stop_at = 0;
  std::string out = "out-translate";
  bool resume = false;
  // machine
  std::string device = "cpu";
  int64_t threads = 0;
  uint64_t seed = 0;
};

CLI::Option* add_options(CLI::App& app, Options& o) {
  cli::show_defaults(app);
  const auto positive = CLI::PositiveNumber;
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
      ->check(CLI::Range(0.0, 0.9));
  m->add_flag("--norm-first", o.norm_first, "pre-norm layers instead of the paper's post-norm");
  CLI::App* d = app.add_option_group("Data");
  d->add_option("--dict", o.dict, "dictd files PREFIX.index and PREFIX.dict.dz");
  d->add_option("--max-words", o.max_words, "longest pair kept, in words per side")
      ->check(positive);
  d->add_option("--bpe-vocab", o.bpe_vocab, "shared BPE vocabulary (with <pad> <bos> <eos>)")
      ->check(CLI::Range(int64_t{260}, int64_t{1} << 16));
  d->add_option("--max-tokens", o.max_tokens, "longest tokenized side kept (with bos/eos)")
      ->check(CLI::Range(int64_t{4}, int64_t{512}));
  d->add_option("--valid-fraction", o.valid_fraction, "share of pairs for validation")
      ->check(CLI::Range(0.0, 0.5));
  d->add_option("--test-fraction", o.test_fraction, "share of pairs for the test split")
      ->check(CLI::Range(0.0, 0.5));
  d->add_option("--dump-data", o.dump_data,
                "write the splits, tokenized pairs, batches and initial weights here and exit "
                "(for bench/torch_translate_train_ref.py)");
  CLI::App* t = app.add_option_group("Optimisation");
  CLI::Option* steps = t->add_option("--steps", o.steps, "optimizer steps")->check(positive);
  t->add_option("--minutes", o.minutes,
                "plan the steps so that training takes this long, from the speed of steps 2-11 "
                "(0 = use --steps; a resumed run keeps its plan)")
      ->check(cli::finite_non_negative);
  t->add_option("--batch-tokens", o.batch_tokens, "target tokens (padding included) per batch")
      ->check(positive);
  t->add_option("--warmup", o.warmup, "Noam warmup steps (the paper: 4000 of 100k)")
      ->check(positive);
  t->add_option("--lr-factor", o.lr_factor, "Noam factor: lr = f d^-0.5 min(s^-0.5, s w^-1.5)")
      ->check(cli::finite_non_negative);
  t->add_option("--label-smoothing", o.label_smoothing, "label smoothing (the paper: 0.1)")
      ->check(CLI::Range(0.0, 0.9));
  t->add_option("--grad-clip", o.grad_clip, "global gradient norm clip (0 = off)")
      ->check(cli::finite_non_negative);
  CLI::App* p = app.add_option_group("Progress, evaluation, checkpoints");
  p->add_option("--log-every", o.log_every, "steps between progress lines")->check(positive);
  p->add_option("--eval-every", o.eval_every, "steps between validations")->check(positive);
  p->add_option("--eval-pairs", o.eval_pairs, "validation pairs per evaluation")->check(positive);
  p->add_option("--samples", o.samples, "sample translations printed per evaluation")
      ->check(cli::non_negative_integer);
  p->add_option("--beam", o.beam, "beam width of the translations (samples and BLEU)")
      ->check(positive);
  p->add_option("--bleu-pairs", o.bleu_pairs, "validation pairs translated for BLEU per evaluation")
      ->check(positive);
  p->add_option("--test-pairs", o.test_pairs, "test pairs translated for the final BLEU (0 = all)")
      ->check(cli::non_negative_integer);
  p->add_option("--checkpoint-every", o.checkpoint_every, "steps between checkpoints (0 = end)")
      ->check(cli::non_negative_integer);
  p->add_option("--out", o.out, "directory for checkpoint, tokenizer, log.csv, loss.png");
  p->add_flag("--resume", o.resume, "continue from <out>/ckpt.safetensors")->expected(0, 1);
  p->add_option("--stop-at", o.stop_at, "end after that step with a checkpoint (0 = run on)")
      ->check(cli::non_negative_integer);
  CLI::App* machine = app.add_option_group("Machine");
  cli::add_device(*machine, o.device);
  machine->add_option("--threads", o.threads, "CPU threads (0 = OpenMP's default)")
      ->check(cli::non_negative_integer);
  machine->add_option("--seed", o.seed, "seed of the weights, batch order and dropout")
      ->check(cli::non_negative_integer);
  return steps;
}

// ============================================================================ data

struct Example {
  std::vector<int64_t> src, tgt;  // src = words + eos; tgt = bos + words + eos
  size_t pair;                    // index into its split's pairs
};

struct Specials {
  int64_t pad, bos, eos;
};

constexpr float kLengthPenalty = 0.6f;  // GNMT's alpha in the beam search of the translations

std::vector<Example> encode_split(const data::BPETokenizer& tok, const Specials& s,
                                  const std::vector<data::TranslationPair>& pairs,
                                  int64_t max_tokens) {
  std::vector<Example> out;
  for (size_t i = 0; i < pairs.size(); ++i) {
    Example e{tok.encode(pairs[i].english), {s.bos}, i};
    e.src.push_back(s.eos);
    const auto de = tok.encode(pairs[i].german);
    e.tgt.insert(e.tgt.end(), de.begin(), de.end());
    e.tgt.push_back(s.eos);
    if (static_cast<int64_t>(e.src.size()) <= max_tokens &&
        static_cast<int64_t>(e.tgt.size()) <= max_tokens)
      out.push_back(std::move(e));
  }
  return out;
}

// Token-count batching by length buckets (the paper's "batched together by approximate sequence
// length", sec. 5.1): examples sorted by (target, source) length, cut into consecutive runs
// whose padded target size B * T stays within `budget`. The runs are fixed; each epoch visits
// them in an order shuffled from (seed, epoch), so (epoch, index) names a batch exactly.
std::vector<std::vector<size_t>> make_batches(const std::vector<Example>& examples,
                                              int64_t budget) {
  std::vector<size_t> order(examples.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& x = examples[a];
    const auto& y = examples[b];
    return std::pair(x.tgt.size(), x.src.size()) < std::pair(y.tgt.size(), y.src.size());
  });
  std::vector<std::vector<size_t>> batches(1);
  size_t longest = 0;
  for (size_t i : order) {
    const size_t len = std::max(examples[i].tgt.size(), examples[i].src.size());
    if (!batches.back().empty() &&
        static_cast<int64_t>((batches.back().size() + 1) * std::max(longest, len)) > budget) {
      batches.emplace_back();
      longest = 0;
    }
    batches.back().push_back(i);
    longest = std::max(longest, len);
  }
  return batches;
}

// The batches of `epoch` in an order drawn from (seed, epoch) with SplitMix64 (data/splitmix.h):
// the same on every platform, and in bench/torch_translate_train_ref.py.
std::vector<size_t> epoch_order(size_t n, uint64_t seed, int64_t epoch) {
  const std::vector<int64_t> perm = data::random_permutation(
      static_cast<int64_t>(n), data::mix_seeds(seed, static_cast<uint64_t>(epoch)));
  return {perm.begin(), perm.end()};
}

// A batch as padded tensors: src (B, S), tgt_in (B, T), tgt_out (B, T), T = longest tgt - 1.
struct Batch {
  Tensor src, tgt_in, tgt_out;
  int64_t target_tokens = 0;
};

Batch collate(const std::vector<Example>& examples, const std::vector<size_t>& rows, int64_t pad,
              Device device) {
  size_t S = 0, T = 0;
  for (size_t r : rows) {
    S = std::max(S, examples[r].src.size());
    T = std::max(T, examples[r].tgt.size() - 1);
  }
  const auto B = static_cast<int64_t>(rows.size());
  std::vector<int64_t> src(rows.size() * S, pad), in(rows.size() * T, pad),
      out(rows.size() * T, pad);
  Batch b;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Example& e = examples[rows[i]];
    std::copy(e.src.begin(), e.src.end(), src.begin() + static_cast<std::ptrdiff_t>(i * S));
    std::copy(e.tgt.begin(), e.tgt.end() - 1, in.begin() + static_cast<std::ptrdiff_t>(i * T));
    std::copy(e.tgt.begin() + 1, e.tgt.end(), out.begin() + static_cast<std::ptrdiff_t>(i * T));
    b.target_tokens += static_cast<int64_t>(e.tgt.size()) - 1;
  }
  b.src = tensor_i64(src, {B, static_cast<int64_t>(S)}).to(device);
  b.tgt_in = tensor_i64(in, {B, static_cast<int64_t>(T)}).to(device);
  b.tgt_out = tensor_i64(out, {B, static_cast<int64_t>(T)}).to(device);
  return b;
}

// ============================================================================ evaluation

// A decoded translation as text: byte-level BPE can produce any bytes, and BLEU (metrics/text.h)
// takes UTF-8 only, so each maximal ill-formed subsequence becomes one U+FFFD (Unicode's
// recommended practice, which Python's bytes.decode("utf-8", "replace") follows).
std::string replace_invalid_utf8(const std::string& bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  std::string out;
  for (size_t i = 0; i < n;) {
    const unsigned char b = p[i];
    // the length of the sequence b leads and the range of its second byte (Unicode table 3-7)
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b < 0x80) {
      len = 1;
    } else if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      lo = b == 0xE0 ? 0xA0 : 0x80;  // no overlong forms
      hi = b == 0xED ? 0x9F : 0xBF;  // no surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      lo = b == 0xF0 ? 0x90 : 0x80;  // no overlong forms
      hi = b == 0xF4 ? 0x8F : 0xBF;  // nothing above U+10FFFF
    }
    auto fits = [&](size_t k) {  // byte k of the sequence
      return p[i + k] >= (k == 1 ? lo : 0x80) && p[i + k] <= (k == 1 ? hi : 0xBF);
    };
    size_t good = len > 0 ? 1 : 0;  // bytes of a well-formed prefix
    while (good > 0 && good < len && i + good < n && fits(good)) ++good;
    if (good == len && len > 0) {
      out.append(bytes, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD for the ill-formed prefix (at least the lead byte)
      i += std::max<size_t>(good, 1);
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

// ============================================================================ --dump-data

// Everything a reference trainer needs to repeat this run on the same data, written to
// --dump-data (bench/torch_translate_train_ref.py reads it and checks itself against it):
//   train.tsv, valid.tsv, test.tsv  the pairs, English TAB German per line (BLEU's references)
//   tokenizer.txt                   the shared BPE (BPETokenizer::save; decoding concatenates
//                                   the bytes of the ids)
//   data.safetensors                int64, per split S of train, valid, test, the pairs kept (at
//                                   most --max-tokens ids a side): S.src and S.tgt concatenated,
//                                   S.src_offsets and S.tgt_offsets [n + 1] (src = words + eos,
//                                   tgt = bos + words + eos), S.pair [n] (the line in S.tsv);
//                                   the batching, to check a re-implementation against:
//                                   batch_rows with batch_offsets [batches + 1] (make_batches'
//                                   runs of train rows), epoch0_order and epoch1_order
//                                   (epoch_order); metadata: the special ids, the options of the
//                                   run, the model config, and loom's corpus_bleu of two fixed
//                                   corpora of test sentences (bleu_check_*), so that another
//                                   BLEU can check itself on this very text
//   init.safetensors                the initial weights (after manual_seed(--seed)) under
//                                   torch_ref.py's Seq2Seq names, the model config as metadata
void dump_run(const Options& o, const data::PairSplits& splits, const data::BPETokenizer& tok,
              const Specials& sp, const std::array<const std::vector<Example>*, 3>& examples,
              const std::vector<std::vector<size_t>>& batches,
              const models::TransformerConfig& config, const models::Transformer& model) {
  const std::string& dir = o.dump_data;
  const char* what = "train_translate --dump-data";
  fs::create_directories(dir);
  const std::array<std::pair<const char*, const std::vector<data::TranslationPair>*>, 3> named = {
      {{"train", &splits.train}, {"valid", &splits.valid}, {"test", &splits.test}}};
  std::vector<std::pair<std::string, Tensor>> tensors;
  auto add = [&](const std::string& name, const std::vector<int64_t>& values) {
    tensors.emplace_back(name, tensor_i64(values, {static_cast<int64_t>(values.size())}));
  };
  for (size_t s = 0; s < named.size(); ++s) {
    const auto& [split, pairs] = named[s];
    std::string text;
    for (size_t i = 0; i < pairs->size(); ++i) {
      const data::TranslationPair& p = (*pairs)[i];
      LOOM_CHECK((p.english + p.german).find_first_of("\t\n") == std::string::npos,
                 "{}: pair {} of the {} split holds a tab or a newline: '{}' / '{}'", what, i,
                 split, p.english, p.german);
      text += p.english + "\t" + p.german + "\n";
    }
    data::write_file_atomic(fmt::format("{}/{}.tsv", dir, split), text, what);
    std::vector<int64_t> src, tgt, src_offsets{0}, tgt_offsets{0}, pair;
    for (const Example& e : *examples[s]) {
      src.insert(src.end(), e.src.begin(), e.src.end());
      tgt.insert(tgt.end(), e.tgt.begin(), e.tgt.end());
      src_offsets.push_back(static_cast<int64_t>(src.size()));
      tgt_offsets.push_back(static_cast<int64_t>(tgt.size()));
      pair.push_back(static_cast<int64_t>(e.pair));
    }
    const std::array<std::pair<const char*, const std::vector<int64_t>*>, 5> columns = {
        {{"src", &src},
         {"tgt", &tgt},
         {"src_offsets", &src_offsets},
         {"tgt_offsets", &tgt_offsets},
         {"pair", &pair}}};
    for (const auto& [name, values] : columns) add(fmt::format("{}.{}", split, name), *values);
  }
  std::vector<int64_t> rows, offsets{0};
  for (const auto& b : batches) {
    rows.insert(rows.end(), b.begin(), b.end());
    offsets.push_back(static_cast<int64_t>(rows.size()));
  }
  add("batch_rows", rows);
  add("batch_offsets", offsets);
  for (const int64_t epoch : {0, 1}) {
    const std::vector<size_t> order = epoch_order(batches.size(), o.seed, epoch);
    add(fmt::format("epoch{}_order", epoch), {order.begin(), order.end()});
  }
  // BLEU on this data: the English of the first 200 test pairs against their German, and the
  // German without its first word (the whole sentence when it has one word) against itself.
  std::vector<std::string> english, german, shortened;
  const std::vector<Example>& test = *examples[2];
  for (size_t i = 0; i < std::min<size_t>(test.size(), 200); ++i) {
    const data::TranslationPair& p = splits.test[test[i].pair];
    const size_t space = p.german.find(' ');
    english.push_back(p.english);
    german.push_back(p.german);
    shortened.push_back(space == std::string::npos ? p.german : p.german.substr(space + 1));
  }
  std::map<std::string, std::string> meta = config.to_metadata();
  meta.insert(
      {{"pad_id", std::to_string(sp.pad)},
       {"bos_id", std::to_string(sp.bos)},
       {"eos_id", std::to_string(sp.eos)},
       {"vocab_size", std::to_string(tok.vocab_size())},
       {"seed", std::to_string(o.seed)},
       {"max_words", std::to_string(o.max_words)},
       {"bpe_vocab", std::to_string(o.bpe_vocab)},
       {"max_tokens", std::to_string(o.max_tokens)},
       {"batch_tokens", std::to_string(o.batch_tokens)},
       {"steps", std::to_string(o.steps)},
       {"warmup", std::to_string(o.warmup)},
       {"lr_factor", fmt::format("{}", o.lr_factor)},
       {"label_smoothing", fmt::format("{}", o.label_smoothing)},
       {"grad_clip", fmt::format("{}", o.grad_clip)},
       {"log_every", std::to_string(o.log_every)},
       {"eval_every", std::to_string(o.eval_every)},
       {"eval_pairs", std::to_string(o.eval_pairs)},
       {"bleu_pairs", std::to_string(o.bleu_pairs)},
       {"test_pairs", std::to_string(o.test_pairs)},
       {"beam", std::to_string(o.beam)},
       {"length_penalty", fmt::format("{}", kLengthPenalty)},
       {"samples", std::to_string(o.samples)},
       {"bleu_check_pairs", std::to_string(german.size())},
       {"bleu_check_english", fmt::format("{}", metrics::corpus_bleu(english, german))},
       {"bleu_check_shortened", fmt::format("{}", metrics::corpus_bleu(shortened, german))}});
  nn::write_safetensors(dir + "/data.safetensors", tensors, meta);
  nn::write_safetensors(dir + "/init.safetensors", model.named_parameters(), config.to_metadata());
  tok.save(dir + "/tokenizer.txt");
  fmt::print(
      "wrote {}/{{train,valid,test}}.tsv, tokenizer.txt, data.safetensors ({} batches) and "
      "init.safetensors\n",
      dir, batches.size());
}

}  // namespace

// ============================================================================ main

int main(int argc, char** argv) try {
  cli::use_passive_omp_wait(argv);  // idle OpenMP threads sleep instead of spinning
  Options o;
  CLI::App app{"train_translate: trains an English -> German Transformer on FreeDict eng-deu"};
  const CLI::Option* steps_flag = add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  cli::init_distributed();  // a job of one unless started by mpirun/srun; rank 0 prints
  cli::print_config(app);
  if (o.threads > 0) set_num_threads(static_cast<int>(o.threads));
  const Device device = cli::device_of(o.device);
  fs::create_directories(o.out);
  const std::string ckpt_path = o.out + "/ckpt.safetensors", tok_path = o.out + "/tokenizer.txt";
  LOOM_CHECK(!o.resume || fs::exists(ckpt_path), "train_translate: --resume but there is no '{}'",
             ckpt_path);

  // ---- data: dictionary -> pairs -> splits
  const auto t0 = std::chrono::steady_clock::now();
  const data::Dictd dict = data::Dictd::open(o.dict);
  const data::PairSplits splits = data::split_pairs(
      data::extract_pairs(dict, {.max_words = o.max_words}), o.valid_fraction, o.test_fraction);
  fmt::print("read {} dictionary entries in {:.1f} s\n{}", dict.entries().size(),
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
             data::corpus_statistics(splits));
  // ---- tokenizer: one byte-level BPE over both languages, saved beside the checkpoint
  data::BPETokenizer tok;
  if (o.resume && fs::exists(tok_path)) {
    tok = data::BPETokenizer::load(tok_path);
  } else {
    std::string text;
    for (const auto& p : splits.train) text += p.english + "\n" + p.german + "\n";
    tok = data::BPETokenizer::train(text, o.bpe_vocab, {"<pad>", "<bos>", "<eos>"});
    if (distributed::is_main_process()) tok.save(tok_path);
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
  models::TransformerConfig config = models::TransformerConfig::preset(o.model);
  config.src_vocab_size = config.tgt_vocab_size = tok.vocab_size();
  config.pad_id = sp.pad;
  config.dropout = o.dropout;
  config.norm_first = o.norm_first;
  if (o.d_model) config.d_model = o.d_model;
  if (o.n_head) config.n_head = o.n_head;
  if (o.layers) config.n_encoder_layers = config.n_decoder_layers = o.layers;
  if (o.d_ff) config.d_ff = o.d_ff;
  config.max_len = std::max<int64_t>(config.max_len, o.max_tokens);
  manual_seed(o.seed);
  const auto model_ptr = std::make_shared<models::Transformer>(config);
  models::Transformer& model = *model_ptr;
  if (!o.dump_data.empty()) {  // the data and initial weights of this run, for a reference
    if (distributed::is_main_process())
      dump_run(o, splits, tok, sp, {&train, &valid, &test}, batches, config, model);
    return 0;
  }
  model.to(device);
  nn::DistributedDataParallel ddp(model_ptr);  // rank 0's weights; gradients averaged
  // The paper's Adam (sec. 5.3); the Noam schedule sets the rate every step.
  optim::Adam opt(model.parameters(), 1e-4f, 0.9f, 0.98f, 1e-9f);
  fmt::print("model: {} | {} parameters | {} threads\n", config.to_string(), model.num_parameters(),
             get_num_threads());

  // ---- resume
  int64_t start = 0, total = o.steps, epoch = 0, index = 0;
  if (o.resume) {
    const nn::Metadata meta = nn::read_metadata(ckpt_path);
    const auto saved = models::TransformerConfig::from_metadata(meta, ckpt_path);
    LOOM_CHECK(saved.to_string() == config.to_string(),
               "train_translate: checkpoint '{}' holds another model ({}) than configured ({})",
               ckpt_path, saved.to_string(), config.to_string());
    const auto state = nn::TrainerState::from_metadata(meta, "train_translate: " + ckpt_path);
    state.check_global_batch(global_tokens, "tokens", "train_translate: " + ckpt_path);
    nn::load_checkpoint(ckpt_path, {{"model", &model}}, &opt);
    start = state.step;
    if (steps_flag->count() == 0) total = state.total_steps;
    epoch = state.epoch;
    index = state.batch_index;
    LOOM_CHECK(index >= 0 && index <= static_cast<int64_t>(batches.size()),
               "train_translate: checkpoint batch_index {} outside the {} batches", index,
               batches.size());
    state.restore_rng();
    fmt::print("resumed from {} at step {} (epoch {}, batch {})\n", ckpt_path, start, epoch, index);
  }
  const bool main_process = distributed::is_main_process();  // the one that writes files
  auto checkpoint = [&](int64_t step) {
    nn::Metadata meta = config.to_metadata();
    meta.merge(nn::TrainerState::capture(step, total, epoch, index, global_tokens).to_metadata());
    if (main_process) nn::save_checkpoint(ckpt_path, {{"model", &model}}, &opt, meta);
  };
  data::CsvLog log(main_process ? o.out + "/log.csv" : "",
                   {"step", "lr", "train_loss", "val_loss", "val_bleu"},
                   o.resume ? std::optional<int64_t>(start) : std::nullopt);

  // ---- training loop
  model.train();
  optim::ProgressMeter progress(global_tokens);
  std::vector<size_t> order = epoch_order(batches.size(), o.seed, epoch);
  optim::TimeBudget budget(o.resume ? 0.0 : o.minutes);  // a resumed run keeps its plan
  bool stopped = false;
  for (int64_t step = start; step < total; ++step) {
    if (index == static_cast<int64_t>(batches.size())) {
      ++epoch;
      index = 0;
      order = epoch_order(batches.size(), o.seed, epoch);
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
    const auto loss_value =  // the global batch's: the mean over the ranks
        static_cast<float>(distributed::all_reduce_value(loss.item(), distributed::ReduceOp::Mean));
    LOOM_CHECK(std::isfinite(loss_value), "train_translate: loss {} at step {}", loss_value, step);
    progress.add(loss_value);
    const int64_t done = step + 1;
    if (const auto planned = budget.observe(done, progress.elapsed())) {
      total = distributed::broadcast_value(*planned);  // every process stops at the same step
      fmt::print("planned steps: {} ({:.0f} ms/step)\n", total, budget.seconds_per_step() * 1e3);
    }
    if (done % o.log_every == 0 || done == total)
      fmt::print("{}\n", progress.line(done, total, lr));
    double val_loss = std::numeric_limits<double>::quiet_NaN(), bleu = val_loss;
    if ((done % o.eval_every == 0 || done == total) && main_process) {
      const double e0 = progress.elapsed();
      val_loss = validation_loss(model, valid, o.eval_pairs, sp.pad, device);
      std::vector<std::string> hyps;
      bleu = split_bleu(model, tok, sp, valid, splits.valid, o.bleu_pairs, o.beam, o.max_tokens,
                        &hyps);
      model.train();  // translate_batch restores the mode; validation_loss leaves it in train
      fmt::print("eval step {} | val loss {:.4f} | perplexity {:.2f} | BLEU {:.2f} ({} pairs, beam "
                 "{})\n",
                 done, val_loss, std::exp(val_loss), bleu, hyps.size(), o.beam);
      for (size_t i = 0; i < std::min(hyps.size(), static_cast<size_t>(o.samples)); ++i) {
        const auto& pair = splits.valid[valid[i].pair];
        fmt::print("  {}\n    -> {}   (reference: {})\n", pair.english, hyps[i], pair.german);
      }
      progress.exclude(progress.elapsed() - e0);
    }
    log.row({static_cast<double>(done), lr, loss_value, val_loss, bleu});
    if ((o.checkpoint_every > 0 && done % o.checkpoint_every == 0) || done == total ||
        done == o.stop_at)
      checkpoint(done);
    if (done == o.stop_at && done != total) {
      fmt::print("stopped at step {} (--stop-at); --resume continues from {}\n", done, ckpt_path);
      stopped = true;
      break;
    }
  }
  // ---- final report (rank 0's): test BLEU, curves
  if (!main_process) return 0;
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
      o.out + "/loss.png", {train_curve, val_curve},
      {.title = "English -> German", .x_label = "step", .y_label = "loss (nats/token)"});
  data::save_plot(o.out + "/bleu.png",
                  {{"validation BLEU", table.column("step"), table.column("val_bleu")}},
                  {.title = "English -> German", .x_label = "step", .y_label = "BLEU"});
  fmt::print("wrote {}, {}/log.csv, {}/loss.png and {}/bleu.png\n", ckpt_path, o.out, o.out, o.out);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
