// GPT generation: the KV cache computes exactly what the full forward computes, greedy decoding
// matches PyTorch (also once the context window slides), and the sampling rules (temperature,
// top-k, top-p, stop token) do what they promise.
#include <cmath>
#include <numeric>

#include "gpt_fixture.h"

using namespace loom;
using namespace loom::testing;
using models::GPT;
using models::GPTConfig;
using models::sample_token;

namespace {

// softmax(logits / temperature) in double: the distribution sample_token draws from.
std::vector<double> softmax_t(const std::vector<float>& logits, double temperature) {
  const double top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double total = 0;
  for (size_t i = 0; i < p.size(); ++i) total += p[i] = std::exp((logits[i] - top) / temperature);
  for (double& x : p) x /= total;
  return p;
}

}  // namespace

TEST_CASE("KV cache: logits of incremental decoding equal the full forward's") {
  auto model = golden_gpt();
  NoGradGuard no_grad;
  const Tensor ids = gpt_golden("ids");  // (2, 7)
  const Tensor full = model->forward(ids);
  models::KVCache cache(model->config(), 2);
  // A 3-token prefill, then one token at a time, then two at once.
  std::vector<Tensor> parts;
  parts.push_back(model->forward(ids.narrow(1, 0, 3), cache));
  parts.push_back(model->forward(ids.narrow(1, 3, 1), cache));
  parts.push_back(model->forward(ids.narrow(1, 4, 1), cache));
  parts.push_back(model->forward(ids.narrow(1, 5, 2), cache));
  CHECK(cache.length() == 7);
  check_close(cat(parts, 1), full, 1e-5f, 1e-6f, "cached logits");
  // The cache is full after context = 9 positions.
  CHECK_THROWS_AS(model->forward(ids.narrow(1, 0, 3), cache), Error);
  cache.clear();
  check_close(model->forward(ids.narrow(1, 0, 2), cache), full.narrow(1, 0, 2), 1e-5f, 1e-6f,
              "after clear");
}

TEST_CASE("last_only computes exactly the last position's hidden state of the full forward") {
  auto model = golden_gpt();
  NoGradGuard no_grad;
  const Tensor ids = gpt_golden("ids");                                         // (2, 7)
  const Tensor full = model->forward_hidden(ids);                               // (2, 7, 12)
  const Tensor last = model->forward_hidden(ids, nullptr, /*last_only=*/true);  // (2, 1, 12)
  check_close(last, full.narrow(1, 6, 1), 1e-5f, 1e-6f, "last position");
  // Also after a cached prefix: positions 4..6 given, only position 6 computed.
  models::KVCache cache(model->config(), 2);
  model->forward(ids.narrow(1, 0, 4), cache);
  check_close(model->forward_hidden(ids.narrow(1, 4, 3), &cache, true), full.narrow(1, 6, 1), 1e-5f,
              1e-6f, "last position after a cached prefix");
  CHECK(cache.length() == 7);
}

TEST_CASE("Greedy generation matches PyTorch, with and without the KV cache") {
  // 4 prompt tokens + 10 new ones with context 9: the window slides for the last 5 tokens.
  auto model = golden_gpt();
  const std::vector<int64_t> prompt = gpt_golden("generate.prompt").to_vector_i64();
  const std::vector<int64_t> expected = gpt_golden("generate.greedy").to_vector_i64();
  const int64_t new_tokens = static_cast<int64_t>(expected.size() - prompt.size());
  CHECK(model->generate(prompt, new_tokens) == expected);
  models::GenerateOptions no_cache;
  no_cache.max_new_tokens = new_tokens;
  no_cache.use_cache = false;
  CHECK(model->generate(prompt, no_cache) == expected);
  // generate leaves the model in the mode it found it in and records no graph.
  CHECK(model->is_training());
}

