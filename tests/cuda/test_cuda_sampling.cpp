// Next-token sampling on CUDA against the CPU: the sample_next kernel on rows with and without
// ties, and GPT::generate's device loop (tokens kept on the GPU, copied back in batches)
// against the CPU loop. Without a GPU the cases return at once (test_cuda.cpp's first case
// reports that once).
#include <cmath>
#include <vector>

#include "generation/sampling_rows.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

models::GPTConfig tiny_gpt() {
  models::GPTConfig c;
  c.vocab_size = 61, c.context = 20, c.n_layer = 2, c.n_head = 2, c.d_model = 16;
  return c;
}

// The same model on the CPU and on CUDA, its weights 6x the init's so that the logits are far
// from uniform (and greedy choices far from ties).
struct ModelPair {
  models::GPT cpu, gpu;
  ModelPair(const models::GPTConfig& config, uint64_t seed)
      : cpu((manual_seed(seed), config)), gpu((manual_seed(seed), config)) {
    NoGradGuard no_grad;
    for (auto& p : cpu.parameters()) p.mul_(6.0f);
    for (auto& p : gpu.parameters()) p.mul_(6.0f);
    gpu.to(Device::CUDA);
  }
};

}  // namespace

TEST_CASE("sample_next on CUDA picks the CPU's tokens: greedy, temperature, top-k, top-p, ties") {
  LOOM_REQUIRE_GPU();
  struct Setting {
    float temperature;
    int64_t top_k;
    float top_p;
  };
  const Setting settings[] = {{0.0f, 0, 1.0f},  {1.0f, 0, 1.0f},  {0.6f, 0, 1.0f},
                              {1.0f, 1, 1.0f},  {1.2f, 9, 1.0f},  {1.0f, 400, 1.0f},
                              {1.0f, 0, 0.85f}, {1.0f, 0, 1e-6f}, {0.9f, 12, 0.7f}};
  manual_seed(8);
  const int64_t rows = 6, vocab = 157;
  for (const bool with_ties : {false, true}) {
    const Tensor logits = sampling_rows(rows, vocab, with_ties);
    const Tensor logits_gpu = logits.to(Device::CUDA);
    for (const Setting& s : settings) {
      for (const uint64_t seed : {3ull, 1234ull}) {
        const Tensor cpu = models::sample_next(logits, s.temperature, s.top_k, s.top_p, seed, 40);
        const Tensor gpu =
            models::sample_next(logits_gpu, s.temperature, s.top_k, s.top_p, seed, 40);
        REQUIRE(gpu.device() == Device::CUDA);
        REQUIRE(gpu.dtype() == DType::Int64);
        CHECK_MESSAGE(gpu.to_vector_i64() == cpu.to_vector_i64(),
                      "T " << s.temperature << " top_k " << s.top_k << " top_p " << s.top_p
                           << " ties " << with_ties << " seed " << seed);
      }
    }
  }
  // Greedy decoding over rows as long as GPT-2's vocabulary (split into slices of 1024 logits
  // on CUDA): the first id of the largest logit, across slices; -0 and +0 compare equal.
  const int64_t long_n = 50257;
  std::vector<float> long_rows = (rand({3, long_n}) * 8.0f - 4.0f).to_vector();  // in [-4, 4)
  long_rows[0 * long_n + 40000] = 9.0f;  // the maximum in a late slice
  long_rows[1 * long_n + 30000] = 9.5f;  // tied: the first id wins, two slices apart
  long_rows[1 * long_n + 32500] = 9.5f;
  for (int64_t i = 0; i < long_n; ++i) long_rows[2 * long_n + i] = i % 2 ? -1.0f : -2.0f;
  long_rows[2 * long_n + 7] = -0.0f, long_rows[2 * long_n + 5000] = 0.0f;  // -0 first
  const Tensor long_logits = tensor(long_rows, {3, long_n});
  const std::vector<int64_t> long_cpu =
      models::sample_next(long_logits, 0.0f, 0, 1.0f, 0, 0).to_vector_i64();
  CHECK(long_cpu == std::vector<int64_t>{40000, 30000, 7});
  CHECK(models::sample_next(long_logits.to(Device::CUDA), 0.0f, 0, 1.0f, 0, 0).to_vector_i64() ==
        long_cpu);
  long_rows[1 * long_n + 45000] = NAN;  // a NaN in a late slice: that row's token is -1
  CHECK(models::sample_next(tensor(long_rows, {3, long_n}).to(Device::CUDA), 0.0f, 0, 1.0f, 0, 0)
            .to_vector_i64() == std::vector<int64_t>{40000, -1, 7});
  // A row with a NaN: token -1 on CUDA (the kernel cannot throw), the other rows unharmed.
  const Tensor nan_rows = tensor({0.0f, NAN, 1.0f, 0.0f, 2.0f, 1.0f}, {2, 3}).to(Device::CUDA);
  CHECK(models::sample_next(nan_rows, 0.0f, 0, 1.0f, 0, 0).to_vector_i64() ==
        std::vector<int64_t>{-1, 1});
  expect_error([&] { models::sample_next(nan_rows, -1.0f, 0, 1.0f, 0, 0); },
               {"sample_next", "temperature"});
}

