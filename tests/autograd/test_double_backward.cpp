// Gradients of gradients: autograd::grad and Tensor::backward with create_graph. A
// gradgradcheck (finite differences of the gradient) over the ops, golden second derivatives
// from PyTorch (a Hessian-vector product, a WGAN-GP gradient penalty: tests/golden/gen_grad.py),
// torch.autograd.grad's semantics, and the errors.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "test_util.h"

using namespace loom;
using loom::testing::check_close;
using loom::testing::expect_error;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Central differences of the scalar g(inputs) with respect to every element of inputs[k],
// each perturbed in place (outside autograd) and restored.
Tensor numeric_gradient(const std::function<float()>& g, const Tensor& x, float eps) {
  Tensor flat = x.detach();  // shares storage
  const std::vector<float> base = flat.to_vector();
  std::vector<float> numeric(base.size());
  auto set = [&](const std::vector<float>& values) {
    NoGradGuard no_grad;
    flat.copy_(tensor(values, flat.shape()));
  };
  for (size_t i = 0; i < base.size(); ++i) {
    std::vector<float> v = base;
    v[i] = base[i] + eps;
    set(v);
    const double plus = g();
    v[i] = base[i] - eps;
    set(v);
    const double minus = g();
    numeric[i] = static_cast<float>((plus - minus) / (2.0 * eps));
  }
  set(base);
  return tensor(numeric, x.shape());
}

// torch.autograd.gradgradcheck's idea: the gradient of f, computed with create_graph, is a
// function like any other, so its own gradient (the recorded backward, differentiated) must
// match finite differences of it. With a fixed random grad_output v and fixed random weights
// u_k, G = sum_k <u_k, d<f, v>/d input_k> is differentiated with respect to every float input
// and v itself (a backward is linear in v: that checks the recorded backward uses it).
void gradgradcheck(const Fn& f, std::vector<Tensor> inputs, const std::string& what,
                   float eps = 1e-2f, float rtol = 3e-2f, float atol = 3e-3f) {
  for (Tensor& x : inputs) x = x.detach().clone().requires_grad_();
  manual_seed(4242);
  const Tensor v = randn(f(inputs).shape()).requires_grad_();
  std::vector<Tensor> u;
  for (const Tensor& x : inputs) u.push_back(randn(x.shape()));
  auto G = [&](bool create_graph) {
    const std::vector<Tensor> grads =
        autograd::grad({f(inputs)}, inputs, {v}, false, create_graph, /*allow_unused=*/true);
    Tensor total = zeros({});
    for (size_t k = 0; k < grads.size(); ++k)
      if (grads[k].defined()) total = total + sum(grads[k] * u[k]);
    return total;
  };
  std::vector<Tensor> wrt = inputs;
  wrt.push_back(v);
  const Tensor g = G(true);
  // A gradient that depends on nothing (relu's: a mask times v) builds no graph.
  std::vector<Tensor> analytic(wrt.size());
  if (g.requires_grad()) analytic = autograd::grad({g}, wrt, {}, false, false, true);
  for (size_t k = 0; k < wrt.size(); ++k) {
    const Tensor numeric = numeric_gradient([&] { return G(false).item(); }, wrt[k], eps);
    const Tensor a = analytic[k].defined() ? analytic[k] : zeros(wrt[k].shape());
    check_close(a, numeric, rtol, atol,
                what + (k + 1 == wrt.size() ? " d/d grad_output" : " d/d input " +
                                                                       std::to_string(k)));
  }
}

Tensor positive(Shape s) { return abs(randn(std::move(s))) + 0.5f; }
// Values kept at least `gap` away from each of `kinks` (where a derivative jumps).
Tensor away_from(Tensor x, std::initializer_list<float> kinks, float gap = 0.1f) {
  for (float k : kinks) x = where(lt(abs(x - k), scalar_tensor(gap)), x + 2.0f * gap, x);
  return x.detach();
}

