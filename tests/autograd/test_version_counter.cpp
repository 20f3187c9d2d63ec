// The version counter and anomaly mode. Tensors saved for backward carry the version of their
// storage; an in-place change between forward and backward is an error (as in PyTorch), never
// a silently wrong gradient. Anomaly mode names the op whose backward produced NaN/Inf.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>

#include "loom.h"

using namespace loom;

namespace {
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Turns anomaly mode on for one scope.
struct AnomalyScope {
  AnomalyScope() { autograd::set_detect_anomaly(true); }
  ~AnomalyScope() { autograd::set_detect_anomaly(false); }
};
}  // namespace

TEST_CASE("in-place ops bump the version counter, shared by views") {
  Tensor t = zeros({4});
  Tensor view = t.narrow(0, 1, 2);
  CHECK(t.version() == 0);
  t.fill_(1.f);
  t.mul_(2.f);
  t.add_(ones({4}));
  t.zero_();
  view.copy_(ones({2}));
  CHECK(t.version() == 5);
  CHECK(view.version() == 5);
  CHECK(t.detach().version() == 5);
}

TEST_CASE("modifying a tensor saved for backward in place makes backward throw (exp, mul_)") {
  // The exact reproduction of the issue: x.grad used to be 100 * exp(x).
  manual_seed(0);
  Tensor x = randn({3}).requires_grad_();
  Tensor y = x.exp();
  Tensor z = y.sum();
  y.mul_(100);
  const std::string what = error_of([&] { z.backward(); });
  CHECK(what.find("one of the variables needed for gradient computation has been modified by an "
                  "inplace operation") != std::string::npos);
  CHECK(what.find("'exp'") != std::string::npos);
  CHECK(what.find("is at version 1; expected version 0") != std::string::npos);
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("an in-place change of an input saved by matmul is caught; one not saved is not") {
  Tensor w = ones({2, 2}).requires_grad_();
  Tensor a = ones({3, 2});
  Tensor out = matmul(a, w).sum();
  a.fill_(5.f);  // matmul's backward reads a to compute dw
  CHECK(error_of([&] { out.backward(); }).find("'matmul'") != std::string::npos);

  // add saves nothing: changing its input in place after the forward changes no gradient.
  Tensor b = ones({3}).requires_grad_();
  Tensor c = ones({3});
  Tensor s = (b + c).sum();
  c.fill_(2.f);
  s.backward();
  CHECK(b.grad().to_vector() == std::vector<float>{1, 1, 1});
}

TEST_CASE("optimizer steps between iterations do not trip the version check") {
  Tensor w = ones({2}).requires_grad_();
  optim::SGD opt(std::vector<Tensor>{w}, 0.1f);
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    (w * w).sum().backward();  // a fresh graph each step sees the current version
    opt.step();
  }
  CHECK(w.version() >= 3);
}

TEST_CASE("anomaly mode names the op whose backward produced Inf or NaN") {
  CHECK_FALSE(autograd::is_anomaly_enabled());
  {
    AnomalyScope on;
    CHECK(autograd::is_anomaly_enabled());
    Tensor x = zeros({2}).requires_grad_();
    const std::string what = error_of([&] { x.sqrt().sum().backward(); });  // d sqrt(0) = inf
    CHECK(what.find("anomaly detected") != std::string::npos);
    CHECK(what.find("'sqrt'") != std::string::npos);
    CHECK(what.find("Inf") != std::string::npos);
    CHECK(what.find("input 0") != std::string::npos);

    Tensor y = zeros({2}).requires_grad_();
    Tensor l = (y.log() * 0.0f).sum();  // 0 * -inf = NaN in the forward; backward: 0 * (1/0)
    const std::string nan = error_of([&] { l.backward(); });
    CHECK(nan.find("anomaly detected") != std::string::npos);
    CHECK(nan.find("'log'") != std::string::npos);
    CHECK(nan.find("NaN") != std::string::npos);

    Tensor ok = ones({2}).requires_grad_();
    ok.sqrt().sum().backward();  // finite: no error
    CHECK(ok.grad().defined());
  }
  CHECK_FALSE(autograd::is_anomaly_enabled());
  Tensor x = zeros({2}).requires_grad_();
  x.sqrt().sum().backward();  // off: the Inf gradient goes through, as in PyTorch
  CHECK(std::isinf(x.grad().to_vector()[0]));
}
