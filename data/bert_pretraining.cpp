// BERT pre-training examples: sentences, NSP pairs and the masked-LM rule of google-research/
// bert's create_pretraining_data.py (see data/bert_pretraining.h for the rules).
#include "data/bert_pretraining.h"

#include <cmath>

#include "autograd/ops.h"
#include "core/error.h"
#include "data/splitmix.h"

namespace loom::data {
namespace {

// Uniform in [0, 1) from the top 53 bits (Python's random.random() resolution).
double uniform01(SplitMix64& gen) { return static_cast<double>(gen.next() >> 11) * 0x1.0p-53; }

// Python's round() of a non-negative double: nearest integer, half to even.
int64_t round_half_even(double x) {
  const double lower = std::floor(x), diff = x - lower;
  if (diff > 0.5) return static_cast<int64_t>(lower) + 1;
  if (diff < 0.5) return static_cast<int64_t>(lower);
  return static_cast<int64_t>(lower) + (static_cast<int64_t>(lower) % 2 == 0 ? 0 : 1);
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// The first `max_words` (> 0) words of a sentence of split_sentences (words one space apart).
std::string_view first_words(std::string_view sentence, int64_t max_words) {
  size_t next = 0;  // where the next word starts
  for (int64_t words = 0; words < max_words; ++words) {
    const size_t space = sentence.find(' ', next);
    if (space == std::string_view::npos) return sentence;
    next = space + 1;
  }
  return sentence.substr(0, next - 1);  // without the space after the last word kept
}

}  // namespace

void truncate_seq_pair(std::vector<int64_t>& a, std::vector<int64_t>& b, size_t max_tokens,
                       SplitMix64& gen) {
  // The tokens kept are [front, back) of each; erasing a vector's first token instead would
  // move all the others, quadratic in a long sentence (a 1M-word one took 87 s).
  struct Kept {
    size_t front, back;
    size_t size() const { return back - front; }
  } kept_a{0, a.size()}, kept_b{0, b.size()};
  while (kept_a.size() + kept_b.size() > max_tokens) {
    Kept& longer = kept_a.size() > kept_b.size() ? kept_a : kept_b;  // b on a tie
    if (uniform01(gen) < 0.5)
      ++longer.front;
    else
      --longer.back;
  }
  auto cut = [](std::vector<int64_t>& ids, const Kept& kept) {
    ids = std::vector<int64_t>(ids.begin() + static_cast<ptrdiff_t>(kept.front),
                               ids.begin() + static_cast<ptrdiff_t>(kept.back));
  };
  cut(a, kept_a);
  cut(b, kept_b);
}

MaskedTokens mask_tokens(const std::vector<int64_t>& ids, const MaskingRule& rule, uint64_t seed) {
  MaskedTokens out{ids, std::vector<int64_t>(ids.size(), -100)};
  std::vector<int64_t> candidates;
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] != rule.cls_id && ids[i] != rule.sep_id)
      candidates.push_back(static_cast<int64_t>(i));
  if (candidates.empty()) return out;
  SplitMix64 gen(seed);
  // rng.shuffle(cand_indexes) (Fisher-Yates).
  for (size_t i = candidates.size() - 1; i > 0; --i)
    std::swap(candidates[i], candidates[gen.uniform(i + 1)]);
  const int64_t wanted = std::min(
      rule.max_predictions,
      std::max<int64_t>(1, round_half_even(static_cast<double>(ids.size()) * rule.masked_lm_prob)));
  const auto n = std::min<size_t>(static_cast<size_t>(wanted), candidates.size());
  for (size_t k = 0; k < n; ++k) {
    const auto i = static_cast<size_t>(candidates[k]);
    out.labels[i] = ids[i];
    if (uniform01(gen) < 0.8) {
      out.ids[i] = rule.mask_id;         // 80%: [MASK]
    } else if (uniform01(gen) >= 0.5) {  // 10%: a random token
      out.ids[i] = static_cast<int64_t>(gen.uniform(static_cast<uint64_t>(rule.vocab_size)));
    }  // 10%: unchanged
  }
  return out;
}

std::vector<std::string> split_sentences(std::string_view text) {
  std::vector<std::string> sentences;
  std::string current;
  auto flush = [&] {
    while (!current.empty() && current.back() == ' ') current.pop_back();
    if (!current.empty()) sentences.push_back(std::move(current));
    current.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (is_space(c)) {
      if (!current.empty() && current.back() != ' ') current += ' ';
      continue;
    }
    current += c;
    if (c != '.' && c != '!' && c != '?') continue;
    // The end mark, more of them ("?!", "..."), closing quotes or brackets, then a space.
    size_t j = i + 1;
    while (j < text.size() &&
           (text[j] == '.' || text[j] == '!' || text[j] == '?' || text[j] == '"' ||
            text[j] == '\'' || text[j] == ')' || text[j] == ']'))
      current += text[j++];
    i = j - 1;
    if (j < text.size() && is_space(text[j])) flush();
  }
  flush();
  return sentences;
}