const std::map<std::string, Tensor>& golden() {
  static const std::map<std::string, Tensor> tensors =
      nn::read_safetensors(std::string(LOOM_TEST_DATA) + "/grad.safetensors");
  return tensors;
}
Tensor golden(const std::string& name) {
  auto it = golden().find(name);
  REQUIRE_MESSAGE(it != golden().end(), "grad.safetensors has no tensor " << name);
  return it->second;
}

}  // namespace

TEST_CASE("gradgradcheck: every differentiable unary function") {
  manual_seed(1);
  using U = std::function<Tensor(const Tensor&)>;
  const Tensor any = randn({3, 4}), pos = positive({3, 4});
  const Tensor smooth_kinks = away_from(randn({3, 4}) * 2.0f, {0.0f});
  const std::vector<std::tuple<const char*, U, Tensor>> fns = {
      {"exp", [](const Tensor& x) { return exp(x); }, any},
      {"log", [](const Tensor& x) { return log(x); }, pos},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, pos},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, pos},
      {"tanh", [](const Tensor& x) { return tanh(x); }, any},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, any},
      {"relu", [](const Tensor& x) { return relu(x) * x; }, smooth_kinks},
      {"gelu", [](const Tensor& x) { return gelu(x); }, any},
      {"gelu_tanh", [](const Tensor& x) { return gelu_tanh(x); }, any},
      {"abs", [](const Tensor& x) { return abs(x) * x; }, smooth_kinks},
      {"sin", [](const Tensor& x) { return sin(x); }, any},
      {"cos", [](const Tensor& x) { return cos(x); }, any},
      {"neg", [](const Tensor& x) { return -x * x; }, any},
      {"pow3", [](const Tensor& x) { return pow(x, 3.0f); }, any},
      {"pow-1.5", [](const Tensor& x) { return pow(x, -1.5f); }, pos},
      {"affine", [](const Tensor& x) { return (2.0f - x * 3.0f + 1.0f) * x; }, any},
      {"rdiv", [](const Tensor& x) { return 2.0f / x; }, pos},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5f, 0.7f) * x; },
       away_from(randn({3, 4}), {-0.5f, 0.7f})},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, pos},
      {"square", [](const Tensor& x) { return square(x) * x; }, any},
      {"log1p", [](const Tensor& x) { return log1p(x); }, pos},
      {"expm1", [](const Tensor& x) { return expm1(x); }, any},
      {"log2", [](const Tensor& x) { return log2(x); }, pos},
      {"exp2", [](const Tensor& x) { return exp2(x); }, any},
      {"erf", [](const Tensor& x) { return erf(x); }, any},
      {"silu", [](const Tensor& x) { return silu(x); }, any},
      {"softplus", [](const Tensor& x) { return softplus(x, 2.0f, 3.0f); },
       away_from(randn({3, 4}), {1.5f})},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.1f) * x; }, smooth_kinks},
      {"elu", [](const Tensor& x) { return elu(x, 0.7f); }, smooth_kinks},
      {"mish", [](const Tensor& x) { return mish(x); }, any},
      {"hardswish", [](const Tensor& x) { return hardswish(x) * x; },
       away_from(randn({3, 4}) * 3.0f, {-3.0f, 3.0f})},
      {"logit", [](const Tensor& x) { return logit(x); }, rand({3, 4}) * 0.8f + 0.1f},
      {"logit eps", [](const Tensor& x) { return logit(x, 0.2f) * x; },
       away_from(rand({3, 4}), {0.2f, 0.8f}, 0.05f)},
      {"relu6", [](const Tensor& x) { return relu6(x) * x; },
       away_from(randn({3, 4}) * 4.0f + 3.0f, {0.0f, 6.0f})},
  };
  for (const auto& [name, f, x] : fns)
    gradgradcheck([f = f](const std::vector<Tensor>& in) { return f(in[0]); }, {x}, name, 1e-3f);
  // The same on a non-contiguous input.
  gradgradcheck([](const std::vector<Tensor>& in) { return tanh(in[0]) * sigmoid(in[0]); },
                {randn({4, 3}).transpose(0, 1)}, "tanh * sigmoid transposed", 1e-3f);
}

