// Tokenizer: the interface shared by the byte-level and BPE tokenizers. A tokenizer maps any
// byte string (UTF-8 or not) to a sequence of int64 token ids and back, losslessly:
// decode(encode(s)) == s for every s, including the empty string and invalid UTF-8.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace loom::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text`, each in [0, vocab_size()).
  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  // The bytes the ids stand for. Throws loom::Error naming the first id outside the vocabulary.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  // Writes the tokenizer to a text file that load_tokenizer reads back.
  virtual void save(const std::string& path) const = 0;
};

// Reads a file written by any Tokenizer::save, choosing the kind from the header line.
// Throws loom::Error naming the file (and line) if it is missing, of unknown kind or corrupt.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

// A tokenizer file and a model's checkpoint that must go together: the tokenizer's vocabulary
// (`tokenizer_vocab` ids, read from `tokenizer_path`) must be the model's (`model_vocab`, read
// from `model_path`). The model could emit ids the tokenizer cannot decode, or be fed ids it
// cannot embed; checked at load, before any output, with a loom::Error naming both files.
void check_vocab_sizes(int64_t tokenizer_vocab, const std::string& tokenizer_path,
                       int64_t model_vocab, const std::string& model_path);

}  // namespace loom::data
