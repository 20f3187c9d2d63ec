// Every nn layer, loss and model on CUDA against the same module on the CPU (the reference).
// Each case builds the module twice from one seed, moves one copy to the GPU with
// Module::to(Device::CUDA), runs both on the same inputs, backpropagates the same random
// projection of the output, and compares the outputs, the input gradients and every named
// parameter's gradient. Without a GPU every case returns at once (test_cuda.cpp's first case
// reports that once).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda_parity.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

// Values uniform in [lo, hi) from the global generator, seeded so both devices see them.
Tensor uniform_input(const Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  manual_seed(seed);
  return rand(shape) * (hi - lo) + lo;
}

struct Tolerance {
  float rtol = 1e-4f, atol = 1e-5f;
};

// Builds two copies of a module from the same seed (make) and compares them with
// compare_modules: the output, the inputs' gradients and every parameter's gradient.
template <typename M>
void compare_module(const std::string& what, const std::function<std::shared_ptr<M>()>& make,
                    const std::vector<Tensor>& inputs,
                    const std::function<Tensor(M&, const std::vector<Tensor>&)>& forward,
                    Tolerance tol = {}) {
  manual_seed(7);
  std::shared_ptr<M> cpu = make();
  manual_seed(7);
  std::shared_ptr<M> gpu = make();
  compare_modules(what, *cpu, *gpu, inputs, forward, tol.rtol, tol.atol);
}

// The functional forms (attention, the losses): compare_op, the inputs named first.
void compare_function(const std::string& what, const std::vector<Tensor>& inputs,
                      const ParityFn& f, Tolerance tol = {}) {
  compare_op(what, f, inputs, tol.rtol, tol.atol);
}

}  // namespace

TEST_CASE("Linear, Embedding, LayerNorm, FeedForward and Dropout match the CPU on CUDA") {
  LOOM_REQUIRE_GPU();
  compare_module<nn::Linear>(
      "Linear", [] { return std::make_shared<nn::Linear>(5, 7); }, {uniform_input({3, 4, 5}, 1)},
      [](nn::Linear& m, const auto& x) { return m.forward(x[0]); });
  compare_module<nn::Linear>(
      "Linear without bias", [] { return std::make_shared<nn::Linear>(5, 3, false); },
      {uniform_input({4, 5}, 2)}, [](nn::Linear& m, const auto& x) { return m.forward(x[0]); });
  compare_module<nn::Embedding>(
      "Embedding (repeated ids accumulate)", [] { return std::make_shared<nn::Embedding>(10, 6); },
      {tensor_i64({1, 3, 3, 9, 0, 1, 1, 7}, {2, 4})},
      [](nn::Embedding& m, const auto& x) { return m.forward(x[0]); });
  compare_module<nn::LayerNorm>(
      "LayerNorm", [] { return std::make_shared<nn::LayerNorm>(8); },
      {uniform_input({3, 5, 8}, 3, -3, 3)},
      [](nn::LayerNorm& m, const auto& x) { return m.forward(x[0]); });
  for (auto act : {nn::Activation::ReLU, nn::Activation::GELU}) {
    compare_module<nn::FeedForward>(
        act == nn::Activation::ReLU ? "FeedForward ReLU" : "FeedForward GELU",
        [act] { return std::make_shared<nn::FeedForward>(8, 16, 0.0f, act); },
        {uniform_input({2, 3, 8}, 4)},
        [](nn::FeedForward& m, const auto& x) { return m.forward(x[0]); });
  }
  // The dropout mask comes from the Philox generator, the same numbers on both devices.
  compare_module<nn::Dropout>(
      "Dropout (training)", [] { return std::make_shared<nn::Dropout>(0.3f); },
      {uniform_input({4, 50}, 5)}, [](nn::Dropout& m, const auto& x) {
        manual_seed(99);
        return m.forward(x[0]);
      });
}

