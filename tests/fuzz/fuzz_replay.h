// The corpus replay shared by the fuzz targets when they are built without libFuzzer: a main
// that feeds every file of the given directories (or the given files) to the target's
// read_or_reject and checks the verdict against the file's name.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace loom::fuzz {

// true: the input was read; false: rejected with loom::Error (its message in `why`). Any other
// exception escapes and counts as a failure.
using ReadOrReject = bool (*)(const uint8_t* data, size_t size, std::string& why);

// Exit status 1 if any input escaped with another exception, a valid_* file was rejected or a
// bad_* file read (or there were no inputs); 0 otherwise. Prints one verdict line per input.
inline int replay_corpus(int argc, char** argv, ReadOrReject read_or_reject) {
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
      const bool read = read_or_reject(bytes.data(), bytes.size(), why);
      verdict = read ? "read" : "rejected: " + why;
      if (name.rfind("valid_", 0) == 0 && !read) ok = false;
      if (name.rfind("bad_", 0) == 0 && read) ok = false;
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
