// The ctest side of a fuzz target: without libFuzzer, the target's main() replays its committed
// corpus through the same entry point the fuzzer calls. Files named valid_* must be accepted,
// bad_* rejected with loom::Error, anything else either; any other exception fails the replay.
//
//   bool read_or_reject(const uint8_t* data, size_t size, std::string& why);  // the target's
//   int main(int argc, char** argv) { return loom::fuzz::replay(argc, argv, read_or_reject); }
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

using Target = bool (*)(const uint8_t* data, size_t size, std::string& why);

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
