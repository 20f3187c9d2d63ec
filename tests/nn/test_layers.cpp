// Linear, Embedding, LayerNorm, FeedForward, Dropout and positional encodings: PyTorch golden
// outputs and gradients, finite-difference gradient checks and error paths.
#include <cmath>
#include <tuple>

#include "backends/backend.h"
#include "nn_golden.h"

using namespace loom;
using namespace loom::testing;

TEST_CASE("Linear matches PyTorch, with and without bias") {
  nn::Linear lin(5, 4);
  load_case_state(lin, "linear");
  auto in = case_inputs("linear");
  check_case("linear", lin.forward(in[0]), in, &lin);

  nn::Linear no_bias(5, 3, false);
  load_case_state(no_bias, "linear_nobias");
  auto in2 = case_inputs("linear_nobias");
  check_case("linear_nobias", no_bias.forward(in2[0]), in2, &no_bias);
}

TEST_CASE("Embedding matches PyTorch and repeated ids accumulate gradient") {
  nn::Embedding emb(10, 4);
  load_case_state(emb, "embedding");
  auto in = case_inputs("embedding");
  check_case("embedding", emb.forward(in[0]), in, &emb);
}

TEST_CASE("LayerNorm matches PyTorch") {
  nn::LayerNorm ln(6);
  load_case_state(ln, "layer_norm");
  auto in = case_inputs("layer_norm");
  check_case("layer_norm", ln.forward(in[0]), in, &ln);

  nn::LayerNorm ln_eps(6, 1e-3f);
  load_case_state(ln_eps, "layer_norm_eps");
  auto in2 = case_inputs("layer_norm_eps");
  check_case("layer_norm_eps", ln_eps.forward(in2[0]), in2, &ln_eps, 1e-4f, 1e-4f);
}

TEST_CASE("LayerNorm::add_and_forward gives x + residual and its LayerNorm, as the two ops do") {
  manual_seed(31);
  nn::LayerNorm ln(6);
  {
    NoGradGuard no_grad;
    ln.weight.copy_(randn({6}));
    ln.bias.copy_(randn({6}));
  }
  // The same numbers, values and gradients, as the unfused ops: the kernel adds once and
  // normalises the sum exactly as layer_norm does.
  auto run = [&](bool fused, const Tensor& x0, const Tensor& r0) {
    ln.zero_grad();
    Tensor x = x0.detach().requires_grad_(true), r = r0.detach().requires_grad_(true);
    Tensor h, y;
    if (fused) {
      std::tie(h, y) = ln.add_and_forward(x, r);
    } else {
      h = x + r;
      y = ln.forward(h);
    }
    sum(y * y + h).backward();  // h also feeds the loss, as the next residual add
    return std::vector<Tensor>{h, y, x.grad(), r.grad(), ln.weight.grad(), ln.bias.grad()};
  };
  const Tensor x = randn({2, 3, 6}) * 2.0f + 1.0f, r = randn({2, 3, 6});
  const std::vector<Tensor> fused = run(true, x, r), plain = run(false, x, r);
  const char* names[] = {"sum", "normalised", "dx", "dresidual", "dweight", "dbias"};
  for (size_t i = 0; i < fused.size(); ++i) check_close(fused[i], plain[i], 0.0f, 0.0f, names[i]);

  // A residual that broadcasts takes the two ops' path: still the same values.
  const Tensor row = randn({6});
  check_close(ln.add_and_forward(x, row).second, ln.forward(x + row), 0.0f, 0.0f, "broadcast");
  // A bfloat16 branch, on either side, is added in float32 by the kernel as it is
  // read: the values and gradients of the two ops (bfloat16 + float32 promotes, as PyTorch).
  for (const bool branch_first : {false, true}) {
    CAPTURE(branch_first);
    auto with_branch = [&](bool fused) {
      ln.zero_grad();
      Tensor xs = x.detach().requires_grad_(true);
      Tensor rs = r.to(DType::BFloat16).requires_grad_(true);
      Tensor h, y;
      if (fused)
        std::tie(h, y) = branch_first ? ln.add_and_forward(rs, xs) : ln.add_and_forward(xs, rs);
      else
        y = ln.forward(h = xs + rs);
      CHECK(h.dtype() == DType::Float32);
      sum(y * y + h).backward();
      return std::vector<Tensor>{h, y, xs.grad(), rs.grad().to(DType::Float32), ln.weight.grad()};
    };
    const std::vector<Tensor> f = with_branch(true), p = with_branch(false);
    for (size_t i = 0; i < f.size(); ++i) check_close(f[i], p[i], 0.0f, 0.0f, "bfloat16 branch");
  }

  // Inference (no graph) and in-place use of the sum afterwards.
  {
    NoGradGuard no_grad;
    auto [h, y] = ln.add_and_forward(x, r);
    check_close(y, ln.forward(x + r), 0.0f, 0.0f, "no grad");
    h.mul_(2.0f);  // allowed: nothing saved it
  }
  expect_error([&] { ln.add_and_forward(randn({2, 5}), randn({2, 5})); },
               {"LayerNorm(6)", "[2,5]"});
  expect_error([&] { nn::functional::add_layer_norm(x, r, randn({5}), Tensor()); },
               {"add_layer_norm", "[5]", "[2,3,6]"});
  expect_error([&] { nn::functional::add_layer_norm(x, Tensor(), Tensor(), Tensor()); },
               {"add_layer_norm"});
}

