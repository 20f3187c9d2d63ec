// BPETokenizer::train: learning the merges.
//
// The algorithm is the one of the seed lecture's BPE slide (count pairs, merge the most
// frequent, repeat). Done literally, every merge recounts all pairs of the whole corpus; we use
// the standard optimisations of Sennrich et al.'s subword-nmt (learn_bpe.py) and Hugging Face
// tokenizers instead, which give the same merges much faster:
//   1. Pre-tokenized chunks are counted once; training works on the distinct chunks ("words"),
//      each weighted by its frequency. Natural text has far fewer distinct words than words.
//   2. Pair counts are kept in a table and updated incrementally: a merge only changes the
//      words that contain the merged pair, found through an index pair -> words.
//   3. The most frequent pair comes from a max-heap with lazy deletion: a popped entry whose
//      count is out of date is pushed back with its current count.
#include <fmt/format.h>

#include <queue>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/pretokenize.h"

namespace loom::data {
namespace {

// A distinct chunk of the training text as its current token ids, and how often it occurs.
struct Word {
  std::vector<int32_t> tokens;
  int64_t count;
};

// A heap entry. The top is the largest count; ties go to the smallest pair key, i.e. the pair
// with the smaller left id, then the smaller right id, which makes training deterministic.
struct Candidate {
  int64_t count;
  uint64_t pair;
  bool operator<(const Candidate& o) const {
    return count != o.count ? count < o.count : pair > o.pair;
  }
};

uint64_t key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right);
}

std::vector<Word> count_words(std::string_view text) {
  std::unordered_map<std::string_view, int64_t> counts;
  for (size_t start = 0; start < text.size();) {
    const size_t end = chunk_end(text, start);
    ++counts[text.substr(start, end - start)];
    start = end;
  }
  std::vector<Word> words;
  words.reserve(counts.size());
  for (const auto& [chunk, count] : counts) {
    std::vector<int32_t> tokens(chunk.size());
    for (size_t i = 0; i < chunk.size(); ++i) tokens[i] = static_cast<unsigned char>(chunk[i]);
    words.push_back({std::move(tokens), count});
  }
  return words;
}

// Replaces every occurrence of (left, right) in `tokens` by `merged`, left to right.
void merge_pair(std::vector<int32_t>& tokens, int32_t left, int32_t right, int32_t merged) {
  size_t out = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i + 1 < tokens.size() && tokens[i] == left && tokens[i + 1] == right) {
      tokens[out++] = merged;
      ++i;
    } else {
      tokens[out++] = tokens[i];
    }
  }
  tokens.resize(out);
}

class Trainer {
 public:
  explicit Trainer(std::string_view text)
      : words_(count_words(text)), seen_in_merge_(words_.size(), -1) {
    for (size_t w = 0; w < words_.size(); ++w) add_pairs(static_cast<int32_t>(w), +1);
    for (const auto& [pair, count] : pair_counts_) heap_.push({count, pair});
    changed_.clear();
  }

  // The most frequent pair, or false when no pair is left.
  bool pop_best(uint64_t& best) {
    while (!heap_.empty()) {
      const Candidate top = heap_.top();
      heap_.pop();
      const auto it = pair_counts_.find(top.pair);
      if (it == pair_counts_.end()) continue;  // the pair has disappeared
      if (it->second != top.count) {           // out of date: retry with the current count
        heap_.push({it->second, top.pair});
        continue;
      }
      best = top.pair;
      return true;
    }
    return false;
  }

  // Merges `pair` into the new token `merged` in every word that contains it.
  void apply(uint64_t pair, int32_t merged) {
    const auto left = static_cast<int32_t>(pair >> 32),
               right = static_cast<int32_t>(pair & 0xffffffffu);
    std::vector<int32_t> candidates = std::move(pair_words_[pair]);
    changed_.clear();
    for (const int32_t w : candidates) {
      if (seen_in_merge_[w] == merged) continue;  // listed twice
      seen_in_merge_[w] = merged;
      add_pairs(w, -1);
      merge_pair(words_[w].tokens, left, right, merged);
      add_pairs(w, +1);
    }
    pair_counts_.erase(pair);
    pair_words_.erase(pair);
    // Only pairs containing the new token can have grown; all others only shrank, and their
    // heap entries (now too large) are corrected when popped.
    for (const uint64_t p : changed_) {
      const bool has_merged = static_cast<int32_t>(p >> 32) == merged ||
                              static_cast<int32_t>(p & 0xffffffffu) == merged;
      const auto it = pair_counts_.find(p);
      if (has_merged && it != pair_counts_.end()) heap_.push({it->second, p});
    }
  }

 private:
  // Adds (sign = +1) or removes (sign = -1) the pairs of word w to/from the tables.
  void add_pairs(int32_t w, int sign) {
    const Word& word = words_[w];
    for (size_t i = 0; i + 1 < word.tokens.size(); ++i) {
      const uint64_t p = key(word.tokens[i], word.tokens[i + 1]);
      const auto it = pair_counts_.try_emplace(p, 0).first;
      it->second += sign * word.count;
      if (sign > 0) {
        std::vector<int32_t>& list = pair_words_[p];
        if (list.empty() || list.back() != w) list.push_back(w);
        changed_.push_back(p);
      } else if (it->second == 0) {
        // Forget pairs that no word contains any more, keeping the tables small; if the
        // add_pairs(w, +1) that follows brings one back, it is entered afresh.
        pair_counts_.erase(it);
        pair_words_.erase(p);
      }
    }
  }

  std::vector<Word> words_;
  std::vector<int32_t> seen_in_merge_;                             // word -> last merge visiting it
  std::unordered_map<uint64_t, int64_t> pair_counts_;              // pair -> occurrences
  std::unordered_map<uint64_t, std::vector<int32_t>> pair_words_;  // pair -> words (superset)
  std::priority_queue<Candidate> heap_;
  std::vector<uint64_t> changed_;  // pairs added during apply()
};

}  // namespace

BPETokenizer BPETokenizer::train(std::string_view text, int64_t vocab_size,
                                 std::vector<std::string> special_tokens) {
  const auto num_special = static_cast<int64_t>(special_tokens.size());
  LOOM_CHECK(vocab_size >= 256 + num_special && vocab_size <= (int64_t{1} << 31) - 1,
             "BPETokenizer::train: vocab_size {} must be in [256 + {} special tokens, 2^31)",
             vocab_size, num_special);
  const int64_t num_merges = vocab_size - 256 - num_special;
  Trainer trainer(text);
  std::vector<Merge> merges;
  merges.reserve(static_cast<size_t>(num_merges));
  std::vector<size_t> token_bytes(256, 1);  // the length of every token so far
  uint64_t best = 0;
  while (static_cast<int64_t>(merges.size()) < num_merges && trainer.pop_best(best)) {
    const auto left = static_cast<int64_t>(best >> 32), right = static_cast<int64_t>(best & 0xffffffffu);
    const size_t bytes = token_bytes[left] + token_bytes[right];
    if (bytes > kMaxTokenBytes) continue;  // never a token longer than load() accepts
    trainer.apply(best, static_cast<int32_t>(256 + merges.size()));
    merges.emplace_back(left, right);
    token_bytes.push_back(bytes);
  }
  return BPETokenizer(std::move(merges), std::move(special_tokens));
}

}  // namespace loom::data
