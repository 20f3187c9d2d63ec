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
using loom::testing::max_ulp_distance;

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
  // Linear, as PyTorch's autocast addmm: the product of the bfloat16 operands accumulated in
  // float32 from the bias cast to bfloat16, and rounded to bfloat16 once.
  const Tensor out = linear.forward(x);
  CHECK(out.dtype() == DType::BFloat16);
  const Tensor by_hand = [&] {
    AutocastGuard off(false);
    return matmul(bf16_rounded(x), bf16_rounded(linear.weight).t()) + bf16_rounded(linear.bias);
  }();
  // One rounding of the float32 sum: within half a bfloat16 step (at most 2^-8 relative) of
  // it, and equal to its rounding except where the sums' float32 order differs at a tie.
  check_close(out.to(DType::Float32), by_hand, 1.0f / 256, 1e-6f,
              "autocast Linear vs the upcast bfloat16 product");
  const std::vector<float> got = out.to(DType::Float32).to_vector();
  const std::vector<float> want = by_hand.to(DType::BFloat16).to(DType::Float32).to_vector();
  int64_t equal = 0;
  for (size_t i = 0; i < got.size(); ++i) equal += got[i] == want[i];
  CHECK(equal >= static_cast<int64_t>(got.size()) - 1);
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
  REQUIRE(y.dtype() == DType::BFloat16);
  // One node, whose inputs are the float32 leaves themselves: no cast nodes in between.
  REQUIRE(y.grad_fn() != nullptr);
  CHECK(y.grad_fn()->name == "linear");
  REQUIRE(y.grad_fn()->inputs.size() == 3);
  CHECK(y.grad_fn()->inputs[0].leaf == x.impl_ptr());
  CHECK(y.grad_fn()->inputs[1].leaf == linear.weight.impl_ptr());
  CHECK(y.grad_fn()->inputs[2].leaf == linear.bias.impl_ptr());
  for (const autograd::Edge& e : y.grad_fn()->inputs) CHECK(e.node == nullptr);
  // A float32 gradient from a float32 consumer (y * upstream is float32: type promotion).
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

TEST_CASE(
    "an autocast Linear's bias gradient from a bfloat16 gradient is its float32 column "
    "sums, not rounded") {
  manual_seed(13);
  nn::Linear linear(20, 12);
  const Tensor x = randn({40, 20}).requires_grad_(true);
  const Tensor g = randn({40, 12}).to(DType::BFloat16);  // as a bfloat16 consumer sends it
  Tensor y;
  {
    AutocastGuard amp;
    y = linear.forward(x);
  }
  y.backward(g);
  const Tensor g32 = g.to(DType::Float32);
  REQUIRE(linear.bias.grad().dtype() == DType::Float32);
  check_close(linear.bias.grad(), sum(g32, 0), 1e-6f, 1e-6f, "db");
  CHECK(linear.bias.grad().to_vector() != bf16_rounded(linear.bias.grad()).to_vector());
  check_close(x.grad(), matmul(g32, bf16_rounded(linear.weight)), 1e-6f, 1e-6f, "dx");
  check_close(linear.weight.grad(), matmul(g32.t(), bf16_rounded(x)), 1e-6f, 1e-6f, "dW");
}

