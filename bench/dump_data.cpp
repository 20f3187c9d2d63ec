// The data of a loom training run, written for its PyTorch twin (bench/reference/train.py), so
// that scripts/reproduce.sh trains loom's trainer and the twin on identical data: the twin reads
// what this program writes and checks its own batching, masking and BLEU against it before it
// trains.
//
//   dump_data translation --out DIR [flags]   train_translate's splits, tokenizer, tokenized
//                                             pairs, batches and initial weights
//   dump_data bert --out DIR [flags]          train_bert's tokenizer and sentence pairs
//
// Each takes the flags of its trainer that shape the data (for translation, the initial weights
// too) under the trainer's names, with its defaults and checks, and records them in the dump;
// the trainer's other flags, its recipe, are accepted and left alone, so that reproduce.sh hands
// one list of flags to the trainer, to this program and to the twin (which takes the recipe, and
// refuses data flags that differ from the dump's).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "data/dictd.h"
#include "data/text_file.h"
#include "examples/bert_data.h"
#include "examples/cli.h"
#include "examples/translate_data.h"
#include "loom.h"
#include "models/transformer.h"

using namespace loom;
using namespace loom::translate_example;

namespace {

// ============================================================================ translation

// train_translate's flags that shape its data and initial weights: the data and model flags of
// examples/translate_data.h (train_translate's own), its --batch-tokens and its --seed.
struct TranslationFlags {
  DataFlags data;
  ModelFlags model;
  int64_t batch_tokens = 2500;
  uint64_t seed = 0;
};

void add_translation_flags(CLI::App& app, TranslationFlags& f) {
  add_data_flags(app, f.data);
  app.add_option("--batch-tokens", f.batch_tokens, "target tokens (padding included) per batch")
      ->check(cli::positive_integer);
  add_model_flags(app, f.model);
  app.add_option("--seed", f.seed, "seed of the initial weights and the batch order")
      ->check(cli::non_negative_integer);
}

// Int64 tensors of the kept pairs of each split and of the batching, under the names the twin
// reads (see dump_translation).
std::vector<std::pair<std::string, Tensor>> translation_tensors(
    const std::array<const std::vector<Example>*, 3>& examples,
    const std::vector<std::vector<size_t>>& batches, uint64_t seed) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  auto add = [&](const std::string& name, const std::vector<int64_t>& values) {
    tensors.emplace_back(name, tensor_i64(values, {static_cast<int64_t>(values.size())}));
  };
  const std::array<const char*, 3> splits = {"train", "valid", "test"};
  for (size_t s = 0; s < splits.size(); ++s) {
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
    for (const auto& [name, values] : columns) add(fmt::format("{}.{}", splits[s], name), *values);
  }
  std::vector<int64_t> rows, offsets{0};
  for (const auto& b : batches) {
    rows.insert(rows.end(), b.begin(), b.end());
    offsets.push_back(static_cast<int64_t>(rows.size()));
  }
  add("batch_rows", rows);
  add("batch_offsets", offsets);
  for (const int64_t epoch : {0, 1}) {
    const std::vector<size_t> order = epoch_order(batches.size(), seed, epoch);
    add(fmt::format("epoch{}_order", epoch), {order.begin(), order.end()});
  }
  return tensors;
}

// BLEU on this data, so that another BLEU can check itself on this very text: the English of the
// first 200 test pairs against their German, and the German without its first word (the whole
// sentence when it has one word) against itself.
std::map<std::string, std::string> bleu_checks(const std::vector<Example>& test,
                                               const std::vector<data::TranslationPair>& pairs) {
  std::vector<std::string> english, german, shortened;
  for (size_t i = 0; i < std::min<size_t>(test.size(), 200); ++i) {
    const data::TranslationPair& p = pairs[test[i].pair];
    const size_t space = p.german.find(' ');
    english.push_back(p.english);
    german.push_back(p.german);
    shortened.push_back(space == std::string::npos ? p.german : p.german.substr(space + 1));
  }
  return {{"bleu_check_pairs", std::to_string(german.size())},
          {"bleu_check_english", fmt::format("{}", metrics::corpus_bleu(english, german))},
          {"bleu_check_shortened", fmt::format("{}", metrics::corpus_bleu(shortened, german))}};
}