TEST_CASE("gradgradcheck: broadcasting binary ops, where and masked_fill") {
  manual_seed(2);
  using B = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<const char*, B>> fns = {
      {"add", [](const Tensor& a, const Tensor& b) { return (a + b) * (a + b); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return (a - b) * a; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / (b * b + 0.5f); }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a * a + 0.5f, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b) * a; }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b) * b; }},
  };
  for (const auto& [name, f] : fns)
    gradgradcheck([f = f](const std::vector<Tensor>& in) { return f(in[0], in[1]); },
                  {randn({3, 4}), randn({4})}, name, 1e-3f);
  const Tensor cond = gt(randn({3, 4}), scalar_tensor(0.0f));
  gradgradcheck([cond](const std::vector<Tensor>& in) { return where(cond, in[0], in[1]) * in[0]; },
                {randn({3, 4}), randn({1, 4})}, "where", 1e-3f);
  gradgradcheck(
      [cond](const std::vector<Tensor>& in) { return masked_fill(in[0] * in[0], cond, 2.0f); },
      {randn({3, 4})}, "masked_fill", 1e-3f);
}

TEST_CASE("gradgradcheck: matmul, linear and the fused bias activations") {
  manual_seed(3);
  const auto mm = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  gradgradcheck(mm, {randn({3, 4}), randn({4, 2})}, "matmul 2-D");
  gradgradcheck(mm, {randn({2, 3, 4}), randn({4, 2})}, "matmul batch @ 2-D");
  gradgradcheck(mm, {randn({2, 1, 3, 4}), randn({3, 4, 2})}, "matmul broadcast batch");
  gradgradcheck(mm, {randn({4}), randn({4, 2})}, "matmul 1-D @ 2-D");
  gradgradcheck(mm, {randn({4, 3}).transpose(0, 1), randn({4})}, "matmul transposed @ 1-D");
  gradgradcheck([](const std::vector<Tensor>& in) { return tanh(linear(in[0], in[1], in[2])); },
                {randn({2, 3, 4}), randn({5, 4}), randn({5})}, "linear");
  gradgradcheck([](const std::vector<Tensor>& in) { return tanh(linear(in[0], in[1], Tensor())); },
                {randn({3, 4}), randn({5, 4})}, "linear without bias");
  gradgradcheck([](const std::vector<Tensor>& in) { return bias_gelu(in[0], in[1]); },
                {randn({3, 4}), randn({4})}, "bias_gelu", 1e-3f);
  gradgradcheck([](const std::vector<Tensor>& in) { return add_softmax(in[0], in[1]); },
                {randn({2, 3, 4}), randn({3, 4})}, "add_softmax", 1e-3f);
  gradgradcheck([](const std::vector<Tensor>& in) { return bias_gelu_tanh(in[0], in[1]); },
                {randn({3, 4}), randn({4})}, "bias_gelu_tanh", 1e-3f);
  gradgradcheck([](const std::vector<Tensor>& in) { return bias_relu(in[0], in[1]) * in[0]; },
                {away_from(randn({3, 4}), {0.0f}, 0.5f), zeros({4})}, "bias_relu", 1e-3f);
  gradgradcheck(
      [](const std::vector<Tensor>& in) {
        return linear_activation(in[0], in[1], in[2], UnaryOp::Gelu);
      },
      {randn({3, 4}), randn({2, 4}), randn({2})}, "linear_activation gelu", 1e-3f);
}

