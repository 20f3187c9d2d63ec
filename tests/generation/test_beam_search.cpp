// generation/beam_search.h on its own, with a stand-in model whose next-token probabilities
// depend only on the last token: beam search finds what greedy search misses, and the checks
// name the search. (The Transformer's side: tests/models/test_transformer_decode.cpp.)
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "generation/beam_search.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
using generation::beam_search;
using generation::BeamDecoder;
using generation::top_tokens;

namespace {

// Tokens 0 = bos, 1 = A, 2 = B, 3 = eos. After bos, A is likelier than B; after A nothing is
// likely (A and eos tie at 0.3); after B, eos is almost certain.
const std::vector<std::vector<float>> kNext = {
    {0.05f, 0.5f, 0.4f, 0.05f}, {0.2f, 0.3f, 0.2f, 0.3f}, {0.05f, 0.025f, 0.025f, 0.9f}};

// The stand-in's logits for each row's newest token, counting the reorders it is asked for.
BeamDecoder markov_model(int& reorders) {
  return {[](const std::vector<int64_t>& tokens) {
            std::vector<float> logits;
            for (int64_t t : tokens)
              for (float p : kNext[static_cast<size_t>(t)]) logits.push_back(std::log(p));
            return tensor(logits, {static_cast<int64_t>(tokens.size()), 4});
          },
          [&reorders](const std::vector<int64_t>&) { ++reorders; }};
}

// A stand-in over `vocab` tokens whose logits for row r depend on its sentence (rows are
// sentence-major, `beam` to a sentence; the first is sentence `first`) and newest token: a row of
// a fixed random table. A sentence gets the same logits searched in any batch.
BeamDecoder table_model(int64_t first, int64_t beam, int64_t vocab) {
  std::mt19937 gen(17);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> table(static_cast<size_t>(64 * vocab));
  for (float& x : table) x = normal(gen);
  return {[first, beam, vocab, table](const std::vector<int64_t>& tokens) {
            std::vector<float> logits;
            for (size_t r = 0; r < tokens.size(); ++r) {
              const int64_t sentence = first + static_cast<int64_t>(r) / beam;
              const int64_t row = (sentence * 7919 + tokens[r] * 31) % 64;
              logits.insert(logits.end(), table.begin() + row * vocab,
                            table.begin() + (row + 1) * vocab);
            }
            return tensor(logits, {static_cast<int64_t>(tokens.size()), vocab});
          },
          [](const std::vector<int64_t>&) {}};
}

}  // namespace

TEST_CASE("beam_search: beam 2 finds B eos, which greedy search misses by taking A first") {
  int reorders = 0;
  const BeamDecoder model = markov_model(reorders);
  const auto greedy = beam_search(model, 1, 4, 0, 3, 2, 1)[0];
  CHECK(greedy.tokens == std::vector<int64_t>{1, 1});  // the tie after A goes to the lower id
  CHECK_FALSE(greedy.finished);
  CHECK(greedy.log_prob == doctest::Approx(std::log(0.5 * 0.3)));
  CHECK(reorders == 0);  // greedy search never reorders the cache
  const auto beam = beam_search(model, 1, 4, 0, 3, 2, 2)[0];
  CHECK(beam.tokens == std::vector<int64_t>{2});
  CHECK(beam.finished);
  CHECK(beam.log_prob == doctest::Approx(std::log(0.4 * 0.9)));
  CHECK(beam.score == beam.log_prob);  // no length penalty
  CHECK(reorders == 1);                // after the first step; the second is the last
}

TEST_CASE("beam_search rejects bad arguments and logits of the wrong shape, naming itself") {
  int reorders = 0;
  const BeamDecoder model = markov_model(reorders);
  expect_error([&] { beam_search(model, 0, 4, 0, 3, 2); }, {"beam_search", "no source"});
  expect_error([&] { beam_search(model, 1, 4, 4, 3, 2); }, {"beam_search", "bos_id 4"});
  expect_error([&] { beam_search(model, 1, 4, 0, 3, 0); }, {"beam_search", "max_len 0"});
  expect_error([&] { beam_search(model, 1, 4, 0, 3, 2, 5); }, {"beam_search", "beam 5"});
  expect_error([&] { beam_search(model, 1, 4, 0, 3, 2, 1, -1.0f); }, {"length_penalty -1"});
  expect_error([&] { beam_search(model, 1, 3, 0, 2, 2); }, {"beam_search", "[1,4]", "[1,3]"});
}

// top_tokens against the plain definition, a stable sort of all indices by value, largest first:
// rows of every length around its blocks of 32 (and the 1,000 of the benchmark's vocabulary),
// values with many ties, and rising rows, where every block has a value that enters.
TEST_CASE("top_tokens keeps the largest values, ties to the lower index, as a stable sort") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> level(0, 20);  // few distinct values: many ties
  std::vector<int64_t> got;
  for (int64_t vocab : {1, 2, 31, 32, 33, 64, 95, 1000})
    for (bool rising : {false, true})
      for (size_t keep : {size_t{1}, size_t{2}, size_t{8}}) {
        if (keep > static_cast<size_t>(vocab)) continue;
        std::vector<float> row(static_cast<size_t>(vocab));
        for (size_t v = 0; v < row.size(); ++v)
          row[v] = rising ? 0.01f * static_cast<float>(v) : 0.5f * static_cast<float>(level(rng));
        std::vector<int64_t> order(row.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          return row[static_cast<size_t>(a)] > row[static_cast<size_t>(b)];
        });
        order.resize(keep);
        top_tokens(row.data(), vocab, keep, got);
        CAPTURE(vocab);
        CAPTURE(rising);
        CAPTURE(keep);
        CHECK(got == order);
      }
}

TEST_CASE("top_tokens passes over NaN once its list is full, in a skipped block or not") {
  std::vector<float> row(100, 0.0f);
  row[3] = 2.0f;
  row[40] = std::nanf("");  // in a block with nothing above the worst kept
  row[70] = std::nanf("");  // in a block that holds a better value, at 71
  row[71] = 1.0f;
  std::vector<int64_t> got;
  top_tokens(row.data(), 100, 2, got);
  CHECK(got == std::vector<int64_t>{3, 71});
}

// A search of many sentences (40 x 4 beams over 1000 tokens, the step's log-probabilities read
// where the kernel wrote them) gives each sentence what it gets searched alone.
TEST_CASE("beam_search over many sentences gives each sentence what it gets alone") {
  const int64_t sentences = 40, vocab = 1000, bos = 0, eos = 1, max_len = 6;
  for (int64_t beam : {1, 4}) {
    CAPTURE(beam);
    const auto together =
        beam_search(table_model(0, beam, vocab), sentences, vocab, bos, eos, max_len, beam, 0.6f);
    REQUIRE(together.size() == static_cast<size_t>(sentences));
    for (int64_t b = 0; b < sentences; ++b) {
      const auto alone =
          beam_search(table_model(b, beam, vocab), 1, vocab, bos, eos, max_len, beam, 0.6f)[0];
      const auto& got = together[static_cast<size_t>(b)];
      CHECK_MESSAGE(got.tokens == alone.tokens, "sentence " << b);
      CHECK(got.log_prob == alone.log_prob);
      CHECK(got.finished == alone.finished);
    }
  }
}