// Everything the twin needs to repeat train_translate's run on the same data, in `dir`
// (bench/reference/train.py translation reads it and checks itself against it):
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
//                                   (epoch_order); metadata: the special ids, the model config,
//                                   this program's flags (under their names, "--max-tokens"),
//                                   the length penalty of the beam search, and loom's
//                                   corpus_bleu of two fixed corpora of test sentences
//                                   (bleu_check_*)
//   init.safetensors                the initial weights (after manual_seed(--seed)) under the
//                                   names of bench/reference/models.py's Seq2Seq, the model
//                                   config as metadata
// The data is train_translate's: the same calls in the same order.
void dump_translation(const TranslationFlags& f, const std::string& dir) {
  const char* what = "dump_data translation";
  const DataFlags& d = f.data;
  // ---- dictionary -> pairs -> splits
  const data::Dictd dict = data::Dictd::open(d.dict);
  check_utf8(dict, d.dict, what);
  const data::PairSplits splits = pair_splits(dict, d);
  // ---- one byte-level BPE over both languages, the tokenized pairs and their batches
  const data::BPETokenizer tok = train_shared_bpe(splits.train, d.bpe_vocab);
  const Specials sp = specials_of(tok);
  const std::vector<Example> train = encode_split(tok, sp, splits.train, d.max_tokens);
  const std::vector<Example> valid = encode_split(tok, sp, splits.valid, d.max_tokens);
  const std::vector<Example> test = encode_split(tok, sp, splits.test, d.max_tokens);
  LOOM_CHECK(!train.empty() && !valid.empty(), "{}: no training or validation pairs", what);
  const auto batches = make_batches(train, f.batch_tokens);
  // ---- the model's initial weights
  const models::TransformerConfig config =
      model_config(f.model, tok.vocab_size(), sp.pad, d.max_tokens);
  manual_seed(f.seed);
  const models::Transformer model(config);

  // ---- the files
  const std::array<std::pair<const char*, const std::vector<data::TranslationPair>*>, 3> named = {
      {{"train", &splits.train}, {"valid", &splits.valid}, {"test", &splits.test}}};
  for (const auto& [split, pairs] : named) {
    std::string lines;
    for (size_t i = 0; i < pairs->size(); ++i) {
      const data::TranslationPair& p = (*pairs)[i];
      LOOM_CHECK((p.english + p.german).find_first_of("\t\n") == std::string::npos,
                 "{}: pair {} of the {} split holds a tab or a newline: '{}' / '{}'", what, i,
                 split, p.english, p.german);
      lines += p.english + "\t" + p.german + "\n";
    }
    data::write_file_atomic(fmt::format("{}/{}.tsv", dir, split), lines, what);
  }
  std::map<std::string, std::string> meta = config.to_metadata();
  meta.merge(bleu_checks(test, splits.test));
  meta.insert({{"pad_id", std::to_string(sp.pad)},
               {"bos_id", std::to_string(sp.bos)},
               {"eos_id", std::to_string(sp.eos)},
               {"vocab_size", std::to_string(tok.vocab_size())},
               {"length_penalty", fmt::format("{}", kLengthPenalty)},
               {"--batch-tokens", std::to_string(f.batch_tokens)},
               {"--model", f.model.preset},
               {"--seed", std::to_string(f.seed)}});
  // The data flags and the model's sizes under their flag names, with their values as
  // cli::flag_values writes them ("--max-tokens": "48", "--norm-first": "0").
  for (const auto& flags : {cli::flag_values(d), cli::flag_values(f.model.sizes)})
    meta.insert(flags.begin(), flags.end());
  nn::write_safetensors(dir + "/data.safetensors",
                        translation_tensors({&train, &valid, &test}, batches, f.seed), meta);
  nn::write_safetensors(dir + "/init.safetensors", model.named_parameters(), config.to_metadata());
  tok.save(dir + "/tokenizer.txt");
  fmt::print(
      "wrote {}/{{train,valid,test}}.tsv, tokenizer.txt, data.safetensors ({} batches) and "
      "init.safetensors\n",
      dir, batches.size());
}

// ============================================================================ bert

// train_bert's flags that shape its data (examples/bert_data.h: train_bert's own), and its seed.
struct BertFlags {
  examples::BertDataFlags corpus;
  uint64_t seed = 0;
};

void add_bert_flags(CLI::App& app, BertFlags& f) {
  examples::add_data_flags(app, f.corpus);
  app.add_option("--seed", f.seed, "seed of the split, the pairs and the masking")
      ->check(cli::non_negative_integer);
}