TEST_CASE("Residual: a pre-norm block's sums, formed by the LayerNorm that reads them") {
  manual_seed(32);
  nn::LayerNorm ln_1(6), ln_2(6);
  nn::Linear attn(6, 6), mlp(6, 6);
  // x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)) on the stream and on plain tensors: the same
  // values and gradients (the fused kernel adds exactly as the two ops do).
  auto block = [&](bool stream, const Tensor& x0) {
    for (nn::Module* m : std::initializer_list<nn::Module*>{&ln_1, &ln_2, &attn, &mlp})
      m->zero_grad();
    Tensor input = x0.detach().requires_grad_(true), out;
    if (stream) {
      nn::Residual x = input;
      x = x + attn.forward(ln_1.forward(x));
      x = x + mlp.forward(ln_2.forward(x));
      out = x.tensor();
    } else {
      Tensor x = input;
      x = x + attn.forward(ln_1.forward(x));
      x = x + mlp.forward(ln_2.forward(x));
      out = x;
    }
    sum(out * out).backward();
    return std::vector<Tensor>{out, input.grad(), ln_1.weight.grad(), attn.weight.grad(),
                               ln_2.bias.grad(), mlp.weight.grad()};
  };
  const Tensor x = randn({2, 3, 6});
  const std::vector<Tensor> fused = block(true, x), plain = block(false, x);
  for (size_t i = 0; i < fused.size(); ++i) check_close(fused[i], plain[i], 0.0f, 0.0f, "block");

  // A sum is formed once and shared by copies; a branch of fewer positions continues the last.
  const Tensor a = randn({2, 3, 6}), b = randn({2, 3, 6}), last = randn({2, 1, 6});
  const nn::Residual s = nn::Residual(a) + b;
  const nn::Residual copy = s;
  check_close(ln_1.forward(copy), ln_1.forward(a + b), 0.0f, 0.0f, "normalised sum");
  CHECK(s.tensor().impl() == copy.tensor().impl());
  check_close((s + last).tensor(), (a + b).narrow(1, 2, 1) + last, 0.0f, 0.0f, "last position");
  expect_error([&] { (void)(s + randn({2, 3, 5})); }, {"Residual", "[2,3,5]", "[2,3,6]"});
  expect_error([&] { (void)(s + randn({2, 4, 6})); }, {"Residual", "[2,4,6]", "[2,3,6]"});
  expect_error([&] { (void)(s + Tensor()); }, {"Residual", "undefined"});
}