TEST_CASE("GPT::generate on CUDA returns the CPU's tokens, with and without a stop token") {
  LOOM_REQUIRE_GPU();
  ModelPair pair(tiny_gpt(), 4);
  models::GPT &cpu = pair.cpu, &gpu = pair.gpu;
  const std::vector<int64_t> prompt = {3, 14, 15, 9, 2};
  models::GenerateOptions options;
  options.max_new_tokens = 37;  // past the context of 20 (the window slides), 3 host batches
  const std::vector<int64_t> expected = cpu.generate(prompt, options);
  REQUIRE(expected.size() == prompt.size() + 37);
  std::vector<int64_t> streamed;
  options.on_token = [&](int64_t t) { streamed.push_back(t); };
  CHECK(gpu.generate(prompt, options) == expected);
  CHECK(streamed == std::vector<int64_t>(expected.begin() + 5, expected.end()));
  options.use_cache = false;
  CHECK(gpu.generate(prompt, options) == expected);
  options.use_cache = true;
  options.host_sampling = true;  // the old loop on the GPU model
  CHECK(gpu.generate(prompt, options) == expected);
  options.host_sampling = false;
  options.cuda_graphs = false;  // the device loop launching every kernel (no recorded step)
  CHECK(gpu.generate(prompt, options) == expected);
  options.cuda_graphs = true;

  // A stop token in the middle of the second batch of 16: generation stops right after it.
  options.stop_token = expected[prompt.size() + 20];
  size_t first = prompt.size();
  while (expected[first] != options.stop_token) ++first;
  streamed.clear();
  const std::vector<int64_t> stopped = gpu.generate(prompt, options);
  CHECK(stopped == std::vector<int64_t>(expected.begin(), expected.begin() + first + 1));
  CHECK(streamed == std::vector<int64_t>(stopped.begin() + 5, stopped.end()));
  CHECK(cpu.generate(prompt, options) == stopped);

  // Sampling: the device loop draws the CPU loop's numbers, and leaves the generator where
  // the CPU loop leaves it, also when it computed positions after the stop token.
  options.stop_token = -1;
  options.on_token = nullptr;
  options.temperature = 0.8f;
  options.top_k = 20;
  options.top_p = 0.9f;
  manual_seed(77);
  const std::vector<int64_t> sampled_cpu = cpu.generate(prompt, options);
  manual_seed(77);
  CHECK(gpu.generate(prompt, options) == sampled_cpu);
  options.stop_token = sampled_cpu[prompt.size() + 3];
  manual_seed(77);
  const std::vector<int64_t> stop_cpu = cpu.generate(prompt, options);
  const uint64_t offset_cpu = default_generator().offset();
  manual_seed(77);
  CHECK(gpu.generate(prompt, options) == stop_cpu);
  CHECK(default_generator().offset() == offset_cpu);
  options.cuda_graphs = false;
  manual_seed(77);
  CHECK(gpu.generate(prompt, options) == stop_cpu);
  CHECK(default_generator().offset() == offset_cpu);
}

TEST_CASE("GPT::generate on CUDA: the recorded decoding step gives the CPU's tokens") {
  // A context long enough that the whole run is replays of one recorded step (GPT's graph
  // decoding), greedy and sampled, against the CPU loop; then a prompt that already fills all
  // but one position of the context: one replay, then the window slides (the slide step's replays).
  LOOM_REQUIRE_GPU();
  models::GPTConfig config = tiny_gpt();
  config.context = 64;
  ModelPair pair(config, 6);
  models::GPT &cpu = pair.cpu, &gpu = pair.gpu;
  models::GenerateOptions options;
  options.max_new_tokens = 40;
  for (const float temperature : {0.0f, 1.0f}) {
    options.temperature = temperature;
    CAPTURE(temperature);
    manual_seed(12);
    const std::vector<int64_t> expected = cpu.generate({7, 1, 8}, options);
    const uint64_t offset = default_generator().offset();
    manual_seed(12);
    CHECK(gpu.generate({7, 1, 8}, options) == expected);
    CHECK(default_generator().offset() == offset);
    std::vector<int64_t> long_prompt(63);
    for (size_t i = 0; i < long_prompt.size(); ++i) long_prompt[i] = (7 * i + 3) % 61;
    options.max_new_tokens = 5;
    manual_seed(12);
    const std::vector<int64_t> slid = cpu.generate(long_prompt, options);
    manual_seed(12);
    CHECK(gpu.generate(long_prompt, options) == slid);
    options.max_new_tokens = 40;
  }
}