TEST_CASE("gradgradcheck: reductions, softmax and log_softmax") {
  manual_seed(4);
  using R = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<const char*, R>> fns = {
      {"sum", [](const Tensor& x) { return sum(x * x); }},
      {"sum dim", [](const Tensor& x) { return sum(x * x, 1, true) * x; }},
      {"mean", [](const Tensor& x) { return mean(x) * x; }},
      {"mean dim", [](const Tensor& x) { return mean(x * x, 0); }},
      {"max", [](const Tensor& x) { return max(x) * x; }},
      {"max dim", [](const Tensor& x) { return max(x * x, 1); }},
      {"min dim", [](const Tensor& x) { return min(x * x, 0, true); }},
      {"var", [](const Tensor& x) { return var(x, 1); }},
      {"softmax", [](const Tensor& x) { return softmax(x, 1); }},
      {"softmax dim 0", [](const Tensor& x) { return softmax(x, 0); }},
      {"log_softmax", [](const Tensor& x) { return log_softmax(x, -1); }},
      {"log_softmax dim 0", [](const Tensor& x) { return log_softmax(x, 0); }},
  };
  for (const auto& [name, f] : fns)
    gradgradcheck([f = f](const std::vector<Tensor>& in) { return f(in[0]); }, {randn({3, 4})},
                  name, 1e-3f);
  gradgradcheck([](const std::vector<Tensor>& in) { return softmax(in[0], -1); },
                {randn({3, 5, 2}).transpose(1, 2)}, "softmax strided", 1e-3f);
}

TEST_CASE("gradgradcheck: layer_norm and cross_entropy") {
  manual_seed(5);
  gradgradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2]); },
                {randn({3, 5}), randn({5}), randn({5})}, "layer_norm", 1e-3f);
  gradgradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], Tensor(), Tensor()); },
                {randn({2, 3, 4})}, "layer_norm without affine", 1e-3f);
  gradgradcheck(
      [](const std::vector<Tensor>& in) {
        auto [h, y] = add_layer_norm(in[0], in[1], in[2], in[3]);
        return y * h;
      },
      {randn({3, 4}), randn({3, 4}), randn({4}), randn({4})}, "add_layer_norm", 1e-3f);
  const Tensor target = tensor_i64({2, 0, -100, 3}, {4});
  gradgradcheck([target](const std::vector<Tensor>& in) { return cross_entropy(in[0], target); },
                {randn({4, 5})}, "cross_entropy", 1e-3f);
  gradgradcheck(
      [target](const std::vector<Tensor>& in) {
        return cross_entropy(in[0], target.reshape({2, 2}), -100, 0.2f);
      },
      {randn({2, 2, 5})}, "cross_entropy 3-D, label smoothing", 1e-3f);
}

TEST_CASE("gradgradcheck: views, joins and index ops") {
  manual_seed(6);
  using V = std::function<Tensor(const Tensor&)>;
  const Tensor idx = tensor_i64({2, 0, 2}, {3});
  const Tensor gather_idx = tensor_i64({0, 2, 1, 1, 0, 3}, {3, 2});
  const std::vector<std::pair<const char*, V>> fns = {
      {"reshape", [](const Tensor& x) { return x.reshape({4, 3}) * x.reshape({4, 3}); }},
      {"transpose", [](const Tensor& x) { return x.transpose(0, 1) * x.t(); }},
      {"permute", [](const Tensor& x) { return x.permute({1, 0}).contiguous() * x.t(); }},
      {"narrow", [](const Tensor& x) { return x.narrow(1, 1, 2) * x.narrow(1, 0, 2); }},
      {"expand", [](const Tensor& x) { return x.narrow(0, 0, 1).expand({3, 4}) * x; }},
      {"squeeze", [](const Tensor& x) { return x.unsqueeze(0).squeeze(0) * x; }},
      {"cat", [](const Tensor& x) { return cat({x, x * x}, 1); }},
      {"stack", [](const Tensor& x) { return stack({x, x * x}, 0); }},
      {"split", [](const Tensor& x) { return split(x * x, 2, 1)[1] * x.narrow(1, 0, 2); }},
      {"index_select", [idx](const Tensor& x) { return index_select(x * x, 1, idx); }},
      {"gather", [gather_idx](const Tensor& x) { return gather(x * x, 1, gather_idx); }},
      {"embedding", [idx](const Tensor& x) { return embedding(x, idx) * embedding(x, idx); }},
      {"roll", [](const Tensor& x) { return roll(x, 1, 1) * x; }},
      {"roll two dims", [](const Tensor& x) { return roll(x, {1, -1}, {0, 1}) * x; }},
      {"tril", [](const Tensor& x) { return tril(x * x, 0); }},
  };
  for (const auto& [name, f] : fns)
    gradgradcheck([f = f](const std::vector<Tensor>& in) { return f(in[0]); }, {randn({3, 4})},
                  name, 1e-3f);
  gradgradcheck(
      [](const std::vector<Tensor>& in) {
        manual_seed(11);  // the same mask every call
        return dropout(in[0] * in[0], 0.3f, true);
      },
      {randn({3, 4})}, "dropout", 1e-3f);
}

