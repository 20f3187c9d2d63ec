// PairMerges: the merge loop shared by the BPE and WordPiece trainers (data/bpe_train.cpp,
// data/wordpiece_train.cpp). Both learn a vocabulary by the seed lecture's BPE recipe: count
// adjacent symbol pairs, merge the most frequent, repeat. Done literally, every merge recounts all
// pairs of the corpus; this uses the standard optimisations of Sennrich et al.'s subword-nmt
// (learn_bpe.py) and Hugging Face tokenizers instead, which give the same merges much faster:
//   1. Training works on distinct words, each weighted by its frequency.
//   2. Pair counts are kept in a table and updated incrementally: a merge only changes the
//      words that contain the merged pair, found through an index pair -> words.
//   3. The most frequent pair comes from a max-heap with lazy deletion: a popped entry whose
//      count is out of date is pushed back with its current count.
// Symbols are int32 ids chosen by the caller; ties between equally frequent pairs go to the
// pair with the smaller left id, then the smaller right id, so training is deterministic.
#pragma once

#include <cstdint>
#include <queue>
#include <unordered_map>
#include <vector>

namespace loom::data {

class PairMerges {
 public:
  // A distinct word as its current symbol ids, and how often it occurs.
  struct Word {
    std::vector<int32_t> tokens;
    int64_t count;
  };

  explicit PairMerges(std::vector<Word> words);

  // The most frequent pair (left, right), or false when no pair is left.
  bool pop_best(int32_t& left, int32_t& right);
  // Replaces every occurrence of (left, right), left to right in each word, by `merged` (a new
  // id, or one already in use: two pairs may spell the same token).
  void apply(int32_t left, int32_t right, int32_t merged);

 private:
  // A heap entry: the top is the largest count, ties to the smallest pair key.
  struct Candidate {
    int64_t count;
    uint64_t pair;
    bool operator<(const Candidate& o) const {
      return count != o.count ? count < o.count : pair > o.pair;
    }
  };
  static uint64_t key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right);
  }
  // Adds (sign = +1) or removes (sign = -1) the pairs of word w to/from the tables.
  void add_pairs(int32_t w, int sign);

  std::vector<Word> words_;
  std::vector<int64_t> seen_in_merge_;  // word -> last merge visiting it
  int64_t merges_done_ = 0;
  std::unordered_map<uint64_t, int64_t> pair_counts_;              // pair -> occurrences
  std::unordered_map<uint64_t, std::vector<int32_t>> pair_words_;  // pair -> words (superset)
  std::priority_queue<Candidate> heap_;
  std::vector<uint64_t> changed_;  // pairs added during apply()
};

}  // namespace loom::data
