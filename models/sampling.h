// Autoregressive generation for any model that predicts the next token: the sampling rules
// (greedy, temperature, top-k, top-p) and the decoding loop, kept beside the models rather than
// inside one, so GPT and the encoder-decoder Transformer share them. A model supplies one
// function, "the logits of the token after these tokens"; the loop does the rest.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace loom::models {

struct GenerateOptions {
  int64_t max_new_tokens = 64;
  float temperature = 0.0f;  // 0 = greedy (argmax); else sample from softmax(logits / T)
  int64_t top_k = 0;         // > 0: sample only among the k most likely tokens
  float top_p = 1.0f;        // < 1: nucleus sampling (Holtzman et al. 2020)
  int64_t stop_token = -1;   // >= 0: stop right after generating this token (it is kept)
  bool use_cache = true;     // false re-runs the whole (cropped) context for every token
  // Called with each new token as soon as it is chosen (e.g. to print text as it appears).
  std::function<void(int64_t)> on_token;
};

// Picks the next token from one row of logits [vocab]. temperature 0 takes the argmax (the
// first one on ties, as torch.argmax). Otherwise the logits are divided by the temperature,
// cut to the top_k largest (ties at the k-th value are kept) and to the smallest set of most
// likely tokens whose probability reaches top_p (the most likely token is always kept), and
// the token is drawn by inverting the cumulative distribution at `uniform` in [0, 1).
int64_t sample_token(const std::vector<float>& logits, float temperature, int64_t top_k,
                     float top_p, float uniform);

// The model's side of the loop: the logits [vocab] of the token that follows `tokens` (the
// whole sequence so far, prompt included). A model with a KV cache keeps it between calls.
using NextTokenLogits = std::function<std::vector<float>(const std::vector<int64_t>& tokens)>;

// Autoregressive decoding: appends up to options.max_new_tokens tokens to `prompt`, each drawn
// by sample_token from next_token_logits(tokens so far), and returns prompt + new tokens.
// Sampling (temperature > 0) takes one uniform per token from loom's global generator, so
// manual_seed makes it repeatable; greedy decoding draws nothing. Stops early right after
// options.stop_token. options.use_cache is the model's business (read by its callback).
std::vector<int64_t> generate_tokens(std::vector<int64_t> prompt, const GenerateOptions& options,
                                     const NextTokenLogits& next_token_logits);

}  // namespace loom::models
