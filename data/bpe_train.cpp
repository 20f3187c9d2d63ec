// BPETokenizer::train: learning the merges, by data/pair_merges.h's loop (the seed lecture's BPE
// recipe with subword-nmt's and Hugging Face's optimisations) on the distinct pre-tokenized chunks.
#include <fmt/format.h>

#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/pair_merges.h"
#include "data/pretokenize.h"

namespace loom::data {
namespace {

std::vector<PairMerges::Word> count_words(std::string_view text) {
  std::unordered_map<std::string_view, int64_t> counts;
  for (size_t start = 0; start < text.size();) {
    const size_t end = chunk_end(text, start);
    ++counts[text.substr(start, end - start)];
    start = end;
  }
  std::vector<PairMerges::Word> words;
  words.reserve(counts.size());
  for (const auto& [chunk, count] : counts) {
    std::vector<int32_t> tokens(chunk.size());
    for (size_t i = 0; i < chunk.size(); ++i) tokens[i] = static_cast<unsigned char>(chunk[i]);
    words.push_back({std::move(tokens), count});
  }
  return words;
}

}  // namespace

BPETokenizer BPETokenizer::train(std::string_view text, int64_t vocab_size,
                                 std::vector<std::string> special_tokens) {
  const auto num_special = static_cast<int64_t>(special_tokens.size());
  LOOM_CHECK(vocab_size >= 256 + num_special && vocab_size <= (int64_t{1} << 31) - 1,
             "BPETokenizer::train: vocab_size {} must be in [256 + {} special tokens, 2^31)",
             vocab_size, num_special);
  const int64_t num_merges = vocab_size - 256 - num_special;
  PairMerges trainer(count_words(text));
  std::vector<Merge> merges;
  merges.reserve(static_cast<size_t>(num_merges));
  std::vector<size_t> token_bytes(256, 1);  // the length of every token so far
  int32_t left = 0, right = 0;
  while (static_cast<int64_t>(merges.size()) < num_merges && trainer.pop_best(left, right)) {
    const size_t bytes = token_bytes[left] + token_bytes[right];
    if (bytes > kMaxTokenBytes) continue;  // never a token longer than load() accepts
    trainer.apply(left, right, static_cast<int32_t>(256 + merges.size()));
    merges.emplace_back(left, right);
    token_bytes.push_back(bytes);
  }
  return BPETokenizer(std::move(merges), std::move(special_tokens));
}

}  // namespace loom::data
