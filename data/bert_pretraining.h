// BERT's pre-training data (Devlin et al. 2018, sec. 3.1 and A.1; google-research/bert's
// create_pretraining_data.py) built from a list of documents, e.g. the fortunes:
//
//   documents -> split_sentences -> WordPiece ids per sentence
//   pairs      (A, B): A a sentence, B the sentence after it in the same document (IsNext,
//              label 0) or, with probability 1/2, a random sentence of another document
//              (NotNext, label 1); drawn once, from the seed. Pairs longer than max_seq_len - 3
//              are cut as truncate_seq_pair: one token at a time from the longer of A and B, at
//              its front or back at random. A sentence is cut to its first max_sentence_words
//              words before it is tokenized (a text without end marks is one huge sentence).
//   example    [CLS] A [SEP] B [SEP], token types 0 up to the first [SEP] and 1 after it, and
//              the masking of create_masked_lm_predictions, drawn anew every epoch as a pure
//              function of (seed, epoch, index) so a resumed run sees exactly the same data:
//                n = min(max_predictions, max(1, round(0.15 * length)))  (length counts [CLS]
//                and [SEP]; Python's round: half to even) positions chosen uniformly among all
//                but [CLS]/[SEP]; each becomes [MASK] with probability 0.8, stays itself with
//                0.1, and becomes a token drawn uniformly from the whole vocabulary with 0.1.
//              mlm_labels hold the original id at the n chosen positions and -100 elsewhere,
//              so the loss covers exactly those (kept ones included).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "data/splitmix.h"
#include "data/wordpiece_tokenizer.h"

namespace loom::data {

struct BertPretrainingConfig {
  int64_t max_seq_len = 128;     // [CLS] A [SEP] B [SEP] at most this long
  double masked_lm_prob = 0.15;  // share of the tokens to predict
  int64_t max_predictions = 20;  // max_predictions_per_seq (create_pretraining_data's 20)
  double not_next_prob = 0.5;    // share of NotNext pairs
  uint64_t seed = 12345;         // pairs, truncation and every epoch's masking
  // Words of a sentence kept before tokenizing: far beyond any real sentence (a pair keeps at
  // most max_seq_len - 3 tokens of it), it bounds the work a text without end marks can cause.
  int64_t max_sentence_words = 10000;
};

// The token ids masking needs, looked up in the tokenizer.
struct MaskingRule {
  int64_t cls_id, sep_id, mask_id, vocab_size;
  double masked_lm_prob = 0.15;
  int64_t max_predictions = 20;
};

struct MaskedTokens {
  std::vector<int64_t> ids;     // the input, some positions replaced
  std::vector<int64_t> labels;  // original id where predicted, -100 elsewhere
};

// create_masked_lm_predictions on one sequence (see the top of this file), from `seed` alone.
MaskedTokens mask_tokens(const std::vector<int64_t>& ids, const MaskingRule& rule, uint64_t seed);

// create_pretraining_data.py's truncate_seq_pair: while A and B hold more than max_tokens
// tokens together, one token is dropped from the longer (B when they are as long), at its
// front or back with probability 1/2 each: one gen.next() per token dropped, the front when its
// top 53 bits as a fraction of 2^53 are below 1/2 (Python's random.random() < 0.5). Linear in
// the tokens dropped.
void truncate_seq_pair(std::vector<int64_t>& a, std::vector<int64_t>& b, size_t max_tokens,
                       SplitMix64& gen);

// A document's sentences: the text with runs of whitespace made one space, cut after '.', '!'
// or '?' (and any closing quotes or brackets) that a space follows. Empty pieces are dropped.
std::vector<std::string> split_sentences(std::string_view text);

// One example, unpadded.
struct BertExample {
  std::vector<int64_t> ids, token_types, mlm_labels;
  int64_t next_sentence_label = 0;  // 0 = B follows A (IsNext), 1 = B is random (NotNext)
};

// Examples padded with [PAD] to the longest of the batch, as Bert::forward and
// bert_pretraining_loss take them.
struct BertBatch {
  Tensor ids, token_type_ids, attention_mask, mlm_labels;  // int64 [B, T] (mask: 1 = token)
  Tensor nsp_labels;                                       // int64 [B]
};

class BertPretrainingData {
 public:
  // Throws loom::Error if the documents give no pair (no document with two sentences, or a
  // single document) or the config is invalid.
  BertPretrainingData(const std::vector<std::string>& documents,
                      const WordPieceTokenizer& tokenizer, const BertPretrainingConfig& config);

  int64_t size() const { return static_cast<int64_t>(pairs_.size()); }
  // Example `index` as masked in `epoch` (any epoch >= 0).
  BertExample example(int64_t index, int64_t epoch) const;
  BertBatch batch(const std::vector<int64_t>& indices, int64_t epoch,
                  Device device = Device::CPU) const;
  // The unmasked [CLS] A [SEP] B [SEP] of example `index`.
  std::vector<int64_t> unmasked_ids(int64_t index) const;
  const MaskingRule& masking_rule() const { return rule_; }
  const BertPretrainingConfig& config() const { return config_; }

 private:
  struct Pair {
    std::vector<int64_t> a, b;
    bool is_next;
  };
  void check_index(int64_t index, const char* what) const;

  BertPretrainingConfig config_;
  MaskingRule rule_;
  int64_t pad_id_;
  std::vector<Pair> pairs_;
};

}  // namespace loom::data
