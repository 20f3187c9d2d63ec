// How often the host waits for the GPU, counted by the CUDA emulator (tests/cuda/emulator: every
// cudaStreamSynchronize): a wait stalls the host until the GPU is idle, and the GPU then idles
// while the host queues the next kernels, so the loops that matter must not wait per step. The
// emulator also counts the operations queued (emu::stream_work), each a launch on a GPU.
// These cases run only on the emulator (run_emulated.sh), which counts the waits; on a GPU the
// same code waits as often.
#include <cmath>
#include <vector>

#include "models/gpt_fixture.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

#ifdef LOOM_CUDA_EMULATED
#include "emu.h"

namespace {

// The golden tests' tiny GPT with a context long enough that generation never slides.
models::GPTConfig tiny_gpt() {
  models::GPTConfig config = tiny_gpt_config();
  config.context = 128;
  return config;
}

}  // namespace

TEST_CASE("GPT::generate on CUDA waits for the GPU only when it copies tokens back") {
  // Per cached decoding step the device loop queues the model, the sampling and the token's
  // write without a wait: the position embeddings are a view of wpe, the causal mask is made on
  // the device (Backend::arange), and the embedding's index check is read at the next wait. So
  // the prompt costs one wait (its copy to the device), and every 16 tokens one more (their copy
  // back). The context is long enough that the window never slides (a sliding window re-runs
  // the whole window every step, a prefill each time).
  manual_seed(4);
  models::GPT gpu(tiny_gpt());
  gpu.to(Device::CUDA);
  models::GenerateOptions options;
  for (const bool graphs : {true, false}) {
    for (const float temperature : {0.0f, 0.8f}) {
      options.temperature = temperature;
      options.cuda_graphs = graphs;
      CAPTURE(graphs);
      struct Count {
        unsigned long long waits, work;
      };
      auto count = [&](int64_t new_tokens) {
        options.max_new_tokens = new_tokens;
        const Count before{emu::stream_synchronizations(), emu::stream_work()};
        const std::vector<int64_t> tokens = gpu.generate({3, 4, 5, 9, 2}, options);
        REQUIRE(tokens.size() == static_cast<size_t>(5 + new_tokens));
        return Count{emu::stream_synchronizations() - before.waits,
                     emu::stream_work() - before.work};
      };
      const Count short_run = count(48), long_run = count(96);
      CHECK_MESSAGE(long_run.waits - short_run.waits == 3,
                    "48 tokens: " << short_run.waits << " waits, 96 tokens: " << long_run.waits
                                  << " (T " << temperature << ")");
      CHECK_MESSAGE(short_run.waits == 1 + 3, short_run.waits << " waits for 48 tokens");
      // What the GPU is given per token, each a launch on a GPU. Launched one by one: 21.2
      // operations (kernels, GEMMs, copies) a token for these 48 tokens of 2 layers; 25.2 before
      // the decoding kernel read the cache's keys and values in place (a copy of each per
      // layer), 26.2 before the embeddings' sum went into the first ln_1's kernel, 42.2 before
      // each Linear's product added its bias (and c_fc's its GELU) itself, the keys and values
      // went into the cache in one copy, each block's last add into the next LayerNorm's
      // kernel, and the split-key attention took the place of two
      // products, a scale, a mask and a softmax (adding two copies of the cache's keys and
      // values here); 50.2 before q, k and v came from one GEMM. A guard against new per-token
      // work. Recorded as a CUDA graph: one launch a token, plus the copy back (and the graph's
      // flags) every 16.
      const double per_token = static_cast<double>(long_run.work - short_run.work) / 48.0;
      CHECK_MESSAGE(per_token <= (graphs ? 1.25 : 21.5),
                    per_token << " stream operations per token");
    }
  }
}

TEST_CASE("GPT::generate's recorded decoding step: the kernels a token costs on CUDA") {
  // The CUDA graph that GPT::generate replays once per token, counted as it is recorded: every
  // node is a kernel (or a copy) the GPU runs in turn, each costing a few microseconds however
  // little it does, so for a small model their number is the time of a token.
  manual_seed(4);
  models::GPT gpu(tiny_gpt());
  gpu.to(Device::CUDA);
  models::GenerateOptions options;
  options.max_new_tokens = 4;
  const unsigned long long before = emu::recorded_work();
  REQUIRE(gpu.generate({3, 4, 5, 9, 2}, options).size() == 9);
  const unsigned long long nodes = emu::recorded_work() - before;
  MESSAGE("kernels in the recorded decoding step of a 2-layer GPT: " << nodes);
  // Measured 26: per layer 8 (c_attn's product with its bias; the keys and values written
  // into the cache in one copy; attention in one kernel, a context of 128 keys being one chunk;
  // c_proj; the residual add fused with ln_2; c_fc with its bias and GELU; the second product;
  // the residual add fused with the next LayerNorm, ln_1 or ln_f), and 10 around them (the mask
  // row, the token's and position's embeddings, their sum fused with the first ln_1, the LM
  // head, sampling, the next position and token). 27 before that last fusion; 43 before a product
  // took its bias itself (a copy of the bias first) and c_fc's its GELU (a kernel of bias + GELU),
  // the keys and values one copy (two), the mask one row's copy (a fill, a comparison and a
  // masked_fill), a short cache's attention one kernel (two) and the block's last add went
  // into the next LayerNorm (an add).
  CHECK(nodes <= 26);
}

