// GPT-2 style pre-tokenization: text is cut into chunks (words with their leading space,
// numbers, punctuation runs, whitespace runs, English contractions) before BPE, so that merges
// never cross a word boundary and " dog", " dog." and " dog!" share the token " dog".
//
// This is the rule of GPT-2's regular expression (Radford et al. 2019, Sec. 2.2; openai/gpt-2
// encoder.py),
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// written out by hand over bytes, with one simplification: "letters" are ASCII letters and
// every byte >= 0x80, so a multi-byte UTF-8 character always stays inside one chunk (and a
// chunk is a plain byte range: invalid UTF-8 is split just as well). Non-ASCII punctuation
// and spaces therefore count as letters, where GPT-2 would consult the Unicode tables.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace loom::data {

// End (exclusive) of the chunk that starts at `start` < text.size().
size_t chunk_end(std::string_view text, size_t start);

// All chunks of `text`, in order; their concatenation is `text`.
std::vector<std::string_view> pretokenize(std::string_view text);

}  // namespace loom::data