TEST_CASE("gradgradcheck: the tensor API's reductions, indexing, selection and linear algebra") {
  manual_seed(8);
  using namespace loom::indexing;
  using V = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<const char*, V>> fns = {
      {"sum dims", [](const Tensor& x) { return sum(x * x, Shape{0, 1}) * x; }},
      {"std", [](const Tensor& x) { return loom::std(x, Shape{1}, 1, true); }},
      {"logsumexp", [](const Tensor& x) { return logsumexp(x, 1); }},
      {"norm", [](const Tensor& x) { return norm(x, 2.0f, 1); }},
      {"cumsum", [](const Tensor& x) { return cumsum(x * x, 1); }},
      {"slice with step",
       [](const Tensor& x) {
         return x.index({Slice(), Slice(0, None, 2)}) * x.index({Slice(), Slice(1, None, 2)});
       }},
      {"index int64",
       [](const Tensor& x) { return x.index({tensor_i64({2, 0}, {2})}) * x.narrow(0, 0, 2); }},
      {"flip", [](const Tensor& x) { return flip(x, {1}) * x; }},
      {"repeat", [](const Tensor& x) { return repeat(x * x, {2, 1}); }},
      {"topk", [](const Tensor& x) { return topk(x * x, 2, 1).values; }},
      {"sort", [](const Tensor& x) { return sort(x, 1).values * x; }},
      {"amax", [](const Tensor& x) { return amax(x * x, {1}); }},
      {"einsum", [](const Tensor& x) { return einsum("ij,kj->ik", {x, x * x}); }},
      {"outer", [](const Tensor& x) { return outer(x.narrow(0, 0, 1).reshape({4}), x.flatten()); }},
      {"bmm", [](const Tensor& x) { return bmm(x.unsqueeze(0), x.t().unsqueeze(0)); }},
  };
  for (const auto& [name, f] : fns)
    gradgradcheck([f = f](const std::vector<Tensor>& in) { return f(in[0]); }, {randn({3, 4})},
                  name, 1e-3f);
}

TEST_CASE("gradgradcheck: im2col, col2im, max pooling and batch_norm") {
  manual_seed(43);
  const WindowGeometry w{{3, 2}, {2, 1}, {1, 1}, {1, 2}};
  gradgradcheck([&](const std::vector<Tensor>& t) { return im2col(t[0] * t[0], w, 0.5f); },
                {randn({1, 2, 5, 4})}, "im2col");
  const Shape cols = im2col(zeros({1, 2, 5, 4}), w).shape();
  gradgradcheck([&](const std::vector<Tensor>& t) { return col2im(t[0] * t[0], 5, 4, w); },
                {randn(cols)}, "col2im");
  const Tensor distinct = randperm(40).to(DType::Float32).reshape({1, 2, 4, 5}) * 0.1f + 1.0f;
  gradgradcheck([&](const std::vector<Tensor>& t) {
                  return std::get<0>(max_pool2d_with_indices(t[0] * t[0], w));
                },
                {distinct}, "max_pool2d_with_indices");
  gradgradcheck([](const std::vector<Tensor>& t) {
                  return batch_norm(t[0], t[1], t[2], Tensor(), Tensor(), true);
                },
                {randn({3, 2, 4}), randn({2}), randn({2})}, "batch_norm (training)");
  const Tensor running_mean = randn({2}), running_var = positive({2});
  gradgradcheck([&](const std::vector<Tensor>& t) {
                  return batch_norm(t[0] * t[0], t[1], t[2], running_mean, running_var, false);
                },
                {randn({3, 2, 4}), randn({2}), randn({2})}, "batch_norm (evaluation)");
  // The convolution on those columns: its backward, recorded, is a GEMM and col2im again.
  gradgradcheck([&](const std::vector<Tensor>& t) {
                  return tanh(conv2d_im2col(t[0], t[1], t[2], {{3, 2}, {2, 1}, {1, 1}, {1, 1}}, 2));
                },
                {randn({2, 4, 5, 4}), randn({6, 2, 3, 2}), randn({6})}, "conv2d_im2col");
}