TEST_CASE("bias_gelu, bias_gelu_tanh and bias_relu give act(x + bias) as the two ops do") {
  manual_seed(33);
  using Fn = Tensor (*)(const Tensor&, const Tensor&);
  const std::vector<std::tuple<const char*, Fn, Fn>> cases = {
      {"bias_gelu", bias_gelu, [](const Tensor& x, const Tensor& b) { return gelu(x + b); }},
      {"bias_gelu_tanh", bias_gelu_tanh,
       [](const Tensor& x, const Tensor& b) { return gelu_tanh(x + b); }},
      {"bias_relu", bias_relu, [](const Tensor& x, const Tensor& b) { return relu(x + b); }},
  };
  // Float32: the same numbers, values and both gradients, as the add followed by the
  // activation (the kernel adds in float32, then applies the same math; db is the same sum).
  const Tensor x0 = randn({2, 5, 8}) * 2.0f, b0 = randn({8}), w = randn({2, 5, 8});
  for (const auto& [name, fused, plain] : cases) {
    CAPTURE(std::string(name));
    auto run = [&, w](Fn f, const Tensor& x_in) {
      Tensor x = x_in.detach().requires_grad_(true), b = b0.detach().requires_grad_(true);
      const Tensor y = f(x, b);
      sum(y * w).backward();
      return std::vector<Tensor>{y, x.grad(), b.grad()};
    };
    for (const Tensor& xi : {x0, x0.transpose(0, 1).contiguous().transpose(0, 1)}) {
      const std::vector<Tensor> f = run(fused, xi), p = run(plain, xi);
      check_close(f[0], p[0], 0.0f, 0.0f, "value");
      check_close(f[1], p[1], 0.0f, 0.0f, "dx");
      check_close(f[2], p[2], 0.0f, 0.0f, "dbias");
    }
    // bfloat16 x (a product under autocast): the result stays bfloat16, the float32 value of
    // act(x + bias) rounded once; the gradient of x is bfloat16, the bias's float32.
    Tensor xb = x0.to(DType::BFloat16).requires_grad_(true), b = b0.detach().requires_grad_(true);
    const Tensor y = fused(xb, b);
    REQUIRE(y.dtype() == DType::BFloat16);
    const Tensor reference = plain(xb.detach().to(DType::Float32), b0);
    CHECK(y.to_vector() == reference.to(DType::BFloat16).to_vector());
    sum(y.to(DType::Float32) * w).backward();
    CHECK(xb.grad().dtype() == DType::BFloat16);
    CHECK(b.grad().dtype() == DType::Float32);
  }
  // Without a graph nothing is saved; the errors name the op and the shapes.
  {
    NoGradGuard no_grad;
    check_close(bias_gelu(x0, b0), gelu(x0 + b0), 0.0f, 0.0f, "no grad");
  }
  expect_error([&] { bias_gelu(x0, randn({5})); }, {"bias_gelu", "[5]", "[2,5,8]"});
  expect_error([&] { bias_relu(x0, randn({2, 8})); }, {"bias_relu", "[2,8]"});
  expect_error([&] { bias_gelu(tensor_i64({1, 2}, {2}), b0); }, {"bias_gelu", "int64"});
  const Tensor m = randn({2, 8});
  Tensor out = Tensor::empty({2, 8});
  expect_error([&] { backend(Device::CPU).bias_unary(UnaryOp::Tanh, m, m, out); },
               {"bias_unary", "reads its output"});
}

