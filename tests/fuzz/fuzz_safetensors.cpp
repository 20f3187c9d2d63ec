// Fuzz target of the safetensors reader: whatever the bytes, read_safetensors and
// read_safetensors_metadata either read the file or throw loom::Error -- never crash, hang,
// allocate absurdly or throw anything else.
//
//   As a ctest (any compiler): fuzz_safetensors tests/fuzz/corpus/safetensors
//     replays every file of the corpus; files named valid_* must be read, bad_* rejected.
//   With libFuzzer: scripts/fuzz.sh (clang, -DLOOM_FUZZ=ON -DLOOM_SANITIZE=ON).
//
// The corpus is written by tests/fuzz/make_corpus.py.
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>

#include "fuzz_replay.h"
#include "io/safetensors.h"

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
        // Kept as bfloat16, a BF16 entry holds the bits that widen to the float32 it reads as.
        for (const auto& [name, kept] : loom::nn::read_safetensors(path, nullptr, true)) {
          if (kept.dtype() != loom::DType::BFloat16) continue;
          const loom::Tensor widened = kept.to(loom::DType::Float32), read = tensors.at(name);
          if (std::memcmp(widened.raw_data(), read.raw_data(), 4 * read.numel()) != 0)
            throw std::logic_error("BF16 tensor '" + name + "' kept and widened disagree");
        }
      },
      why);
}

}  // namespace

LOOM_FUZZ_TARGET(accept, [] { loom::fuzz::remove_scratch("safetensors"); })