TEST_CASE("Hessian-vector product of an MLP with layer_norm and cross_entropy matches PyTorch") {
  const std::vector<std::string> names = {"w1", "b1", "ln_w", "ln_b", "w2", "b2"};
  std::vector<Tensor> p;
  for (const auto& n : names) p.push_back(golden("hvp." + n).clone().requires_grad_());
  const Tensor x = golden("hvp.x"), target = golden("hvp.target");
  const Tensor h = layer_norm(gelu(linear(x, p[0], p[1])), p[2], p[3]);
  const Tensor loss = cross_entropy(linear(h, p[4], p[5]), target, -100, 0.1f);
  check_close(loss, golden("hvp.loss"), 1e-5f, 1e-6f, "loss");
  const std::vector<Tensor> g = autograd::grad({loss}, p, {}, false, /*create_graph=*/true);
  Tensor dot = zeros({});
  for (size_t i = 0; i < p.size(); ++i) {
    check_close(g[i], golden("hvp.grad." + names[i]), 1e-4f, 1e-6f, "grad " + names[i]);
    CHECK(g[i].requires_grad());
    dot = dot + sum(g[i] * golden("hvp.v." + names[i]));
  }
  const std::vector<Tensor> hv = autograd::grad({dot}, p);
  for (size_t i = 0; i < p.size(); ++i) {
    check_close(hv[i], golden("hvp.hv." + names[i]), 1e-3f, 1e-5f, "Hv " + names[i]);
    CHECK_FALSE(p[i].grad().defined());  // autograd::grad accumulates nothing
  }
}

TEST_CASE("a WGAN-GP gradient penalty trains the critic as in PyTorch") {
  // Gulrajani et al. 2017, eq. 3: the penalty on the norm of d critic / d x_hat is part of the
  // critic's loss, so its weights' gradient goes through the gradient itself.
  const std::vector<std::string> names = {"w1", "b1", "w2", "b2"};
  std::vector<Tensor> p;
  for (const auto& n : names) p.push_back(golden("gp." + n).clone().requires_grad_());
  auto critic = [&](const Tensor& x) {
    return linear(leaky_relu(linear(x, p[0], p[1]), 0.2f), p[2], p[3]);  // [B, 1]
  };
  const Tensor real = golden("gp.real"), fake = golden("gp.fake"), eps = golden("gp.eps");
  const Tensor x_hat = (eps * real + (1.0f - eps) * fake).requires_grad_();
  const Tensor d = critic(x_hat);
  const Tensor g = autograd::grad({d}, {x_hat}, {ones_like(d)}, false, true)[0];
  check_close(g, golden("gp.grad_x_hat"), 1e-4f, 1e-6f, "d critic / d x_hat");
  const Tensor penalty = mean(pow(sqrt(sum(g * g, 1)) - 1.0f, 2.0f));
  const Tensor loss = mean(critic(fake)) - mean(critic(real)) + penalty * 10.0f;
  check_close(penalty, golden("gp.penalty"), 1e-4f, 1e-6f, "penalty");
  check_close(loss, golden("gp.loss"), 1e-4f, 1e-6f, "loss");
  loss.backward();
  for (size_t i = 0; i < p.size(); ++i)
    check_close(p[i].grad(), golden("gp.grad." + names[i]), 1e-4f, 1e-5f, "grad " + names[i]);
  CHECK_FALSE(x_hat.grad().defined());  // autograd::grad left it alone; backward too (unused)
}