TEST_CASE("KV cache gives the same tokens as no cache on a bigger random model") {
  GPTConfig config;
  config.vocab_size = 50;
  config.context = 24;
  config.n_layer = 3;
  config.n_head = 4;
  config.d_model = 32;
  manual_seed(3);
  GPT model(config);
  {  // larger weights than the init, so the logits are far from uniform
    NoGradGuard no_grad;
    for (auto& p : model.parameters()) p.mul_(8.0f);
  }
  const std::vector<int64_t> prompt = {1, 7, 3, 3, 9};
  models::GenerateOptions options;
  options.max_new_tokens = 40;  // past the context of 24
  const std::vector<int64_t> cached = model.generate(prompt, options);
  options.use_cache = false;
  CHECK(model.generate(prompt, options) == cached);
  CHECK(cached.size() == prompt.size() + 40);
  // Sampling with a fixed seed is repeatable and independent of the cache as well.
  options.temperature = 0.9f;
  options.top_k = 10;
  manual_seed(11);
  const std::vector<int64_t> sampled = model.generate(prompt, options);
  options.use_cache = true;
  manual_seed(11);
  CHECK(model.generate(prompt, options) == sampled);
}

TEST_CASE("generate stops right after the stop token and streams every token") {
  auto model = golden_gpt();
  const std::vector<int64_t> prompt = gpt_golden("generate.prompt").to_vector_i64();
  const std::vector<int64_t> greedy = gpt_golden("generate.greedy").to_vector_i64();
  models::GenerateOptions options;
  options.max_new_tokens = 10;
  options.stop_token = greedy[prompt.size() + 2];  // the third new token
  // The stop token may occur earlier among the new tokens: generation ends at its first one.
  size_t first = prompt.size();
  while (greedy[first] != options.stop_token) ++first;
  std::vector<int64_t> streamed;
  options.on_token = [&](int64_t t) { streamed.push_back(t); };
  const std::vector<int64_t> out = model->generate(prompt, options);
  CHECK(out == std::vector<int64_t>(greedy.begin(), greedy.begin() + first + 1));
  CHECK(streamed == std::vector<int64_t>(out.begin() + prompt.size(), out.end()));
  CHECK(model->generate(prompt, 0) == prompt);
}

TEST_CASE("sample_token: greedy, temperature, top-k and top-p") {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  SUBCASE("temperature 0 is the first argmax, whatever the uniform") {
    CHECK(sample_token(logits, 0.0f, 0, 1.0f, 0.0f) == 1);
    CHECK(sample_token(logits, 0.0f, 0, 1.0f, 0.999f) == 1);
  }
  SUBCASE("inverse CDF of softmax(logits / T) over tokens sorted by probability") {
    const double t = 0.7;
    const std::vector<double> p = softmax_t(logits, t);
    // Sorted order: 1, 3 (tie, smaller id first), 4, 0, 2.
    const std::vector<int64_t> order = {1, 3, 4, 0, 2};
    double cumulative = 0;
    for (int64_t id : order) {
      const double mid = cumulative + 0.5 * p[static_cast<size_t>(id)];
      CHECK(sample_token(logits, static_cast<float>(t), 0, 1.0f, static_cast<float>(mid)) == id);
      cumulative += p[static_cast<size_t>(id)];
    }
  }
  SUBCASE("top_k keeps the k largest (ties at the k-th included)") {
    const std::vector<double> p = softmax_t(logits, 1.0);
    // top_k = 3 keeps ids 1, 3, 4: id 4 holds the top of the renormalised range.
    CHECK(sample_token(logits, 1.0f, 3, 1.0f, 0.999f) == 4);
    const double share_1 = p[1] / (p[1] + p[3] + p[4]);
    CHECK(sample_token(logits, 1.0f, 3, 1.0f, static_cast<float>(share_1 * 0.9)) == 1);
    // top_k = 1 with a tie at the top keeps both tied tokens.
    CHECK(sample_token(logits, 1.0f, 1, 1.0f, 0.99f) == 3);
    CHECK(sample_token(logits, 1.0f, 1, 1.0f, 0.2f) == 1);
  }
  SUBCASE("top_p keeps the smallest most likely set reaching p") {
    const std::vector<double> p = softmax_t(logits, 1.0);
    // p[1] = p[3] ~ 0.37 each: with top_p just above p[1] both are needed; nothing else is.
    const float top_p = static_cast<float>(p[1] + 0.01);
    CHECK(sample_token(logits, 1.0f, 0, top_p, 0.999f) == 3);
    // A tiny top_p keeps only the most likely token.
    CHECK(sample_token(logits, 1.0f, 0, 1e-6f, 0.999f) == 1);
  }
  SUBCASE("bad arguments") {
    CHECK_THROWS_AS(sample_token({}, 1.0f, 0, 1.0f, 0.5f), Error);
    CHECK_THROWS_AS(sample_token(logits, -1.0f, 0, 1.0f, 0.5f), Error);
    CHECK_THROWS_AS(sample_token(logits, 1.0f, -2, 1.0f, 0.5f), Error);
    CHECK_THROWS_AS(sample_token(logits, 1.0f, 0, 0.0f, 0.5f), Error);
    CHECK_THROWS_AS(sample_token(logits, 1.0f, 0, 1.0f, 1.0f), Error);
    CHECK_THROWS_AS(sample_token({1.0f, std::nanf("")}, 1.0f, 0, 1.0f, 0.5f), Error);
  }
}

