#include "data/byte_tokenizer.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/text_file.h"

namespace loom::data {

std::vector<int64_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    LOOM_CHECK(ids[i] >= 0 && ids[i] < 256,
               "ByteTokenizer::decode: id {} at position {} is outside the vocabulary [0, 256)",
               ids[i], i);
    text[i] = static_cast<char>(static_cast<unsigned char>(ids[i]));
  }
  return text;
}

void ByteTokenizer::save(const std::string& path) const {
  write_file_atomic(path, fmt::format("{} {}\n", kMagic, kVersion), "ByteTokenizer::save");
}

ByteTokenizer ByteTokenizer::load(const std::string& path) {
  LineReader reader(path, "ByteTokenizer::load");
  reader.expect_header(fmt::format("{} {}", kMagic, kVersion));
  reader.expect_end("the header");
  return ByteTokenizer();
}

}  // namespace loom::data
