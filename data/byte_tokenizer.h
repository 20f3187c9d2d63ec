// ByteTokenizer: the simplest lossless tokenizer. Token id i is the byte i (0..255), so any
// byte string, valid UTF-8 or not, encodes to exactly as many ids as it has bytes.
#pragma once

#include "data/tokenizer.h"

namespace loom::data {

class ByteTokenizer : public Tokenizer {
 public:
  // Header line of the saved file: "<kMagic> <kVersion>".
  static constexpr const char* kMagic = "loom-byte-tokenizer";
  static constexpr int kVersion = 1;

  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return 256; }
  void save(const std::string& path) const override;
  // Reads a file written by save(); throws loom::Error naming the file and line if it is not one.
  static ByteTokenizer load(const std::string& path);
};

}  // namespace loom::data
