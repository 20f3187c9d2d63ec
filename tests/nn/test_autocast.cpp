// Autocast (autograd/autocast.h, PyTorch's torch.autocast with dtype=torch.bfloat16): the scope
// nests and restores; inside it matmul and Linear compute in bfloat16 with float32 accumulation
// while softmax, layer_norm, cross_entropy and sum return float32; outside nothing changes; and
// an MLP and a tiny GPT trained a few steps under autocast, float32 master weights and AdamW
// state, follow the float32 loss; every layer stays within bfloat16 tolerance of float32.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "test_util.h"

using namespace loom;
using loom::testing::check_close;
using loom::testing::expect_error;

namespace {
// t's values rounded to bfloat16, as float32 (outside autograd).
Tensor bf16_rounded(const Tensor& t) { return t.detach().to(DType::BFloat16).to(DType::Float32); }
}  // namespace

TEST_CASE("AutocastGuard turns autocast on for its scope, nests, and restores the state") {
  CHECK_FALSE(autocast::is_enabled());
  {
    AutocastGuard amp;
    CHECK(autocast::is_enabled());
    CHECK(autocast::get_dtype() == DType::BFloat16);
    {
      AutocastGuard off(false);
      CHECK_FALSE(autocast::is_enabled());
    }
    CHECK(autocast::is_enabled());
  }
  CHECK_FALSE(autocast::is_enabled());
  expect_error([] { AutocastGuard amp(true, DType::Float32); }, {"AutocastGuard", "float32"});
  CHECK_FALSE(autocast::is_enabled());
}

TEST_CASE("under autocast matmul and Linear run in bfloat16 while softmax, layer_norm, sum and the "
          "loss return float32") {
  manual_seed(7);
  const Tensor x = randn({4, 16}), w = randn({16, 8});
  nn::Linear linear(16, 8);
  const Tensor expected = matmul(x.to(DType::BFloat16), w.to(DType::BFloat16));
  const Tensor plain = matmul(x, w);
  AutocastGuard amp;
  const Tensor y = matmul(x, w);
  CHECK(y.dtype() == DType::BFloat16);
  CHECK(y.to_vector() == expected.to_vector());
  check_close(y.to(DType::Float32), plain, 2e-2f, 2e-2f, "matmul vs float32");
  // Linear: the product of the bfloat16 operands accumulated in float32 together with the
  // float32 bias, and not rounded: a float32 result.
  const Tensor out = linear.forward(x);
  CHECK(out.dtype() == DType::Float32);
  const Tensor by_hand = [&] {
    AutocastGuard off(false);
    return matmul(bf16_rounded(x), bf16_rounded(linear.weight).t()) + linear.bias;
  }();
  check_close(out, by_hand, 1e-5f, 1e-5f, "autocast Linear vs the upcast bfloat16 product");
  // ... which is not what rounding the product to bfloat16 first would give.
  const Tensor rounded =
      matmul(x.to(DType::BFloat16), linear.weight.t().to(DType::BFloat16)) + linear.bias;
  CHECK(out.to_vector() != rounded.to_vector());
  CHECK(softmax(y, 1).dtype() == DType::Float32);
  CHECK(log_softmax(y, 0).dtype() == DType::Float32);
  CHECK(layer_norm(y, Tensor(), Tensor()).dtype() == DType::Float32);
  CHECK(sum(y).dtype() == DType::Float32);
  CHECK(exp(y).dtype() == DType::Float32);
  CHECK(cross_entropy(y, tensor_i64({0, 1, 2, 3}, {4})).dtype() == DType::Float32);
  CHECK(gelu(y).dtype() == DType::BFloat16);  // not on either list: the input's dtype
  CHECK((y + y).dtype() == DType::BFloat16);
  CHECK(sum(y).item() == sum(y.to(DType::Float32)).item());  // no rounding to bfloat16
}

