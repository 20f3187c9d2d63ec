// BPETokenizer: training against a literal implementation of the algorithm (recount every
// pair after every merge), encoding against the classic merge loop, and lossless round trips.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/pretokenize.h"
#include "data/splitmix.h"
#include "data_test_util.h"

using namespace loom::data;
using loom::testing::check_error;
using loom::testing::synthetic_corpus;

namespace {

using Tokens = std::vector<int64_t>;

// Replaces each occurrence of `pair`, left to right, by `merged`.
Tokens apply_merge(const Tokens& tokens, const BPETokenizer::Merge& pair, int64_t merged) {
  Tokens out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i + 1 < tokens.size() && tokens[i] == pair.first && tokens[i + 1] == pair.second) {
      out.push_back(merged);
      ++i;
    } else {
      out.push_back(tokens[i]);
    }
  }
  return out;
}

Tokens bytes_of(std::string_view s) {
  Tokens t;
  for (char c : s) t.push_back(static_cast<unsigned char>(c));
  return t;
}

// The seed lecture's BPE, step by step: count all adjacent pairs of all chunks, merge the most
// frequent (ties: smallest pair), repeat. Also returns each merge's pair count.
std::vector<BPETokenizer::Merge> reference_train(std::string_view text, int64_t num_merges,
                                                 std::vector<int64_t>* merge_counts) {
  std::map<std::string_view, int64_t> chunk_counts;
  for (std::string_view chunk : pretokenize(text)) ++chunk_counts[chunk];
  std::vector<std::pair<Tokens, int64_t>> words;
  for (const auto& [chunk, count] : chunk_counts) words.emplace_back(bytes_of(chunk), count);
  std::vector<BPETokenizer::Merge> merges;
  while (static_cast<int64_t>(merges.size()) < num_merges) {
    std::map<BPETokenizer::Merge, int64_t> pair_counts;  // ordered: ties go to the smallest
    for (const auto& [tokens, count] : words)
      for (size_t i = 0; i + 1 < tokens.size(); ++i)
        pair_counts[{tokens[i], tokens[i + 1]}] += count;
    if (pair_counts.empty()) break;
    auto best = pair_counts.begin();
    for (auto it = pair_counts.begin(); it != pair_counts.end(); ++it)
      if (it->second > best->second) best = it;
    const int64_t merged = 256 + static_cast<int64_t>(merges.size());
    for (auto& word : words) word.first = apply_merge(word.first, best->first, merged);
    merges.push_back(best->first);
    merge_counts->push_back(best->second);
  }
  return merges;
}

// Classic encoding (minbpe): in each chunk, merge the adjacent pair of lowest rank, all of
// its occurrences, until no learned pair is left.
Tokens reference_encode(const BPETokenizer& tok, std::string_view text) {
  std::map<BPETokenizer::Merge, int64_t> rank;
  for (size_t k = 0; k < tok.merges().size(); ++k) rank[tok.merges()[k]] = static_cast<int64_t>(k);
  Tokens ids;
  for (std::string_view chunk : pretokenize(text)) {
    Tokens tokens = bytes_of(chunk);
    for (;;) {
      int64_t best = -1;
      for (size_t i = 0; i + 1 < tokens.size(); ++i) {
        const auto it = rank.find({tokens[i], tokens[i + 1]});
        if (it != rank.end() && (best < 0 || it->second < best)) best = it->second;
      }
      if (best < 0) break;
      tokens = apply_merge(tokens, tok.merges()[best], 256 + best);
    }
    ids.insert(ids.end(), tokens.begin(), tokens.end());
  }
  return ids;
}

std::string random_bytes(SplitMix64& rng, size_t max_len) {
  std::string s(rng.uniform(max_len + 1), '\0');
  for (char& c : s) c = static_cast<char>(rng.uniform(256));
  return s;
}

}  // namespace

