// The data of BERT pre-training on the fortunes, shared by train_bert (which trains on it) and
// bench/dump_data.cpp (which writes it for the PyTorch reference, bench/reference/train.py bert):
// the flags that choose it, the sentence pairs of the training and the held-out fortunes, and
// the batches of each epoch, pairs of similar length together.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cli.h"
#include "loom.h"

namespace loom::examples {

// The flags that choose the data, beside --seed (which draws the split, the pairs and their
// masking).
struct BertDataFlags {
  std::string fortunes = data::kFortunesDir;
  int64_t vocab_size = 8192;
  int64_t max_seq_len = 128;
  double val_fraction = 0.05;
};

inline void add_data_flags(CLI::App& group, BertDataFlags& f) {
  group.add_option("--fortunes", f.fortunes, "directory of the fortune files");
  group.add_option("--vocab-size", f.vocab_size, "WordPiece vocabulary learned from the fortunes")
      ->check(cli::range(int64_t{64}, int64_t{1} << 20));
  group.add_option("--max-seq-len", f.max_seq_len, "[CLS] A [SEP] B [SEP] at most this long")
      ->check(cli::range(int64_t{8}, int64_t{4096}));
  group.add_option("--val-fraction", f.val_fraction, "fortunes held out for evaluation")
      ->check(cli::range(0.001, 0.5));
}

// The sentence pairs of both parts of a fortune split, as masked from `seed` (the training
// pairs) and `seed` + 1 (the held-out ones).
struct SentencePairs {
  data::BertPretrainingData train;
  data::BertPretrainingData val;
};

inline SentencePairs sentence_pairs(const data::TrainValSplit& split,
                                    const data::WordPieceTokenizer& tok, int64_t max_seq_len,
                                    uint64_t seed) {
  data::BertPretrainingConfig config{.max_seq_len = max_seq_len, .seed = seed};
  data::BertPretrainingData train(split.train, tok, config);
  config.seed = seed + 1;
  return {std::move(train), data::BertPretrainingData(split.val, tok, config)};
}

// The length of each pair, [CLS] A [SEP] B [SEP], in tokens.
inline std::vector<int64_t> pair_lengths(const data::BertPretrainingData& pairs) {
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < pairs.size(); ++i)
    lengths.push_back(static_cast<int64_t>(pairs.unmasked_ids(i).size()));
  return lengths;
}

// The batches of an epoch, a pure function of (seed, epoch), so a resumed run sees the same
// ones: the pairs in a random order, cut into groups of kGroupBatches batches; within a group
// sorted by length (stable) and cut into batches, so that a batch holds pairs of similar length
// and little padding (Hugging Face's group_by_length); then the batches in a random order.
// An epoch has size / batch batches (the remainder waits for another epoch's order).
inline constexpr int64_t kGroupBatches = 50;

inline std::vector<std::vector<int64_t>> epoch_batches(const std::vector<int64_t>& lengths,
                                                       int64_t batch, uint64_t seed,
                                                       int64_t epoch) {
  const int64_t per_epoch = static_cast<int64_t>(lengths.size()) / batch;
  const uint64_t epoch_seed = data::mix_seeds(seed, static_cast<uint64_t>(epoch));
  std::vector<int64_t> perm =
      data::random_permutation(static_cast<int64_t>(lengths.size()), epoch_seed);
  perm.resize(static_cast<size_t>(per_epoch * batch));
  const auto group = static_cast<size_t>(kGroupBatches * batch);
  for (size_t g = 0; g < perm.size(); g += group)
    std::stable_sort(perm.begin() + g, perm.begin() + std::min(perm.size(), g + group),
                     [&](int64_t a, int64_t b) { return lengths[a] < lengths[b]; });
  const std::vector<int64_t> order =
      data::random_permutation(per_epoch, data::mix_seeds(epoch_seed, 0x62617463));  // "batc"
  std::vector<std::vector<int64_t>> batches;
  for (int64_t k : order)
    batches.emplace_back(perm.begin() + k * batch, perm.begin() + (k + 1) * batch);
  return batches;
}

// The mean of batch x (longest pair) over the batches of epoch 0: the tokens a step computes
// on average, padding included, for planning --minutes.
inline double mean_padded_tokens(const std::vector<int64_t>& lengths, int64_t batch,
                                 uint64_t seed) {
  const std::vector<std::vector<int64_t>> batches = epoch_batches(lengths, batch, seed, 0);
  double sum = 0;
  for (const std::vector<int64_t>& batch : batches) {
    int64_t longest = 0;
    for (int64_t i : batch) longest = std::max(longest, lengths[static_cast<size_t>(i)]);
    sum += static_cast<double>(static_cast<int64_t>(batch.size()) * longest);
  }
  return sum / static_cast<double>(batches.size());
}

}  // namespace loom::examples
