// Autoregressive generation for any model that predicts the next token: the sampling rules
// (greedy, temperature, top-k, top-p) and the decoding loop, kept below the models rather than
// inside one (as Hugging Face keeps generation apart from modeling), so every model that
// generates shares them. A model supplies one function, "the logits of the token after these
// tokens"; the loop does the rest. models/gpt.h brings these names into loom::models.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace loom::generation {

struct GenerateOptions {
  int64_t max_new_tokens = 64;
  float temperature = 0.0f;  // 0 = greedy (argmax); else sample from softmax(logits / T)
  int64_t top_k = 0;         // > 0: sample only among the k most likely tokens
  float top_p = 1.0f;        // < 1: nucleus sampling (Holtzman et al. 2020)
  int64_t stop_token = -1;   // >= 0: stop right after generating this token (it is kept)
  bool use_cache = true;     // false re-runs the whole (cropped) context for every token
  // Called with each new token as soon as it is chosen (e.g. to print text as it appears).
  // A model that decodes on a GPU (GPT::generate) calls it as each batch of tokens reaches
  // the host, so there it is called in bursts (GPT: every 16 tokens).
  std::function<void(int64_t)> on_token;
  // A GPU model samples on the device (sample_next) and copies tokens back in batches; true
  // forces the host-synchronised loop instead (the logits of every token copied to the host
  // and sampled there by sample_token), e.g. to compare the two. No effect on the CPU.
  bool host_sampling = false;
  // A GPU model with a KV cache records one decoding step as a CUDA graph (backends/graph.h) and
  // replays it for every token: one launch per token instead of one per kernel (GPT records a
  // second step for the tokens after the window slides past its context). The tokens are the
  // same either way; false launches every kernel from the host (e.g. to compare).
  bool cuda_graphs = true;
};

// Throws loom::Error (naming `op`) unless max_new_tokens >= 0, temperature >= 0, top_k >= 0
// and top_p in (0, 1]: the checks generate_tokens makes, for loops of a model's own.
void check_generate_options(const GenerateOptions& options, const char* op = "generate");

// Picks the next token from one row of logits [vocab]. temperature 0 takes the argmax (the
// first one on ties, as torch.argmax). Otherwise the logits are divided by the temperature,
// cut to the top_k largest (ties at the k-th value are kept) and to the smallest set of most
// likely tokens whose probability reaches top_p (the most likely token is always kept), and
// the token is drawn by inverting the cumulative distribution at `uniform` in [0, 1).
int64_t sample_token(const std::vector<float>& logits, float temperature, int64_t top_k,
                     float top_p, float uniform);

// sample_token for a batch of rows, computed where the logits are (a CUDA kernel for CUDA
// logits: no copy to the host): logits float32 [B, vocab] -> int64 [B] on the same device.
// Row b draws its uniform as philox_uniform(offset + b, seed) (core/rng.h), so for the same
// logits and seed both devices pick the same tokens (barring logits within rounding of a tie
// or of a top-p/inverse-CDF boundary: the CUDA kernel sums the probabilities in another order).
// Throws loom::Error naming sample_next for a temperature < 0, top_k < 0, top_p outside
// (0, 1], or logits that are not 2-D float32. A NaN logit: an error on the CPU, token -1 on
// CUDA (see Backend::sample).
Tensor sample_next(const Tensor& logits, float temperature, int64_t top_k, float top_p,
                   uint64_t seed, uint64_t offset);
// The same with offset + offset_by[0] as the first counter, offset_by an int64 tensor of one
// element on the logits' device, read where the kernel runs: a recorded graph (backends/graph.h)
// advances the draws by advancing offset_by.
Tensor sample_next(const Tensor& logits, float temperature, int64_t top_k, float top_p,
                   uint64_t seed, uint64_t offset, const Tensor& offset_by);
// The same with the draws taken from loom's global generator as generate_tokens takes them
// (B counters when temperature > 0, none for greedy decoding).
Tensor sample_next(const Tensor& logits, float temperature, int64_t top_k = 0, float top_p = 1.0f);

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

}  // namespace loom::generation
