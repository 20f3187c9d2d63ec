// clip_grad_norm: the returned norm is the global L2 norm of all gradients, gradients above the
// limit are scaled by max_norm / (norm + 1e-6) (torch.nn.utils.clip_grad_norm_), gradients
// within it are untouched, parameters without gradients are ignored.
#include <cmath>
#include <limits>

#include "backends/backend.h"
#include "test_util.h"

using namespace loom;
using loom::testing::check_close;

namespace {

Tensor param_with_grad(std::vector<float> grad, Shape shape) {
  Tensor p = zeros(shape);
  p.requires_grad_(true);
  p.set_grad(tensor(std::move(grad), shape));
  return p;
}

double hand_norm(const std::vector<std::vector<float>>& grads) {
  double squares = 0.0;
  for (const auto& g : grads)
    for (float x : g) squares += double(x) * x;
  return std::sqrt(squares);
}

std::vector<float> scaled(std::vector<float> g, double scale) {
  for (float& x : g) x = static_cast<float>(x * scale);
  return g;
}

}  // namespace

TEST_CASE("clip_grad_norm scales all gradients by max_norm / (norm + 1e-6) when above") {
  const std::vector<float> g1 = {3.0f, -4.0f, 1.0f, 2.0f, 0.5f, -1.5f}, g2 = {12.0f, -0.25f};
  Tensor a = param_with_grad(g1, {2, 3}), b = param_with_grad(g2, {2});
  Tensor no_grad = zeros({4});
  no_grad.requires_grad_(true);
  const double norm = hand_norm({g1, g2});
  const float max_norm = 1.5f;
  const float returned = optim::clip_grad_norm({a, no_grad, b}, max_norm);
  CHECK(returned == doctest::Approx(norm).epsilon(1e-6));
  const double scale = max_norm / (norm + 1e-6);
  check_close(a.grad(), tensor(scaled(g1, scale), {2, 3}), 1e-6f, 0.0f, "a.grad");
  check_close(b.grad(), tensor(scaled(g2, scale), {2}), 1e-6f, 0.0f, "b.grad");
  CHECK_FALSE(no_grad.grad().defined());
  // The clipped gradients have norm max_norm (up to the 1e-6).
  std::vector<float> ga = a.grad().to_vector(), gb = b.grad().to_vector();
  CHECK(hand_norm({ga, gb}) == doctest::Approx(max_norm).epsilon(1e-5));
}

TEST_CASE("clip_grad_norm leaves gradients within the limit untouched") {
  const std::vector<float> g = {0.3f, -0.4f};
  Tensor p = param_with_grad(g, {2});
  const float returned = optim::clip_grad_norm({p}, 1.0f);
  CHECK(returned == doctest::Approx(hand_norm({g})).epsilon(1e-6));
  check_close(p.grad(), tensor(g, {2}), 0.0f, 0.0f, "unclipped grad");
}

TEST_CASE("clip_grad_norm of parameters without gradients is 0") {
  Tensor p = zeros({3});
  p.requires_grad_(true);
  CHECK(optim::clip_grad_norm({p}, 1.0f) == 0.0f);
  CHECK(optim::clip_grad_norm({}, 1.0f) == 0.0f);
}

TEST_CASE("clip_grad_norm works on gradients produced by backward") {
  Tensor w = tensor({1.0f, 2.0f, 3.0f}, {3});
  w.requires_grad_(true);
  sum(w * w * 10.0f).backward();  // grad = 20 w
  const double norm = 20.0 * std::sqrt(1.0 + 4.0 + 9.0);
  CHECK(optim::clip_grad_norm({w}, 2.0f) == doctest::Approx(norm).epsilon(1e-6));
  const double scale = 2.0 / (norm + 1e-6);
  check_close(w.grad(), tensor(scaled({20.0f, 40.0f, 60.0f}, scale), {3}), 1e-6f, 0.0f, "w.grad");
}

TEST_CASE("clip_grad_norm rejects a non-positive max_norm") {
  Tensor p = param_with_grad({1.0f}, {1});
  CHECK_THROWS_WITH_AS(optim::clip_grad_norm({p}, 0.0f),
                       doctest::Contains("clip_grad_norm_: max_norm 0"), Error);
  CHECK_THROWS_WITH_AS(optim::clip_grad_norm({p}, -1.0f),
                       doctest::Contains("clip_grad_norm_: max_norm -1"), Error);
}

// ---------------------------------------------------------------------------- multi-tensor kernels
// clip_grad_norm's Backend::sum_of_squares_multi and scale_multi (tests/cuda/test_cuda_optim.cpp
// compares the CUDA ones with these).

TEST_CASE("sum_of_squares_multi is the double sum of x^2 over every tensor, any layout") {
  using loom::testing::philox_tensor;
  const std::vector<Tensor> xs = {philox_tensor({1}, 1), philox_tensor({0}, 2),
                                  philox_tensor({1025}, 3), philox_tensor({40, 3}, 4).t(),
                                  philox_tensor({70000}, 5)};
  double want = 0.0;
  for (const Tensor& x : xs)
    for (float v : x.contiguous().to_vector()) want += double(v) * v;
  Tensor out = Tensor::empty({}, DType::Float32, Device::CPU);
  cpu_backend().sum_of_squares_multi(xs, out);
  CHECK(out.item() == static_cast<float>(want));
  cpu_backend().sum_of_squares_multi(std::vector<Tensor>{philox_tensor({0}, 2)}, out);
  CHECK(out.item() == 0.0f);
  cpu_backend().sum_of_squares_multi({}, out);
  CHECK(out.item() == 0.0f);
}

