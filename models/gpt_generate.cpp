// GPT::generate: autoregressive decoding, GPT's side of generation/sampling.h's loop. On the CPU
// (or with host_sampling) the logits of each step come to the host and are sampled there; on a
// GPU the sequence stays on the device, and with a KV cache each token is one replay of a
// recorded step (backends/graph.h). The model itself is in models/gpt.cpp.
#include <algorithm>
#include <optional>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "backends/graph.h"
#include "core/rng.h"
#include "models/gpt.h"
#include "nn/eval_guard.h"
#include "nn/functional.h"

namespace loom::models {

std::vector<float> GPT::next_token_logits(const std::vector<int64_t>& window,
                                       nn::KVCache* cache) {
  // The positions the cache does not hold yet: all of them on the first step (the "prefill"),
  // then only the newest token.
  const int64_t done = cache != nullptr ? cache->length() : 0;
  const int64_t n = static_cast<int64_t>(window.size()) - done;
  std::vector<int64_t> fresh(window.begin() + done, window.end());
  Tensor ids = tensor_i64(fresh, {1, n}).to(wte->weight.device());  // (1, n)
  // Only the last position's logits are needed: the last block and the LM head run on one row.
  Tensor hidden = forward_hidden(ids, cache, /*last_only=*/true);  // (1, 1, C)
  return lm_head(hidden.reshape({1, -1})).to_vector();             // (1, vocab)
}

std::vector<int64_t> GPT::generate(std::vector<int64_t> prompt, int64_t max_new_tokens,
                                   float temperature, int64_t top_k, float top_p) {
  GenerateOptions options;
  options.max_new_tokens = max_new_tokens;
  options.temperature = temperature;
  options.top_k = top_k;
  options.top_p = top_p;
  return generate(std::move(prompt), options);
}

std::vector<int64_t> GPT::generate(std::vector<int64_t> prompt, const GenerateOptions& options) {
  LOOM_CHECK(!prompt.empty(), "GPT::generate: the prompt is empty (give at least one token)");
  for (size_t i = 0; i < prompt.size(); ++i)
    LOOM_CHECK(prompt[i] >= 0 && prompt[i] < config_.vocab_size,
               "GPT::generate: prompt token {} at position {} is outside the vocabulary [0, {})",
               prompt[i], i, config_.vocab_size);
  LOOM_CHECK(options.stop_token < config_.vocab_size,
             "GPT::generate: stop_token {} is outside the vocabulary [0, {})", options.stop_token,
             config_.vocab_size);

  check_generate_options(options, "GPT::generate");

  // Evaluation mode (no dropout) and no gradients for the call, then the caller's mode again.
  nn::EvalGuard eval_mode(*this);
  if (wte->weight.device() != Device::CPU && !options.host_sampling)
    return generate_on_device(std::move(prompt), options);

  std::optional<KVCache> cache;
  if (options.use_cache) cache.emplace(config_, 1, wte->weight.device());
  int64_t cached_from = 0;  // the cache holds tokens[cached_from, cached_from + length)
  auto logits_after = [&](const std::vector<int64_t>& tokens) {
    // The model sees at most `context` tokens: the newest ones. Once the window slides, all
    // positions change, so the cache starts over from the new window (exactly what a run
    // without the cache computes, so both give the same tokens).
    const int64_t start =
        std::max<int64_t>(0, static_cast<int64_t>(tokens.size()) - config_.context);
    if (cache && start != cached_from) {
      cache->clear();
      cached_from = start;
    }
    const std::vector<int64_t> window(tokens.begin() + start, tokens.end());
    return next_token_logits(window, cache ? &*cache : nullptr);
  };
  return generate_tokens(std::move(prompt), options, logits_after);
}

std::vector<int64_t> GPT::generate_on_device(std::vector<int64_t> prompt,
                                             const GenerateOptions& options) {
  // The sequence lives in a device buffer seq (1, prompt + max_new_tokens); each step runs the
  // model on the positions the cache lacks (a view of seq), samples the next token where the
  // logits are and writes it into seq, so nothing waits for the host. Every kHostBatch steps
  // (and at the end) the new tokens are copied back in one transfer; only then are the stop
  // token and on_token handled, so up to kHostBatch - 1 positions after a stop token may have
  // been computed, and are dropped. The window, the cache restarts and the draws (one
  // counter of the global generator per token when sampling) are those of the CPU loop.
  constexpr int64_t kHostBatch = 16;
  const Device device = wte->weight.device();
  const int64_t prompt_len = static_cast<int64_t>(prompt.size());
  const int64_t context = config_.context;
  Tensor seq = Tensor::empty({1, prompt_len + options.max_new_tokens}, DType::Int64, device);
  seq.narrow(1, 0, prompt_len).copy_(tensor_i64(prompt, {1, prompt_len}));
  std::optional<KVCache> cache;
  if (options.use_cache) cache.emplace(config_, 1, device);
  int64_t cached_from = 0;  // the cache holds seq[cached_from, cached_from + length)
  Generator& gen = default_generator();
  const uint64_t first_draw = gen.offset();
  const bool sampling = options.temperature > 0.0f;

  // With the cache, and while the whole sequence fits the context, a step takes the newest
  // token and appends one: the same kernels every time, only the position differs. So the
  // position lives in device memory (`position`, which the step advances itself through the
  // table successor[p] = p + 1), the step is recorded once as a CUDA graph, and each token
  // costs one replay. Once the window slides, a step runs the model over the whole window
  // (the cache starts over every time, so it is not needed): again the same kernels, over
  // the positions `window` of seq, which the slide step advances by one itself. The draws stay
  // those of the loop below: token t (0-based) uses counter first_draw + t, which is
  // first_draw + 1 - prompt_len + the position of the newest input (unsigned arithmetic wraps,
  // so the sum is exact).
  const bool graphs = options.cuda_graphs && cache.has_value();
  const uint64_t draw_base = first_draw + 1 - static_cast<uint64_t>(prompt_len);
  // (seq's length) int64: successor[p] = p + 1, the positions' next ones
  const Tensor successor =
      graphs ? arange(seq.size(1) + 1, device).narrow(0, 1, seq.size(1)).contiguous() : Tensor();
  // Samples the next token from the hidden state (1, 1, C) of the token at position `newest`
  // (1) and writes it after that one; returns the position written.
  auto sample_into_seq = [&](const Tensor& hidden, const Tensor& newest) {
    const Tensor logits = lm_head(hidden.reshape({1, -1}));  // (1, vocab)
    const Tensor next = sample_next(logits, options.temperature, options.top_k, options.top_p,
                                    gen.seed(), draw_base, newest);
    const Tensor after = index_select(successor, 0, newest);  // (1): newest + 1
    seq.index_copy_(1, after, next.view({1, 1}));
    return after;
  };
  Tensor position, causal;  // (1) int64; (context, context)
  CudaGraph step_graph;
  auto record_step = [&] {
    position = zeros({1}, DType::Int64, device);
    causal = nn::functional::causal_mask(context, device);  // row p: -inf after key p
    step_graph.capture([&] {
      // (context): 0 for the keys up to the position, -inf after it (one row's copy)
      const Tensor mask = index_select(causal, 0, position).view({context});
      position.copy_(sample_into_seq(decode_step_hidden(seq, position, mask, *cache), position));
    });
  };
  Tensor window;  // (context) int64: the positions of seq the model sees once it slides
  CudaGraph slide_graph;
  auto record_slide = [&] {
    slide_graph.capture([&] {
      const Tensor ids = index_select(seq, 1, window);                         // (1, context)
      const Tensor hidden = forward_hidden(ids, nullptr, /*last_only=*/true);  // (1, 1, C)
      sample_into_seq(hidden, window.narrow(0, context - 1, 1));
      window.copy_(index_select(successor, 0, window));
    });
  };

  std::vector<int64_t> tokens = std::move(prompt);
  int64_t length = prompt_len;  // tokens in seq; those before tokens.size() are on the host
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    const int64_t start = std::max<int64_t>(0, length - context);  // the window
    if (cache && start != cached_from) {
      cache->clear();
      cached_from = start;
    }
    const int64_t done = cache ? cache->length() : 0;
    if (graphs && start == 0 && done == length - 1) {  // one token to take: replay the step
      if (!step_graph.captured()) {
        record_step();
        position.fill_(static_cast<float>(length - 1));  // the graph advances it from here
      }
      if (sampling) gen.reserve(1);  // the counter the replay draws (see above)
      step_graph.replay();
      cache->advance(1);
      ++length;
    } else if (graphs && start > 0) {  // the window slides: replay the slide step
      if (!slide_graph.captured()) {
        // [start, start + context): the graph advances it from here
        window = arange(start + context, device).narrow(0, start, context);
        record_slide();
      }
      if (sampling) gen.reserve(1);
      slide_graph.replay();
      ++length;
    } else {
      const Tensor ids = seq.narrow(1, start + done, length - start - done);       // (1, n)
      const Tensor hidden = forward_hidden(ids, cache ? &*cache : nullptr, true);  // (1, 1, C)
      const Tensor logits = lm_head(hidden.reshape({1, -1}));                      // (1, vocab)
      const Tensor next = sample_next(logits, options.temperature, options.top_k, options.top_p);
      seq.narrow(1, length, 1).copy_(next.view({1, 1}));
      ++length;
    }
    if (length - static_cast<int64_t>(tokens.size()) < kHostBatch &&
        step + 1 < options.max_new_tokens)
      continue;
    const int64_t fresh_from = static_cast<int64_t>(tokens.size());
    for (const int64_t token : seq.narrow(1, fresh_from, length - fresh_from).to_vector_i64()) {
      LOOM_CHECK(token >= 0, "GPT::generate: the logits of new token {} hold a NaN",
                 static_cast<int64_t>(tokens.size()) - prompt_len);
      tokens.push_back(token);
      if (options.on_token) options.on_token(token);
      if (token == options.stop_token) {
        // Give back the draws of the dropped positions, as the CPU loop never made them.
        if (sampling)
          gen.set_state(
              gen.seed(),
              first_draw + static_cast<uint64_t>(static_cast<int64_t>(tokens.size()) - prompt_len));
        return tokens;
      }
    }
  }
  return tokens;
}

}  // namespace loom::models