BertPretrainingData::BertPretrainingData(const std::vector<std::string>& documents,
                                         const WordPieceTokenizer& tokenizer,
                                         const BertPretrainingConfig& config)
    : config_(config), pad_id_(tokenizer.token_id("[PAD]")) {
  LOOM_CHECK(config.max_seq_len >= 5 && config.masked_lm_prob > 0 && config.masked_lm_prob < 1 &&
                 config.max_predictions > 0 && config.not_next_prob >= 0 &&
                 config.not_next_prob <= 1 && config.max_sentence_words > 0,
             "BertPretrainingData: invalid config (max_seq_len {} >= 5, masked_lm_prob {} in "
             "(0, 1), max_predictions {} > 0, not_next_prob {} in [0, 1], max_sentence_words {} "
             "> 0)",
             config.max_seq_len, config.masked_lm_prob, config.max_predictions,
             config.not_next_prob, config.max_sentence_words);
  rule_ = {tokenizer.token_id("[CLS]"), tokenizer.token_id("[SEP]"), tokenizer.token_id("[MASK]"),
           tokenizer.vocab_size(),      config.masked_lm_prob,       config.max_predictions};
  // Documents as lists of tokenized sentences (sentences that tokenize to nothing dropped).
  std::vector<std::vector<std::vector<int64_t>>> docs;
  for (const std::string& document : documents) {
    std::vector<std::vector<int64_t>> sentences;
    for (const std::string& sentence : split_sentences(document)) {
      auto ids = tokenizer.encode(first_words(sentence, config.max_sentence_words));
      if (!ids.empty()) sentences.push_back(std::move(ids));
    }
    if (!sentences.empty()) docs.push_back(std::move(sentences));
  }
  LOOM_CHECK(docs.size() >= 2,
             "BertPretrainingData: {} documents with text; NotNext pairs need "
             "at least 2",
             docs.size());
  SplitMix64 gen(mix_seeds(config.seed, 0x6e7370));  // "nsp"
  const auto max_tokens = static_cast<size_t>(config.max_seq_len - 3);
  for (size_t d = 0; d < docs.size(); ++d) {
    for (size_t s = 0; s + 1 < docs[d].size(); ++s) {
      Pair pair{docs[d][s], docs[d][s + 1], true};
      if (uniform01(gen) < config.not_next_prob) {  // a random sentence of another document
        size_t other = gen.uniform(docs.size() - 1);
        if (other >= d) ++other;
        pair.b = docs[other][gen.uniform(docs[other].size())];
        pair.is_next = false;
      }
      truncate_seq_pair(pair.a, pair.b, max_tokens, gen);
      pairs_.push_back(std::move(pair));
    }
  }
  LOOM_CHECK(!pairs_.empty(), "BertPretrainingData: no document has two sentences");
}

void BertPretrainingData::check_index(int64_t index, const char* what) const {
  LOOM_CHECK(index >= 0 && index < size(), "BertPretrainingData::{}: index {} outside [0, {})",
             what, index, size());
}

std::vector<int64_t> BertPretrainingData::unmasked_ids(int64_t index) const {
  check_index(index, "unmasked_ids");
  const Pair& p = pairs_[static_cast<size_t>(index)];
  std::vector<int64_t> ids{rule_.cls_id};
  ids.insert(ids.end(), p.a.begin(), p.a.end());
  ids.push_back(rule_.sep_id);
  ids.insert(ids.end(), p.b.begin(), p.b.end());
  ids.push_back(rule_.sep_id);
  return ids;
}

BertExample BertPretrainingData::example(int64_t index, int64_t epoch) const {
  check_index(index, "example");
  LOOM_CHECK(epoch >= 0, "BertPretrainingData::example: epoch {} is negative", epoch);
  const Pair& p = pairs_[static_cast<size_t>(index)];
  const uint64_t seed = mix_seeds(mix_seeds(config_.seed, static_cast<uint64_t>(epoch)),
                                  static_cast<uint64_t>(index));
  MaskedTokens masked = mask_tokens(unmasked_ids(index), rule_, seed);
  BertExample e;
  e.token_types.assign(masked.ids.size(), 1);
  std::fill(e.token_types.begin(), e.token_types.begin() + static_cast<int64_t>(p.a.size()) + 2, 0);
  e.ids = std::move(masked.ids);
  e.mlm_labels = std::move(masked.labels);
  e.next_sentence_label = p.is_next ? 0 : 1;
  return e;
}

BertBatch BertPretrainingData::batch(const std::vector<int64_t>& indices, int64_t epoch,
                                     Device device) const {
  LOOM_CHECK(!indices.empty(), "BertPretrainingData::batch: no indices");
  std::vector<BertExample> examples;
  size_t T = 0;
  for (const int64_t index : indices) {
    examples.push_back(example(index, epoch));
    T = std::max(T, examples.back().ids.size());
  }
  const auto B = static_cast<int64_t>(examples.size());
  std::vector<int64_t> ids(B * T, pad_id_), types(B * T, 0), mask(B * T, 0), labels(B * T, -100),
      nsp(static_cast<size_t>(B));
  for (size_t b = 0; b < examples.size(); ++b) {
    const BertExample& e = examples[b];
    std::copy(e.ids.begin(), e.ids.end(), ids.begin() + b * T);
    std::copy(e.token_types.begin(), e.token_types.end(), types.begin() + b * T);
    std::fill_n(mask.begin() + b * T, e.ids.size(), 1);
    std::copy(e.mlm_labels.begin(), e.mlm_labels.end(), labels.begin() + b * T);
    nsp[b] = e.next_sentence_label;
  }
  const Shape shape{B, static_cast<int64_t>(T)};
  return {tensor_i64(ids, shape).to(device), tensor_i64(types, shape).to(device),
          tensor_i64(mask, shape).to(device), tensor_i64(labels, shape).to(device),
          tensor_i64(nsp, {B}).to(device)};
}

}  // namespace loom::data
