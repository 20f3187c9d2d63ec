#include "data/pair_merges.h"

#include <cstddef>
#include <utility>

namespace loom::data {
namespace {

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

}  // namespace

PairMerges::PairMerges(std::vector<Word> words)
    : words_(std::move(words)), seen_in_merge_(words_.size(), -1) {
  for (size_t w = 0; w < words_.size(); ++w) add_pairs(static_cast<int32_t>(w), +1);
  for (const auto& [pair, count] : pair_counts_) heap_.push({count, pair});
  changed_.clear();
}

bool PairMerges::pop_best(int32_t& left, int32_t& right) {
  while (!heap_.empty()) {
    const Candidate top = heap_.top();
    heap_.pop();
    const auto it = pair_counts_.find(top.pair);
    if (it == pair_counts_.end()) continue;  // the pair has disappeared
    if (it->second != top.count) {           // out of date: retry with the current count
      heap_.push({it->second, top.pair});
      continue;
    }
    left = static_cast<int32_t>(top.pair >> 32);
    right = static_cast<int32_t>(top.pair & 0xffffffffu);
    return true;
  }
  return false;
}

void PairMerges::apply(int32_t left, int32_t right, int32_t merged) {
  const uint64_t pair = key(left, right);
  const int64_t merge = merges_done_++;
  std::vector<int32_t> candidates = std::move(pair_words_[pair]);
  changed_.clear();
  for (const int32_t w : candidates) {
    if (seen_in_merge_[w] == merge) continue;  // listed twice
    seen_in_merge_[w] = merge;
    add_pairs(w, -1);
    merge_pair(words_[w].tokens, left, right, merged);
    add_pairs(w, +1);
  }
  pair_counts_.erase(pair);
  pair_words_.erase(pair);
  // Only pairs containing the new token can have grown; all others only shrank, and their
  // heap entries (now too large) are corrected when popped.
  for (const uint64_t p : changed_) {
    const bool has_merged =
        static_cast<int32_t>(p >> 32) == merged || static_cast<int32_t>(p & 0xffffffffu) == merged;
    const auto it = pair_counts_.find(p);
    if (has_merged && it != pair_counts_.end()) heap_.push({it->second, p});
  }
}

void PairMerges::add_pairs(int32_t w, int sign) {
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

}  // namespace loom::data
