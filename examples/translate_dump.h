// train_translate --dump-data: the data, batches and initial weights of a run, for the PyTorch
// reference (bench/reference/train.py translation).
#pragma once

#include <fmt/format.h>

#include <array>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"
#include "data/text_file.h"
#include "loom.h"
#include "models/transformer.h"
#include "translate_data.h"

namespace loom::translate_example {

// Everything a reference trainer needs to repeat this run on the same data, written to
// --dump-data (bench/reference/train.py translation reads it and checks itself against it):
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
//   init.safetensors                the initial weights (after manual_seed(--seed)) under the
//                                   names of bench/reference/models.py's Seq2Seq, the model
//                                   config as metadata
// `o` is train_translate's Options: the run's settings are recorded from it.
template <class Options>
void dump_run(const Options& o, const data::PairSplits& splits, const data::BPETokenizer& tok,
              const Specials& sp, const std::array<const std::vector<Example>*, 3>& examples,
              const std::vector<std::vector<size_t>>& batches,
              const models::TransformerConfig& config, const models::Transformer& model) {
  const std::string& dir = o.dump_data;
  const char* what = "train_translate --dump-data";
  cli::create_directory(dir, "--dump-data");
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
    const std::vector<size_t> order = epoch_order(batches.size(), o.run.seed, epoch);
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
       {"seed", std::to_string(o.run.seed)},
       {"max_words", std::to_string(o.max_words)},
       {"bpe_vocab", std::to_string(o.bpe_vocab)},
       {"max_tokens", std::to_string(o.max_tokens)},
       {"batch_tokens", std::to_string(o.batch_tokens)},
       {"steps", std::to_string(o.run.steps)},
       {"warmup", std::to_string(o.warmup)},
       {"lr_factor", fmt::format("{}", o.lr_factor)},
       {"label_smoothing", fmt::format("{}", o.label_smoothing)},
       {"grad_clip", fmt::format("{}", o.grad_clip)},
       {"log_every", std::to_string(o.run.log_every)},
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


}  // namespace loom::translate_example