TEST_CASE("bias_unary_backward with dbias: the bias's gradient in the same pass, to the bit") {
  // On the CPU, contiguous float32 operands and a broadcast bias row take one pass that sums the
  // columns as it writes dx; it must equal the kernel alone followed by reduce's column sums
  // (what the backward ran before), bit for bit, whatever the rows (one chunk of rows, many).
  manual_seed(35);
  Backend& be = backend(Device::CPU);
  for (const UnaryOp op : {UnaryOp::Gelu, UnaryOp::GeluTanh, UnaryOp::Relu}) {
    for (const Shape& shape : {Shape{300, 70}, Shape{3, 40, 33}, Shape{1, 16}}) {
      CAPTURE(unary_op_name(op));
      CAPTURE(shape_str(shape));
      const int64_t cols = shape.back(), rows = shape_numel(shape) / cols;
      const Tensor g = randn(shape), x = randn(shape) * 3.0f, b = randn({cols});
      const Tensor bias = b.reshape({1, cols}).expand({rows, cols}).reshape(shape);
      Tensor dx = Tensor::empty(shape), db = Tensor::empty({cols});
      be.bias_unary_backward(op, g, x, bias, dx, db);
      Tensor dx_alone = Tensor::empty(shape), none, db_alone = Tensor::empty({cols});
      be.bias_unary_backward(op, g, x, bias, dx_alone, none);
      be.reduce(ReduceOp::Sum, dx_alone, 1, rows, cols, db_alone);
      CHECK(dx.to_vector() == dx_alone.to_vector());
      CHECK(db.to_vector() == db_alone.to_vector());
      // A strided gradient (of more than one row) takes the two kernels; the same numbers.
      const Tensor g_strided = g.reshape({rows, cols}).t().contiguous().t().reshape(shape);
      Tensor dx2 = Tensor::empty(shape), db2 = Tensor::empty({cols});
      be.bias_unary_backward(op, g_strided, x, bias, dx2, db2);
      CHECK(dx2.to_vector() == dx.to_vector());
      CHECK(db2.to_vector() == db.to_vector());
    }
  }
  // dbias must be float32 with one element per column.
  const Tensor m = randn({4, 8});
  Tensor out = Tensor::empty({4, 8}), wrong = Tensor::empty({7});
  expect_error([&] { be.bias_unary_backward(UnaryOp::Gelu, m, m, m, out, wrong); },
               {"bias_unary_backward", "dbias"});
}

TEST_CASE("linear_activation is act(linear(x)): one fused GEMM without autograd, two ops with") {
  manual_seed(34);
  const Tensor w = randn({6, 5}), b = randn({6});
  for (const UnaryOp act : {UnaryOp::Relu, UnaryOp::Gelu, UnaryOp::GeluTanh}) {
    auto plain = [act](const Tensor& y) {
      return act == UnaryOp::Relu ? relu(y) : act == UnaryOp::Gelu ? gelu(y) : gelu_tanh(y);
    };
    CAPTURE(static_cast<int>(act));
    for (const Tensor& x : {randn({2, 3, 5}), randn({1, 5}), randn({5, 4}).t()}) {
      for (const bool with_bias : {true, false}) {
        const Tensor bias = with_bias ? b : Tensor();
        const Tensor want = plain(linear(x, w, bias));
        {  // the product applies the bias and the activation itself (GemmArgs::activation)
          NoGradGuard no_grad;
          check_close(linear_activation(x, w, bias, act), want, 1e-6f, 1e-6f, "no grad");
        }
        // With autograd: the two ops, values and gradients. Not bit for bit: the two ops add the
        // bias in the activation's kernel, `want` in the GEMM (from C), and BLAS kernels differ
        // in where they round that sum (OpenBLAS's AVX-512 GEMM does, its AVX2 one did not).
        const Tensor xg = x.detach().requires_grad_(true), wg = w.detach().requires_grad_(true);
        const Tensor y = linear_activation(xg, wg, bias, act);
        check_close(y, want, 1e-6f, 1e-6f, "with autograd");
        sum(y * y).backward();
        const Tensor xr = x.detach().requires_grad_(true), wr = w.detach().requires_grad_(true);
        const Tensor yr = plain(linear(xr, wr, bias));
        sum(yr * yr).backward();
        check_close(xg.grad(), xr.grad(), 1e-6f, 1e-6f, "dx");
        check_close(wg.grad(), wr.grad(), 1e-6f, 1e-6f, "dW");
      }
    }
  }
  // Under autocast the fused product rounds act(x W^T + b) to bfloat16 once.
  const Tensor x = randn({3, 5});
  Tensor fused, reference;
  {
    NoGradGuard no_grad;
    AutocastGuard amp;
    fused = linear_activation(x, w, b, UnaryOp::GeluTanh);
    reference = gelu_tanh(linear(x, w, b).to(DType::Float32));
  }
  CHECK(fused.dtype() == DType::BFloat16);
  check_close(fused.to(DType::Float32), reference, 1.0f / 128, 1.0f / 128, "autocast");
  expect_error([&] { linear_activation(x, w, b, UnaryOp::Tanh); },
               {"linear_activation", "Relu, Gelu or GeluTanh"});
  expect_error(
      [&] {
        linear_activation(x, randn({6, 4}), b, UnaryOp::Relu);
      },
      {"linear", "[3,5]", "[6,4]"});
}

