// The corpus-replay main shared by the fuzz targets when they are built without libFuzzer:
// every file under the given directories (or the files given) goes through `read_or_reject`;
// files named valid_* must be accepted, bad_* rejected with loom::Error, and nothing may escape
// with another exception. Exit status 1 on any failure or an empty corpus.
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

// read_or_reject(data, size, why): true if accepted; false if rejected, the message in `why`.
template <class ReadOrReject>
int replay_corpus(int argc, char** argv, ReadOrReject read_or_reject) {
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
