// Fuzz target of the dictd reader and the FreeDict pair extraction (data/dictd.h): whatever the
// bytes, Dictd either reads them or throws loom::Error, and what it reads obeys the rules:
// every entry's range lies inside the body, and extract_pairs / split_pairs of it give
// non-empty pairs, each in exactly one split.
//
// Input layout: the index text, one NUL byte, then the body (gzip/dictzip or plain); with no
// NUL, all of it is the index and the body is empty.
//
//   As a ctest: fuzz_dictd tests/fuzz/corpus/dictd   (valid_* read, bad_* rejected)
//   With libFuzzer: scripts/fuzz.sh (clang, -DLOOM_FUZZ=ON)
//
// The corpus is written by tests/fuzz/make_dictd_corpus.py.
#include <stdexcept>
#include <string>
#include <string_view>

#include "data/dictd.h"
#include "fuzz_replay.h"

namespace {

// Decompression cap while fuzzing, so that a gzip bomb costs milliseconds.
constexpr size_t kFuzzMaxBytes = size_t{1} << 20;

void check(const loom::data::Dictd& dict) {
  for (size_t i = 0; i < dict.entries().size(); ++i) {
    const auto& e = dict.entries()[i];
    if (e.offset > dict.body_size() || e.length > dict.body_size() - e.offset)
      throw std::logic_error("Dictd accepted an entry outside the body");
    if (dict.definition(i).size() != e.length) throw std::logic_error("definition length");
  }
  const auto pairs = loom::data::extract_pairs(dict);
  for (const auto& p : pairs)
    if (p.english.empty() || p.german.empty()) throw std::logic_error("an empty side");
  const auto s = loom::data::split_pairs(pairs, 0.3, 0.3);
  if (s.train.size() + s.valid.size() + s.test.size() != pairs.size())
    throw std::logic_error("split_pairs lost pairs");
  loom::data::corpus_statistics(s);
}

bool accept(const uint8_t* data, size_t size, std::string& why) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const size_t nul = bytes.find('\0');
  const std::string_view index = bytes.substr(0, nul);
  const std::string_view body = nul == std::string_view::npos ? "" : bytes.substr(nul + 1);
  return loom::fuzz::accepted(
      [&] { check(loom::data::Dictd(index, body, "fuzz input", kFuzzMaxBytes)); }, why);
}

}  // namespace

LOOM_FUZZ_TARGET(accept, [] {})
