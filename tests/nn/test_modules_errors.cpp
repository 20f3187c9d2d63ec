// Error paths of the modules and functional ops of tests/nn/test_modules.cpp: each misuse is a
// loom::Error naming the layer or op and the shapes or values at fault.
#include "nn_golden.h"

using namespace loom;
using namespace loom::testing;
namespace F = loom::nn::functional;

TEST_CASE("convolution layers refuse bad configurations and inputs") {
  expect_error([] { nn::Conv2d(4, 6, 3, 1, 0, 1, 4); }, {"Conv2d", "6", "groups 4"});
  expect_error([] { nn::Conv1d(3, 6, 3, 1, 0, 1, 2); }, {"Conv1d", "in_channels 3", "groups 2"});
  expect_error([] { nn::Conv2d(2, 2, {3, 0}); }, {"Conv2d", "kernel_size (3, 0)"});
  expect_error([] { nn::Conv2d(2, 2, 3, 1, -1); }, {"Conv2d", "invalid padding -1"});
  expect_error([] { nn::ConvTranspose2d(2, 2, 3, 2, 0, 2); },
               {"ConvTranspose2d", "output_padding (2, 2)", "stride (2, 2)"});
  expect_error([] { nn::Conv2d(2, 2, nn::ExpandingArray<2>{1, 2, 3}); },
               {"ExpandingArray", "expected 2 sizes, got 3"});

  nn::Conv2d conv(4, 6, 3, 1, 0, 1, 2);
  expect_error([&] { conv.forward(zeros({1, 3, 5, 5})); }, {"Conv2d(4, 6", "[1,3,5,5]"});
  expect_error([&] { conv.forward(zeros({4, 5, 5})); }, {"Conv2d", "[4,5,5]"});
  expect_error([&] { conv.forward(zeros({1, 4, 2, 5})); }, {"Conv2d", "smaller than the kernel"});
  nn::Conv1d conv1(2, 2, 3);
  expect_error([&] { conv1.forward(zeros({1, 2, 4, 4})); }, {"Conv1d", "[N, 2, L]", "[1,2,4,4]"});
  nn::ConvTranspose2d up(2, 4, 3);
  expect_error([&] { up.forward(zeros({1, 4, 3, 3})); }, {"ConvTranspose2d", "[1,4,3,3]"});

  expect_error([] { F::conv2d(zeros({1, 4, 5, 5}), zeros({6, 3, 3, 3}), Tensor(), 1, 0, 1, 2); },
               {"conv2d", "[1,4,5,5]", "[6,3,3,3]", "groups 2"});
  expect_error([] { F::conv2d(zeros({1, 2, 5, 5}), zeros({6, 2, 3, 3}), zeros({5})); },
               {"conv2d", "bias", "[5]", "6 output channels"});
  expect_error([] { F::conv_transpose2d(zeros({1, 3, 5, 5}), zeros({4, 2, 3, 3})); },
               {"conv_transpose2d", "[1,3,5,5]", "[4,2,3,3]"});
  expect_error([] { F::conv1d(zeros({1, 2, 5}), zeros({2, 2, 3, 3})); },
               {"conv1d", "[2,2,3,3]"});
}

TEST_CASE("pooling layers refuse bad sizes and inputs") {
  expect_error([] { nn::AvgPool2d(2, 1, 2); }, {"AvgPool2d", "padding (2, 2)", "half"});
  expect_error([] { nn::MaxPool2d({3, 2}, 1, {1, 2}); }, {"MaxPool2d", "padding (1, 2)"});
  expect_error([] { nn::AdaptiveAvgPool2d({0, 2}); }, {"AdaptiveAvgPool2d", "(0, 2)"});
  expect_error([] { nn::AdaptiveAvgPool1d(0); }, {"AdaptiveAvgPool1d", "0"});
  expect_error([] { F::avg_pool2d(zeros({2, 3, 4}), 2); }, {"avg_pool2d", "[2,3,4]"});
  expect_error([] { F::adaptive_avg_pool2d(zeros({4}), 2); }, {"adaptive_avg_pool2d", "[4]"});
  expect_error([] { F::adaptive_avg_pool1d(zeros({1, 2, 3, 4}), 2); },
               {"adaptive_avg_pool1d", "[1,2,3,4]"});
}