TEST_CASE("MultiheadAttention matches the CPU on CUDA with causal and padding masks") {
  LOOM_REQUIRE_GPU();
  auto make = [] { return std::make_shared<nn::MultiheadAttention>(8, 2); };
  compare_module<nn::MultiheadAttention>(
      "self-attention, causal mask", make, {uniform_input({2, 5, 8}, 10)},
      [](nn::MultiheadAttention& m, const auto& x) {
        return m.forward(x[0], x[0], x[0], nn::functional::causal_mask(5, x[0].device()));
      });
  compare_module<nn::MultiheadAttention>(
      "cross-attention, key padding mask", make,
      {uniform_input({2, 3, 8}, 11), uniform_input({2, 6, 8}, 12),
       tensor_i64({0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1}, {2, 6})},
      [](nn::MultiheadAttention& m, const auto& x) {
        return m.forward(x[0], x[1], x[1], Tensor(), x[2]);
      });
  compare_module<nn::MultiheadAttention>(
      "attention weights", make, {uniform_input({2, 4, 8}, 13)},
      [](nn::MultiheadAttention& m, const auto& x) {
        auto [out, weights] = m.forward_with_weights(x[0], x[0], x[0]);
        return cat({out.reshape({2, -1}), weights.reshape({2, -1})}, 1);
      });
}

TEST_CASE("scaled_dot_product_attention's causal flag and query offset match the CPU on CUDA") {
  LOOM_REQUIRE_GPU();
  namespace F = nn::functional;
  // Heads split out of a [B, T, heads, d] view (copied inside) and a causal flag.
  compare_function("causal, strided heads",
                   {uniform_input({2, 5, 2, 4}, 14), uniform_input({2, 5, 2, 4}, 15),
                    uniform_input({2, 5, 2, 4}, 16)},
                   [](const std::vector<Tensor>& x) {
                     return F::scaled_dot_product_attention(x[0].transpose(1, 2),
                                                            x[1].transpose(1, 2),
                                                            x[2].transpose(1, 2), {.causal = true});
                   });
  // Two new queries after three cached keys, with key padding on top (a KV-cache step).
  compare_function(
      "causal with query offset and padding",
      {uniform_input({2, 2, 2, 4}, 17), uniform_input({2, 2, 5, 4}, 18),
       uniform_input({2, 2, 5, 4}, 19), tensor_i64({0, 0, 0, 0, 0, 0, 1, 0, 0, 0}, {2, 5})},
      [](const std::vector<Tensor>& x) {
        return F::scaled_dot_product_attention(
            x[0], x[1], x[2], {.mask = F::padding_mask(x[3]), .causal = true, .query_offset = 3});
      });
}

TEST_CASE("Transformer encoder and decoder layers match the CPU on CUDA, pre- and post-norm") {
  LOOM_REQUIRE_GPU();
  for (bool norm_first : {false, true}) {
    const std::string tag = norm_first ? " (norm_first)" : " (post-norm)";
    compare_module<nn::TransformerEncoderLayer>(
        "TransformerEncoderLayer" + tag,
        [norm_first] {
          return std::make_shared<nn::TransformerEncoderLayer>(8, 2, 16, 0.0f,
                                                               nn::Activation::ReLU, norm_first);
        },
        {uniform_input({2, 5, 8}, 20), tensor_i64({0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 5})},
        [](nn::TransformerEncoderLayer& m, const auto& x) {
          return m.forward(x[0], nn::functional::causal_mask(5, x[0].device()), x[1]);
        });
    compare_module<nn::TransformerDecoderLayer>(
        "TransformerDecoderLayer" + tag,
        [norm_first] {
          return std::make_shared<nn::TransformerDecoderLayer>(8, 2, 16, 0.0f,
                                                               nn::Activation::GELU, norm_first);
        },
        {uniform_input({2, 4, 8}, 21), uniform_input({2, 6, 8}, 22)},
        [](nn::TransformerDecoderLayer& m, const auto& x) {
          return m.forward(x[0], x[1], nn::functional::causal_mask(4, x[0].device()));
        });
  }
  compare_module<nn::SinusoidalPositionalEncoding>(
      "SinusoidalPositionalEncoding",
      [] { return std::make_shared<nn::SinusoidalPositionalEncoding>(8, 64); },
      {uniform_input({2, 5, 8}, 23)},
      [](nn::SinusoidalPositionalEncoding& m, const auto& x) { return m.forward(x[0], 3); });
  compare_module<nn::LearnedPositionalEmbedding>(
      "LearnedPositionalEmbedding",
      [] { return std::make_shared<nn::LearnedPositionalEmbedding>(16, 8); },
      {uniform_input({2, 5, 8}, 24)},
      [](nn::LearnedPositionalEmbedding& m, const auto& x) { return m.forward(x[0], 2); });
}