// One split's pairs in `path`: ids int64 [N, L] ([CLS] A [SEP] B [SEP] padded with [PAD]),
// lengths [N], segment_a [N] (the length of [CLS] A [SEP]), nsp_labels [N] (0 = IsNext), and
// the examples as masked in epoch 0 (masked_ids, mlm_labels [N, L]), so that a reference
// trainer re-implementing the masking (SplitMix64, data/bert_pretraining.cpp) can check itself;
// the masking rule and its seed, and `flags`, in the metadata.
void dump_pairs(const data::BertPretrainingData& pairs, const data::WordPieceTokenizer& tok,
                const std::map<std::string, std::string>& flags, const std::string& path) {
  const int64_t n = pairs.size();
  int64_t longest = 0;
  for (int64_t i = 0; i < n; ++i)
    longest = std::max<int64_t>(longest, static_cast<int64_t>(pairs.unmasked_ids(i).size()));
  std::vector<int64_t> ids(static_cast<size_t>(n * longest), tok.token_id("[PAD]"));
  std::vector<int64_t> masked = ids;
  std::vector<int64_t> labels(ids.size(), -100);
  std::vector<int64_t> lengths, segment_a, nsp;
  for (int64_t i = 0; i < n; ++i) {
    const data::BertExample e = pairs.example(i, 0);
    const std::vector<int64_t> plain = pairs.unmasked_ids(i);
    std::copy(plain.begin(), plain.end(), ids.begin() + i * longest);
    std::copy(e.ids.begin(), e.ids.end(), masked.begin() + i * longest);
    std::copy(e.mlm_labels.begin(), e.mlm_labels.end(), labels.begin() + i * longest);
    lengths.push_back(static_cast<int64_t>(plain.size()));
    segment_a.push_back(std::count(e.token_types.begin(), e.token_types.end(), 0));
    nsp.push_back(e.next_sentence_label);
  }
  const data::MaskingRule& r = pairs.masking_rule();
  std::map<std::string, std::string> meta = flags;
  meta.insert({{"cls_id", std::to_string(r.cls_id)},
               {"sep_id", std::to_string(r.sep_id)},
               {"mask_id", std::to_string(r.mask_id)},
               {"pad_id", std::to_string(tok.token_id("[PAD]"))},
               {"vocab_size", std::to_string(r.vocab_size)},
               {"masked_lm_prob", fmt::format("{}", r.masked_lm_prob)},
               {"max_predictions", std::to_string(r.max_predictions)},
               {"seed", std::to_string(pairs.config().seed)}});
  nn::write_safetensors(path,
                        {{"ids", tensor_i64(ids, {n, longest})},
                         {"lengths", tensor_i64(lengths, {n})},
                         {"segment_a", tensor_i64(segment_a, {n})},
                         {"nsp_labels", tensor_i64(nsp, {n})},
                         {"masked_ids", tensor_i64(masked, {n, longest})},
                         {"mlm_labels", tensor_i64(labels, {n, longest})}},
                        meta);
}

// train_bert's data in `dir`: tokenizer.txt (the WordPiece vocabulary, as train_bert saves it),
// vocab.txt (one token a line) and the pairs of both splits, train.safetensors and
// val.safetensors (bench/reference/train.py bert reads them). The data is train_bert's: the
// same calls in the same order (examples/bert_data.h).
void dump_bert(const BertFlags& f, const std::string& dir) {
  const data::TrainValSplit split =
      data::split_train_val(data::read_fortunes(f.corpus.fortunes), f.corpus.val_fraction, f.seed);
  const data::WordPieceTokenizer tok =
      data::WordPieceTokenizer::train(split.train, f.corpus.vocab_size);
  const examples::SentencePairs pairs =
      examples::sentence_pairs(split, tok, f.corpus.max_seq_len, f.seed);

  const std::map<std::string, std::string> flags = {
      {"--fortunes", f.corpus.fortunes},
      {"--vocab-size", std::to_string(f.corpus.vocab_size)},
      {"--max-seq-len", std::to_string(f.corpus.max_seq_len)},
      {"--val-fraction", fmt::format("{}", f.corpus.val_fraction)},
      {"--seed", std::to_string(f.seed)}};
  tok.save(dir + "/tokenizer.txt");
  dump_pairs(pairs.train, tok, flags, dir + "/train.safetensors");
  dump_pairs(pairs.val, tok, flags, dir + "/val.safetensors");
  std::string vocab;
  for (const std::string& t : tok.vocab()) vocab += t + "\n";
  data::write_file_atomic(dir + "/vocab.txt", vocab, "dump_data bert");
  fmt::print("{} training pairs, {} held-out pairs, WordPiece vocabulary {}\n", pairs.train.size(),
             pairs.val.size(), tok.vocab_size());
  fmt::print("wrote {}/{{vocab.txt, tokenizer.txt, train.safetensors, val.safetensors}}\n", dir);
}

}  // namespace

// ============================================================================ main

int main(int argc, char** argv) try {
  CLI::App app{"dump_data: the data of a loom trainer's run, for its PyTorch twin"};
  app.require_subcommand(1);
  std::string out;
  TranslationFlags translation;
  BertFlags bert;
  CLI::App* t = app.add_subcommand("translation", "train_translate's data and initial weights");
  CLI::App* b = app.add_subcommand("bert", "train_bert's tokenizer and sentence pairs");
  for (CLI::App* task : {t, b}) {
    cli::show_defaults(*task);
    task->allow_extras();  // the trainer's recipe flags, for the trainer and the twin
    task->add_option("--out", out, "directory to write")->required()->check(cli::output_directory);
  }
  add_translation_flags(*t, translation);
  add_bert_flags(*b, bert);
  CLI11_PARSE(app, argc, argv);
  cli::create_directory(out, "--out");
  if (t->parsed()) dump_translation(translation, out);
  if (b->parsed()) dump_bert(bert, out);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
