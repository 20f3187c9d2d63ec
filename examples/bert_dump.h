// train_bert --dump-data: the tokenized sentence pairs of a pre-training run, for a reference
// trainer (bench/reference/train.py bert).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "data/text_file.h"
#include "loom.h"

namespace loom::examples {

// --dump-data: vocab.txt, and train/val.safetensors holding the unmasked pairs: ids int64
// [N, L] ([CLS] A [SEP] B [SEP] padded with [PAD]), lengths [N], segment_a [N] (the length of
// [CLS] A [SEP]), nsp_labels [N] (0 = IsNext); the masking rule and its seed are in the
// metadata. bench/reference/train.py bert reads them.
inline void dump_pairs(const data::BertPretrainingData& pairs,
                       const data::WordPieceTokenizer& tok, const std::string& path) {
  // Also the examples as masked in epoch 0 (masked_ids, mlm_labels [N, L]), so that a reference
  // trainer re-implementing the masking (SplitMix64, data/bert_pretraining.cpp) can check itself.
  const int64_t n = pairs.size();
  int64_t longest = 0;
  for (int64_t i = 0; i < n; ++i)
    longest = std::max<int64_t>(longest, static_cast<int64_t>(pairs.unmasked_ids(i).size()));
  std::vector<int64_t> ids(static_cast<size_t>(n * longest), tok.token_id("[PAD]")), lengths,
      segment_a, nsp, masked = ids, labels(ids.size(), -100);
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
  nn::write_safetensors(path,
                        {{"ids", tensor_i64(ids, {n, longest})},
                         {"lengths", tensor_i64(lengths, {n})},
                         {"segment_a", tensor_i64(segment_a, {n})},
                         {"nsp_labels", tensor_i64(nsp, {n})},
                         {"masked_ids", tensor_i64(masked, {n, longest})},
                         {"mlm_labels", tensor_i64(labels, {n, longest})}},
                        {{"cls_id", std::to_string(r.cls_id)},
                         {"sep_id", std::to_string(r.sep_id)},
                         {"mask_id", std::to_string(r.mask_id)},
                         {"pad_id", std::to_string(tok.token_id("[PAD]"))},
                         {"vocab_size", std::to_string(r.vocab_size)},
                         {"masked_lm_prob", fmt::format("{}", r.masked_lm_prob)},
                         {"max_predictions", std::to_string(r.max_predictions)},
                         {"seed", std::to_string(pairs.config().seed)}});
}

// The whole dump in `dir` (beside the tokenizer.txt the run saved there): vocab.txt, one token a
// line, and the pairs of both splits.
inline void dump_data(const data::BertPretrainingData& train, const data::BertPretrainingData& val,
                      const data::WordPieceTokenizer& tok, const std::string& dir) {
  dump_pairs(train, tok, dir + "/train.safetensors");
  dump_pairs(val, tok, dir + "/val.safetensors");
  std::string vocab;
  for (const std::string& t : tok.vocab()) vocab += t + "\n";
  data::write_file_atomic(dir + "/vocab.txt", vocab, "train_bert --dump-data");
  fmt::print("wrote {}/{{vocab.txt, tokenizer.txt, train.safetensors, val.safetensors}}\n", dir);
}

}  // namespace loom::examples