TEST_CASE("autograd::grad returns gradients and leaves .grad alone") {
  Tensor x = tensor({1.0f, 2.0f, 3.0f}, {3}).requires_grad_();
  Tensor w = tensor({0.5f, -1.0f, 2.0f}, {3}).requires_grad_();
  x.set_grad(ones({3}));  // an earlier gradient must stay as it is
  const Tensor y = sum(x * x * w);
  const std::vector<Tensor> g = autograd::grad({y}, {x, w});
  check_close(g[0], tensor({1.0f, -4.0f, 12.0f}, {3}), 0.0f, 1e-6f, "dy/dx = 2 x w");
  check_close(g[1], tensor({1.0f, 4.0f, 9.0f}, {3}), 0.0f, 1e-6f, "dy/dw = x^2");
  CHECK_FALSE(g[0].requires_grad());  // no create_graph: plain tensors
  CHECK(x.grad().to_vector() == std::vector<float>{1.0f, 1.0f, 1.0f});
  CHECK_FALSE(w.grad().defined());

  // grad_outputs weight each output; several outputs add up.
  Tensor a = tensor({1.0f, 2.0f}, {2}).requires_grad_();
  const Tensor y1 = a * 3.0f, y2 = sum(a * a);
  const std::vector<Tensor> ga =
      autograd::grad({y1, y2}, {a}, {tensor({1.0f, -1.0f}, {2}), Tensor()});
  check_close(ga[0], tensor({5.0f, 1.0f}, {2}), 0.0f, 1e-6f, "3 v + 2 a");

  // A non-leaf input: its gradient is caught where it was produced.
  Tensor b = tensor({1.0f, -2.0f}, {2}).requires_grad_();
  const Tensor h = b * 2.0f;
  const Tensor z = sum(h * h) + sum(b);
  const std::vector<Tensor> gh = autograd::grad({z}, {h, b}, {}, true);
  check_close(gh[0], tensor({4.0f, -8.0f}, {2}), 0.0f, 1e-6f, "dz/dh = 2 h");
  check_close(gh[1], tensor({9.0f, -15.0f}, {2}), 0.0f, 1e-6f, "dz/db = 8 b + 1");
  // The output itself, and a leaf output.
  check_close(autograd::grad({h}, {h}, {tensor({3.0f, 4.0f}, {2})})[0], tensor({3.0f, 4.0f}, {2}),
              0.0f, 0.0f, "dh/dh");
  check_close(autograd::grad({b}, {b}, {ones({2})})[0], ones({2}), 0.0f, 0.0f, "db/db");
}

TEST_CASE("autograd::grad: allow_unused, retain_graph and create_graph") {
  Tensor x = tensor({1.0f, 2.0f}, {2}).requires_grad_();
  Tensor unused = ones({2}).requires_grad_();
  Tensor y = sum(x * x);
  expect_error([&] { autograd::grad({y}, {x, unused}, {}, true); },
               {"grad", "input 1", "[2]", "allow_unused"});
  const std::vector<Tensor> g = autograd::grad({y}, {x, unused}, {}, true, false, true);
  CHECK(g[0].defined());
  CHECK_FALSE(g[1].defined());

  // retain_graph keeps the graph for another pass; without it the second pass is an error.
  autograd::grad({y}, {x}, {}, /*retain_graph=*/true);
  autograd::grad({y}, {x});
  expect_error([&] { autograd::grad({y}, {x}); }, {"backward", "second time", "retain_graph"});

  // create_graph: the gradient has a grad_fn and differentiates again; the graph is retained.
  Tensor t = tensor({0.5f, -1.5f}, {2}).requires_grad_();
  const Tensor f = sum(pow(t, 3.0f));
  const Tensor dt = autograd::grad({f}, {t}, {}, false, true)[0];  // 3 t^2
  CHECK(dt.requires_grad());
  const Tensor d2 = autograd::grad({sum(dt)}, {t})[0];  // 6 t
  check_close(d2, tensor({3.0f, -9.0f}, {2}), 0.0f, 1e-5f, "d2/dt2 t^3");
  check_close(autograd::grad({f}, {t})[0], tensor({0.75f, 6.75f}, {2}), 0.0f, 1e-5f, "again");

  // A third derivative: each gradient recorded again.
  Tensor s = tensor({0.3f, -0.7f}, {2}).requires_grad_();
  Tensor d = sum(tanh(s));
  for (int order = 0; order < 3; ++order) d = sum(autograd::grad({d}, {s}, {}, false, true)[0]);
  // d3/ds3 tanh = -2 (1 - t^2)(1 - 3 t^2), summed
  float expected = 0.0f;
  for (float v : {0.3f, -0.7f}) {
    const float th = std::tanh(v);
    expected += -2.0f * (1.0f - th * th) * (1.0f - 3.0f * th * th);
  }
  CHECK(d.item() == doctest::Approx(expected).epsilon(1e-4));
}

