// Helpers for the data tests: a self-deleting temporary directory, whole-file writes and a
// check that a call throws loom::Error with every expected piece in its message.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/splitmix.h"
#include "test_util.h"  // TempDir

namespace loom::testing {

inline void write_file(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  REQUIRE_MESSAGE(out.good(), "could not write " << path);
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// `fn` must throw loom::Error whose message contains every string in `pieces`.
inline void check_error(const std::function<void()>& fn, const std::vector<std::string>& pieces) {
  try {
    fn();
    FAIL_CHECK("expected a loom::Error containing '" << pieces.front() << "'");
  } catch (const loom::Error& e) {
    const std::string message = e.what();
    for (const std::string& piece : pieces)
      CHECK_MESSAGE(message.find(piece) != std::string::npos,
                    "message '" << message << "' lacks '" << piece << "'");
  }
}

inline std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  size_t start = 0;
  for (size_t end; (end = text.find(' ', start)) != std::string::npos; start = end + 1)
    words.push_back(text.substr(start, end - start));
  words.push_back(text.substr(start));
  return words;
}

// Deterministic text of about `bytes` bytes that looks enough like prose for BPE: words of a
// Zipf-like vocabulary (ASCII and multi-byte UTF-8), contractions, numbers, punctuation,
// line breaks and indentation.
inline std::string synthetic_corpus(size_t bytes, uint64_t seed) {
  // Common English words, then some with multi-byte UTF-8 characters.
  static const std::vector<std::string> words = split_words(
      "the of and a to in is you that it he was for on are as with his they I at be this have "
      "from or one had by word but not what all were we when your can said there use an each "
      "which she do how their if computer fortune program wisdom tokenizer merge frequency "
      "na\u00efve Gr\u00fc\u00dfe caf\u00e9 \u65e5\u672c\u8a9e \u043c\u0438\u0440 \U0001F642");
  static const std::vector<std::string> glue = {" ",    " ",   " ",    " ",  ", ", ". ",
                                                "\n",   "'s ", "n't ", "! ", "? ", " -- ",
                                                "\n  ", " (",  ") ",   " "};
  loom::data::SplitMix64 rng(seed);
  std::string text;
  while (text.size() < bytes) {
    // Zipf-like: index = floor(n^u) - 1 with u uniform favours the first (common) words.
    const double u = static_cast<double>(rng.next() >> 11) / 9007199254740992.0;
    const size_t idx = static_cast<size_t>(std::pow(static_cast<double>(words.size()), u)) - 1;
    text += rng.uniform(40) == 0 ? std::to_string(rng.uniform(100000)) : words[idx];
    text += glue[rng.uniform(glue.size())];
  }
  return text;
}

}  // namespace loom::testing
