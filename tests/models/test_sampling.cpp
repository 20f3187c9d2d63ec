// models/sampling.h's decoding loop on its own, with a stand-in model: what it asks the model,
// when it stops, what it streams, and that sampling is repeatable under manual_seed.
#include <vector>

#include "models/sampling.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
using models::generate_tokens;
using models::GenerateOptions;

namespace {

// A "model" over 5 tokens that always predicts (last token + 1) mod 5, most of the time.
std::vector<float> count_up(const std::vector<int64_t>& tokens) {
  std::vector<float> logits(5, 0.0f);
  logits[static_cast<size_t>((tokens.back() + 1) % 5)] = 3.0f;
  return logits;
}

}  // namespace

TEST_CASE("generate_tokens: greedy decoding asks the model once per new token, with every token") {
  std::vector<size_t> seen_lengths;
  GenerateOptions options;
  options.max_new_tokens = 6;
  const std::vector<int64_t> out =
      generate_tokens({2, 3}, options, [&](const std::vector<int64_t>& tokens) {
        seen_lengths.push_back(tokens.size());
        return count_up(tokens);
      });
  CHECK(out == std::vector<int64_t>{2, 3, 4, 0, 1, 2, 3, 4});
  CHECK(seen_lengths == std::vector<size_t>{2, 3, 4, 5, 6, 7});
  options.max_new_tokens = 0;
  CHECK(generate_tokens({2, 3}, options, count_up) == std::vector<int64_t>{2, 3});
}

TEST_CASE("generate_tokens stops right after the stop token and streams each token") {
  GenerateOptions options;
  options.max_new_tokens = 10;
  options.stop_token = 1;
  std::vector<int64_t> streamed;
  options.on_token = [&](int64_t t) { streamed.push_back(t); };
  const std::vector<int64_t> out = generate_tokens({3}, options, count_up);
  CHECK(out == std::vector<int64_t>{3, 4, 0, 1});
  CHECK(streamed == std::vector<int64_t>{4, 0, 1});
}

TEST_CASE("generate_tokens samples repeatably under manual_seed, and checks its options") {
  GenerateOptions options;
  options.max_new_tokens = 30;
  options.temperature = 2.0f;  // flat enough that other tokens are drawn too
  manual_seed(17);
  const std::vector<int64_t> a = generate_tokens({0}, options, count_up);
  manual_seed(17);
  CHECK(generate_tokens({0}, options, count_up) == a);
  bool departs = false;  // some draw is not the most likely token
  for (size_t i = 1; i < a.size(); ++i) departs |= a[i] != (a[i - 1] + 1) % 5;
  CHECK(departs);

  for (auto edit : std::vector<std::function<void(GenerateOptions&)>>{
           [](GenerateOptions& o) { o.max_new_tokens = -1; },
           [](GenerateOptions& o) { o.temperature = -0.5f; },
           [](GenerateOptions& o) { o.top_k = -1; }, [](GenerateOptions& o) { o.top_p = 0.0f; }}) {
    GenerateOptions bad;
    edit(bad);
    CHECK_THROWS_AS(generate_tokens({0}, bad, count_up), Error);
  }
}
