// generation/beam_search.h on its own, with a stand-in model whose next-token probabilities
// depend only on the last token: beam search finds what greedy search misses, and the checks
// name the search. (The Transformer's side: tests/models/test_transformer_decode.cpp.)
#include <cmath>
#include <vector>

#include "generation/beam_search.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
using generation::beam_search;
using generation::BeamDecoder;

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