// linear_activation(x, W, b, act) and `other` (x, W, b) give the same values and the same
// gradients of x, W and b (of the sum of squares), to the bit.
template <class Other>
void check_linear_activation_bits(const Tensor& x, const Tensor& w, const Tensor& b, UnaryOp act,
                                  const Other& other) {
  const auto leaf = [](const Tensor& t) { return t.detach().requires_grad_(true); };
  const Tensor xg = leaf(x), wg = leaf(w), bg = leaf(b), xr = leaf(x), wr = leaf(w), br = leaf(b);
  const Tensor y = linear_activation(xg, wg, bg, act), yr = other(xr, wr, br);
  CHECK(y.shape() == yr.shape());
  CHECK(y.to_vector() == yr.to_vector());
  sum(y * y).backward();
  sum(yr * yr).backward();
  CHECK(xg.grad().to_vector() == xr.grad().to_vector());
  CHECK(wg.grad().to_vector() == wr.grad().to_vector());
  CHECK(bg.grad().to_vector() == br.grad().to_vector());
}

// In a training step on the CPU the product x W^T also writes act(x W^T + b) as it finishes each
// band of rows (GemmArgs::activation_out): the same two nodes as linear() then bias_gelu (or
// bias_relu, bias_gelu_tanh), and the same bits, forward and backward, on every path of the
// product (tiles, a single row, a transposed x).
TEST_CASE("linear_activation with autograd on the CPU: one product, the two ops' bits") {
  manual_seed(36);
  const Tensor w = randn({200, 64}), b = randn({200});
  for (const UnaryOp act : {UnaryOp::Relu, UnaryOp::Gelu, UnaryOp::GeluTanh}) {
    const auto two_ops = [act](const Tensor& x, const Tensor& weight, const Tensor& bias) {
      const Tensor h = linear(x, weight, Tensor());
      return act == UnaryOp::Relu   ? bias_relu(h, bias)
             : act == UnaryOp::Gelu ? bias_gelu(h, bias)
                                    : bias_gelu_tanh(h, bias);
    };
    CAPTURE(unary_op_name(act));
    for (const Tensor& x : {randn({300, 64}), randn({2, 3, 64}), randn({1, 64}),
                            randn({64, 50}).t()}) {
      CAPTURE(shape_str(x.shape()));
      check_linear_activation_bits(x, w, b, act, two_ops);
    }
  }
}

// The form a model writes without it, act(linear(x, W, b)) with the bias added by the product,
// has the same bits too: a sum started from 0 + b, then the products (the GEMM's bias), is the
// products plus b (the activation's), and b's gradient is the column sums of the same rows in
// the same chunks. So BERT's GELU(a W_1 + b_1) and DETR's box MLP use linear_activation.
TEST_CASE("linear_activation equals the activation of linear() with its bias, to the bit") {
  manual_seed(37);
  const Tensor w = randn({96, 48}), b = randn({96});
  for (const UnaryOp act : {UnaryOp::Relu, UnaryOp::Gelu, UnaryOp::GeluTanh}) {
    const auto activation_of_linear = [act](const Tensor& x, const Tensor& weight,
                                            const Tensor& bias) {
      const Tensor h = linear(x, weight, bias);
      return act == UnaryOp::Relu ? relu(h) : act == UnaryOp::Gelu ? gelu(h) : gelu_tanh(h);
    };
    CAPTURE(unary_op_name(act));
    for (const Tensor& x : {randn({256, 48}), randn({4, 5, 48}), randn({1, 48})}) {
      CAPTURE(shape_str(x.shape()));
      check_linear_activation_bits(x, w, b, act, activation_of_linear);
    }
  }
}

