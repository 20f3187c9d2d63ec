// WordPieceTokenizer: token ids equal to google-research/bert's FullTokenizer (golden ids from
// tests/golden/gen_wordpiece.py on tricky inputs), Python's lower-casing, training, files and
// the errors of hostile vocabularies.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "data/wordpiece_tokenizer.h"
#include "data_test_util.h"

using namespace loom::data;
using loom::testing::check_error;
using loom::testing::TempDir;
using loom::testing::write_file;

namespace {

const std::string kVocab = std::string(LOOM_TEST_DATA) + "/wordpiece_vocab.txt";

std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return bytes;
}

struct GoldenCase {
  bool lower_case;
  std::string text;
  std::vector<int64_t> ids;
};

std::vector<GoldenCase> golden_cases() {
  std::ifstream in(std::string(LOOM_TEST_DATA) + "/wordpiece_golden.txt");
  REQUIRE(in.good());
  std::vector<GoldenCase> cases;
  for (std::string line; std::getline(in, line);) {
    const size_t tab1 = line.find('\t'), tab2 = line.find('\t', tab1 + 1);
    REQUIRE(tab2 != std::string::npos);
    GoldenCase c{line[0] == '1', from_hex(line.substr(tab1 + 1, tab2 - tab1 - 1)), {}};
    std::stringstream ids(line.substr(tab2 + 1));
    for (int64_t id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace

TEST_CASE("WordPieceTokenizer: ids equal tokenization.py's FullTokenizer on tricky inputs") {
  const auto lower = WordPieceTokenizer::from_vocab_file(kVocab, true);
  const auto cased = WordPieceTokenizer::from_vocab_file(kVocab, false);
  const std::vector<GoldenCase> cases = golden_cases();
  REQUIRE(cases.size() == 62);
  for (const GoldenCase& c : cases) {
    const auto& tok = c.lower_case ? lower : cased;
    CHECK_MESSAGE(tok.encode(c.text) == c.ids,
                  "lower_case " << c.lower_case << " text '" << c.text << "'");
  }
}

TEST_CASE("WordPieceTokenizer: lower-casing is Python's str.lower, not a locale's") {
  const auto tok = WordPieceTokenizer::from_vocab_file(kVocab, true);
  // U+0130 lowers to "i" + U+0307 (SpecialCasing, as Python); the dot is an Mn mark, stripped.
  CHECK(WordPieceTokenizer::basic_tokenize("\xC4\xB0stanbul", true) ==
        std::vector<std::string>{"istanbul"});
  // Final_Sigma: a word-final capital sigma lowers to U+03C2.
  CHECK(WordPieceTokenizer::basic_tokenize("\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3", true) ==
        std::vector<std::string>{"\xCE\xBF\xCE\xB4\xCE\xBF\xCF\x82"});
  // Without lower_case nothing is folded or stripped.
  CHECK(WordPieceTokenizer::basic_tokenize("Caf\xC3\xA9!", false) ==
        std::vector<std::string>{"Caf\xC3\xA9", "!"});
  CHECK(tok.tokenize("UNAFFABLE") == std::vector<std::string>{"un", "##aff", "##able"});
}

TEST_CASE("WordPieceTokenizer: every code point str.lower changes is lower-cased as Python does") {
  // ICU's root-locale full lowercase against Python 3.11's str.lower, through BasicTokenizer
  // (lower, NFD, Mn marks removed), on all 1,433 code points Python changes.
  std::ifstream in(std::string(LOOM_TEST_DATA) + "/wordpiece_lower_golden.txt");
  REQUIRE(in.good());
  int64_t cases = 0;
  for (std::string line; std::getline(in, line); ++cases) {
    const size_t tab = line.find('\t');
    REQUIRE(tab != std::string::npos);
    const auto cp = static_cast<uint32_t>(std::stoul(line.substr(0, tab), nullptr, 16));
    std::string utf8;  // the code point as UTF-8
    if (cp < 0x80) {
      utf8 += static_cast<char>(cp);
    } else if (cp < 0x800) {
      utf8 += {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    } else if (cp < 0x10000) {
      utf8 += {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
               static_cast<char>(0x80 | (cp & 0x3F))};
    } else {
      utf8 += {static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
               static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
    }
    std::vector<std::string> expected;
    std::stringstream tokens(line.substr(tab + 1));
    for (std::string hex; tokens >> hex;) expected.push_back(from_hex(hex));
    CHECK_MESSAGE(WordPieceTokenizer::basic_tokenize(utf8, true) == expected,
                  "U+" << line.substr(0, tab));
  }
  CHECK(cases == 1433);
}

TEST_CASE("WordPieceTokenizer: a word of more than 100 characters is one [UNK]") {
  const auto tok = WordPieceTokenizer::from_vocab_file(kVocab);
  const int64_t unk = tok.token_id("[UNK]");
  CHECK(tok.encode(std::string(101, 'x')) == std::vector<int64_t>{unk});
  CHECK(tok.encode(std::string(100, 'x')).front() != unk);
  CHECK(tok.encode("\xE2\x98\x83 run") == std::vector<int64_t>{unk, tok.token_id("run")});
}

TEST_CASE("WordPieceTokenizer: decode joins the pieces as Hugging Face's decode") {
  const auto tok = WordPieceTokenizer::from_vocab_file(kVocab);
  CHECK(tok.decode(tok.encode("The UNAFFABLE meaning, of life!")) ==
        "the unaffable meaning , of life !");
  CHECK(tok.decode({}) == "");
  CHECK(tok.decode({tok.token_id("[CLS]"), tok.token_id("run"), tok.token_id("##s")}) ==
        "[CLS] runs");
  check_error([&] { tok.decode({0, tok.vocab_size()}); }, {"decode", "position 1"});
  check_error([&] { tok.token_id("nope"); }, {"token_id", "'nope'"});
}

TEST_CASE("WordPieceTokenizer: save and load_tokenizer give the same tokenizer") {
  TempDir dir;
  for (const bool lower_case : {true, false}) {
    const auto tok = WordPieceTokenizer::from_vocab_file(kVocab, lower_case);
    const std::string path = dir.file("wp.txt");
    tok.save(path);
    const auto loaded = load_tokenizer(path);
    const auto* wp = dynamic_cast<const WordPieceTokenizer*>(loaded.get());
    REQUIRE(wp != nullptr);
    CHECK(wp->vocab() == tok.vocab());
    CHECK(wp->lower_case() == lower_case);
    for (const GoldenCase& c : golden_cases()) CHECK(wp->encode(c.text) == tok.encode(c.text));
  }
}

TEST_CASE("WordPieceTokenizer::train learns whole words and ## continuations") {
  std::vector<std::string> texts;
  for (int i = 0; i < 20; ++i) texts.push_back("The lowest newer WIDEST wider, newest low!");
  const auto tok = WordPieceTokenizer::train(texts, 60);
  // Specials first, in BERT's order.
  for (int64_t i = 0; i < 5; ++i)
    CHECK(tok.token(i) == WordPieceTokenizer::special_tokens()[static_cast<size_t>(i)]);
  CHECK(tok.vocab_size() <= 60);
  std::set<std::string> unique(tok.vocab().begin(), tok.vocab().end());
  CHECK(unique.size() == tok.vocab().size());
  // Every training word encodes without [UNK], and frequent words became single tokens.
  const std::vector<int64_t> ids = tok.encode(texts[0]);
  for (const int64_t id : ids) CHECK(id != tok.token_id("[UNK]"));
  CHECK(tok.tokenize("lowest") == std::vector<std::string>{"lowest"});
  CHECK(tok.decode(ids) == "the lowest newer widest wider , newest low !");
  // The same texts give the same vocabulary.
  CHECK(WordPieceTokenizer::train(texts, 60).vocab() == tok.vocab());
  check_error([&] { WordPieceTokenizer::train(texts, 8); }, {"train", "vocab_size 8"});
}

TEST_CASE("WordPieceTokenizer: hostile vocabularies are loom::Errors naming file and line") {
  TempDir dir;
  const std::string path = dir.file("vocab.txt");
  auto rejects = [&](const std::string& contents, const std::vector<std::string>& pieces) {
    write_file(path, contents);
    check_error([&] { WordPieceTokenizer::from_vocab_file(path); }, pieces);
  };
  rejects("", {"vocab.txt", "empty"});
  rejects("[PAD]\nhello\n", {"vocab.txt", "line 2", "no [UNK]"});
  rejects("[UNK]\n\nhello\n", {"vocab.txt", "line 2", "empty token"});
  rejects("[UNK]\nab\xFF\n", {"vocab.txt", "line 2", "UTF-8"});
  rejects("[UNK]\n" + std::string(2000, 'a') + "\n", {"vocab.txt", "line 2", "2000 bytes"});
  check_error([&] { WordPieceTokenizer::from_vocab_file(dir.file("missing.txt")); },
              {"missing.txt"});
  // Lines are stripped: CRLF endings and surrounding spaces are not part of the tokens.
  write_file(path, "[UNK]\r\n  hello \r\n##s\n");
  const auto tok = WordPieceTokenizer::from_vocab_file(path);
  CHECK(tok.tokenize("Hellos") == std::vector<std::string>{"hello", "##s"});

  // The saved format: header, lower_case, count, tokens.
  auto load_rejects = [&](const std::string& contents, const std::vector<std::string>& pieces) {
    write_file(path, contents);
    check_error([&] { load_tokenizer(path); }, pieces);
  };
  load_rejects("loom-wordpiece-tokenizer 2\n", {"line 1", "header"});
  load_rejects("loom-wordpiece-tokenizer 1\nlower_case 2\n", {"line 2", "lower_case"});
  load_rejects("loom-wordpiece-tokenizer 1\nlower_case 1\nvocab 99999999999\n", {"line 3"});
  load_rejects("loom-wordpiece-tokenizer 1\nlower_case 1\nvocab 3\n[UNK]\na\n", {"line 6", "ends"});
  load_rejects("loom-wordpiece-tokenizer 1\nlower_case 1\nvocab 1\n[UNK]\nextra\n",
               {"line 5", "unexpected"});
  check_error([] { WordPieceTokenizer({"a", "b"}); }, {"no [UNK]"});
  check_error([] { WordPieceTokenizer({"[UNK]", " a"}); }, {"token 1", "whitespace"});
}
