// The `fortunes` package as a text corpus (Debian: `apt-get install fortunes`, files in
// /usr/share/games/fortunes). A fortune file is plain text whose entries are separated by
// lines holding a single "%"; next to each file lie its strfile index (*.dat) and a UTF-8
// symlink (*.u8), which the reader skips, as it skips the offensive collection.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::data {

inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

// Every entry of every plain fortune file directly in `dir`, files in name order, entries in
// file order. Each entry loses its leading blank lines and trailing whitespace (indentation
// is kept: much of the collection is ASCII art); entries left empty are dropped. Skipped:
// subdirectories (Debian puts the offensive fortunes in off/), *.dat and *.u8 files, hidden
// files, files whose name marks them offensive (containing "off" as a '-'/'.'-separated word,
// or "offensive", or ending in "-o" as in BSD), and links to a file already read or skipped.
// Throws loom::Error naming `dir` if it is missing or holds no fortunes.
std::vector<std::string> read_fortunes(const std::string& dir = kFortunesDir);

// The entries of one fortune file's text (same trimming rules as read_fortunes).
std::vector<std::string> parse_fortunes(std::string_view text);

struct TrainValSplit {
  std::vector<std::string> train, val;
};

// A seeded random split: round(val_fraction * n) entries go to validation, the rest to
// training, each part keeping the original order. Same entries + seed => same split on every
// platform (SplitMix64, not <random>). val_fraction must be in [0, 1).
TrainValSplit split_train_val(const std::vector<std::string>& entries, double val_fraction,
                              uint64_t seed);

// The entries joined into one training text, `separator` between consecutive entries
// (e.g. "\n\n", or "<|endoftext|>" for a BPE tokenizer that has it as a special token).
std::string join_entries(const std::vector<std::string>& entries, std::string_view separator);

}  // namespace loom::data
