// BERT pre-training data: google-research/bert's masking rule (counts with Python's rounding,
// never [CLS]/[SEP], the 80/10/10 split, uniform positions), sentence splitting, NSP pairs and
// their layout, masking as a pure function of (seed, epoch, index), and padded batches.
#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "data/bert_pretraining.h"
#include "data_test_util.h"

using namespace loom::data;
using loom::testing::check_error;

namespace {

const MaskingRule kRule{/*cls_id=*/2, /*sep_id=*/3, /*mask_id=*/4, /*vocab_size=*/1000};

// [CLS] 100 101 ... [SEP] 200 201 ... [SEP] of `length` tokens in all.
std::vector<int64_t> sequence(int64_t length) {
  std::vector<int64_t> ids{kRule.cls_id};
  const int64_t a = (length - 3) / 2;
  for (int64_t i = 0; i < a; ++i) ids.push_back(100 + i);
  ids.push_back(kRule.sep_id);
  for (int64_t i = 0; ids.size() + 1 < static_cast<size_t>(length); ++i) ids.push_back(200 + i);
  ids.push_back(kRule.sep_id);
  return ids;
}

std::vector<std::string> documents() {
  return {"The cat sat on the mat. The dog ate the cat! Did it? Yes.",
          "A fortune for you. Another one here. And a third sentence.", "Single sentence only",
          "Books are heavy. Paper is light. Ink is dark. Pens run dry."};
}

}  // namespace

TEST_CASE("mask_tokens predicts min(20, max(1, round(15% of the length))) positions") {
  // Python's round: half to even (10 -> 1.5 -> 2, 30 -> 4.5 -> 4, 50 -> 7.5 -> 8).
  const std::map<int64_t, int64_t> expected = {{4, 1},  {5, 1},   {10, 2},   {30, 4},
                                               {50, 8}, {70, 10}, {128, 19}, {200, 20}};
  for (const auto& [length, count] : expected) {
    for (uint64_t seed = 0; seed < 20; ++seed) {
      const std::vector<int64_t> ids = sequence(length);
      const MaskedTokens m = mask_tokens(ids, kRule, seed);
      int64_t predicted = 0;
      for (size_t i = 0; i < ids.size(); ++i) {
        if (m.labels[i] == -100) {
          CHECK(m.ids[i] == ids[i]);  // untouched outside the predictions
          continue;
        }
        ++predicted;
        CHECK(m.labels[i] == ids[i]);
        CHECK(ids[i] != kRule.cls_id);  // never [CLS] or [SEP]
        CHECK(ids[i] != kRule.sep_id);
      }
      CHECK_MESSAGE(predicted == count, "length " << length);
    }
  }
  // Only [CLS]/[SEP]: nothing to predict.
  const MaskedTokens none = mask_tokens({2, 3, 3}, kRule, 1);
  CHECK(none.labels == std::vector<int64_t>{-100, -100, -100});
}

TEST_CASE("mask_tokens: 80% [MASK], 10% random, 10% unchanged, positions uniform") {
  const std::vector<int64_t> ids = sequence(40);  // 6 predictions each
  int64_t total = 0, masked = 0, kept = 0, random = 0;
  std::vector<int64_t> chosen(ids.size(), 0);
  for (uint64_t seed = 0; seed < 4000; ++seed) {
    const MaskedTokens m = mask_tokens(ids, kRule, seed);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (m.labels[i] == -100) continue;
      ++total;
      ++chosen[i];
      if (m.ids[i] == kRule.mask_id)
        ++masked;
      else if (m.ids[i] == ids[i])
        ++kept;
      else
        ++random;
      CHECK(m.ids[i] >= 0);
      CHECK(m.ids[i] < kRule.vocab_size);
    }
  }
  REQUIRE(total == 4000 * 6);
  const double n = static_cast<double>(total);
  CHECK(masked / n == doctest::Approx(0.8).epsilon(0.02));
  CHECK(kept / n == doctest::Approx(0.1).epsilon(0.1));
  CHECK(random / n == doctest::Approx(0.1).epsilon(0.1));
  // Each of the 37 candidate positions is chosen about 6/37 of the time.
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == kRule.cls_id || ids[i] == kRule.sep_id) {
      CHECK(chosen[i] == 0);
    } else {
      CHECK(chosen[i] / 4000.0 == doctest::Approx(6.0 / 37).epsilon(0.12));
    }
  }
  // A pure function of the seed.
  CHECK(mask_tokens(ids, kRule, 9).ids == mask_tokens(ids, kRule, 9).ids);
  CHECK(mask_tokens(ids, kRule, 9).labels != mask_tokens(ids, kRule, 10).labels);
}

