// ByteTokenizer: ids are the bytes, and every byte string round-trips.
#include <doctest/doctest.h>

#include "data/byte_tokenizer.h"
#include "data/splitmix.h"
#include "data_test_util.h"

using namespace loom::data;
using loom::testing::check_error;

TEST_CASE("ByteTokenizer: ids are the byte values, one per byte") {
  const ByteTokenizer tok;
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
  const std::vector<int64_t> ids = tok.encode(all_bytes);
  REQUIRE(ids.size() == 256);
  for (int b = 0; b < 256; ++b) CHECK(ids[b] == b);
  CHECK(tok.decode(ids) == all_bytes);
  CHECK(tok.vocab_size() == 256);
}

TEST_CASE("ByteTokenizer: empty input and random bytes (invalid UTF-8) round-trip") {
  const ByteTokenizer tok;
  CHECK(tok.encode("").empty());
  CHECK(tok.decode({}).empty());
  SplitMix64 rng(99);
  for (int trial = 0; trial < 200; ++trial) {
    std::string s(rng.uniform(64), '\0');
    for (char& c : s) c = static_cast<char>(rng.uniform(256));
    CHECK(tok.decode(tok.encode(s)) == s);
  }
}

TEST_CASE("ByteTokenizer: decoding an id that is not a byte throws, naming it") {
  const ByteTokenizer tok;
  check_error([&] { tok.decode({65, 256}); }, {"ByteTokenizer::decode", "256", "position 1"});
  check_error([&] { tok.decode({-1}); }, {"-1"});
}
