#include "data/pretokenize.h"

namespace loom::data {
namespace {

enum class CharClass { Letter, Digit, Space, Other };

CharClass char_class(char c) {
  const auto b = static_cast<unsigned char>(c);
  if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || b >= 0x80) return CharClass::Letter;
  if (b >= '0' && b <= '9') return CharClass::Digit;
  if (b == ' ' || b == '\t' || b == '\n' || b == '\v' || b == '\f' || b == '\r')
    return CharClass::Space;
  return CharClass::Other;
}

// End of the run of characters of class `cls` starting at `i`.
size_t run_end(std::string_view text, size_t i, CharClass cls) {
  while (i < text.size() && char_class(text[i]) == cls) ++i;
  return i;
}

// Length of the contraction ('s 't 're 've 'm 'll 'd, case-sensitive as in GPT-2) at `i`, or 0.
size_t contraction_length(std::string_view text, size_t i) {
  const std::string_view rest = text.substr(i);
  for (std::string_view c : {"'s", "'t", "'m", "'d", "'re", "'ve", "'ll"})
    if (rest.substr(0, c.size()) == c) return c.size();
  return 0;
}

}  // namespace

size_t chunk_end(std::string_view text, size_t start) {
  // The alternatives of the regular expression, tried in its order.
  if (const size_t n = contraction_length(text, start)) return start + n;
  const CharClass cls = char_class(text[start]);
  if (cls != CharClass::Space) return run_end(text, start, cls);  // \p{L}+, \p{N}+, [^\s..]+
  // " ?\p{L}+" etc.: one space glues itself to the word, number or punctuation after it.
  if (text[start] == ' ' && start + 1 < text.size()) {
    const CharClass next = char_class(text[start + 1]);
    if (next != CharClass::Space) return run_end(text, start + 1, next);
  }
  // \s+(?!\S): a whitespace run, leaving its last character to the word that follows;
  // \s+ when the run is a single character.
  const size_t end = run_end(text, start, CharClass::Space);
  if (end < text.size() && end - start > 1) return end - 1;
  return end;
}

std::vector<std::string_view> pretokenize(std::string_view text) {
  std::vector<std::string_view> chunks;
  for (size_t start = 0; start < text.size();) {
    const size_t end = chunk_end(text, start);
    chunks.push_back(text.substr(start, end - start));
    start = end;
  }
  return chunks;
}

}  // namespace loom::data