TEST_CASE("GPT::generate on CUDA: once the window slides, a token is one replay too") {
  // A context of 16 and a 15-token prompt: the first token is the prompt's prefill, the second
  // one replay of the decoding step, and from the third on the window slides, so each token
  // runs the model over the whole window (the slide step, recorded once and then replayed).
  manual_seed(4);
  models::GPTConfig config = tiny_gpt_config();
  config.context = 16;
  models::GPT gpu(config);
  gpu.to(Device::CUDA);
  models::GenerateOptions options;
  std::vector<int64_t> prompt(15);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int64_t>(3 * i + 1) % 13;
  auto work = [&](int64_t new_tokens) {
    options.max_new_tokens = new_tokens;
    const unsigned long long before = emu::stream_work(), graphs = emu::graph_launches();
    REQUIRE(gpu.generate(prompt, options).size() == prompt.size() + new_tokens);
    return std::pair{emu::stream_work() - before, emu::graph_launches() - graphs};
  };
  const auto [short_work, short_replays] = work(16);
  const auto [long_work, long_replays] = work(48);
  CHECK(long_replays - short_replays == 32);  // every sliding token a replay
  const double per_token = static_cast<double>(long_work - short_work) / 32.0;
  MESSAGE("stream operations per sliding token: " << per_token);
  // One replay, plus the copy back (and the graph's flags) every 16 tokens.
  CHECK(per_token <= 1.25);
}

TEST_CASE("a GPT training step on CUDA waits for the GPU only where the loss is read") {
  // Forward, cross-entropy (its mean over the non-ignored targets is counted on the device),
  // backward and the AdamW step queue their kernels without a wait: the embedding's and the
  // loss's index checks are read at the next wait, here loss.item().
  manual_seed(5);
  models::GPT model(tiny_gpt());
  model.to(Device::CUDA);
  optim::AdamW opt(model.parameters(), 1e-3f);
  const Tensor ids = randint(0, 13, {2, 12}).to(Device::CUDA);
  Tensor target = randint(0, 13, {2, 12});
  target.data_ptr<int64_t>()[3] = -100;  // an ignored position
  target = target.to(Device::CUDA);
  for (int step = 0; step < 3; ++step) {
    const unsigned long long before = emu::stream_synchronizations();
    opt.zero_grad();
    const Tensor logits = model.forward(ids);  // (2, 12, 13)
    const Tensor loss = cross_entropy(logits.reshape({-1, 13}), target.reshape({-1}));
    loss.backward();
    opt.step();
    const unsigned long long waits = emu::stream_synchronizations() - before;
    CHECK_MESSAGE(waits == 0, waits << " waits in step " << step);
    const float value = loss.item();
    CHECK(std::isfinite(value));
    CHECK(emu::stream_synchronizations() == before + 1);  // the one wait: reading the loss
  }
}

TEST_CASE("an autocast GPT training step keeps its activations bfloat16 between products") {
  // Under autocast a Linear returns bfloat16 (as PyTorch's), so GELU, the next product and
  // attention read it with no cast, and the loss reads the bfloat16 logits. Counted here: the
  // operations a step queues (forward, loss, backward, AdamW); each cast is one of them.
  auto step_work = [](bool amp) {
    manual_seed(5);
    models::GPT model(tiny_gpt());
    model.to(Device::CUDA);
    optim::AdamW opt(model.parameters(), 1e-3f);
    const Tensor ids = randint(0, 13, {2, 12}).to(Device::CUDA);
    const Tensor target = randint(0, 13, {2, 12}).to(Device::CUDA);
    unsigned long long work = 0;
    for (int step = 0; step < 2; ++step) {  // the second step: the optimizer state exists
      const unsigned long long before = emu::stream_work();
      opt.zero_grad();
      Tensor loss;
      {
        AutocastGuard scope(amp);
        const Tensor logits = model.forward(ids);
        if (amp) CHECK(logits.dtype() == DType::BFloat16);
        loss = cross_entropy(logits.reshape({-1, 13}), target.reshape({-1}));
      }
      loss.backward();
      opt.step();
      work = emu::stream_work() - before;
      CHECK(std::isfinite(loss.item()));
    }
    return work;
  };
  const unsigned long long fp32 = step_work(false), amp = step_work(true);
  MESSAGE("stream operations per training step: float32 " << fp32 << ", autocast " << amp);
  // Measured 254 (float32: 222; the rest are the casts PyTorch makes too: each weight, each
  // LayerNorm output before its product, the float32 residual gradient before a backward
  // product). It was 281 when an autocast Linear returned float32 and every product cast its
  // input, and its backward its gradient, to bfloat16, 258 before the MLP's first bias moved
  // into GELU's kernel (bias_gelu_tanh: no bias copy for the GEMM to start from), and 256
  // before each block's last residual add moved into the next LayerNorm's kernel.
  CHECK(amp <= 254);
}
#endif
