// Conv2d, max_pool2d and BatchNorm2d (the CNN backbone pieces) against PyTorch, gradient checks
// and error paths.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "nn_golden.h"

using namespace loom;
using namespace loom::testing;
namespace F = loom::nn::functional;

TEST_CASE("Conv2d matches PyTorch: stride 2 with padding, and no bias") {
  nn::Conv2d conv(3, 4, 3, 2, 1);
  load_case_state(conv, "conv_strided");
  auto in = case_inputs("conv_strided");  // [2,3,7,6] -> [2,4,4,3]
  check_case("conv_strided", conv.forward(in[0]), in, &conv);

  nn::Conv2d conv_nb(2, 3, 2, 1, 0, false);
  load_case_state(conv_nb, "conv_nobias");
  auto in2 = case_inputs("conv_nobias");  // [1,2,5,5] -> [1,3,4,4]
  check_case("conv_nobias", conv_nb.forward(in2[0]), in2, &conv_nb);
}

TEST_CASE("max_pool2d matches PyTorch, with and without padding") {
  auto in = case_inputs("max_pool");  // k=2, s=2 on [2,3,6,6]
  check_case("max_pool", nn::MaxPool2d(2).forward(in[0]), in);
  auto in2 = case_inputs("max_pool_padded");  // k=3, s=2, p=1 on [1,2,7,7]: overlapping
  check_case("max_pool_padded", F::max_pool2d(in2[0], 3, 2, 1), in2);
}

TEST_CASE("BatchNorm2d training step matches PyTorch, including the running statistics") {
  nn::BatchNorm2d bn(4);
  load_case_state(bn, "batch_norm_train");
  auto in = case_inputs("batch_norm_train");
  check_case("batch_norm_train", bn.forward(in[0]), in, &bn);
  const auto after = fixture_group("batch_norm_train", "state_after");
  check_close(bn.running_mean, after.at("running_mean"), 1e-5f, 1e-6f, "running_mean");
  check_close(bn.running_var, after.at("running_var"), 1e-5f, 1e-6f, "running_var");
  CHECK(bn.num_batches_tracked.to_vector_i64() == after.at("num_batches_tracked").to_vector_i64());
}

TEST_CASE("BatchNorm2d evaluation uses the running statistics, as PyTorch") {
  nn::BatchNorm2d bn(4);
  load_case_state(bn, "batch_norm_eval");
  bn.eval();
  const std::vector<float> running_mean = bn.running_mean.to_vector();
  auto in = case_inputs("batch_norm_eval");
  check_case("batch_norm_eval", bn.forward(in[0]), in, &bn);
  CHECK(bn.running_mean.to_vector() == running_mean);  // no update in evaluation
}

TEST_CASE("gradcheck: conv2d, max_pool2d, batch_norm") {
  manual_seed(31);
  nn::Conv2d conv(2, 3, 3, 2, 1);
  gradcheck([&](const std::vector<Tensor>& t) { return weighted_sum(conv.forward(t[0])); },
            {randn({1, 2, 5, 4}), conv.weight, conv.bias}, 1e-2f, 2e-2f, 2e-3f, "conv2d");

  // Distinct values 0.1 apart, so a +-0.01 perturbation never changes a window's maximum.
  std::vector<float> values(2 * 5 * 5);
  std::iota(values.begin(), values.end(), 0.0f);
  std::shuffle(values.begin(), values.end(), std::mt19937(5));
  for (float& v : values) v *= 0.1f;
  gradcheck([](const std::vector<Tensor>& t) { return weighted_sum(F::max_pool2d(t[0], 3, 2, 1)); },
            {tensor(values, {1, 2, 5, 5})}, 1e-2f, 2e-2f, 2e-3f, "max_pool2d");

  nn::BatchNorm2d bn(2);
  {
    NoGradGuard guard;
    bn.weight.copy_(randn({2}));
    bn.bias.copy_(randn({2}));
  }
  gradcheck([&](const std::vector<Tensor>& t) { return weighted_sum(bn.forward(t[0])); },
            {randn({3, 2, 2, 2}), bn.weight, bn.bias}, 1e-2f, 2e-2f, 2e-3f, "batch_norm train");
  bn.eval();
  bn.zero_grad();
  gradcheck([&](const std::vector<Tensor>& t) { return weighted_sum(bn.forward(t[0])); },
            {randn({1, 2, 2, 2}), bn.weight}, 1e-2f, 2e-2f, 2e-3f, "batch_norm eval");
}