TEST_CASE("sum_of_squares_multi gives the same bits on one thread or three, over many tensors") {
  // A model's list: many small tensors (biases, norms) and a few large ones, 1.1 million
  // elements in all, so that the blocks are shared among the threads.
  using loom::testing::philox_tensor;
  std::vector<Tensor> xs;
  double want = 0.0;
  for (int i = 0; i < 150; ++i) {
    const int64_t n = i % 10 == 0 ? 70001 + i : 3 + 37 * i;
    xs.push_back(philox_tensor({n}, 200 + i));
    for (float v : xs.back().to_vector()) want += double(v) * v;
  }
  const int saved = get_num_threads();
  std::vector<float> got;
  for (int threads : {1, 3}) {
    set_num_threads(threads);
    Tensor out = Tensor::empty({}, DType::Float32, Device::CPU);
    cpu_backend().sum_of_squares_multi(xs, out);
    got.push_back(out.item());
  }
  set_num_threads(saved);
  CHECK(got[0] == got[1]);
  CHECK(got[0] == doctest::Approx(want).epsilon(1e-7));
}

TEST_CASE("scale_multi scales every tensor in place like mul_") {
  using loom::testing::philox_tensor;
  std::vector<Tensor> xs = {philox_tensor({3}, 1), philox_tensor({0}, 2),
                            philox_tensor({5, 7}, 3), philox_tensor({20000}, 4)};
  std::vector<Tensor> want;
  for (const Tensor& x : xs) want.push_back(x.clone().mul_(0.37f));
  cpu_backend().scale_multi(xs, 0.37f);
  for (size_t i = 0; i < xs.size(); ++i)
    check_close(xs[i], want[i], 0.0f, 0.0f, "tensor " + std::to_string(i));
}

TEST_CASE("zero_multi zeroes every tensor in place, NaN and infinity included") {
  using loom::testing::philox_tensor;
  std::vector<Tensor> xs = {philox_tensor({3}, 1), philox_tensor({0}, 2),
                            philox_tensor({5, 7}, 3), philox_tensor({20000}, 4)};
  xs[0].data_ptr<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  xs[3].data_ptr<float>()[7] = std::numeric_limits<float>::infinity();
  cpu_backend().zero_multi(xs);
  for (size_t i = 0; i < xs.size(); ++i)
    check_close(xs[i], zeros(xs[i].shape()), 0.0f, 0.0f, "tensor " + std::to_string(i));
}

TEST_CASE("sum_of_squares_multi, scale_multi and zero_multi name the tensor at fault") {
  using loom::testing::expect_error;
  Tensor out = Tensor::empty({}, DType::Float32, Device::CPU);
  const std::vector<Tensor> ints = {zeros({2}), Tensor::empty({3}, DType::Int64, Device::CPU)};
  expect_error([&] { cpu_backend().sum_of_squares_multi(ints, out); },
               {"sum_of_squares_multi", "x has dtype int64", "tensor 1 of 2"});
  Tensor two = zeros({2});
  expect_error([&] { cpu_backend().sum_of_squares_multi(ints, two); },
               {"sum_of_squares_multi", "out has shape [2]", "expected 1 elements"});
  std::vector<Tensor> strided = {zeros({2}), zeros({3}), zeros({4, 5}).t()};
  expect_error([&] { cpu_backend().scale_multi(strided, 0.5f); },
               {"scale_multi", "x (shape [5,4]) must be contiguous", "tensor 2 of 3"});
  expect_error([&] { cpu_backend().zero_multi(strided); },
               {"zero_multi", "x (shape [5,4]) must be contiguous", "tensor 2 of 3"});
}

TEST_CASE("clip_grad_norm measures and scales a strided gradient like a contiguous one") {
  const std::vector<float> g1 = {3.0f, -4.0f, 1.0f, 2.0f, 0.5f, -1.5f}, g2 = {12.0f, -0.25f};
  Tensor a = zeros({3, 2});
  a.requires_grad_(true);
  a.set_grad(tensor(g1, {2, 3}).t());  // a transposed (strided) gradient
  Tensor b = param_with_grad(g2, {2});
  const double norm = hand_norm({g1, g2});
  CHECK(optim::clip_grad_norm({a, b}, 1.5f) == doctest::Approx(norm).epsilon(1e-6));
  const double scale = 1.5 / (norm + 1e-6);
  check_close(a.grad(), tensor(scaled(g1, scale), {2, 3}).t(), 1e-6f, 0.0f, "strided a.grad");
  check_close(b.grad(), tensor(scaled(g2, scale), {2}), 1e-6f, 0.0f, "b.grad");
}

TEST_CASE("clip_grad_norm counts bfloat16 gradients in the norm beside float32 ones") {
  // Values exact in bfloat16, so the hand norm is exact too.
  const std::vector<float> g1 = {3.0f, -4.0f}, g2 = {12.0f, 0.5f, -1.5f}, g3 = {2.0f};
  Tensor a = param_with_grad(g1, {2});
  Tensor b = zeros({3}, DType::BFloat16), c = zeros({1}, DType::BFloat16);
  b.requires_grad_(true);
  c.requires_grad_(true);
  b.set_grad(tensor(g2, {3}).to(DType::BFloat16));
  c.set_grad(tensor(g3, {1}).to(DType::BFloat16));
  const double norm = hand_norm({g1, g2, g3});
  CHECK(optim::clip_grad_norm({a, b, c}, 100.0f) == doctest::Approx(norm).epsilon(1e-6));
  // Within the limit: untouched.
  check_close(b.grad().to(DType::Float32), tensor(g2, {3}), 0.0f, 0.0f, "bfloat16 grad");
}
