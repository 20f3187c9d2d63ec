// Losses against PyTorch (values and gradients, every reduction), gradient checks, box
// utilities and error paths.
#include <cmath>
#include <limits>

#include "nn_golden.h"

using namespace loom;
using namespace loom::testing;
namespace F = loom::nn::functional;
using F::Reduction;

TEST_CASE("cross_entropy matches PyTorch: ignore_index, label smoothing, [B,T,C] logits") {
  auto in = case_inputs("ce");  // logits [6,5], target [6] with one -100
  check_case("ce", F::cross_entropy(in[0], in[1]), in);
  auto in2 = case_inputs("ce_smooth");
  check_case("ce_smooth", F::cross_entropy(in2[0], in2[1], -100, 0.1f), in2);
  auto in3 = case_inputs("ce_3d");  // logits [2,3,5], target [2,3], ignore_index 1
  check_case("ce_3d", F::cross_entropy(in3[0], in3[1], 1, 0.2f), in3);
}

TEST_CASE("cross_entropy reads logits with padded rows in place and matches the contiguous ones") {
  // An LM head's logits on the GPU are a [rows, V] view of a buffer with wider rows
  // (ops_matmul.cpp); the loss and its gradient must not notice, and the 3-D view of them the
  // model returns reshapes to 2-D without a copy.
  manual_seed(41);
  const Tensor buffer = randn({6, 16});
  const Tensor leaf = buffer.clone().requires_grad_();
  const Tensor dense = buffer.narrow(1, 0, 13).contiguous().requires_grad_();
  const Tensor target = tensor_i64({0, 12, 5, -100, 7, 3}, {6});
  for (float smoothing : {0.0f, 0.1f}) {
    CAPTURE(smoothing);
    const Tensor view = leaf.narrow(1, 0, 13).reshape({2, 3, 13}).reshape({-1, 13});
    REQUIRE(view.impl()->storage() == leaf.impl()->storage());  // still padded rows
    const Tensor a = F::cross_entropy(view, target, -100, smoothing);
    const Tensor b = F::cross_entropy(dense, target, -100, smoothing);
    CHECK(a.item() == b.item());
    a.backward();
    b.backward();
  }
  check_close(leaf.grad().narrow(1, 0, 13), dense.grad(), 0.0f, 0.0f, "d logits");
  CHECK(leaf.grad().narrow(1, 13, 3).to_vector() == std::vector<float>(18, 0.0f));
}

TEST_CASE("regression and binary losses match PyTorch for every reduction") {
  const std::pair<const char*, Reduction> reductions[] = {
      {"mean", Reduction::Mean}, {"sum", Reduction::Sum}, {"none", Reduction::None}};
  for (const auto& [tag, reduction] : reductions) {
    const std::string r = tag;
    INFO(r);
    auto mse = case_inputs("mse_" + r);
    check_case("mse_" + r, F::mse_loss(mse[0], mse[1], reduction), mse);
    auto l1 = case_inputs("l1_" + r);
    check_case("l1_" + r, F::l1_loss(l1[0], l1[1], reduction), l1);
    auto sl1 = case_inputs("smooth_l1_" + r);
    check_case("smooth_l1_" + r, F::smooth_l1_loss(sl1[0], sl1[1], reduction), sl1);
    auto bce = case_inputs("bce_" + r);
    check_case("bce_" + r, F::binary_cross_entropy_with_logits(bce[0], bce[1], reduction), bce);
  }
  auto beta = case_inputs("smooth_l1_beta");
  check_case("smooth_l1_beta", F::smooth_l1_loss(beta[0], beta[1], Reduction::Mean, 0.5f), beta);
}

TEST_CASE("binary_cross_entropy_with_logits is stable for large logits") {
  const Tensor logits = tensor({-200.0f, 200.0f, 0.0f}, {3});
  const Tensor target = tensor({1.0f, 1.0f, 0.5f}, {3});
  const std::vector<float> loss =
      F::binary_cross_entropy_with_logits(logits, target, Reduction::None).to_vector();
  // -log sigmoid(-200) = 200 (+ e^-200); -log sigmoid(200) = e^-200 ~ 0; at 0: log 2.
  CHECK(loss[0] == doctest::Approx(200.0f));
  CHECK(loss[1] == doctest::Approx(0.0f));
  CHECK(loss[2] == doctest::Approx(std::log(2.0f)));
}