TEST_CASE("split_sentences cuts after . ! ? and closing quotes, normalising whitespace") {
  CHECK(split_sentences("One. Two!  Three?\n\tFour") ==
        std::vector<std::string>{"One.", "Two!", "Three?", "Four"});
  CHECK(split_sentences("He said \"stop.\" Then... left?!  ok") ==
        std::vector<std::string>{"He said \"stop.\"", "Then...", "left?!", "ok"});
  CHECK(split_sentences("3.14 is pi. e.g.x") == std::vector<std::string>{"3.14 is pi.", "e.g.x"});
  CHECK(split_sentences("  \n ").empty());
  CHECK(split_sentences("").empty());
}

TEST_CASE("BertPretrainingData: [CLS] A [SEP] B [SEP], segments, IsNext and NotNext pairs") {
  const auto tok = WordPieceTokenizer::train(documents(), 200);
  BertPretrainingConfig config;
  config.seed = 3;
  const BertPretrainingData data(documents(), tok, config);
  // Pairs: 3 in document 0, 2 in document 1, none in 2 (one sentence), 3 in document 3.
  REQUIRE(data.size() == 8);
  const int64_t cls = tok.token_id("[CLS]"), sep = tok.token_id("[SEP]");
  int64_t not_next = 0;
  for (int64_t i = 0; i < data.size(); ++i) {
    const BertExample e = data.example(i, 0);
    const std::vector<int64_t> plain = data.unmasked_ids(i);
    REQUIRE(e.ids.size() == plain.size());
    CHECK(plain.front() == cls);
    CHECK(plain.back() == sep);
    const auto first_sep = std::find(plain.begin(), plain.end(), sep) - plain.begin();
    for (size_t t = 0; t < plain.size(); ++t)
      CHECK(e.token_types[t] == (static_cast<int64_t>(t) <= first_sep ? 0 : 1));
    not_next += e.next_sentence_label;
  }
  CHECK(not_next > 0);
  CHECK(not_next < data.size());
  // An IsNext pair is two consecutive sentences of one document; a NotNext B comes from another.
  std::set<std::string> consecutive;
  for (const std::string& doc : documents()) {
    const std::vector<std::string> sentences = split_sentences(doc);
    for (size_t k = 0; k + 1 < sentences.size(); ++k)
      consecutive.insert("[CLS] " + tok.decode(tok.encode(sentences[k])) + " [SEP] " +
                         tok.decode(tok.encode(sentences[k + 1])) + " [SEP]");
  }
  for (int64_t i = 0; i < data.size(); ++i) {
    const std::string text = tok.decode(data.unmasked_ids(i));
    CHECK_MESSAGE(consecutive.count(text) == (data.example(i, 0).next_sentence_label == 0 ? 1 : 0),
                  text);
  }
}

TEST_CASE("BertPretrainingData: masking is a pure function of (seed, epoch, index)") {
  const auto tok = WordPieceTokenizer::train(documents(), 200);
  BertPretrainingConfig config;
  const BertPretrainingData a(documents(), tok, config), b(documents(), tok, config);
  bool epochs_differ = false;
  for (int64_t i = 0; i < a.size(); ++i) {
    CHECK(a.example(i, 5).ids == b.example(i, 5).ids);  // rebuilt: the same data
    CHECK(a.example(i, 5).mlm_labels == a.example(i, 5).mlm_labels);
    epochs_differ = epochs_differ || a.example(i, 5).mlm_labels != a.example(i, 6).mlm_labels;
    CHECK(a.unmasked_ids(i) == b.unmasked_ids(i));
  }
  CHECK(epochs_differ);
  check_error([&] { a.example(a.size(), 0); }, {"example", "index 8"});
  check_error([&] { a.example(0, -1); }, {"epoch -1"});
}

