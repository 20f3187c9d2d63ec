// Fuzz target of the fortunes reader (data/fortunes.h): whatever the bytes of a fortune file,
// read_fortunes returns its entries or throws loom::Error (a file with no entry), and the
// entries obey the documented rules: none is empty, none starts with a blank line or ends in
// whitespace, and parse_fortunes of the same bytes gives the same entries.
//
//   As a ctest: fuzz_fortunes tests/fuzz/corpus/fortunes   (valid_* read, bad_* rejected)
//   With libFuzzer: scripts/fuzz.sh (clang, -DLOOM_FUZZ=ON)
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/fortunes.h"
#include "fuzz_replay.h"

namespace {

void check_entries(const std::vector<std::string>& entries, const std::string& text) {
  for (const std::string& e : entries) {
    if (e.empty()) throw std::logic_error("an empty entry");
    if (e.front() == '\n') throw std::logic_error("an entry starts with a blank line");
    const char last = e.back();
    if (last == ' ' || last == '\t' || last == '\n' || last == '\r')
      throw std::logic_error("an entry ends in whitespace");
  }
  if (loom::data::parse_fortunes(text) != entries)
    throw std::logic_error("read_fortunes and parse_fortunes disagree");
  const auto split = loom::data::split_train_val(entries, 0.25, 7);
  if (split.train.size() + split.val.size() != entries.size())
    throw std::logic_error("split_train_val lost entries");
}

// read_fortunes takes a directory: the input is the one fortune file of a scratch directory.
bool accept(const uint8_t* data, size_t size, std::string& why) {
  const std::string dir = loom::fuzz::scratch_path("fortunes");
  std::filesystem::create_directories(dir);
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::ofstream(dir + "/fortunes", std::ios::binary | std::ios::trunc) << text;
  return loom::fuzz::accepted([&] { check_entries(loom::data::read_fortunes(dir), text); }, why);
}

}  // namespace

LOOM_FUZZ_TARGET(accept, [] { loom::fuzz::remove_scratch("fortunes"); })
