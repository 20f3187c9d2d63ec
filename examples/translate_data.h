// The data of the English -> German translation run, shared by train_translate (which trains on
// it) and bench/dump_data.cpp (which writes it for the PyTorch reference,
// bench/reference/train.py translation): the flags that choose the data and the model, the
// dictionary's pairs and their splits, tokenized pairs, length-bucket batches with a seeded
// order per epoch, and their padded tensors.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli.h"
#include "data/dictd.h"
#include "loom.h"
#include "models/transformer.h"

namespace loom::translate_example {

struct Example {
  std::vector<int64_t> src, tgt;  // src = words + eos; tgt = bos + words + eos
  size_t pair;                    // index into its split's pairs
};

struct Specials {
  int64_t pad, bos, eos;
};

constexpr float kLengthPenalty = 0.6f;  // GNMT's alpha in the beam search of the translations

// ============================================================================ the flags

// The model: a TransformerConfig preset (--model), its sizes overridden where not 0.
#define TRANSLATE_MODEL_FIELDS(F)                                                       \
  F(int64_t, d_model, 0, non_negative, "override the width (0 = keep)")                 \
  F(int64_t, n_head, 0, non_negative, "override the heads (0 = keep)")                  \
  F(int64_t, layers, 0, non_negative, "override encoder and decoder layers (0 = keep)") \
  F(int64_t, d_ff, 0, non_negative, "override the feed-forward width (0 = keep)")       \
  F(bool, norm_first, false, any, "pre-norm layers instead of the paper's post-norm")

LOOM_FIELDS_STRUCT(ModelSizes, TRANSLATE_MODEL_FIELDS);

struct ModelFlags {
  std::string preset = "seq2seq-mini";
  ModelSizes sizes;
  float dropout = 0.1f;  // recorded in the config (the initial weights do not depend on it)
};

// --model, the sizes and --dropout, as flags of `group`.
inline void add_model_flags(CLI::App& group, ModelFlags& m) {
  group.add_option("--model", m.preset, "Transformer preset")
      ->check(CLI::IsMember(models::TransformerConfig::preset_names()));
  cli::add_fields(group, m.sizes);
  group.add_option("--dropout", m.dropout, "dropout (the paper's P_drop)")
      ->check(cli::range(0.0, 0.9));
}

// The model the flags configure, for a shared vocabulary of `vocab_size` tokens whose <pad> is
// `pad_id`, with positions for sides of `max_tokens`.
inline models::TransformerConfig model_config(const ModelFlags& m, int64_t vocab_size,
                                              int64_t pad_id, int64_t max_tokens) {
  models::TransformerConfig c = models::TransformerConfig::preset(m.preset);
  c.src_vocab_size = c.tgt_vocab_size = vocab_size;
  c.pad_id = pad_id;
  c.dropout = m.dropout;
  c.norm_first = m.sizes.norm_first;
  if (m.sizes.d_model) c.d_model = m.sizes.d_model;
  if (m.sizes.n_head) c.n_head = m.sizes.n_head;
  if (m.sizes.layers) c.n_encoder_layers = c.n_decoder_layers = m.sizes.layers;
  if (m.sizes.d_ff) c.d_ff = m.sizes.d_ff;
  c.max_len = std::max<int64_t>(c.max_len, max_tokens);
  return c;
}

// The data: which pairs of the dictionary, their lengths, the tokenizer and the splits. A
// resumed run must keep them all; the checks beyond the Check are add_data_flags'.
#define TRANSLATE_DATA_FIELDS(F)                                                                  \
  F(std::string, dict, data::kFreedictEngDeu, any, "dictd files PREFIX.index and PREFIX.dict.dz") \
  F(std::string, pairs, "examples", any,                                                          \
    "the dictionary's quoted example phrases and sentences, its headword -> first "               \
    "translation pairs, or both (headword pairs are single rare words: a 10-minute run "          \
    "learns from the examples)")                                                                  \
  F(int64_t, max_words, 12, positive, "longest pair kept, in words per side")                     \
  F(int64_t, bpe_vocab, 4000, any, "shared BPE vocabulary (with <pad> <bos> <eos>)")              \
  F(int64_t, max_tokens, 48, any, "longest tokenized side kept (with bos/eos)")                   \
  F(double, valid_fraction, 0.01, any, "share of pairs for validation")                           \
  F(double, test_fraction, 0.01, any, "share of pairs for the test split")

LOOM_FIELDS_STRUCT(DataFlags, TRANSLATE_DATA_FIELDS);

// The data flags as flags of `group`, with the bounds their Check cannot state.
inline void add_data_flags(CLI::App& group, DataFlags& d) {
  cli::add_fields(group, d);
  group.get_option("--pairs")->check(CLI::IsMember({"both", "examples", "headwords"}));
  group.get_option("--bpe-vocab")->check(cli::range(int64_t{260}, int64_t{1} << 16));
  group.get_option("--max-tokens")->check(cli::range(int64_t{4}, int64_t{512}));
  group.get_option("--valid-fraction")->check(cli::range(0.0, 0.5));
  group.get_option("--test-fraction")->check(cli::range(0.0, 0.5));
}

// ============================================================================ the pairs

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

// The pairs of `dict` the flags choose (--pairs, --max-words), split into train, valid and
// test (--valid-fraction, --test-fraction).
inline data::PairSplits pair_splits(const data::Dictd& dict, const DataFlags& d) {
  return data::split_pairs(data::extract_pairs(dict, {.headwords = d.pairs != "examples",
                                                      .examples = d.pairs != "headwords",
                                                      .max_words = d.max_words}),
                           d.valid_fraction, d.test_fraction);
}

// One byte-level BPE over both languages of the training pairs (Vaswani et al. 2017, 5.1: a
// shared source-target vocabulary), with <pad>, <bos> and <eos> as special tokens.
inline data::BPETokenizer train_shared_bpe(const std::vector<data::TranslationPair>& train,
                                           int64_t vocab_size) {
  std::string text;
  for (const auto& p : train) text += p.english + "\n" + p.german + "\n";
  return data::BPETokenizer::train(text, vocab_size, {"<pad>", "<bos>", "<eos>"});
}

inline Specials specials_of(const data::BPETokenizer& tok) {
  return {tok.special_token_id("<pad>"), tok.special_token_id("<bos>"),
          tok.special_token_id("<eos>")};
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

inline Batch collate(const std::vector<Example>& examples, const std::vector<size_t>& rows,
                     int64_t pad, Device device) {
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
