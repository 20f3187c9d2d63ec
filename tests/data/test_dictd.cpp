// The dictd reader and FreeDict English -> German pairs: base-64 numbers, hand-made dictionaries
// (plain and gzipped bodies), every bad or truncated index/body rejected naming the file and
// offset, annotation stripping, pair extraction, deduplication, length limit, the deterministic
// split, statistics, and (when Debian's dict-freedict-eng-deu is installed) the real files.
#include <filesystem>
#include <fstream>
#include <string>

#include "data/dictd.h"
#include "data/gzip_util.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
using namespace loom::data;

namespace {

// Definitions in FreeDict's layout, and an index for them.
const std::string kSlope =
    "slope /slˈəʊp/\n"
    "Abdachung <fem>, Schräge <fem>, Böschung <fem>\n"
    "      \"side slope of a dam\"  - seitliche Abdachung eines Damms\n"
    "   Synonym: {talus}\n\n";
const std::string kArrangement =
    "arrangement /ɐɹˈeɪndʒmənt/\n"
    "Vereinbarung <fem> [econ.]\n"
    "      \"I'm sure we can come to some arrangement.\"  - Ich bin sicher, dass wir uns "
    "irgendwie einigen können.\n"
    "      \"by arrangement\"  - nach Vereinbarung; laut Absprache\n\n";
const std::string kTalus =
    "talus /tˈaləs/\n"
    "Abdachung <fem>, Schräge <fem>\n"
    "      \"side slope of a dam\"  - Böschung eines Damms\n\n";  // duplicate English

std::string index_line(const std::string& word, size_t offset, size_t length) {
  return word + "\t" + encode_dictd_number(offset) + "\t" + encode_dictd_number(length) + "\n";
}

// The body and its index: "00databaseinfo", slope, arrangement, talus (and slope again under
// another headword, pointing at the same definition).
std::pair<std::string, std::string> small_dictionary() {
  const std::string info = "00-database-info\nA test dictionary\n";
  const std::string body = info + kSlope + kArrangement + kTalus;
  std::string index = index_line("00databaseinfo", 0, info.size());
  size_t at = info.size();
  index += index_line("slope", at, kSlope.size());
  index += index_line("slope of a dam", at, kSlope.size());
  at += kSlope.size();
  index += index_line("arrangement", at, kArrangement.size());
  at += kArrangement.size();
  index += index_line("talus", at, kTalus.size());
  return {index, body};
}

}  // namespace

TEST_CASE("dictd base-64 numbers decode as dictfmt writes them, and bad ones throw") {
  CHECK(decode_dictd_number("A", "t") == 0);
  CHECK(decode_dictd_number("BA", "t") == 64);
  CHECK(decode_dictd_number("/", "t") == 63);
  CHECK(decode_dictd_number("BWPZk", "t") == ((((1u * 64 + 22) * 64 + 15) * 64 + 25) * 64 + 36));
  for (uint64_t v : {0ull, 1ull, 63ull, 64ull, 79560845ull, (1ull << 62) + 12345})
    CHECK(decode_dictd_number(encode_dictd_number(v), "t") == v);
  expect_error([] { decode_dictd_number("", "file x line 3"); }, {"file x line 3", "empty"});
  expect_error([] { decode_dictd_number("AB=C", "w"); }, {"'='", "AB=C"});
  expect_error([] { decode_dictd_number("////////////", "w"); }, {"12 digits"});
  expect_error([] { decode_dictd_number("P//////////", "w"); }, {"2^63"});
}

TEST_CASE("A hand-made dictd dictionary reads, plain and gzipped, with every definition") {
  const auto dictionary = small_dictionary();
  const std::string &index = dictionary.first, &body = dictionary.second;
  for (const std::string& stored : {body, gzip(body)}) {
    const Dictd dict(index, stored, "test.index");
    REQUIRE(dict.entries().size() == 5);
    CHECK(dict.body_size() == body.size());
    CHECK(dict.entries()[1].headword == "slope");
    CHECK(dict.definition(1) == kSlope);
    CHECK(dict.definition(3) == kArrangement);
    CHECK(dict.definition(4) == kTalus);
  }
}

TEST_CASE("dictd: bad or truncated indexes and bodies are errors naming the file and offset") {
  const auto dictionary = small_dictionary();
  const std::string &index = dictionary.first, &body = dictionary.second;
  // The body cut short: the last definition passes its end.
  expect_error([&] { Dictd(index, body.substr(0, body.size() - 10), "dict/x.index"); },
               {"dict/x.index", "line 5", "offset", "passes the end", "truncated"});
  // A gzipped body cut short.
  const std::string gz = gzip(body);
  expect_error([&] { Dictd(index, gz.substr(0, gz.size() / 2), "x.dict.dz"); }, {"x.dict.dz"});
  // Index lines with a wrong field count, a bad digit, an offset past the end.
  expect_error([&] { Dictd("word\tA\n", body, "y.index"); }, {"y.index", "line 1", "2 fields"});
  expect_error([&] { Dictd("a\tA\tB\nword\tA*\tB\n", body, "y.index"); },
               {"y.index", "line 2", "byte offset 6", "'*'"});
  expect_error([&] { Dictd("word\t" + encode_dictd_number(body.size() + 1) + "\tA\n", body, "z"); },
               {"z", "offset " + std::to_string(body.size() + 1)});
  // offset + length overflowing 64 bits is caught, not wrapped.
  expect_error([&] { Dictd("w\tB\t" + encode_dictd_number((1ull << 63) - 1) + "\n", body, "z"); },
               {"passes the end"});
  // A body over the cap.
  expect_error([&] { Dictd(index, body, "cap", 10); }, {"cap", "exceeds"});
  expect_error([] { Dictd::open("/nonexistent/loom-dictd"); }, {"/nonexistent/loom-dictd.index"});
}