TEST_CASE("BPETokenizer::train: same merges as recounting every pair after every merge") {
  const std::string text = synthetic_corpus(30000, 1);
  const int64_t num_merges = 200;
  std::vector<int64_t> counts;
  const std::vector<BPETokenizer::Merge> expected = reference_train(text, num_merges, &counts);
  REQUIRE(static_cast<int64_t>(expected.size()) == num_merges);
  const BPETokenizer tok = BPETokenizer::train(text, 256 + num_merges);
  CHECK(tok.merges() == expected);
  CHECK(tok.vocab_size() == 256 + num_merges);
  // Merges happen in frequency order: a merge can never create a pair more frequent than itself.
  for (size_t k = 1; k < counts.size(); ++k) CHECK(counts[k] <= counts[k - 1]);
}

TEST_CASE("BPETokenizer::train: the first merge is the most frequent adjacent pair") {
  // "lo" occurs in every word, more often than any other pair.
  const std::string text = "low lower lowest low slow glow low";
  std::map<BPETokenizer::Merge, int64_t> counts;
  for (std::string_view chunk : pretokenize(text))
    for (size_t i = 0; i + 1 < chunk.size(); ++i)
      ++counts[{static_cast<unsigned char>(chunk[i]), static_cast<unsigned char>(chunk[i + 1])}];
  BPETokenizer::Merge most{-1, -1};
  int64_t best = 0;
  for (const auto& [pair, count] : counts)
    if (count > best) best = count, most = pair;
  const BPETokenizer tok = BPETokenizer::train(text, 257);
  REQUIRE(tok.merges().size() == 1);
  CHECK(tok.merges()[0] == most);
  CHECK(tok.token_bytes(256) ==
        std::string{static_cast<char>(most.first), static_cast<char>(most.second)});
}

TEST_CASE("BPETokenizer::train: stops early when no pair is left, and checks vocab_size") {
  const BPETokenizer tok = BPETokenizer::train("ab ab", 1000);
  // Chunks "ab" and " ab": merges (a,b) then (' ', ab); then every chunk is one token.
  CHECK(tok.merges().size() == 2);
  CHECK(tok.encode("ab ab").size() == 2);
  check_error([] { BPETokenizer::train("x", 255); }, {"BPETokenizer::train", "255"});
  check_error([] { BPETokenizer::train("x", 256, {"<|endoftext|>"}); }, {"256", "special"});
}

TEST_CASE("BPETokenizer::encode: agrees with the classic merge loop and shortens text") {
  const std::string train_text = synthetic_corpus(30000, 2);
  const BPETokenizer tok = BPETokenizer::train(train_text, 256 + 300);
  const std::string text = synthetic_corpus(8000, 3);  // not the training text
  const Tokens ids = tok.encode(text);
  CHECK(ids == reference_encode(tok, text));
  CHECK(ids.size() < text.size());
  const Tokens train_ids = tok.encode(train_text);
  CHECK(train_ids.size() * 2 < train_text.size());  // 300 merges of prose: over 2 bytes a token
  CHECK(tok.decode(train_ids) == train_text);
  for (int64_t id : ids) CHECK((id >= 0 && id < tok.vocab_size()));
}

TEST_CASE("BPETokenizer: random bytes, invalid UTF-8 and empty input round-trip") {
  SplitMix64 rng(5);
  std::string noise;
  for (int i = 0; i < 40; ++i) noise += random_bytes(rng, 200);
  // One tokenizer trained on prose, one on noise (whose merges join arbitrary bytes).
  const BPETokenizer prose = BPETokenizer::train(synthetic_corpus(20000, 4), 256 + 200);
  const BPETokenizer bytes = BPETokenizer::train(noise, 256 + 200);
  std::vector<std::string> invalid_utf8 = {"\xff\xfe",     "\x80",      "abc\x80\x81xyz",
                                           "\xe2\x82",     "\xc0\xaf",  "\xed\xa0\x80",
                                           "\xf0\x9f\x99", "caf\xe9 x", " \xff \xff\xff  \xfe"};
  invalid_utf8.push_back(std::string("nul\0inside", 10));
  for (const BPETokenizer* tok : {&prose, &bytes}) {
    CHECK(tok->encode("").empty());
    CHECK(tok->decode({}).empty());
    for (const std::string& s : invalid_utf8) CHECK(tok->decode(tok->encode(s)) == s);
    for (int trial = 0; trial < 300; ++trial) {
      const std::string s = random_bytes(rng, 120);
      const Tokens ids = tok->encode(s);
      CHECK(tok->decode(ids) == s);
      CHECK(ids == reference_encode(*tok, s));
    }
  }
  const BPETokenizer untrained;
  CHECK(untrained.vocab_size() == 256);
  CHECK(untrained.encode("\xffZ") == bytes_of("\xffZ"));  // no merges: the bytes
}

