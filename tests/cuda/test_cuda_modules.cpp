// The modules and functional ops a PyTorch user reaches for (tests/nn/test_modules.cpp) on CUDA
// against the CPU: the functional forms with the weights as inputs, so values and the gradients
// of input and weights are compared, and the modules moved with Module::to(Device::CUDA).
// Without a GPU the cases return at once (test_cuda.cpp's first case reports that once);
// tests/cuda/emulator/run_emulated.sh runs them on the CPU emulator.
#include <string>
#include <vector>

#include "cuda_parity.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
namespace F = loom::nn::functional;

TEST_CASE("cuda: conv1d, conv2d with groups and dilation, conv_transpose2d") {
  LOOM_REQUIRE_GPU();
  manual_seed(61);
  compare_op("conv1d", [](const auto& t) { return F::conv1d(t[0], t[1], t[2], 2, 1, 2, 2); },
             {randn({2, 4, 11}), randn({6, 2, 3}), randn({6})});
  compare_op("conv2d groups dilation",
             [](const auto& t) {
               return F::conv2d(t[0], t[1], t[2], {2, 1}, {1, 0}, {1, 2}, 2);
             },
             {randn({2, 4, 7, 8}), randn({6, 2, 3, 2}), randn({6})});
  compare_op("conv_transpose2d",
             [](const auto& t) { return F::conv_transpose2d(t[0], t[1], t[2], 2, 1, 1, 2); },
             {randn({2, 4, 4, 5}), randn({4, 3, 3, 3}), randn({6})});
  compare_op("conv_transpose2d dilated",
             [](const auto& t) {
               return F::conv_transpose2d(t[0], t[1], Tensor(), {1, 2}, {0, 1}, 0, 1, 2);
             },
             {randn({1, 3, 3, 4}), randn({3, 2, 2, 3})});
}

TEST_CASE("cuda: avg, max and adaptive pooling, group_norm, rms_norm") {
  LOOM_REQUIRE_GPU();
  manual_seed(62);
  const Tensor x = randn({2, 3, 7, 6});
  compare_op("max_pool2d",
             [](const auto& t) {
               return F::max_pool2d(t[0], {3, 2}, {2, 1}, {1, 0});
             },
             {x});
  compare_op("avg_pool2d", [](const auto& t) { return F::avg_pool2d(t[0], 3, 2, 1); }, {x});
  compare_op("adaptive_avg_pool2d",
             [](const auto& t) {
               return F::adaptive_avg_pool2d(t[0], {3, 4});
             },
             {randn({2, 3, 7, 10})});
  compare_op("adaptive_avg_pool1d", [](const auto& t) { return F::adaptive_avg_pool1d(t[0], 4); },
             {randn({2, 3, 10})});
  compare_op("group_norm", [](const auto& t) { return F::group_norm(t[0], 2, t[1], t[2]); },
             {randn({2, 6, 3, 4}), randn({6}), randn({6})});
  compare_op("rms_norm", [](const auto& t) { return F::rms_norm(t[0], {5}, t[1]); },
             {randn({2, 3, 5}), randn({5})});
}

TEST_CASE("cuda: pad in four modes and interpolate") {
  LOOM_REQUIRE_GPU();
  manual_seed(63);
  const Tensor x = randn({2, 3, 4, 5});
  for (const char* mode : {"constant", "reflect", "replicate", "circular"})
    compare_op(std::string("pad ") + mode,
               [&](const auto& t) {
                 return F::pad(t[0], {1, 3, 2, 1}, mode, 0.5f);
               },
               {x});
  compare_op("pad crop", [](const auto& t) { return F::pad(t[0], {-1, 2}); }, {x});
  compare_op("interpolate nearest",
             [](const auto& t) {
               return F::interpolate(t[0], {7, 3});
             },
             {x});
  compare_op("interpolate bilinear",
             [](const auto& t) {
               return F::interpolate(t[0], {7, 9}, "bilinear");
             },
             {x});
  compare_op("interpolate bilinear align_corners",
             [](const auto& t) {
               return F::interpolate(t[0], {3, 8}, "bilinear", true);
             },
             {x});
}

TEST_CASE("cuda: nll_loss, weighted BCE, kl_div, cosine_similarity, normalize") {
  LOOM_REQUIRE_GPU();
  manual_seed(64);
  const Tensor labels = tensor_i64({0, 4, -100, 2, 2, 1}, {6});
  compare_op("nll_loss weighted",
             [&](const auto& t) { return F::nll_loss(log_softmax(t[0], 1), t[1], t[2]); },
             {randn({6, 5}), labels, rand({5}) + 0.5f});
  compare_op(
      "bce weight pos_weight",
      [](const auto& t) { return F::binary_cross_entropy_with_logits(t[0], t[1], t[2], t[3]); },
      {randn({3, 4}), rand({3, 4}), rand({3, 4}), rand({4}) + 0.5f});
  compare_op("kl_div batchmean",
             [](const auto& t) {
               return F::kl_div(log_softmax(t[0], 1), softmax(t[1], 1), F::Reduction::BatchMean);
             },
             {randn({3, 5}), randn({3, 5})});
  compare_op("cosine_similarity", [](const auto& t) { return F::cosine_similarity(t[0], t[1]); },
             {randn({3, 4, 2}), randn({3, 4, 2})});
  compare_op("normalize", [](const auto& t) { return F::normalize(t[0], 2.0f, -1); },
             {randn({3, 4})});
}

TEST_CASE("cuda: a Sequential of the new modules moved with Module::to, BatchNorm1d included") {
  LOOM_REQUIRE_GPU();
  auto make = [] {
    manual_seed(65);
    return std::make_shared<nn::Sequential>(
        std::make_shared<nn::Conv2d>(2, 4, 3, 1, 1, 1, 2), std::make_shared<nn::GroupNorm>(2, 4),
        std::make_shared<nn::SiLU>(), std::make_shared<nn::ConvTranspose2d>(4, 2, 2, 2),
        std::make_shared<nn::AvgPool2d>(2), std::make_shared<nn::Flatten>(),
        std::make_shared<nn::Linear>(2 * 5 * 4, 6), std::make_shared<nn::BatchNorm1d>(6),
        std::make_shared<nn::LeakyReLU>(0.1f), std::make_shared<nn::RMSNorm>(6));
  };
  auto cpu = make(), gpu = make();
  manual_seed(66);
  // A random projection of the output, not sum(out * out): after the final RMSNorm (unit
  // weight) the sum of squares is the constant 6 per row, whose gradients are rounding noise.
  // The Linear's bias feeds BatchNorm1d, which subtracts the batch mean: its gradient is zero
  // up to rounding (1e-5 on one device, 0 on the other), hence atol 1e-4.
  compare_modules(
      "Sequential", *cpu, *gpu, {randn({3, 2, 5, 4})},
      [](nn::Sequential& m, const std::vector<Tensor>& t) { return m.forward(t[0]); }, 1e-4f,
      1e-4f);
  const auto bn_cpu = cpu->at<nn::BatchNorm1d>(7), bn_gpu = gpu->at<nn::BatchNorm1d>(7);
  check_close(bn_gpu->running_var, bn_cpu->running_var, 1e-5f, 1e-6f, "running_var");
}
