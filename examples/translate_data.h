// The data of the English -> German translation run, shared by train_translate (which trains on
// it) and translate_dump.h (which writes it for the PyTorch reference,
// bench/reference/train.py translation): tokenized pairs, length-bucket batches with a seeded
// order per epoch, and their padded tensors.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/dictd.h"
#include "loom.h"

namespace loom::translate_example {

struct Example {
  std::vector<int64_t> src, tgt;  // src = words + eos; tgt = bos + words + eos
  size_t pair;                    // index into its split's pairs
};

struct Specials {
  int64_t pad, bos, eos;
};

constexpr float kLengthPenalty = 0.6f;  // GNMT's alpha in the beam search of the translations

// BLEU (metrics/text.h) and the printed translations take UTF-8 text only: every definition of
// the dictionary is checked before the first step, naming the body file and the byte offset in
// it (decompressed), rather than found invalid by the first evaluation, after training.
inline void check_utf8(const data::Dictd& dict, const std::string& prefix,
                       const std::string& program) {
  for (size_t i = 0; i < dict.entries().size(); ++i) {
    const std::string_view text = dict.definition(i);
    const size_t valid = data::valid_utf8_prefix(text);
    LOOM_CHECK(valid == text.size(),
               "{}: '{}' byte {} (decompressed), in the definition of '{}': 0x{:02x} is not "
               "valid UTF-8, which BLEU and the translations need",
               program, data::Dictd::body_path(prefix), dict.entries()[i].offset + valid,
               dict.entries()[i].headword, static_cast<unsigned char>(text[valid]));
  }
}

inline std::vector<Example> encode_split(const data::BPETokenizer& tok, const Specials& s,
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
inline std::vector<std::vector<size_t>> make_batches(const std::vector<Example>& examples,
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
// the same on every platform, and in bench/reference/train.py translation.
inline std::vector<size_t> epoch_order(size_t n, uint64_t seed, int64_t epoch) {
  const std::vector<int64_t> perm = data::random_permutation(
      static_cast<int64_t>(n), data::mix_seeds(seed, static_cast<uint64_t>(epoch)));
  return {perm.begin(), perm.end()};
}

// A batch as padded tensors: src (B, S), tgt_in (B, T), tgt_out (B, T), T = longest tgt - 1.
struct Batch {
  Tensor src, tgt_in, tgt_out;
  int64_t target_tokens = 0;
};

inline Batch collate(const std::vector<Example>& examples, const std::vector<size_t>& rows, int64_t pad,
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


}  // namespace loom::translate_example