TEST_CASE("backward(create_graph) gives leaves a gradient with a graph") {
  Tensor x = tensor({1.0f, -2.0f, 0.5f}, {3}).requires_grad_();
  sum(pow(x, 3.0f)).backward(Tensor(), false, /*create_graph=*/true);
  const Tensor gx = x.grad();  // 3 x^2
  CHECK(gx.requires_grad());
  check_close(autograd::grad({sum(gx)}, {x})[0], x.detach() * 6.0f, 0.0f, 1e-5f, "6 x");
  // A plain backward afterwards accumulates as usual, into a fresh .grad.
  x.set_grad(Tensor());
  sum(x * x).backward();
  CHECK_FALSE(x.grad().requires_grad());
  check_close(x.grad(), x.detach() * 2.0f, 0.0f, 0.0f, "2 x");
}

TEST_CASE("autograd::grad errors name the problem") {
  Tensor x = ones({2, 3}).requires_grad_();
  Tensor y = x * 2.0f;
  expect_error([&] { autograd::grad({y}, {x}); },
               {"grad", "one-element", "[2,3]", "grad_outputs"});
  expect_error([&] { autograd::grad({y}, {x}, {ones({3, 2})}); },
               {"grad", "grad_output 0", "[3,2]", "[2,3]"});
  expect_error([&] { autograd::grad({y}, {x}, {ones({2, 3}), ones({2, 3})}); },
               {"grad", "2 grad_outputs", "1 outputs"});
  expect_error([&] { autograd::grad({ones({1})}, {x}); }, {"grad", "output 0", "require grad"});
  expect_error([&] { autograd::grad({sum(y)}, {ones({2})}); }, {"grad", "input 0", "require grad"});
  expect_error([&] { autograd::grad({}, {x}); }, {"grad", "no outputs"});
  expect_error([&] { autograd::grad({sum(y)}, {Tensor()}); }, {"grad", "input 0", "undefined"});
}

TEST_CASE("a second backward through a kernel with no derivative names the op") {
  Tensor x = (rand({2, 3}) + 0.5f).requires_grad_();
  const Tensor g = autograd::grad({sum(cumprod(x, 1))}, {x}, {}, false, true)[0];
  expect_error([&] { autograd::grad({sum(g)}, {x}); }, {"cumprod", "differentiated twice"});
}

TEST_CASE("a second backward through fused attention names the op") {
  namespace F = loom::nn::functional;
  F::set_fused_attention(Device::CPU, true);
  manual_seed(7);
  Tensor q = randn({2, 5, 8}).requires_grad_(), k = randn({2, 5, 8}).requires_grad_(),
         v = randn({2, 5, 8}).requires_grad_();
  const Tensor out = F::scaled_dot_product_attention(q, k, v, F::AttentionOptions{});
  F::reset_fused_attention(Device::CPU);
  // The first derivative works under create_graph (a gradient penalty on a transformer's
  // input needs only it) ...
  const std::vector<Tensor> g = autograd::grad({sum(out * out)}, {q, k, v}, {}, false, true);
  CHECK(g[0].requires_grad());
  // ... and differentiating it again raises, never a silent zero.
  expect_error([&] { autograd::grad({sum(g[0])}, {q}); },
               {"scaled_dot_product_attention", "differentiated twice"});
}
