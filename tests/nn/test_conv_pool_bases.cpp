// What the convolution layers share through nn::ConvNd and the two window poolings through
// nn::Pool2d: the reprs (strings printed by PyTorch 1.13 for the same layers), the weight
// layouts, output_padding, and the constructor forms and checks each layer inherits.
#include "nn_golden.h"

using namespace loom;
using namespace loom::testing;

TEST_CASE("ConvNd gives every convolution PyTorch's repr, in PyTorch's order of sizes") {
  CHECK(nn::ConvTranspose2d(2, 4, 3, 2, 1, 1, 1, false, 2).repr() ==
        "ConvTranspose2d(2, 4, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), "
        "dilation=(2, 2), output_padding=(1, 1), bias=False)");
  CHECK(nn::Conv1d(2, 4, 3, 1, 1, 2, 2, false).repr() ==
        "Conv1d(2, 4, kernel_size=(3,), stride=(1,), padding=(1,), dilation=(2,), groups=2, "
        "bias=False)");
  CHECK(nn::Conv2d(4, 6, {3, 2}, {2, 1}, {1, 0}, {1, 2}, 2, false).repr() ==
        "Conv2d(4, 6, kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), "
        "groups=2, bias=False)");
}

TEST_CASE("ConvNd lays out the weight of a plain and of a transposed convolution as PyTorch") {
  nn::Conv2d conv(4, 6, 3);
  CHECK(conv.weight.shape() == Shape{6, 4, 3, 3});
  CHECK(conv.output_padding == nn::ExpandingArray<2>(0));  // PyTorch's (0, 0)
  CHECK(nn::ConvTranspose2d(4, 6, 3, 1, 0, 0, 2).weight.shape() == Shape{4, 3, 3, 3});
  nn::Conv1d conv1(4, 6, 5, 1, 0, 1, 2);
  CHECK(conv1.weight.shape() == Shape{6, 2, 5});
  CHECK(conv1.output_padding == 0);
  CHECK(conv1.named_parameters().size() == 2);
  CHECK(nn::Conv1d(4, 6, 5, 1, 0, 1, 1, false).named_parameters().size() == 1);
}

TEST_CASE("Pool2d gives MaxPool2d and AvgPool2d their constructors, checks and repr") {
  CHECK(nn::MaxPool2d({2, 3}).repr() ==
        "MaxPool2d(kernel_size=(2, 3), stride=(2, 3), padding=0, dilation=1, ceil_mode=False)");
  CHECK(nn::AvgPool2d({2, 3}, 1, 1).repr() ==
        "AvgPool2d(kernel_size=(2, 3), stride=1, padding=1)");
  nn::AvgPool2d pool(2);
  CHECK(pool.stride == nn::ExpandingArray<2>(2));  // stride 0 = kernel_size
  CHECK(pool.forward(ones({1, 1, 4, 4})).shape() == Shape{1, 1, 2, 2});
  expect_error([] { nn::MaxPool2d(0); }, {"MaxPool2d", "kernel_size (0, 0)"});
  expect_error([] { nn::AvgPool2d({2, 2}, -1); }, {"AvgPool2d", "stride (-1, -1)"});
}
