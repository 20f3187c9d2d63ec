// Swin's window helpers (models/swin_window.h) and DropPath (nn/drop_path.h): values against the
// official PyTorch code (tests/golden/gen_swin.py -> swin.safetensors), gradients, statistics
// and errors.
#include <string>

#include "nn/drop_path.h"
#include "io/safetensors.h"
#include "models/swin_window.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
namespace F = loom::nn::functional;

namespace {

Tensor swin_golden(const std::string& name) {
  static const std::map<std::string, Tensor> tensors =
      nn::read_safetensors(std::string(LOOM_TEST_DATA) + "/swin.safetensors");
  auto it = tensors.find(name);
  REQUIRE_MESSAGE(it != tensors.end(), "swin.safetensors has no tensor " << name);
  return it->second;
}

// A scalar that depends on every element of `out` with distinct weights, for gradcheck.
Tensor weighted_sum(const Tensor& out) {
  manual_seed(11);
  return sum(out * randn(out.shape(), out.device()));
}

}  // namespace

TEST_CASE("window_partition and window_reverse equal the official functions") {
  const Tensor x = swin_golden("window.x");  // (2, 8, 8, 3)
  const Tensor windows = models::window_partition(x, 4);
  check_close(windows, swin_golden("window.partition"), 0.0f, 0.0f, "partition");
  check_close(models::window_reverse(windows, 4, 8, 8), swin_golden("window.reverse"), 0.0f, 0.0f,
              "reverse");
  // Non-square maps and one window per image.
  manual_seed(1);
  const Tensor y = randn({3, 4, 6, 2});
  CHECK(models::window_partition(y, 2).shape() == Shape{18, 4, 2});
  check_close(models::window_reverse(models::window_partition(y, 2), 2, 4, 6), y, 0.0f, 0.0f,
              "4x6");
  const Tensor one = randn({1, 3, 3, 1});
  check_close(models::window_partition(one, 3), one.view({1, 9, 1}), 0.0f, 0.0f, "one window");
}

TEST_CASE("window_partition -> window_reverse passes gradients through (gradcheck)") {
  manual_seed(2);
  const Tensor x = randn({2, 4, 4, 3});
  gradcheck(
      [](const std::vector<Tensor>& in) {
        const Tensor windows = models::window_partition(in[0], 2);  // (8, 4, 3)
        return weighted_sum(models::window_reverse(windows * windows, 2, 4, 4));
      },
      {x}, 1e-2f, 2e-2f, 2e-3f, "partition/reverse");
}

TEST_CASE("relative_position_index and shifted_window_mask equal the official buffers") {
  CHECK(models::relative_position_index(4).dtype() == DType::Int64);
  CHECK(models::relative_position_index(4).to_vector() ==
        swin_golden("window.relative_position_index").to_vector());
  // Corners of a 2x2 window: offsets (dy, dx) + (1, 1) in a 3x3 table.
  CHECK(models::relative_position_index(2).to_vector() ==
        std::vector<float>{4, 3, 1, 0, 5, 4, 2, 1, 7, 6, 4, 3, 8, 7, 5, 4});
  check_close(models::shifted_window_mask(8, 8, 4, 2), swin_golden("window.mask"), 0.0f, 0.0f,
              "8x8 w4 s2");
  check_close(models::shifted_window_mask(6, 6, 3, 1), swin_golden("window.mask_6_3_1"), 0.0f, 0.0f,
              "6x6 w3 s1");
  // The first window holds one region only: nothing masked there.
  CHECK(max(abs(models::shifted_window_mask(8, 8, 4, 2).select(0, 0))).item() == 0.0f);
}

TEST_CASE("window helpers reject maps that are not whole windows") {
  expect_error([] { models::window_partition(zeros({1, 6, 8, 2}), 4); },
               {"window_partition", "6x8", "4x4"});
  expect_error([] { models::window_partition(zeros({6, 8, 2}), 2); },
               {"window_partition", "[6,8,2]"});
  expect_error([] { models::window_reverse(zeros({3, 16, 2}), 4, 8, 8); }, {"window_reverse", "4"});
  expect_error([] { models::shifted_window_mask(8, 8, 4, 4); }, {"shifted_window_mask", "shift 4"});
  expect_error([] { models::shifted_window_mask(8, 8, 3, 1); }, {"shifted_window_mask", "8x8"});
}

TEST_CASE("DropPath is the identity in eval mode and with p = 0") {
  const Tensor x = swin_golden("drop_path.x");
  nn::DropPath drop(0.5f);
  drop.eval();
  check_close(drop.forward(x), swin_golden("drop_path.eval"), 0.0f, 0.0f, "eval");
  nn::DropPath none(0.0f);  // training, but p = 0
  check_close(none.forward(x), x, 0.0f, 0.0f, "p = 0");
  CHECK(drop.extra_repr() == "drop_prob=0.500");
}

TEST_CASE("DropPath in training zeroes whole samples and keeps the mean") {
  manual_seed(3);
  const float p = 0.25f;
  nn::DropPath drop(p);
  const int64_t B = 4000;
  const Tensor x = ones({B, 3, 5});
  const Tensor y = drop.forward(x);
  const std::vector<float> v = y.to_vector();
  int64_t dropped = 0;
  for (int64_t b = 0; b < B; ++b) {
    const float first = v[static_cast<size_t>(b * 15)];
    CHECK((first == 0.0f || std::fabs(first - 1.0f / (1.0f - p)) < 1e-6f));
    for (int64_t i = 1; i < 15; ++i)  // the whole sample shares one draw
      REQUIRE(v[static_cast<size_t>(b * 15 + i)] == first);
    dropped += first == 0.0f ? 1 : 0;
  }
  CHECK(std::fabs(static_cast<double>(dropped) / B - p) < 0.03);
  CHECK(std::fabs(mean(y).item() - 1.0f) < 0.05f);  // E[y] = x
  // The gradient is the same per-sample scale.
  const Tensor leaf = ones({8, 2}).requires_grad_(true);
  const Tensor out = drop.forward(leaf);
  sum(out).backward();
  check_close(leaf.grad(), out.detach(), 0.0f, 0.0f, "grad");
}

TEST_CASE("DropPath rejects probabilities p outside 0 <= p < 1") {
  expect_error([] { nn::DropPath(1.0f); }, {"DropPath", "1"});
  expect_error([] { F::drop_path(ones({2, 2}), -0.1f, true); }, {"drop_path", "-0.1"});
}
