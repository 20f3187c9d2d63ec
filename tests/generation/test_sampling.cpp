// generation/sampling.h's decoding loop on its own, with a stand-in model: what it asks the model,
// when it stops, what it streams, and that sampling is repeatable under manual_seed.
#include <vector>

#include "generation/sampling.h"
#include "sampling_rows.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
using generation::generate_tokens;
using generation::GenerateOptions;

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

// ---------------------------------------------------------------------------- sample_next

namespace {

struct SamplingSetting {
  float temperature;
  int64_t top_k;
  float top_p;
};
const SamplingSetting kSettings[] = {
    {0.0f, 0, 1.0f}, {0.0f, 5, 0.5f},  {1.0f, 0, 1.0f},  {0.7f, 0, 1.0f},   {2.5f, 0, 1.0f},
    {1.0f, 1, 1.0f}, {1.0f, 7, 1.0f},  {0.8f, 96, 1.0f}, {1.0f, 500, 1.0f}, {1.0f, 0, 0.9f},
    {1.3f, 0, 0.3f}, {1.0f, 0, 1e-6f}, {0.9f, 10, 0.8f}, {1.5f, 3, 0.95f},
};

}  // namespace

TEST_CASE("sample_next on the CPU picks sample_token's token for every row, setting and seed") {
  using generation::sample_next;
  using generation::sample_token;
  manual_seed(5);
  const int64_t rows = 16, vocab = 97;
  for (const bool with_ties : {false, true}) {
    const Tensor logits = sampling_rows(rows, vocab, with_ties);
    const std::vector<float> host = logits.to_vector();
    for (const SamplingSetting& s : kSettings) {
      for (const uint64_t seed : {1ull, 99ull}) {
        const uint64_t offset = 1000 * seed;
        const Tensor tokens = sample_next(logits, s.temperature, s.top_k, s.top_p, seed, offset);
        REQUIRE(tokens.dtype() == DType::Int64);
        REQUIRE(tokens.shape() == Shape{rows});
        const std::vector<int64_t> got = tokens.to_vector_i64();
        for (int64_t r = 0; r < rows; ++r) {
          const std::vector<float> row(host.begin() + r * vocab, host.begin() + (r + 1) * vocab);
          const float u = s.temperature > 0.0f ? philox_uniform(offset + r, seed) : 0.0f;
          CHECK_MESSAGE(got[r] == sample_token(row, s.temperature, s.top_k, s.top_p, u),
                        "row " << r << " T " << s.temperature << " top_k " << s.top_k << " top_p "
                               << s.top_p << " ties " << with_ties);
        }
      }
    }
  }
}

TEST_CASE("sample_next draws from the global generator as generate_tokens does") {
  const Tensor logits = tensor({0.0f, 0.1f, 0.2f, 0.0f, 0.3f, 0.1f}, {2, 3});
  manual_seed(21);
  const uint64_t before = default_generator().offset();
  const Tensor greedy = generation::sample_next(logits, 0.0f);
  CHECK(default_generator().offset() == before);  // greedy decoding draws nothing
  CHECK(greedy.to_vector_i64() == std::vector<int64_t>{2, 1});
  const Tensor sampled = generation::sample_next(logits, 1.0f, 0, 1.0f);
  CHECK(default_generator().offset() == before + 2);  // one counter per row
  CHECK(sampled.to_vector_i64() ==
        generation::sample_next(logits, 1.0f, 0, 1.0f, default_generator().seed(), before)
            .to_vector_i64());
}

TEST_CASE("sample_next with offset_by draws counter offset + offset_by, read from the tensor") {
  // The device-side counter a recorded graph advances (GPT::generate on a GPU); on the CPU the
  // same argument is read from host memory.
  manual_seed(8);
  const Tensor logits = randn({3, 11});
  Tensor offset_by = tensor_i64({0}, {1});
  for (const int64_t by : {0, 5, 40}) {
    offset_by.fill_(static_cast<float>(by));
    CHECK(generation::sample_next(logits, 1.0f, 0, 1.0f, 17, 100, offset_by).to_vector_i64() ==
          generation::sample_next(logits, 1.0f, 0, 1.0f, 17, 100 + by).to_vector_i64());
  }
  expect_error([&] { generation::sample_next(logits, 1.0f, 0, 1.0f, 17, 100, tensor({1}, {1})); },
               {"sample_next", "offset_by", "float32"});
  expect_error(
      [&] { generation::sample_next(logits, 1.0f, 0, 1.0f, 17, 100, tensor_i64({1, 2}, {2})); },
      {"sample_next", "offset_by", "[2]"});
}

TEST_CASE("sample_next rejects bad arguments with loom::Error naming the op") {
  using generation::sample_next;
  const Tensor logits = tensor({0.0f, 1.0f, 2.0f, 3.0f}, {2, 2});
  expect_error([&] { sample_next(logits, -1.0f, 0, 1.0f, 0, 0); }, {"sample_next", "temperature"});
  expect_error([&] { sample_next(logits, 1.0f, -2, 1.0f, 0, 0); }, {"sample_next", "top_k"});
  expect_error([&] { sample_next(logits, 1.0f, 0, 0.0f, 0, 0); }, {"sample_next", "top_p"});
  expect_error([&] { sample_next(logits, 1.0f, 0, 1.5f, 0, 0); }, {"sample_next", "top_p"});
  expect_error(
      [&] {
        sample_next(tensor({1.0f, 2.0f}, {2}), 1.0f, 0, 1.0f, 0, 0);
      },
      {"sample_next", "[2]"});
  expect_error(
      [&] {
        sample_next(tensor_i64({1, 2}, {1, 2}), 1.0f, 0, 1.0f, 0, 0);
      },
      {"sample_next", "int64"});
  expect_error(
      [&] {
        sample_next(Tensor::empty({2, 0}), 1.0f, 0, 1.0f, 0, 0);
      },
      {"sample_next", "[2,0]"});
  expect_error(
      [&] {
        sample_next(tensor({1.0f, NAN}, {1, 2}), 1.0f, 0, 1.0f, 0, 0);
      },
      {"sample", "NaN"});
  CHECK(sample_next(Tensor::empty({0, 3}), 1.0f, 0, 1.0f, 0, 0).shape() == Shape{0});
}