TEST_CASE(
    "under autocast the activations between products stay bfloat16 and the loss reads "
    "bfloat16 logits") {
  manual_seed(14);
  nn::Linear fc1(16, 32), fc2(32, 10);
  const Tensor x = randn({8, 16});
  const Tensor target = tensor_i64({0, 1, 2, 3, 4, 5, 6, 7}, {8});
  {
    AutocastGuard amp;
    const Tensor h = fc1.forward(x);
    CHECK(h.dtype() == DType::BFloat16);
    CHECK(gelu(h).dtype() == DType::BFloat16);  // one bfloat16 pass, no cast
    const Tensor logits = fc2.forward(gelu(h));
    CHECK(logits.dtype() == DType::BFloat16);
    CHECK((x.narrow(1, 0, 10) + logits).dtype() == DType::Float32);  // a float32 residual sum
  }
  // The loss of bfloat16 logits: log-sum-exp and mean in float32 on the exact values (the
  // same numbers as on their float32 copy), its gradient the float32 one rounded once.
  const Tensor logits = (randn({8, 10}) * 3.0f).to(DType::BFloat16).requires_grad_(true);
  const Tensor upcast = logits.detach().to(DType::Float32).requires_grad_(true);
  Tensor loss;
  {
    AutocastGuard amp;
    loss = cross_entropy(logits, target, -100, 0.1f);
  }
  REQUIRE(loss.dtype() == DType::Float32);
  const Tensor loss32 = cross_entropy(upcast, target, -100, 0.1f);
  CHECK(loss.item() == loss32.item());
  loss.backward();
  loss32.backward();
  REQUIRE(logits.grad().dtype() == DType::BFloat16);
  CHECK(logits.grad().to_vector() == upcast.grad().to(DType::BFloat16).to_vector());
  // Outside autocast the loss of bfloat16 logits is bfloat16, as any op on bfloat16.
  CHECK(cross_entropy(logits, target).dtype() == DType::BFloat16);
  // A bfloat16 sum is read as it is: float32 under autocast, its gradient in x's dtype.
  const Tensor xb = randn({5, 7}).to(DType::BFloat16).requires_grad_(true);
  Tensor column;
  {
    AutocastGuard amp;
    column = sum(xb, 0);
  }
  REQUIRE(column.dtype() == DType::Float32);
  CHECK(column.to_vector() == sum(xb.detach().to(DType::Float32), 0).to_vector());
  sum(column * 2.0f).backward();
  REQUIRE(xb.grad().dtype() == DType::BFloat16);
  CHECK(xb.grad().to_vector() == std::vector<float>(35, 2.0f));
}

TEST_CASE("golden: an MLP forward and backward under autocast matches torch.autocast") {
  // tests/golden/gen_bf16.py: Linear, GELU, Linear and the loss under
  // torch.autocast("cpu", dtype=torch.bfloat16), torch 1.13.
  const auto g = nn::read_safetensors(LOOM_TEST_DATA "/autocast.safetensors", nullptr, true);
  const Tensor x = g.at("x").clone().requires_grad_(true);
  const Tensor w1 = g.at("w1").clone().requires_grad_(true),
               b1 = g.at("b1").clone().requires_grad_(true);
  const Tensor w2 = g.at("w2").clone().requires_grad_(true),
               b2 = g.at("b2").clone().requires_grad_(true);
  Tensor y1, h, logits, loss;
  {
    AutocastGuard amp;
    y1 = linear(x, w1, b1);
    h = gelu(y1);
    logits = linear(h, w2, b2);
    loss = cross_entropy(logits, g.at("target"), -100, 0.1f);
  }
  // The activations are bfloat16 as PyTorch's: each one rounding of the same float32 sum (a
  // sum's order may move a value across a rounding boundary: at most one step).
  CHECK(max_ulp_distance(y1, g.at("y1")) <= 1);
  CHECK(max_ulp_distance(h, g.at("h")) <= 1);
  CHECK(max_ulp_distance(logits, g.at("logits")) <= 1);
  REQUIRE(loss.dtype() == DType::Float32);
  check_close(loss, g.at("loss"), 1e-3f, 1e-6f, "loss");
  loss.backward();
  // The gradients pass through bfloat16 products whose roundings PyTorch makes in its own order.
  for (const auto& [name, t] :
       {std::pair{"dx", x}, {"dw1", w1}, {"db1", b1}, {"dw2", w2}, {"db2", b2}}) {
    const Tensor want = g.at(name);
    REQUIRE(t.grad().dtype() == DType::Float32);
    check_close(t.grad(), want, 0.0f, 0.02f * max(abs(want)).item(), name);
  }
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