TEST_CASE("Conv2d, BatchNorm2d and MaxPool2d match the CPU on CUDA") {
  LOOM_REQUIRE_GPU();
  compare_module<nn::Conv2d>(
      "Conv2d stride 2 padding 1", [] { return std::make_shared<nn::Conv2d>(3, 4, 3, 2, 1); },
      {uniform_input({2, 3, 7, 7}, 30)},
      [](nn::Conv2d& m, const auto& x) { return m.forward(x[0]); });
  compare_module<nn::Conv2d>(
      "Conv2d 1x1 without bias", [] { return std::make_shared<nn::Conv2d>(3, 5, 1, 1, 0, false); },
      {uniform_input({1, 3, 4, 6}, 31)},
      [](nn::Conv2d& m, const auto& x) { return m.forward(x[0]); });
  compare_module<nn::MaxPool2d>(
      "MaxPool2d 3/2 padding 1", [] { return std::make_shared<nn::MaxPool2d>(3, 2, 1); },
      {uniform_input({2, 3, 7, 7}, 32)},
      [](nn::MaxPool2d& m, const auto& x) { return m.forward(x[0]); });

  // BatchNorm2d in training mode uses the batch statistics and updates the running ones; in
  // eval mode it uses the running ones. Both devices must agree on all of it.
  manual_seed(7);
  auto cpu = std::make_shared<nn::BatchNorm2d>(3);
  manual_seed(7);
  auto gpu = std::make_shared<nn::BatchNorm2d>(3);
  gpu->to(Device::CUDA);
  compare_module<nn::BatchNorm2d>(
      "BatchNorm2d (training)", [] { return std::make_shared<nn::BatchNorm2d>(3); },
      {uniform_input({4, 3, 5, 5}, 33, -2, 3)},
      [](nn::BatchNorm2d& m, const auto& x) { return m.forward(x[0]); });
  const Tensor x = uniform_input({4, 3, 5, 5}, 34, -2, 3);
  {
    NoGradGuard no_grad;
    for (int i = 0; i < 3; ++i) cpu->forward(x), gpu->forward(x.to(Device::CUDA));
  }
  check_close(gpu->running_mean, cpu->running_mean, 1e-5f, 1e-6f, "BatchNorm2d running_mean");
  check_close(gpu->running_var, cpu->running_var, 1e-5f, 1e-6f, "BatchNorm2d running_var");
  cpu->eval(), gpu->eval();
  NoGradGuard no_grad;
  check_close(gpu->forward(x.to(Device::CUDA)), cpu->forward(x), 1e-5f, 1e-5f,
              "BatchNorm2d (eval)");
}

TEST_CASE("every loss matches the CPU on CUDA, values and gradients") {
  LOOM_REQUIRE_GPU();
  namespace F = nn::functional;
  const Tensor a = uniform_input({6, 5}, 40, -2, 2), b = uniform_input({6, 5}, 41, -2, 2);
  compare_function("mse_loss", {a, b}, [](const auto& x) { return F::mse_loss(x[0], x[1]); });
  compare_function("l1_loss", {a, b}, [](const auto& x) { return F::l1_loss(x[0], x[1]); });
  compare_function("smooth_l1_loss", {a, b},
                   [](const auto& x) { return F::smooth_l1_loss(x[0], x[1]); });
  compare_function("binary_cross_entropy_with_logits", {a * 3.0f, uniform_input({6, 5}, 42, 0, 1)},
                   [](const auto& x) { return F::binary_cross_entropy_with_logits(x[0], x[1]); });
  compare_function("cross_entropy with ignore_index and label smoothing",
                   {a, tensor_i64({0, 4, -100, 2, 2, 1}, {6})},
                   [](const auto& x) { return F::cross_entropy(x[0], x[1], -100, 0.1f); });
  // Boxes (cx, cy, w, h) with positive sizes, converted to corners as DETR does.
  const Tensor centers = uniform_input({5, 2}, 43, 0.2f, 0.8f);
  const Tensor sizes1 = uniform_input({5, 2}, 44, 0.1f, 0.5f);
  const Tensor sizes2 = uniform_input({5, 2}, 45, 0.1f, 0.5f);
  compare_function("generalized_box_iou_loss", {centers, sizes1, sizes2}, [](const auto& x) {
    const Tensor b1 = models::box_cxcywh_to_xyxy(cat({x[0], x[1]}, 1));
    const Tensor b2 = models::box_cxcywh_to_xyxy(cat({x[0] + 0.05f, x[2]}, 1));
    return models::generalized_box_iou_loss(b1, b2);
  });
}