TEST_CASE("generalized IoU and IoU match DETR's box_ops, with gradients") {
  auto in = case_inputs("giou");  // xyxy [3,4] and [2,4] -> [3,2]
  check_case("giou", models::generalized_box_iou(in[0], in[1]), in);
  auto in2 = case_inputs("box_iou");
  check_case("box_iou", models::box_iou(in2[0], in2[1]), in2);
  auto in3 = case_inputs("giou_loss");  // mean of 1 - GIoU over matching pairs
  check_case("giou_loss", models::generalized_box_iou_loss(in3[0], in3[1]), in3);
}

TEST_CASE("box invariants: identical boxes have GIoU 1, conversions round-trip") {
  const Tensor cxcywh = tensor({0.5f, 0.5f, 0.2f, 0.4f, 0.1f, 0.3f, 0.1f, 0.1f}, {2, 4});
  const Tensor xyxy = models::box_cxcywh_to_xyxy(cxcywh);
  check_close(models::box_xyxy_to_cxcywh(xyxy), cxcywh, 1e-6f, 1e-7f, "round trip");
  const std::vector<float> g = models::generalized_box_iou(xyxy, xyxy).to_vector();
  CHECK(g[0] == doctest::Approx(1.0f));
  CHECK(g[3] == doctest::Approx(1.0f));
  CHECK(g[1] < 0.0f);  // disjoint boxes: GIoU below 0
  check_close(models::generalized_box_iou_loss(xyxy, xyxy, Reduction::Sum), scalar_tensor(0.0f),
              0.0f, 1e-6f, "zero loss");
}

TEST_CASE("gradcheck: smooth_l1, bce with logits, generalized IoU") {
  manual_seed(41);
  gradcheck([](const std::vector<Tensor>& t) { return F::smooth_l1_loss(t[0], t[1]); },
            {randn({3, 4}) * 2.0f, randn({3, 4})}, 1e-3f, 2e-2f, 2e-3f, "smooth_l1");
  gradcheck(
      [](const std::vector<Tensor>& t) { return F::binary_cross_entropy_with_logits(t[0], t[1]); },
      {randn({3, 4}) * 3.0f, rand({3, 4})}, 1e-2f, 2e-2f, 2e-3f, "bce");
  const Tensor a = tensor({0.1f, 0.1f, 0.5f, 0.6f, 0.3f, 0.2f, 0.9f, 0.7f}, {2, 4});
  const Tensor b = tensor({0.2f, 0.3f, 0.6f, 0.8f, 0.0f, 0.5f, 0.3f, 0.9f}, {2, 4});
  gradcheck(
      [](const std::vector<Tensor>& t) {
        return weighted_sum(models::generalized_box_iou(t[0], t[1]));
      },
      {a, b}, 1e-3f, 2e-2f, 2e-3f, "giou");
}

TEST_CASE("losses reject mismatched or invalid inputs") {
  check_error([] { F::mse_loss(zeros({2, 3}), zeros({3, 2})); }, {"mse_loss", "[2,3]", "[3,2]"});
  check_error([] { F::l1_loss(zeros({2}), tensor_i64({1, 2}, {2})); }, {"l1_loss", "int64"});
  check_error([] { F::smooth_l1_loss(zeros({2}), zeros({2}), Reduction::Mean, -1.0f); },
              {"smooth_l1_loss", "beta"});
  check_error([] { F::binary_cross_entropy_with_logits(zeros({2}), zeros({3})); },
              {"binary_cross_entropy_with_logits", "[2]", "[3]"});
  check_error(
      [] {
        F::cross_entropy(zeros({4, 3}), tensor_i64({0, 1, 2}, {3}));
      },
      {"cross_entropy", "[4,3]", "[3]"});
  check_error([] { F::cross_entropy(zeros({4, 3}), zeros({4})); }, {"cross_entropy", "int64"});
  const Tensor bad = tensor({0.5f, 0.5f, 0.4f, 0.9f}, {1, 4});  // x1 < x0
  check_error([&] { models::generalized_box_iou(bad, bad); }, {"generalized_box_iou", "x1 < x0"});
  check_error([] { models::box_iou(zeros({2, 3}), zeros({2, 4})); }, {"box_iou", "[2,3]"});
}