TEST_CASE("an autocast Linear is one autograd node whose float32 gradients are the float32 "
          "products of the bfloat16-rounded operands") {
  manual_seed(12);
  nn::Linear linear(24, 16);
  const Tensor x = randn({6, 24}).requires_grad_(true);
  const Tensor upstream = randn({6, 16});
  Tensor y;
  {
    AutocastGuard amp;
    y = linear.forward(x);
  }
  REQUIRE(y.dtype() == DType::Float32);
  // One node, whose inputs are the float32 leaves themselves: no cast nodes in between.
  REQUIRE(y.grad_fn() != nullptr);
  CHECK(y.grad_fn()->name == "linear");
  REQUIRE(y.grad_fn()->inputs.size() == 3);
  CHECK(y.grad_fn()->inputs[0].leaf == x.impl_ptr());
  CHECK(y.grad_fn()->inputs[1].leaf == linear.weight.impl_ptr());
  CHECK(y.grad_fn()->inputs[2].leaf == linear.bias.impl_ptr());
  for (const autograd::Edge& e : y.grad_fn()->inputs) CHECK(e.node == nullptr);
  sum(y * upstream).backward();
  REQUIRE(x.grad().dtype() == DType::Float32);
  REQUIRE(linear.weight.grad().dtype() == DType::Float32);
  REQUIRE(linear.bias.grad().dtype() == DType::Float32);
  // dx = g W and dW = g^T x on the bfloat16-rounded g, W and x, accumulated in float32 and not
  // rounded afterwards; db = the column sums of the float32 g.
  const Tensor g = bf16_rounded(upstream);
  check_close(x.grad(), matmul(g, bf16_rounded(linear.weight)), 1e-6f, 1e-6f, "dx");
  check_close(linear.weight.grad(), matmul(g.t(), bf16_rounded(x)), 1e-6f, 1e-6f, "dW");
  check_close(linear.bias.grad(), sum(upstream, 0), 1e-6f, 1e-6f, "db");
  CHECK(x.grad().to_vector() != bf16_rounded(x.grad()).to_vector());  // not rounded to bfloat16
  CHECK(linear.weight.grad().to_vector() != bf16_rounded(linear.weight.grad()).to_vector());
}

TEST_CASE("outside autocast nothing changes: float32 ops stay float32") {
  manual_seed(8);
  const Tensor x = randn({3, 5}), w = randn({5, 2});
  const Tensor before = matmul(x, w);
  { AutocastGuard amp; }
  CHECK(matmul(x, w).dtype() == DType::Float32);
  CHECK(matmul(x, w).to_vector() == before.to_vector());
}

namespace {

// Trains a fresh model built by `make` (same seed each time) `steps` AdamW steps on one fixed
// batch and returns the loss of every step; under autocast when `amp` is set.
template <class Make, class Loss>
std::vector<float> train_losses(const Make& make, const Loss& loss_of, bool amp, int steps) {
  manual_seed(11);
  auto model = make();
  optim::AdamW opt(model->parameters(), 3e-3f);
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    Tensor loss;
    {
      AutocastGuard scope(amp);
      loss = loss_of(*model);
    }
    REQUIRE(loss.dtype() == DType::Float32);
    losses.push_back(loss.item());
    opt.zero_grad();
    loss.backward();
    for (const Tensor& p : model->parameters()) {
      REQUIRE(p.dtype() == DType::Float32);  // master weights ...
      if (p.grad().defined()) REQUIRE(p.grad().dtype() == DType::Float32);  // ... and gradients
    }
    opt.step();
  }
  return losses;
}

// Each step's loss within 5% (+0.01) of float32's: bfloat16 rounding changes every step a little
// and the changes compound over a run, but the curve must stay on top of float32's.
void check_tracks(const std::vector<float>& amp, const std::vector<float>& fp32) {
  REQUIRE(amp.size() == fp32.size());
  float worst = 0.0f;
  for (size_t i = 0; i < amp.size(); ++i) {
    CHECK_MESSAGE(std::fabs(amp[i] - fp32[i]) <= 0.05f * fp32[i] + 0.01f,
                  "step " << i << ": autocast loss " << amp[i] << ", float32 " << fp32[i]);
    worst = std::max(worst, std::fabs(amp[i] - fp32[i]) / fp32[i]);
  }
  MESSAGE("largest relative difference from float32: " << worst);
  CHECK(amp.back() < 0.7f * amp.front());  // and it learns
}

}  // namespace

TEST_CASE("an MLP trained under autocast follows the float32 loss") {
  manual_seed(9);
  const Tensor x = randn({64, 10});
  const Tensor y = argmax(matmul(x, randn({10, 4})), 1);  // a learnable labelling
  auto make = [] {
    auto mlp = std::make_shared<nn::Sequential>();
    mlp->push_back(std::make_shared<nn::Linear>(10, 64));
    mlp->push_back(std::make_shared<nn::GELU>());
    mlp->push_back(std::make_shared<nn::Linear>(64, 4));
    return mlp;
  };
  auto loss_of = [&](nn::Sequential& m) { return cross_entropy(m.forward(x), y); };
  check_tracks(train_losses(make, loss_of, true, 40), train_losses(make, loss_of, false, 40));
}

TEST_CASE("a tiny GPT trained 200 steps under autocast follows the float32 loss") {
  models::GPTConfig config;
  config.vocab_size = 32, config.context = 16, config.n_layer = 2, config.n_head = 2;
  config.d_model = 32;
  manual_seed(10);
  const Tensor ids = randint(0, 32, {4, 16});
  const Tensor inputs = ids.narrow(1, 0, 15), targets = ids.narrow(1, 1, 15);
  auto make = [&] { return std::make_shared<models::GPT>(config); };
  auto loss_of = [&](models::GPT& gpt) {
    return cross_entropy(gpt.forward(inputs).reshape({-1, 32}), targets.reshape({-1}));
  };
  check_tracks(train_losses(make, loss_of, true, 200), train_losses(make, loss_of, false, 200));
}

