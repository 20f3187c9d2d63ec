// Sampling rules and the autoregressive decoding loop shared by the models that generate text.
#include "generation/sampling.h"

#include <cmath>

#include "autograd/packed_weights.h"
#include "backends/backend.h"
#include "backends/sample/sample.h"
#include "core/error.h"
#include "core/rng.h"

namespace loom::generation {

int64_t sample_token(const std::vector<float>& logits, float temperature, int64_t top_k,
                     float top_p, float uniform) {
  LOOM_CHECK(!logits.empty(), "sample_token: empty logits");
  LOOM_CHECK(temperature >= 0.0f, "sample_token: temperature {} is negative", temperature);
  LOOM_CHECK(top_k >= 0, "sample_token: top_k {} is negative", top_k);
  LOOM_CHECK(top_p > 0.0f && top_p <= 1.0f, "sample_token: top_p {} outside (0, 1]", top_p);
  LOOM_CHECK(uniform >= 0.0f && uniform < 1.0f, "sample_token: uniform {} outside [0, 1)", uniform);
  for (size_t i = 0; i < logits.size(); ++i)
    LOOM_CHECK(!std::isnan(logits[i]), "sample_token: logit {} of {} is NaN", i, logits.size());
  return cpu::sample_row(logits.data(), static_cast<int64_t>(logits.size()), temperature, top_k,
                         top_p, uniform);
}

Tensor sample_next(const Tensor& logits, float temperature, int64_t top_k, float top_p,
                   uint64_t seed, uint64_t offset) {
  return sample_next(logits, temperature, top_k, top_p, seed, offset, Tensor{});
}

Tensor sample_next(const Tensor& logits, float temperature, int64_t top_k, float top_p,
                   uint64_t seed, uint64_t offset, const Tensor& offset_by) {
  LOOM_CHECK(logits.defined() && logits.dtype() == DType::Float32 && logits.dim() == 2,
             "sample_next: expected float32 logits of shape [B, vocab], got {} of shape {}",
             logits.defined() ? dtype_name(logits.dtype()) : "undefined",
             logits.defined() ? shape_str(logits.shape()) : "[]");
  LOOM_CHECK(logits.size(1) > 0, "sample_next: logits of shape {} have an empty vocabulary",
             shape_str(logits.shape()));
  LOOM_CHECK(temperature >= 0.0f, "sample_next: temperature {} is negative", temperature);
  LOOM_CHECK(top_k >= 0, "sample_next: top_k {} is negative", top_k);
  LOOM_CHECK(top_p > 0.0f && top_p <= 1.0f, "sample_next: top_p {} outside (0, 1]", top_p);
  Tensor tokens = Tensor::empty({logits.size(0)}, DType::Int64, logits.device());
  LOOM_CHECK(!offset_by.defined() || (offset_by.dtype() == DType::Int64 && offset_by.numel() == 1 &&
                                      offset_by.device() == logits.device()),
             "sample_next: offset_by must be one int64 on the logits' device ({}), got {} of "
             "shape {} on {}",
             device_name(logits.device()), dtype_name(offset_by.dtype()),
             shape_str(offset_by.shape()), device_name(offset_by.device()));
  backend(logits.device())
      .sample(logits.detach(), temperature, top_k, top_p, seed, offset, tokens, offset_by);
  return tokens;
}

Tensor sample_next(const Tensor& logits, float temperature, int64_t top_k, float top_p) {
  Generator& gen = default_generator();
  uint64_t offset = 0;
  // Greedy decoding draws nothing; sampling one counter per row, as generate_tokens.
  if (temperature > 0.0f && logits.defined() && logits.dim() == 2)
    offset = gen.reserve(static_cast<uint64_t>(logits.size(0)));
  return sample_next(logits, temperature, top_k, top_p, gen.seed(), offset);
}

void check_generate_options(const GenerateOptions& options, const char* op) {
  LOOM_CHECK(options.max_new_tokens >= 0, "{}: max_new_tokens {} is negative", op,
             options.max_new_tokens);
  LOOM_CHECK(options.temperature >= 0.0f, "{}: temperature {} is negative", op,
             options.temperature);
  LOOM_CHECK(options.top_k >= 0, "{}: top_k {} is negative", op, options.top_k);
  LOOM_CHECK(options.top_p > 0.0f && options.top_p <= 1.0f, "{}: top_p {} outside (0, 1]", op,
             options.top_p);
}

std::vector<int64_t> generate_tokens(std::vector<int64_t> prompt, const GenerateOptions& options,
                                     const NextTokenLogits& next_token_logits) {
  check_generate_options(options);
  PackedWeightsGuard packed;  // the same weights every token: each packed once
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

}  // namespace loom::generation