TEST_CASE("a GPT on CUDA: logits, every gradient, AdamW steps and KV-cache decoding match "
          "the CPU") {
  LOOM_REQUIRE_GPU();
  models::GPTConfig config;
  config.vocab_size = 37, config.context = 16, config.n_layer = 2, config.n_head = 2;
  config.d_model = 16;
  manual_seed(3);
  const Tensor ids = randint(0, config.vocab_size, {2, 12});
  const Tensor x = ids.narrow(1, 0, 11).contiguous(), y = ids.narrow(1, 1, 11).contiguous();
  compare_module<models::GPT>(
      "GPT logits and gradients", [&] { return std::make_shared<models::GPT>(config); }, {x},
      [](models::GPT& m, const auto& in) { return m.forward(in[0]); }, {2e-4f, 2e-5f});

  // Three AdamW steps with weight-decay groups on both devices from the same weights.
  manual_seed(7);
  models::GPT cpu(config);
  manual_seed(7);
  models::GPT gpu(config);
  gpu.to(Device::CUDA);
  optim::AdamW opt_cpu(cpu.parameters(), 1e-2f), opt_gpu(gpu.parameters(), 1e-2f);
  float loss_cpu = 0, loss_gpu = 0;
  for (int step = 0; step < 3; ++step) {
    Tensor l1 = cross_entropy(cpu.forward(x).reshape({-1, config.vocab_size}), y.reshape({-1}));
    Tensor l2 = cross_entropy(gpu.forward(x.to(Device::CUDA)).reshape({-1, config.vocab_size}),
                              y.to(Device::CUDA).reshape({-1}));
    l1.backward(), l2.backward();
    optim::clip_grad_norm(cpu.parameters(), 1.0f), optim::clip_grad_norm(gpu.parameters(), 1.0f);
    opt_cpu.step(), opt_gpu.step();
    opt_cpu.zero_grad(), opt_gpu.zero_grad();
    loss_cpu = l1.item(), loss_gpu = l2.item();
  }
  CHECK(loss_gpu == doctest::Approx(loss_cpu).epsilon(1e-4));
  const auto p_cpu = cpu.named_parameters(), p_gpu = gpu.named_parameters();
  const int64_t C = config.d_model;
  for (size_t i = 0; i < p_cpu.size(); ++i) {
    const std::string& name = p_cpu[i].first;
    Tensor want = p_cpu[i].second, got = p_gpu[i].second;
    if (name.ends_with("attn.c_attn.bias")) {
      // The key bias [C, 2C) adds the same q.b_k to every score of a query, which softmax
      // cancels: its true gradient is 0, and Adam turns the rounding noise left in its place
      // into steps of either sign. Only the query and value biases are compared.
      want = cat({want.narrow(0, 0, C), want.narrow(0, 2 * C, C)}, 0);
      got = cat({got.narrow(0, 0, C), got.narrow(0, 2 * C, C)}, 0);
    }
    check_close(got, want, 1e-3f, 1e-5f, "after 3 AdamW steps: " + name);
  }

  // Greedy decoding with the KV cache gives the CPU's tokens.
  cpu.eval(), gpu.eval();
  const std::vector<int64_t> prompt = {1, 5, 9};
  CHECK(gpu.generate(prompt, 10) == cpu.generate(prompt, 10));
  models::GenerateOptions no_cache;
  no_cache.max_new_tokens = 10, no_cache.use_cache = false;
  CHECK(gpu.generate(prompt, no_cache) == cpu.generate(prompt, 10));
}