TEST_CASE("every layer under autocast stays within bfloat16 tolerance of float32, forward and "
          "input gradient") {
  // Each layer runs once in float32 and once under autocast on the same weights and input; the
  // output and the input's gradient agree to a few bfloat16 ulps of the values' scale.
  struct LayerCase {
    const char* name;
    Shape input;
    std::function<Tensor(const Tensor&)> forward;
  };
  manual_seed(31);
  nn::Linear linear(24, 16);
  nn::LayerNorm norm(24);
  nn::Embedding embedding(50, 24);
  nn::Conv2d conv(3, 8, 3, 1, 1);
  nn::FeedForward ffn(24, 48, 0.0f, nn::Activation::GELU);
  nn::MultiheadAttention mha(24, 4);
  nn::TransformerEncoderLayer encoder(24, 4, 48, 0.0f);
  nn::TransformerDecoderLayer decoder(24, 4, 48, 0.0f);
  const Tensor memory = randn({2, 5, 24});
  const Tensor causal = nn::functional::causal_mask(7);
  const std::vector<LayerCase> cases = {
      {"Linear", {2, 7, 24}, [&](const Tensor& x) { return linear.forward(x); }},
      {"LayerNorm", {2, 7, 24}, [&](const Tensor& x) { return norm.forward(x); }},
      {"Embedding + LayerNorm", {2, 7, 24},
       [&](const Tensor& x) { return norm.forward(embedding.forward(randint(0, 50, {2, 7})) + x); }},
      {"Conv2d", {2, 3, 9, 9}, [&](const Tensor& x) { return conv.forward(x); }},
      {"FeedForward (GELU)", {2, 7, 24}, [&](const Tensor& x) { return ffn.forward(x); }},
      {"MultiheadAttention (causal)", {2, 7, 24},
       [&](const Tensor& x) { return mha.forward(x, x, x, causal); }},
      {"TransformerEncoderLayer", {2, 7, 24}, [&](const Tensor& x) { return encoder.forward(x); }},
      {"TransformerDecoderLayer", {2, 7, 24},
       [&](const Tensor& x) { return decoder.forward(x, memory, causal); }},
  };
  for (const LayerCase& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    const Tensor x = randn(c.input);
    auto run = [&](bool amp) {
      manual_seed(32);  // the same random draws inside (Embedding's ids) in both runs
      const Tensor xi = x.clone().requires_grad_(true);
      Tensor y;
      {
        AutocastGuard scope(amp);
        y = c.forward(xi);
      }
      const Tensor yf = y.to(DType::Float32);
      sum(yf * yf).backward();
      return std::pair{yf.detach(), xi.grad()};
    };
    const auto [y32, g32] = run(false);
    const auto [y16, g16] = run(true);
    const float scale = max(abs(y32)).item(), gscale = max(abs(g32)).item();
    check_close(y16, y32, 0.0f, 0.03f * scale, "forward under autocast vs float32");
    REQUIRE(g16.dtype() == DType::Float32);
    check_close(g16, g32, 0.0f, 0.05f * gscale, "input gradient under autocast vs float32");
    // ... and autocast did change the arithmetic (Embedding and LayerNorm stay float32).
    if (name.find("LayerNorm") == std::string::npos) CHECK(y16.to_vector() != y32.to_vector());
  }
}

TEST_CASE("matmul with out_dtype float32 keeps the float32 accumulators of a bfloat16 product") {
  manual_seed(33);
  const Tensor a = randn({3, 5, 16}).to(DType::BFloat16), b = randn({3, 16, 4}).to(DType::BFloat16);
  const Tensor exact = matmul(a.to(DType::Float32), b.to(DType::Float32));
  const Tensor c = matmul(a, b, DType::Float32);
  REQUIRE(c.dtype() == DType::Float32);
  check_close(c, exact, 1e-6f, 1e-6f, "bfloat16 product, float32 result");
  CHECK(matmul(a, b).to_vector() == exact.to(DType::BFloat16).to_vector());  // rounded once
  {
    AutocastGuard amp;  // float32 operands under autocast: the same bfloat16 product
    check_close(matmul(a.to(DType::Float32), b.to(DType::Float32), DType::Float32), exact, 1e-6f,
                1e-6f, "under autocast");
  }
  // Gradients flow to the operands in their dtype.
  const Tensor ag = a.detach().requires_grad_(true);
  sum(matmul(ag, b, DType::Float32)).backward();
  CHECK(ag.grad().dtype() == DType::BFloat16);
  expect_error([&] { matmul(randn({2, 3}), randn({3, 2}), DType::BFloat16); },
               {"matmul", "float32", "bfloat16"});
}
