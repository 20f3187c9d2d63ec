// What every fuzz target shares. A target is one function, `bool accept(data, size, why)`:
// true when the reader accepted the input, false (the message in `why`) when it rejected it
// with loom::Error; any other exception or crash escapes and is the bug the fuzzer looks for.
// LOOM_FUZZ_TARGET(accept, cleanup) then defines
//   * libFuzzer's entry point LLVMFuzzerTestOneInput (built with -DLOOM_FUZZ=ON, clang), and
//   * without libFuzzer, a main() that replays the committed corpus (the ctest): files named
//     valid_* must be accepted, bad_* rejected, anything else either; `cleanup` runs at the end.
//
//   bool accept(const uint8_t* data, size_t size, std::string& why) {
//     return loom::fuzz::accepted([&] { reader(loom::fuzz::write_input("x", data, size)); }, why);
//   }
//   LOOM_FUZZ_TARGET(accept, [] { loom::fuzz::remove_scratch("x"); })
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"

namespace loom::fuzz {

using Target = bool (*)(const uint8_t* data, size_t size, std::string& why);

// A path of this process under the temp dir, for readers that take a file or directory.
inline std::string scratch_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("loom_fuzz_" + name + "_" + std::to_string(::getpid())))
      .string();
}
inline void remove_scratch(const std::string& name) {
  std::error_code ec;
  std::filesystem::remove_all(scratch_path(name), ec);
}

// Writes the input to scratch_path(name) and returns that path.
inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch_path(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

// Runs `read`: true if it returned, false (its message in `why`) if it threw loom::Error.
template <class Read>
bool accepted(Read read, std::string& why) {
  try {
    read();
    return true;
  } catch (const loom::Error& e) {
    why = e.what();
    return false;
  }
}

// Replays every file under the directories (or the files) named on the command line. Exit
// status 1 if an input escaped with another exception, a valid_* file was rejected or a bad_*
// file accepted, or there was no input at all.
inline int replay(int argc, char** argv, Target target) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      for (const auto& e : fs::directory_iterator(argv[i]))
        if (e.is_regular_file()) inputs.push_back(e.path());
    } else {
      inputs.emplace_back(argv[i]);
    }
  }
  std::sort(inputs.begin(), inputs.end());
  int failures = 0;
  for (const fs::path& input : inputs) {
    std::ifstream in(input, std::ios::binary);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
    const std::string name = input.filename().string();
    std::string why, verdict;
    bool ok = true;
    try {
      const bool accepted = target(bytes.data(), bytes.size(), why);
      verdict = accepted ? "accepted" : "rejected: " + why;
      if (name.rfind("valid_", 0) == 0 && !accepted) ok = false;
      if (name.rfind("bad_", 0) == 0 && accepted) ok = false;
    } catch (const std::exception& e) {
      verdict = std::string("ESCAPED (not a loom::Error): ") + e.what();
      ok = false;
    }
    std::printf("%s %s: %s\n", ok ? "ok  " : "FAIL", name.c_str(), verdict.c_str());
    failures += ok ? 0 : 1;
  }
  std::printf("%zu inputs, %d failures\n", inputs.size(), failures);
  return inputs.empty() || failures > 0 ? 1 : 0;
}

}  // namespace loom::fuzz

#ifdef LOOM_FUZZING
#define LOOM_FUZZ_TARGET(accept, cleanup)                                     \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { \
    std::string why;                                                        \
    accept(data, size, why);                                                \
    return 0;                                                               \
  }
#else
#define LOOM_FUZZ_TARGET(accept, cleanup)                           \
  int main(int argc, char** argv) {                                 \
    const int status = ::loom::fuzz::replay(argc, argv, accept);    \
    (cleanup)();                                                    \
    return status;                                                  \
  }
#endif
