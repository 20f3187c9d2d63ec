// Double backward on CUDA against the CPU: autograd::grad with create_graph through the ops
// whose backward is a kernel on a plain backward and recorded ops under create_graph (the unary
// functions, softmax, layer_norm, cross_entropy, linear), then a Hessian-vector product and a
// gradient penalty differentiated again. Without a GPU the cases return at once (test_cuda.cpp's
// first case reports that once); tests/cuda/emulator/run_emulated.sh runs them on the CPU
// emulator.
#include <string>
#include <vector>

#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

// d/d params of sum_k <u_k, d loss / d params_k>, the loss built by `loss` on `device`: a
// Hessian-vector product (u the vector), through autograd::grad with create_graph.
std::vector<Tensor> hessian_vector(
    const std::function<Tensor(const std::vector<Tensor>&)>& loss,
    const std::vector<Tensor>& params, const std::vector<Tensor>& u, Device device) {
  std::vector<Tensor> p;
  for (const Tensor& t : params) p.push_back(t.to(device).detach().requires_grad_());
  const std::vector<Tensor> g = autograd::grad({loss(p)}, p, {}, false, true);
  Tensor dot = zeros({}, device);
  for (size_t k = 0; k < p.size(); ++k) dot = dot + sum(g[k] * u[k].to(device));
  std::vector<Tensor> hv = autograd::grad({dot}, p);
  for (Tensor& t : hv) t = t.to(Device::CPU);
  return hv;
}

}  // namespace

TEST_CASE("double backward through unary, softmax, layer_norm, cross_entropy and linear on CUDA") {
  LOOM_REQUIRE_GPU();
  manual_seed(21);
  const Tensor x = randn({6, 5}), target = tensor_i64({0, 4, -100, 2, 1, 3}, {6});
  const std::vector<Tensor> params = {randn({8, 5}) * 0.5f, randn({8}), randn({8}) + 1.0f,
                                      randn({8}), randn({5, 8}) * 0.5f, randn({5})};
  std::vector<Tensor> u;
  for (const Tensor& t : params) u.push_back(randn(t.shape()));
  // One MLP through every graph-building backward: the activations' table derivatives,
  // layer_norm, log_softmax, cross_entropy and linear.
  for (const char* act : {"gelu", "tanh", "sigmoid", "silu", "gelu_tanh", "mish", "elu"}) {
    CAPTURE(act);
    auto loss = [&x, &target, act = std::string(act)](const std::vector<Tensor>& p) {
      const Device d = p[0].device();
      Tensor h = linear(x.to(d), p[0], p[1]);
      h = act == "gelu"        ? gelu(h)
          : act == "tanh"      ? tanh(h)
          : act == "sigmoid"   ? sigmoid(h)
          : act == "silu"      ? silu(h)
          : act == "gelu_tanh" ? gelu_tanh(h)
          : act == "mish"      ? mish(h)
                               : elu(h);
      const Tensor logits = linear(layer_norm(h, p[2], p[3]), p[4], p[5]);
      return cross_entropy(logits, target.to(d), -100, 0.1f) + mean(exp(log_softmax(logits, 0)));
    };
    const std::vector<Tensor> cpu = hessian_vector(loss, params, u, Device::CPU);
    const std::vector<Tensor> gpu = hessian_vector(loss, params, u, Device::CUDA);
    for (size_t k = 0; k < cpu.size(); ++k)
      check_close(gpu[k], cpu[k], 1e-3f, 1e-4f, std::string(act) + " Hv " + std::to_string(k));
  }
}

TEST_CASE("a gradient penalty's backward on CUDA matches the CPU") {
  LOOM_REQUIRE_GPU();
  manual_seed(22);
  const Tensor w1 = randn({6, 4}), b1 = randn({6}), w2 = randn({1, 6}), x = randn({5, 4});
  std::vector<std::vector<Tensor>> grads;
  for (Device device : {Device::CPU, Device::CUDA}) {
    std::vector<Tensor> p;
    for (const Tensor& t : {w1, b1, w2}) p.push_back(t.to(device).detach().requires_grad_());
    const Tensor xd = x.to(device).detach().requires_grad_();
    const Tensor d = linear(softplus(linear(xd, p[0], p[1])), p[2], Tensor());
    const Tensor g = autograd::grad({d}, {xd}, {ones_like(d)}, false, true)[0];
    mean(pow(sqrt(sum(g * g, 1)) - 1.0f, 2.0f)).backward();
    grads.push_back({p[0].grad().to(Device::CPU), p[1].grad().to(Device::CPU),
                     p[2].grad().to(Device::CPU)});
  }
  for (size_t k = 0; k < 3; ++k)
    check_close(grads[1][k], grads[0][k], 1e-3f, 1e-4f, "penalty grad " + std::to_string(k));
}
