#include "data/tokenizer.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "data/text_file.h"
#include "data/wordpiece_tokenizer.h"

namespace loom::data {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  // The first word of the header line names the kind; each kind validates the rest itself.
  LineReader reader(path, "load_tokenizer");
  const std::string_view header = reader.next("a tokenizer header line");
  const std::string_view magic = header.substr(0, header.find(' '));
  if (magic == BPETokenizer::kMagic)
    return std::make_unique<BPETokenizer>(BPETokenizer::load(path));
  if (magic == ByteTokenizer::kMagic)
    return std::make_unique<ByteTokenizer>(ByteTokenizer::load(path));
  if (magic == WordPieceTokenizer::kMagic)
    return std::make_unique<WordPieceTokenizer>(WordPieceTokenizer::load(path));
  reader.fail(fmt::format("expected a header starting with '{}', '{}' or '{}', got '{}'",
                          BPETokenizer::kMagic, ByteTokenizer::kMagic, WordPieceTokenizer::kMagic,
                          header));
}

void check_vocab_sizes(int64_t tokenizer_vocab, const std::string& tokenizer_path,
                       int64_t model_vocab, const std::string& model_path) {
  LOOM_CHECK(tokenizer_vocab == model_vocab,
             "the tokenizer '{}' has {} tokens but the model '{}' has a vocabulary of {}: they do "
             "not belong together",
             tokenizer_path, tokenizer_vocab, model_path, model_vocab);
}

}  // namespace loom::data