TEST_CASE("conv2d is the direct sum over the window (im2col invariant)") {
  manual_seed(32);
  const Tensor x = randn({1, 2, 4, 5}), w = randn({3, 2, 3, 3}), b = randn({3});
  const Tensor y = F::conv2d(x, w, b, 1, 1);  // [1,3,4,5]
  REQUIRE(y.shape() == Shape({1, 3, 4, 5}));
  const std::vector<float> xv = x.to_vector(), wv = w.to_vector(), bv = b.to_vector();
  const std::vector<float> yv = y.to_vector();
  for (int o = 0; o < 3; ++o)
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 5; ++c) {
        double acc = bv[o];
        for (int ci = 0; ci < 2; ++ci)
          for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
              const int rr = r + i - 1, cc = c + j - 1;
              if (rr < 0 || rr >= 4 || cc < 0 || cc >= 5) continue;
              acc += static_cast<double>(xv[(ci * 4 + rr) * 5 + cc]) *
                     wv[((o * 2 + ci) * 3 + i) * 3 + j];
            }
        CHECK(std::fabs(yv[(o * 4 + r) * 5 + c] - acc) < 1e-4);
      }
}

TEST_CASE("conv2d's weight gradient is the same whether its forward kept the columns or not") {
  // The forward keeps its columns (im2col) for the weight's gradient up to 64 MB
  // (autograd/ops_window.cpp); a larger convolution computes them again in its backward. Eight
  // images of 64 x 64 x 64 under a 3x3 kernel make 75 MB of columns (computed again); each half
  // of the batch makes 38 MB (kept), and the two halves' gradients add up to the whole's.
  manual_seed(33);
  const Tensor x = randn({8, 64, 64, 64}), w = randn({4, 64, 3, 3}).requires_grad_(true);
  const auto weight_grad = [&](const Tensor& images) {
    w.set_grad(Tensor());
    F::conv2d(images, w, Tensor(), 1, 1).sum().backward();
    return w.grad().clone();
  };
  const Tensor whole = weight_grad(x);
  const Tensor halves = weight_grad(x.narrow(0, 0, 4)) + weight_grad(x.narrow(0, 4, 4));
  check_close(whole, halves, 1e-4f, 1e-3f);
}

TEST_CASE("conv, pooling and batch norm reject bad inputs, naming the layer and shapes") {
  nn::Conv2d conv(3, 4, 3);
  check_error([&] { conv.forward(zeros({1, 2, 5, 5})); }, {"Conv2d(3, 4", "[1,2,5,5]"});
  check_error([&] { conv.forward(zeros({3, 5, 5})); }, {"Conv2d", "[3,5,5]"});
  check_error([&] { conv.forward(zeros({1, 3, 2, 2})); }, {"Conv2d", "[1,3,2,2]"});
  check_error([] { nn::Conv2d(3, 4, 3, 0); }, {"Conv2d", "stride 0"});
  check_error([] { F::max_pool2d(zeros({2, 2}), 2); }, {"max_pool2d", "[2,2]"});
  check_error([] { nn::MaxPool2d(2, 2, 2); }, {"MaxPool2d", "padding"});
  nn::BatchNorm2d bn(3);
  check_error([&] { bn.forward(zeros({2, 4, 2, 2})); }, {"BatchNorm2d(3)", "[2,4,2,2]"});
  check_error([&] { bn.forward(zeros({1, 3, 1, 1})); }, {"more than 1 value", "[1,3,1,1]"});
}
