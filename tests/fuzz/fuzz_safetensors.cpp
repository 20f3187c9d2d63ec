// Fuzz target of the safetensors reader: whatever the bytes, read_safetensors and
// read_safetensors_metadata either read the file or throw loom::Error -- never crash, hang,
// allocate absurdly or throw anything else.
//
//   As a ctest (any compiler): fuzz_safetensors tests/fuzz/corpus/safetensors
//     replays every file of the corpus; files named valid_* must be read, bad_* rejected.
//   With libFuzzer (clang): cmake -DCMAKE_CXX_COMPILER=clang++ -DLOOM_FUZZ=ON -DLOOM_SANITIZE=ON
//     then build/tests/fuzz_safetensors -max_len=4096 tests/fuzz/corpus/safetensors
//
// The corpus is written by tests/fuzz/make_corpus.py.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "fuzz_replay.h"
#include "nn/safetensors.h"

namespace {

// The reader takes a path, so each input goes through one scratch file of this process.
const std::string& scratch_path() {
  static const std::string path =
      (std::filesystem::temp_directory_path() /
       ("loom_fuzz_safetensors_" + std::to_string(::getpid()) + ".safetensors"))
          .string();
  return path;
}

// true: read; false: rejected with loom::Error (its message in `why`). Anything else escapes.
bool read_or_reject(const uint8_t* data, size_t size, std::string& why) {
  {
    std::ofstream out(scratch_path(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    std::map<std::string, std::string> metadata;
    const auto tensors = loom::nn::read_safetensors(scratch_path(), &metadata);
    // The header-only reader must agree with the full one on an accepted file.
    if (loom::nn::read_safetensors_metadata(scratch_path()) != metadata)
      throw std::logic_error("read_safetensors_metadata disagrees with read_safetensors");
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
