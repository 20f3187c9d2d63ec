// Sampling rules and the autoregressive decoding loop shared by the models that generate text.
#include "models/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/rng.h"

namespace loom::models {

int64_t sample_token(const std::vector<float>& logits, float temperature, int64_t top_k,
                     float top_p, float uniform) {
  LOOM_CHECK(!logits.empty(), "sample_token: empty logits");
  LOOM_CHECK(temperature >= 0.0f, "sample_token: temperature {} is negative", temperature);
  LOOM_CHECK(top_k >= 0, "sample_token: top_k {} is negative", top_k);
  LOOM_CHECK(top_p > 0.0f && top_p <= 1.0f, "sample_token: top_p {} outside (0, 1]", top_p);
  LOOM_CHECK(uniform >= 0.0f && uniform < 1.0f, "sample_token: uniform {} outside [0, 1)", uniform);
  for (size_t i = 0; i < logits.size(); ++i)
    LOOM_CHECK(!std::isnan(logits[i]), "sample_token: logit {} of {} is NaN", i, logits.size());
  if (temperature == 0.0f)
    return std::max_element(logits.begin(), logits.end()) - logits.begin();  // first maximum
  // Token ids from most to least likely (ties: smaller id first).
  std::vector<int64_t> order(logits.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
  });
  auto logit = [&](size_t rank) {
    return static_cast<double>(logits[static_cast<size_t>(order[rank])]);
  };
  size_t keep = order.size();
  if (top_k > 0 && static_cast<size_t>(top_k) < keep) {  // the k largest, with ties at the k-th
    keep = static_cast<size_t>(top_k);
    while (keep < order.size() && logit(keep) == logit(keep - 1)) ++keep;
  }
  // softmax(logits / T) over the kept tokens, in double.
  std::vector<double> probs(keep);
  double total = 0.0;
  for (size_t r = 0; r < keep; ++r)
    total += probs[r] = std::exp((logit(r) - logit(0)) / temperature);
  if (top_p < 1.0f) {  // Holtzman et al. 2020: the smallest prefix whose mass reaches top_p
    double mass = 0.0;
    size_t r = 0;
    while (r < keep && mass < top_p * total) mass += probs[r++];
    keep = std::max<size_t>(r, 1);
    total = mass;
  }
  // Inverse CDF at `uniform`.
  const double target = static_cast<double>(uniform) * total;
  double cumulative = 0.0;
  for (size_t r = 0; r < keep; ++r) {
    cumulative += probs[r];
    if (target < cumulative) return order[r];
  }
  return order[keep - 1];  // rounding at the very top of the range
}

std::vector<int64_t> generate_tokens(std::vector<int64_t> prompt, const GenerateOptions& options,
                                     const NextTokenLogits& next_token_logits) {
  LOOM_CHECK(options.max_new_tokens >= 0, "generate: max_new_tokens {} is negative",
             options.max_new_tokens);
  LOOM_CHECK(options.temperature >= 0.0f, "generate: temperature {} is negative",
             options.temperature);
  LOOM_CHECK(options.top_k >= 0, "generate: top_k {} is negative", options.top_k);
  LOOM_CHECK(options.top_p > 0.0f && options.top_p <= 1.0f, "generate: top_p {} outside (0, 1]",
             options.top_p);
  std::vector<int64_t> tokens = std::move(prompt);
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    const std::vector<float> logits = next_token_logits(tokens);
    float uniform = 0.0f;
    if (options.temperature > 0.0f) {
      Generator& gen = default_generator();
      uniform = philox_uniform(gen.reserve(1), gen.seed());
    }
    const int64_t next =
        sample_token(logits, options.temperature, options.top_k, options.top_p, uniform);
    tokens.push_back(next);
    if (options.on_token) options.on_token(next);
    if (next == options.stop_token) break;
  }
  return tokens;
}

}  // namespace loom::models