TEST_CASE("Sampled generation follows the model's distribution") {
  // Sampling many single tokens after one prompt: the empirical frequencies approach
  // softmax(logits / T) (a loose bound: 4 standard deviations of a binomial proportion).
  auto model = golden_gpt();
  const std::vector<int64_t> prompt = {3, 1, 4};
  std::vector<float> logits;
  {
    NoGradGuard no_grad;
    logits = model->forward(tensor_i64(prompt, {1, 3})).select(1, 2).reshape({-1}).to_vector();
  }
  const float temperature = 1.5f;
  const std::vector<double> p = softmax_t(logits, temperature);
  std::vector<int> counts(logits.size(), 0);
  const int n = 2000;
  manual_seed(5);
  for (int i = 0; i < n; ++i)
    ++counts[static_cast<size_t>(model->generate(prompt, 1, temperature).back())];
  for (size_t id = 0; id < p.size(); ++id) {
    const double sd = std::sqrt(p[id] * (1 - p[id]) / n);
    CHECK_MESSAGE(std::fabs(counts[id] / double(n) - p[id]) <= 4 * sd + 1e-3,
                  "token " << id << ": " << counts[id] << "/" << n << " vs p = " << p[id]);
  }
}

TEST_CASE("generate rejects bad prompts and options") {
  auto model = golden_gpt();
  CHECK_THROWS_AS(model->generate({}, 3), Error);
  CHECK_THROWS_AS(model->generate({1, 13}, 3), Error);  // vocab is 13
  CHECK_THROWS_AS(model->generate({1, -1}, 3), Error);
  CHECK_THROWS_AS(model->generate({1}, -1), Error);
  CHECK_THROWS_AS(model->generate({1}, 3, -0.5f), Error);
  CHECK_THROWS_AS(model->generate({1}, 3, 1.0f, -1), Error);
  CHECK_THROWS_AS(model->generate({1}, 3, 1.0f, 0, 1.5f), Error);
  models::GenerateOptions options;
  options.stop_token = 13;
  CHECK_THROWS_AS(model->generate({1}, options), Error);
}

TEST_CASE("KVCache::layer is a view: appending through it fills the cache's storage") {
  models::KVCache cache(tiny_gpt_config(), 2);  // 2 layers, (2, 2, 9, 6) each
  manual_seed(15);
  const Tensor k = randn({2, 2, 3, 6}), v = randn({2, 2, 3, 6});
  const models::LayerCache first = cache.layer(1);
  CHECK(first.defined());
  CHECK(first.length == 0);
  auto [keys, values] = first.append(k, v);  // positions [0, 3)
  check_close(keys, k, 0.0f, 0.0f, "keys so far");
  check_close(cache.keys(1).narrow(2, 0, 3), k, 0.0f, 0.0f, "written into the cache");
  check_close(cache.values(1).narrow(2, 0, 3), v, 0.0f, 0.0f, "values written");
  cache.advance(3);
  const Tensor k2 = randn({2, 2, 1, 6});
  auto [keys2, values2] = cache.layer(1).append(k2, randn({2, 2, 1, 6}));  // position 3
  CHECK(keys2.shape() == Shape{2, 2, 4, 6});
  check_close(keys2.narrow(2, 0, 3), k, 0.0f, 0.0f, "earlier keys kept");
  check_close(keys2.narrow(2, 3, 1), k2, 0.0f, 0.0f, "new key appended");
  CHECK_FALSE(models::LayerCache{}.defined());
  CHECK_THROWS_AS(cache.layer(2), Error);
}
