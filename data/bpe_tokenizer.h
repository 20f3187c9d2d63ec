// BPETokenizer: byte-level byte-pair encoding, as in GPT-2.
//
// Byte Pair Encoding (seed lecture 2, "Decoder-only models", slide "Byte Pair Encoding (BPE)",
// after Sennrich et al. 2016): set up a vocabulary of single symbols, count adjacent symbol
// pairs, merge the most frequent pair into a new symbol, and repeat until the vocabulary
// reaches the wanted size. Running it "on bytes instead of Unicode characters" (the same
// slide; Wang et al. 2019; GPT-2) makes the base vocabulary the 256 byte values, so every
// input, valid UTF-8 or not, can be encoded and decoded back exactly.
//
// Vocabulary layout: ids 0..255 are the bytes, id 256 + k is the k-th learned merge, and the
// special tokens (e.g. "<|endoftext|>") come last. Text is first cut into chunks by the GPT-2
// pre-tokenizer (data/pretokenize.h), so merges never cross word boundaries.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/tokenizer.h"

namespace loom::data {

class BPETokenizer : public Tokenizer {
 public:
  // Header line of the saved file: "<kMagic> <kVersion>".
  static constexpr const char* kMagic = "loom-bpe-tokenizer";
  static constexpr int kVersion = 1;
  // Caps against hostile files: each merge may double a token's length, so 40 lines could ask
  // for a terabyte. A token holds at most kMaxTokenBytes bytes (GPT-2's longest holds 128;
  // train() never makes a longer one) and the whole vocabulary at most kMaxVocabBytes.
  static constexpr size_t kMaxTokenBytes = 1024;
  static constexpr size_t kMaxVocabBytes = size_t{64} << 20;
  // Special tokens are few (GPT-2 has one, Llama 3 256) and each is looked for in the text.
  static constexpr size_t kMaxSpecialTokens = 4096;

  // The pair of token ids merged into a new token.
  using Merge = std::pair<int64_t, int64_t>;

  // No merges and no special tokens: encodes exactly like ByteTokenizer.
  BPETokenizer() : BPETokenizer(std::vector<Merge>{}) {}
  // Merge k must combine tokens that exist before it (ids < 256 + k) and appear only once;
  // special tokens must be unique, non-empty and free of whitespace and control bytes.
  explicit BPETokenizer(std::vector<Merge> merges, std::vector<std::string> special_tokens = {});

  // Learns merges from `text` until the vocabulary (bytes + merges + special tokens) has
  // `vocab_size` entries, or no adjacent pair is left to merge. Ties between equally frequent
  // pairs go to the pair with the smaller ids, so the result is the same on every platform.
  static BPETokenizer train(std::string_view text, int64_t vocab_size,
                            std::vector<std::string> special_tokens = {});

  // Plain text: special-token strings in `text` are encoded as ordinary bytes, so no input can
  // smuggle in an <|endoftext|> (tiktoken's encode_ordinary).
  std::vector<int64_t> encode(std::string_view text) const override;
  // Like encode, but each occurrence of a special token's string becomes that token's id.
  std::vector<int64_t> encode_with_special(std::string_view text) const;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.size()); }
  void save(const std::string& path) const override;
  // Reads a file written by save(); throws loom::Error naming the file and line if it is
  // missing, truncated or corrupt.
  static BPETokenizer load(const std::string& path);

  const std::vector<Merge>& merges() const { return merges_; }
  const std::vector<std::string>& special_tokens() const { return special_tokens_; }
  // The id of a special token; throws loom::Error if `token` is not one.
  int64_t special_token_id(std::string_view token) const;
  // The bytes token `id` stands for.
  const std::string& token_bytes(int64_t id) const;

 private:
  // Chunks already encoded in this call -> the [begin, end) of their ids in the output.
  using ChunkCache = std::unordered_map<std::string_view, std::pair<size_t, size_t>>;

  // Adds the next merge / special token; returns why it cannot be added, or "" on success.
  std::string try_add_merge(const Merge& merge);
  std::string try_add_special_token(const std::string& token);
  // Appends the ids of ordinary `text` to `out`.
  void encode_ordinary(std::string_view text, std::vector<int64_t>& out, ChunkCache& cache) const;
  // Appends the ids of one pre-tokenized chunk to `out`.
  void encode_chunk(std::string_view chunk, std::vector<int64_t>& out) const;
  // Rank (merge index) of the pair (left, right), or -1 if it is never merged.
  int64_t rank(int64_t left, int64_t right) const;
  // One 64-bit hash key for a pair of token ids (both < 2^32).
  static uint64_t pair_key(uint64_t left, uint64_t right) { return (left << 32) | right; }

  std::vector<Merge> merges_;
  std::vector<std::string> special_tokens_;
  std::vector<std::string> vocab_;               // id -> bytes
  size_t vocab_bytes_ = 256;                     // the sum of the lengths of vocab_
  std::unordered_map<uint64_t, int64_t> ranks_;  // pair key -> merge index
};

}  // namespace loom::data
