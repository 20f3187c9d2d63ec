// Fuzz target of the safetensors reader: whatever the bytes, read_safetensors and
// read_safetensors_metadata either read the file or throw loom::Error -- never crash, hang,
// allocate absurdly or throw anything else.
//
//   As a ctest (any compiler): fuzz_safetensors tests/fuzz/corpus/safetensors
//     replays every file of the corpus; files named valid_* must be read, bad_* rejected.
//   With libFuzzer: scripts/fuzz.sh (clang, -DLOOM_FUZZ=ON -DLOOM_SANITIZE=ON).
//
// The corpus is written by tests/fuzz/make_corpus.py.
#include <map>
#include <stdexcept>
#include <string>

#include "fuzz_replay.h"
#include "nn/safetensors.h"

namespace {

bool accept(const uint8_t* data, size_t size, std::string& why) {
  const std::string path = loom::fuzz::write_input("safetensors", data, size);
  return loom::fuzz::accepted(
      [&] {
        std::map<std::string, std::string> metadata;
        const auto tensors = loom::nn::read_safetensors(path, &metadata);
        // The header-only reader must agree with the full one on an accepted file.
        if (loom::nn::read_safetensors_metadata(path) != metadata)
          throw std::logic_error("read_safetensors_metadata disagrees with read_safetensors");
      },
      why);
}

}  // namespace

LOOM_FUZZ_TARGET(accept, [] { loom::fuzz::remove_scratch("safetensors"); })
