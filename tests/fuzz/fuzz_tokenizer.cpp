// Fuzz target of the tokenizer files (data::load_tokenizer: the BPE and byte formats): whatever
// the bytes, the file is loaded or rejected with loom::Error -- never a crash, a hang or an
// absurd allocation (a merge chain that doubles a token is cut at BPETokenizer::kMaxTokenBytes).
// A loaded tokenizer must encode and decode losslessly.
//
//   As a ctest: fuzz_tokenizer tests/fuzz/corpus/tokenizer   (valid_* load, bad_* rejected)
//   With libFuzzer: scripts/fuzz.sh (clang, -DLOOM_FUZZ=ON)
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "data/tokenizer.h"
#include "fuzz_replay.h"

namespace {

// The loader takes a path, so each input goes through one scratch file of this process.
const std::string& scratch_path() {
  static const std::string path = (std::filesystem::temp_directory_path() /
                                   ("loom_fuzz_tokenizer_" + std::to_string(::getpid()) + ".txt"))
                                      .string();
  return path;
}

// true: loaded (and round-trips); false: rejected with loom::Error. Anything else escapes.
bool read_or_reject(const uint8_t* data, size_t size, std::string& why) {
  {
    std::ofstream out(scratch_path(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    const auto tok = loom::data::load_tokenizer(scratch_path());
    const std::string text(reinterpret_cast<const char*>(data), size);
    for (const std::string& s : {text, std::string("hello world, \xff\xfe invalid UTF-8")})
      if (tok->decode(tok->encode(s)) != s)
        throw std::logic_error("decode(encode(s)) != s for a loaded tokenizer");
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
  std::filesystem::remove(scratch_path());
  return status;
}
#endif