TEST_CASE("normalisation layers refuse bad configurations and inputs") {
  expect_error([] { nn::GroupNorm(4, 6); }, {"GroupNorm", "num_channels 6", "num_groups 4"});
  nn::GroupNorm gn(2, 4);
  expect_error([&] { gn.forward(zeros({2, 3, 5})); }, {"GroupNorm(2, 4)", "[2,3,5]"});
  expect_error([] { F::group_norm(zeros({2, 6, 3}), 4); }, {"group_norm", "6 channels", "4"});
  nn::RMSNorm rms(4);
  expect_error([&] { rms.forward(zeros({2, 5})); }, {"RMSNorm(4)", "[2,5]"});
  expect_error([] { F::rms_norm(zeros({2, 5}), {4}); }, {"rms_norm", "[2,5]", "[4]"});
  nn::BatchNorm1d bn(3);
  expect_error([&] { bn.forward(zeros({2, 3, 4, 4})); },
               {"BatchNorm1d(3)", "[N, C] or [N, C, L]", "[2,3,4,4]"});
  expect_error([&] { bn.forward(zeros({2, 4})); }, {"BatchNorm1d(3)", "[2,4]"});
  expect_error([&] { bn.forward(zeros({1, 3})); }, {"batch_norm", "more than 1 value"});
}

TEST_CASE("reshape layers refuse sizes that do not fit") {
  nn::Unflatten unflatten(1, {3, 5});
  expect_error([&] { unflatten.forward(zeros({2, 12})); }, {"Unflatten", "[3,5]", "12"});
  nn::Unflatten bad_dim(3, {2, 2});
  expect_error([&] { bad_dim.forward(zeros({2, 4})); }, {"Unflatten", "dim 3", "[2,4]"});
  expect_error([] { nn::Unflatten(1, {}); }, {"Unflatten", "empty"});
}

TEST_CASE("pad and interpolate refuse bad modes and sizes") {
  const Tensor x = zeros({1, 2, 3, 4});
  expect_error([&] { F::pad(x, {1, 1}, "mirror"); }, {"pad", "unknown mode 'mirror'"});
  expect_error([&] { F::pad(x, {1, 1, 1}); }, {"pad", "3 pads", "[1,2,3,4]"});
  expect_error([&] { F::pad(x, {1, 1, 3, 0}, "reflect"); },
               {"pad", "reflect", "(3, 0)", "dim 2"});
  expect_error([&] { F::pad(x, {5, 0}, "circular"); }, {"pad", "circular", "(5, 0)"});
  expect_error([&] { F::pad(x, {-2, -2}); }, {"pad", "(-2, -2)", "empty"});
  expect_error([&] { F::interpolate(x, {4, 4}, "bicubic"); }, {"interpolate", "'bicubic'"});
  expect_error([&] { F::interpolate(x, {4}); }, {"interpolate", "size [4]", "[1,2,3,4]"});
  expect_error([&] { F::interpolate(x, {4, 4}, "nearest", true); },
               {"interpolate", "align_corners"});
  expect_error([&] { F::interpolate(zeros({2, 3}), {4}); }, {"interpolate", "[2,3]"});
  expect_error([&] { F::interpolate(x, {.size = {2, 2}, .scale_factor = {2.0, 2.0}}); },
               {"interpolate", "either size or scale_factor"});
}

TEST_CASE("the losses refuse mismatched shapes, dtypes and targets") {
  expect_error([] { F::nll_loss(zeros({3, 4}), tensor_i64({0, 1}, {2})); },
               {"nll_loss", "[2]", "[3,4]"});
  expect_error([] { F::nll_loss(zeros({2, 4}), zeros({2})); }, {"nll_loss", "int64 target"});
  expect_error([] { F::nll_loss(zeros({2, 4}), tensor_i64({0, 4}, {2})); },
               {"nll_loss", "1 targets", "[0, 4)"});
  expect_error([] { F::nll_loss(zeros({2, 4}), tensor_i64({0, 1}, {2}), ones({3})); },
               {"nll_loss", "weight", "[3]", "4 classes"});
  expect_error([] { F::kl_div(zeros({2, 3}), zeros({3, 2})); }, {"kl_div", "[2,3]", "[3,2]"});
  expect_error(
      [] {
        F::binary_cross_entropy_with_logits(zeros({2, 3}), zeros({2, 3}), Tensor(), ones({2}));
      },
      {"binary_cross_entropy_with_logits", "pos_weight", "[2]", "[2,3]"});
  expect_error([] { F::cosine_similarity(zeros({2, 3}), zeros({4, 3})); },
               {"cosine_similarity", "[2,3]", "[4,3]"});
  expect_error([] { F::cosine_similarity(zeros({2, 3}), zeros({2, 3}), 2); },
               {"cosine_similarity", "dim 2"});
  expect_error([] { F::normalize(zeros({2, 3}), 2.0f, -3); }, {"normalize", "dim -3", "[2,3]"});
}
