// WordPieceTokenizer::train: the Hugging Face tokenizers WordPiece trainer's approach (a BPE
// trainer whose non-initial symbols carry the "##" prefix), by data/pair_merges.h's loop on the
// basic-tokenized words.
#include <fmt/format.h>

#include <map>
#include <set>

#include "core/error.h"
#include "data/pair_merges.h"
#include "data/wordpiece_tokenizer.h"

namespace loom::data {
namespace {

// The UTF-8 characters of `word` ("##"-prefixed after the first).
std::vector<std::string> initial_symbols(const std::string& word) {
  std::vector<std::string> symbols;
  for (size_t i = 0; i < word.size();) {
    size_t n = 1;  // basic_tokenize's output is valid UTF-8: the lead byte gives the length
    const auto lead = static_cast<unsigned char>(word[i]);
    if (lead >= 0xF0)
      n = 4;
    else if (lead >= 0xE0)
      n = 3;
    else if (lead >= 0xC0)
      n = 2;
    symbols.push_back((i > 0 ? "##" : "") + word.substr(i, n));
    i += n;
  }
  return symbols;
}

}  // namespace

WordPieceTokenizer WordPieceTokenizer::train(const std::vector<std::string>& texts,
                                             int64_t vocab_size, bool lower_case) {
  // Distinct words and their counts, then the alphabet: first characters, then "##" ones.
  std::map<std::string, int64_t> counts;
  for (const std::string& text : texts)
    for (std::string& word : basic_tokenize(text, lower_case)) ++counts[std::move(word)];
  std::set<std::string> initial, continuing;
  for (const auto& [word, count] : counts)
    for (const std::string& symbol : initial_symbols(word))
      (symbol.starts_with("##") ? continuing : initial).insert(symbol);

  std::vector<std::string> vocab = special_tokens();
  vocab.insert(vocab.end(), initial.begin(), initial.end());
  vocab.insert(vocab.end(), continuing.begin(), continuing.end());
  LOOM_CHECK(vocab_size >= static_cast<int64_t>(vocab.size()) && vocab_size <= kMaxVocabSize,
             "WordPieceTokenizer::train: vocab_size {} must be in [{}, {}]: the special tokens "
             "and the {} characters of the text come first",
             vocab_size, vocab.size(), kMaxVocabSize, vocab.size() - special_tokens().size());
  std::unordered_map<std::string, int32_t> ids;
  for (size_t id = 0; id < vocab.size(); ++id) ids[vocab[id]] = static_cast<int32_t>(id);

  std::vector<PairMerges::Word> words;
  words.reserve(counts.size());
  for (const auto& [word, count] : counts) {
    PairMerges::Word w{{}, count};
    for (const std::string& symbol : initial_symbols(word)) w.tokens.push_back(ids.at(symbol));
    words.push_back(std::move(w));
  }
  PairMerges merges(std::move(words));
  int32_t left = 0, right = 0;
  while (static_cast<int64_t>(vocab.size()) < vocab_size && merges.pop_best(left, right)) {
    // a + b, b without its "##" (always there: only a word's first symbol lacks it).
    const std::string merged = vocab[left] + vocab[right].substr(2);
    if (merged.size() > kMaxTokenBytes) continue;  // never a token longer than load() accepts
    const auto [it, added] = ids.try_emplace(merged, static_cast<int32_t>(vocab.size()));
    if (added) vocab.push_back(merged);
    merges.apply(left, right, it->second);
  }
  return WordPieceTokenizer(std::move(vocab), lower_case);
}

}  // namespace loom::data