TEST_CASE("BertPretrainingData: truncation to max_seq_len and padded batches") {
  const auto tok = WordPieceTokenizer::train(documents(), 200);
  BertPretrainingConfig config;
  config.max_seq_len = 9;
  const BertPretrainingData data(documents(), tok, config);
  for (int64_t i = 0; i < data.size(); ++i) CHECK(data.unmasked_ids(i).size() <= 9);
  const BertBatch batch = data.batch({0, 1, 2}, 1);
  REQUIRE(batch.ids.dim() == 2);
  CHECK(batch.ids.size(0) == 3);
  CHECK(batch.nsp_labels.shape() == loom::Shape{3});
  const std::vector<int64_t> ids = batch.ids.to_vector_i64();
  const std::vector<int64_t> mask = batch.attention_mask.to_vector_i64();
  const std::vector<int64_t> labels = batch.mlm_labels.to_vector_i64();
  const int64_t T = batch.ids.size(1);
  for (int64_t b = 0; b < 3; ++b) {
    const BertExample e = data.example(b, 1);
    for (int64_t t = 0; t < T; ++t) {
      const bool token = t < static_cast<int64_t>(e.ids.size());
      CHECK(mask[b * T + t] == (token ? 1 : 0));
      CHECK(ids[b * T + t] == (token ? e.ids[t] : tok.token_id("[PAD]")));
      CHECK(labels[b * T + t] == (token ? e.mlm_labels[t] : -100));
    }
  }
  check_error([&] { BertPretrainingData({"Only one document. Two sentences."}, tok, config); },
              {"BertPretrainingData", "1 documents"});
}

namespace {

// truncate_seq_pair as it was written first (and as create_pretraining_data.py writes it):
// erase one token at a time. Quadratic in a long sentence; the reference for the linear one.
void truncate_by_erasing(std::vector<int64_t>& a, std::vector<int64_t>& b, size_t max_tokens,
                         SplitMix64& gen) {
  while (a.size() + b.size() > max_tokens) {
    std::vector<int64_t>& longer = a.size() > b.size() ? a : b;
    if (static_cast<double>(gen.next() >> 11) * 0x1.0p-53 < 0.5)
      longer.erase(longer.begin());
    else
      longer.pop_back();
  }
}

std::vector<int64_t> numbered(size_t n, int64_t first) {
  std::vector<int64_t> ids(n);
  std::iota(ids.begin(), ids.end(), first);
  return ids;
}

}  // namespace

TEST_CASE("truncate_seq_pair keeps what erasing token by token keeps, with the same draws") {
  SplitMix64 sizes(7);
  for (uint64_t seed = 0; seed < 300; ++seed) {
    const size_t len_a = sizes.uniform(60), len_b = sizes.uniform(60);
    const size_t max_tokens = sizes.uniform(70);  // often more than both: nothing to cut
    std::vector<int64_t> a = numbered(len_a, 1000), b = numbered(len_b, 2000);
    std::vector<int64_t> ref_a = a, ref_b = b;
    SplitMix64 gen(seed), ref_gen(seed);
    truncate_seq_pair(a, b, max_tokens, gen);
    truncate_by_erasing(ref_a, ref_b, max_tokens, ref_gen);
    CHECK_MESSAGE(a == ref_a, "seed " << seed);
    CHECK_MESSAGE(b == ref_b, "seed " << seed);
    CHECK(gen.next() == ref_gen.next());  // as many draws
  }
}

TEST_CASE("truncate_seq_pair is linear: a million-token sentence is cut at once") {
  // Erasing at the front took 87 s for a 1M-word sentence; this cut takes milliseconds, so 5 s
  // leaves room for a loaded machine or a sanitizer.
  std::vector<int64_t> a = numbered(1000000, 0), b = numbered(300000, 0);
  SplitMix64 gen(1);
  const auto t0 = std::chrono::steady_clock::now();
  truncate_seq_pair(a, b, 125, gen);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(a.size() + b.size() == 125);
  CHECK(seconds < 5.0);
}

TEST_CASE("BertPretrainingData cuts a sentence to max_sentence_words before tokenizing") {
  const std::vector<std::string> docs = {"one two three four five six seven eight. nine ten.",
                                         "Other text here. And more."};
  const auto tok = WordPieceTokenizer::train(docs, 100);
  BertPretrainingConfig config;
  config.not_next_prob = 0;  // every pair is (sentence, next sentence)
  config.max_sentence_words = 3;
  const BertPretrainingData data(docs, tok, config);
  // [CLS] one two three [SEP] nine ten. [SEP]: the first sentence kept to three words.
  std::vector<int64_t> expected{tok.token_id("[CLS]")};
  for (const int64_t id : tok.encode("one two three")) expected.push_back(id);
  expected.push_back(tok.token_id("[SEP]"));
  for (const int64_t id : tok.encode("nine ten.")) expected.push_back(id);
  expected.push_back(tok.token_id("[SEP]"));
  CHECK(data.unmasked_ids(0) == expected);
  config.max_sentence_words = 0;
  check_error([&] { BertPretrainingData(docs, tok, config); }, {"max_sentence_words 0"});
}