TEST_CASE("BPETokenizer: multi-byte UTF-8 text round-trips and merges within characters") {
  std::string text;
  for (int i = 0; i < 50; ++i)
    text +=
        "Gr\u00fc\u00dfe, \u4e16\u754c! \u041f\u0440\u0438\u0432\u0435\u0442 \U0001F642 na\u00efve "
        "caf\u00e9\n";
  const BPETokenizer tok = BPETokenizer::train(text, 256 + 40);
  const Tokens ids = tok.encode(text);
  CHECK(tok.decode(ids) == text);
  CHECK(ids.size() < text.size() / 4);
  // Some learned token holds a whole multi-byte character.
  bool has_multibyte_token = false;
  for (int64_t id = 256; id < tok.vocab_size(); ++id)
    has_multibyte_token |= tok.token_bytes(id) == "\U0001F642" || tok.token_bytes(id) == "\u00e9";
  CHECK(has_multibyte_token);
  const std::string unseen = "\u65e5\u672c\u8a9e \u03b1\u03b2\u03b3 \U0001F600";
  CHECK(tok.decode(tok.encode(unseen)) == unseen);
}

TEST_CASE("BPETokenizer: special tokens are recognised only by encode_with_special") {
  const std::string eot = "<|endoftext|>";
  const std::vector<std::string> specials = {eot, "<|pad|>"};
  const BPETokenizer tok = BPETokenizer::train(synthetic_corpus(10000, 6), 256 + 50 + 2, specials);
  CHECK(tok.vocab_size() == 256 + 50 + 2);
  CHECK(tok.special_tokens() == specials);
  const int64_t eot_id = tok.special_token_id(eot);
  CHECK(eot_id == 256 + 50);
  CHECK(tok.special_token_id("<|pad|>") == 256 + 51);
  CHECK(tok.token_bytes(eot_id) == eot);

  const std::string text = eot + "first doc" + eot + eot + "second <|pad|>doc" + eot;
  const Tokens plain = tok.encode(text);
  for (int64_t id : plain) CHECK(id < 256 + 50);  // ordinary text only
  CHECK(tok.decode(plain) == text);
  const Tokens with_special = tok.encode_with_special(text);
  CHECK(std::count(with_special.begin(), with_special.end(), eot_id) == 4);
  CHECK(std::count(with_special.begin(), with_special.end(), eot_id + 1) == 1);
  CHECK(with_special.front() == eot_id);
  CHECK(with_special.back() == eot_id);
  CHECK(tok.decode(with_special) == text);
  CHECK(tok.encode_with_special("no specials here") == tok.encode("no specials here"));
  CHECK(tok.encode_with_special("").empty());
  check_error([&] { tok.special_token_id("<|unknown|>"); }, {"<|unknown|>", "special"});
  check_error([] { BPETokenizer({}, {"has space"}); }, {"has space", "whitespace"});
  check_error([] { BPETokenizer({}, {"<a>", "<a>"}); }, {"<a>", "twice"});
}

TEST_CASE("BPETokenizer: invalid merges and ids are rejected with their position") {
  check_error([] { BPETokenizer({{97, 98}, {256, 300}}); }, {"merge 1", "300"});
  check_error([] { BPETokenizer({{97, 98}, {97, 98}}); }, {"merge 1", "repeats merge 0"});
  check_error([] { BPETokenizer({{-1, 98}}); }, {"merge 0"});
  const BPETokenizer tok({{97, 98}});
  CHECK(tok.encode("abab") == Tokens{256, 256});
  check_error([&] { tok.decode({256, 257}); }, {"BPETokenizer::decode", "257", "position 1"});
  check_error([&] { tok.token_bytes(-3); }, {"-3"});
}
