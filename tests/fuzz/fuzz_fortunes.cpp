// Fuzz target of the fortunes reader (data/fortunes.h): whatever the bytes of a fortune file,
// read_fortunes returns its entries or throws loom::Error (a file with no entry), and the
// entries obey the documented rules: none is empty, none starts with a blank line or ends in
// whitespace, and parse_fortunes of the same bytes gives the same entries.
//
//   As a ctest: fuzz_fortunes tests/fuzz/corpus/fortunes   (valid_* read, bad_* rejected)
//   With libFuzzer: scripts/fuzz.sh (clang, -DLOOM_FUZZ=ON)
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/fortunes.h"
#include "fuzz_replay.h"

namespace {

// read_fortunes takes a directory: each input is the one fortune file of a scratch directory.
const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() /
             ("loom_fuzz_fortunes_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

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

// true: read; false: rejected with loom::Error. Anything else escapes.
bool read_or_reject(const uint8_t* data, size_t size, std::string& why) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  {
    std::ofstream out(scratch_dir() / "fortunes", std::ios::binary | std::ios::trunc);
    out << text;
  }
  try {
    check_entries(loom::data::read_fortunes(scratch_dir().string()), text);
    return true;
  } catch (const loom::Error& e) {
    why = e.what();
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string why;
  read_or_reject(data, size, why);
  return 0;
}

#ifndef LOOM_FUZZING
int main(int argc, char** argv) {
  const int status = loom::fuzz::replay(argc, argv, read_or_reject);
  std::filesystem::remove_all(scratch_dir());
  return status;
}
#endif
