// The GPT-2 pre-tokenizer against chunkings made by GPT-2's regular expression
// (tests/data/pretokenize_golden.txt, written by scripts/make_pretokenize_golden.py).
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/pretokenize.h"
#include "data_test_util.h"

using namespace loom::data;

namespace {

std::string from_hex(const std::string& hex) {
  if (hex == "-") return "";
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

std::vector<size_t> parse_lengths(const std::string& field) {
  std::vector<size_t> lengths;
  if (field == "-") return lengths;
  std::stringstream ss(field);
  for (std::string item; std::getline(ss, item, ',');) lengths.push_back(std::stoul(item));
  return lengths;
}

}  // namespace

TEST_CASE("pretokenize: chunks match GPT-2's regular expression on the golden cases") {
  std::ifstream in(std::string(LOOM_SOURCE_DIR) + "/tests/data/pretokenize_golden.txt");
  REQUIRE_MESSAGE(in.good(), "missing tests/data/pretokenize_golden.txt");
  int cases = 0;
  for (std::string hex, lengths; in >> hex >> lengths; ++cases) {
    const std::string text = from_hex(hex);
    std::vector<size_t> actual;
    for (std::string_view chunk : pretokenize(text)) actual.push_back(chunk.size());
    CHECK_MESSAGE(actual == parse_lengths(lengths), "input (hex) " << hex);
  }
  CHECK(cases > 200);
}

TEST_CASE("pretokenize: chunks tile the input and never split a UTF-8 character") {
  const std::string text = loom::testing::synthetic_corpus(20000, 7);
  size_t pos = 0;
  for (std::string_view chunk : pretokenize(text)) {
    REQUIRE(!chunk.empty());
    CHECK(chunk.data() == text.data() + pos);  // contiguous, in order
    pos += chunk.size();
    // A chunk never starts with a UTF-8 continuation byte (10xxxxxx).
    CHECK((static_cast<unsigned char>(chunk[0]) & 0xC0) != 0x80);
  }
  CHECK(pos == text.size());
  CHECK(pretokenize("").empty());
}