TEST_CASE("FeedForward matches PyTorch's linear2(act(linear1(x))) for GELU and ReLU") {
  for (auto [tag, act] : {std::pair{"feed_forward_gelu", nn::Activation::GELU},
                          std::pair{"feed_forward_relu", nn::Activation::ReLU}}) {
    nn::FeedForward ff(6, 12, 0.0f, act);
    load_case_state(ff, tag);
    auto in = case_inputs(tag);
    check_case(tag, ff.forward(in[0]), in, &ff);
  }
}

TEST_CASE("gradcheck: Linear, Embedding, LayerNorm, FeedForward") {
  manual_seed(11);
  nn::Linear lin(3, 2);
  gradcheck([&](const std::vector<Tensor>& v) { return weighted_sum(lin.forward(v[0])); },
            {randn({2, 3}), lin.weight, lin.bias}, 1e-2f, 2e-2f, 2e-3f, "Linear");

  nn::Embedding emb(5, 3);
  const Tensor ids = tensor_i64({4, 0, 4, 2}, {2, 2});
  gradcheck([&](const std::vector<Tensor>&) { return weighted_sum(emb.forward(ids)); },
            {emb.weight}, 1e-2f, 2e-2f, 2e-3f, "Embedding");

  nn::LayerNorm ln(4);
  {
    NoGradGuard guard;
    ln.weight.copy_(randn({4}));
    ln.bias.copy_(randn({4}));
  }
  gradcheck([&](const std::vector<Tensor>& v) { return weighted_sum(ln.forward(v[0])); },
            {randn({3, 4}), ln.weight, ln.bias}, 1e-2f, 2e-2f, 2e-3f, "LayerNorm");

  nn::FeedForward ff(3, 5, 0.0f, nn::Activation::GELU);
  gradcheck([&](const std::vector<Tensor>& v) { return weighted_sum(ff.forward(v[0])); },
            {randn({2, 3}), ff.linear1->weight, ff.linear2->bias}, 1e-2f, 2e-2f, 2e-3f,
            "FeedForward");
}

TEST_CASE("Dropout is inverted, seeded, and the identity in evaluation") {
  const float p = 0.25f;
  nn::Dropout drop(p);
  const Tensor x = ones({4000});
  manual_seed(5);
  const std::vector<float> y = drop.forward(x).to_vector();
  int zeros_seen = 0;
  for (float v : y) {
    const bool dropped = v == 0.0f;
    zeros_seen += dropped;
    // Survivors are scaled by 1/(1-p) so the expectation is unchanged.
    CHECK((dropped || std::fabs(v - 1.0f / (1.0f - p)) < 1e-6f));
  }
  // Binomial(4000, 0.25): mean 1000, std ~27.
  CHECK(std::abs(zeros_seen - 1000) < 150);
  manual_seed(5);
  CHECK(drop.forward(x).to_vector() == y);  // same seed, same mask
  CHECK(drop.forward(x).to_vector() != y);  // the generator moved on

  // The gradient is the same mask, scaled.
  Tensor xg = ones({64}).requires_grad_(true);
  manual_seed(6);
  const Tensor out = drop.forward(xg);
  sum(out).backward();
  check_close(xg.grad(), out.detach(), 0.0f, 1e-6f, "dropout gradient");

  drop.eval();
  check_close(drop.forward(x), x, 0.0f, 0.0f, "eval dropout");
  check_error([] { nn::Dropout(1.5f); }, {"Dropout", "1.5"});
}