TEST_CASE("FreeDict annotations are stripped and a definition gives headword and example pairs") {
  CHECK(strip_annotations("Akut <masc>, Akut-Zeichen <neut> [print] ´") == "Akut, Akut-Zeichen ´");
  CHECK(strip_annotations("Abdachung <fem>  [geol.] {talus} ,") == "Abdachung");
  CHECK(strip_annotations("a < b and [unclosed") == "a < b and [unclosed");
  CHECK(strip_annotations("and/or") == "and/or");
  const auto pairs = definition_pairs(kArrangement);
  REQUIRE(pairs.size() == 3);
  CHECK(pairs[0] == TranslationPair{"arrangement", "Vereinbarung"});
  CHECK(pairs[1] == TranslationPair{"I'm sure we can come to some arrangement.",
                                    "Ich bin sicher, dass wir uns irgendwie einigen können."});
  CHECK(pairs[2] == TranslationPair{"by arrangement", "nach Vereinbarung"});  // first alternative
  CHECK(definition_pairs("just one line").empty());
  CHECK(definition_pairs("burn the midnight oil /x/\neine Nachtschicht einlegen (bis in die "
                         "Nacht hinein arbeiten, lernen) [übtr.], lange aufbleiben\n") ==
        std::vector<TranslationPair>{{"burn the midnight oil", "eine Nachtschicht einlegen"}});
}

TEST_CASE("extract_pairs deduplicates by English, skips metadata, limits length and kinds") {
  const auto dictionary = small_dictionary();
  const std::string &index = dictionary.first, &body = dictionary.second;
  const Dictd dict(index, body, "t");
  const auto pairs = extract_pairs(dict);
  const std::vector<TranslationPair> expected = {
      {"slope", "Abdachung"},
      {"side slope of a dam", "seitliche Abdachung eines Damms"},
      {"arrangement", "Vereinbarung"},
      {"I'm sure we can come to some arrangement.",
       "Ich bin sicher, dass wir uns irgendwie einigen können."},
      {"by arrangement", "nach Vereinbarung"},
      {"talus", "Abdachung"}};
  CHECK(pairs == expected);
  CHECK(extract_pairs(dict, {.headwords = false}).size() == 3);
  CHECK(extract_pairs(dict, {.examples = false}).size() == 3);
  CHECK(extract_pairs(dict, {.max_words = 4}).size() == 4);  // 9- and 5-word examples dropped
  expect_error([&] { extract_pairs(dict, {.max_words = 0}); }, {"max_words 0"});
}

TEST_CASE("split_pairs is deterministic by English and keeps each sentence in one split") {
  std::vector<TranslationPair> pairs;
  for (int i = 0; i < 3000; ++i)
    pairs.push_back({"sentence " + std::to_string(i), "Satz " + std::to_string(i)});
  const PairSplits a = split_pairs(pairs, 0.1, 0.1);
  CHECK(a.train.size() + a.valid.size() + a.test.size() == 3000);
  CHECK(a.valid.size() > 200);  // about 300 each
  CHECK(a.valid.size() < 400);
  CHECK(a.test.size() > 200);
  CHECK(a.test.size() < 400);
  // Another corpus holding the same sentence (other German, other order) splits it the same way.
  std::vector<TranslationPair> other(pairs.rbegin(), pairs.rend());
  other.push_back({a.test[0].english, "anders"});
  const PairSplits b = split_pairs(other, 0.1, 0.1);
  CHECK(b.test.size() == a.test.size() + 1);
  CHECK(b.valid.size() == a.valid.size());
  const std::string stats = corpus_statistics(a);
  CHECK(stats.find("train") != std::string::npos);
  CHECK(stats.find(std::to_string(a.test.size()) + " pairs") != std::string::npos);
  CHECK(stats.find("2.00 words mean, 2 max") != std::string::npos);
  expect_error([&] { split_pairs(pairs, 0.7, 0.5); }, {"split_pairs", "0.7", "0.5"});
}

TEST_CASE("The installed FreeDict eng-deu dictionary reads and gives many pairs") {
  if (!std::filesystem::exists(std::string(kFreedictEngDeu) + ".index")) {
    MESSAGE("dict-freedict-eng-deu not installed: skipped");
    return;
  }
  const Dictd dict = Dictd::open(kFreedictEngDeu);
  CHECK(dict.entries().size() > 400000);
  const auto pairs = extract_pairs(dict, {.max_words = 30});
  CHECK(pairs.size() > 100000);
  bool found = false;
  for (const auto& p : pairs) found = found || p.english == "side slope of a dam";
  CHECK(found);
  const PairSplits s = split_pairs(pairs);
  CHECK(s.test.size() > 500);
  MESSAGE(corpus_statistics(s));
}