// loom::dropout draws its mask and applies it in one kernel (Backend::dropout). Its definition is
// the composite x * (ge(rand(shape), p) * (1 / (1 - p))): the same values and gradients to the
// bit, from the same generator counters (the next draw after either is the same), for a strided x
// and sizes around the kernel's 64-value chunks.
TEST_CASE("dropout is x * (ge(rand, p) / (1 - p)) to the bit, drawn and applied in one pass") {
  for (const int64_t n : {int64_t{1}, int64_t{63}, int64_t{65}, int64_t{5000}}) {
    const float p = 0.3f;
    const Tensor x = randn({2, n}).t();  // [n, 2], not contiguous
    manual_seed(11);
    const Tensor keep = ge(rand({n, 2}), scalar_tensor(p)) * (1.0f / (1.0f - p));
    const Tensor want = x * keep;
    const float next_after_composite = rand({1}).item();
    manual_seed(11);
    Tensor xg = x.detach().requires_grad_(true);
    const Tensor got = dropout(xg, p, true);
    CHECK(rand({1}).item() == next_after_composite);
    CHECK(got.shape() == x.shape());
    CHECK(got.to_vector() == want.to_vector());  // bit for bit: no tolerance
    const Tensor g = randn({n, 2});
    got.backward(g);
    CHECK(xg.grad().to_vector() == (g * keep).to_vector());
  }
  const Tensor three = randn({3});
  Tensor out = Tensor::empty({3}), mask = Tensor::empty({3}), short_mask = Tensor::empty({2});
  check_error([&] { backend(Device::CPU).dropout(three, 0.5f, 1, 0, out, short_mask); },
              {"dropout", "mask"});
  check_error([&] { backend(Device::CPU).dropout(three, 1.0f, 1, 0, out, mask); },
              {"dropout", "probability 1"});
}

TEST_CASE("sinusoidal positional encoding is Vaswani's formula") {
  const Tensor table = fixture("sinusoidal.table");  // [50, 16], float64 formula in gen_nn.py
  nn::SinusoidalPositionalEncoding pe(16, 50);
  check_close(pe.pe, table, 1e-4f, 1e-5f, "pe table");
  // forward adds rows [start, start + T).
  const Tensor x = zeros({2, 3, 16});
  check_close(pe.forward(x, 4).select(0, 1), table.narrow(0, 4, 3), 1e-4f, 1e-5f, "offset");
  check_error([&] { pe.forward(zeros({1, 51, 16})); }, {"SinusoidalPositionalEncoding", "50"});
  check_error([&] { pe.forward(zeros({1, 3, 8})); }, {"[1,3,8]"});
  check_error([] { nn::SinusoidalPositionalEncoding(7); }, {"even"});
}

TEST_CASE("learned positional embedding adds trained rows and gets their gradient") {
  manual_seed(2);
  nn::LearnedPositionalEmbedding pos(6, 4);
  const Tensor x = randn({2, 3, 4});
  check_close(pos.forward(x, 2), x + pos.weight.narrow(0, 2, 3), 1e-6f, 1e-7f, "learned");
  gradcheck([&](const std::vector<Tensor>& v) { return weighted_sum(pos.forward(v[0], 1)); },
            {x, pos.weight}, 1e-2f, 2e-2f, 2e-3f, "LearnedPositionalEmbedding");
  check_error([&] { pos.forward(x, 4); }, {"LearnedPositionalEmbedding", "max_len 6"});
}

TEST_CASE("layers reject inputs of the wrong shape or dtype, naming the layer and shapes") {
  nn::Linear lin(4, 3);
  check_error([&] { lin.forward(zeros({2, 5})); }, {"Linear(4, 3)", "[2,5]"});
  nn::Embedding emb(10, 4);
  check_error([&] { emb.forward(zeros({2})); }, {"Embedding(10, 4)", "int64"});
  check_error([&] { emb.forward(tensor_i64({10}, {1})); }, {"10"});
  nn::LayerNorm ln(8);
  check_error([&] { ln.forward(zeros({2, 4})); }, {"LayerNorm(8)", "[2,4]"});
  check_error([] { nn::Linear(0, 3); }, {"Linear", "positive"});
}
