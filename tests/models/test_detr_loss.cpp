// detr_loss: DETR's HungarianMatcher + SetCriterion against a PyTorch reimplementation on
// random predictions (detr_loss.safetensors, gen_detr.py: loss terms, scipy's matching and the
// gradients in logits and boxes), invariants (batched matching = per-image matching, target
// order does not matter, empty targets, box conversions round-trip), finite-difference
// gradients of GIoU and of the loss, and the error paths.
#include <map>
#include <string>

#include "models/detr_loss.h"
#include "nn/functional.h"
#include "io/safetensors.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
using models::DETRLossConfig;
using models::DETRTarget;

namespace {

const std::map<std::string, Tensor>& loss_golden() {
  static const std::map<std::string, Tensor> t =
      nn::read_safetensors(std::string(LOOM_TEST_DATA) + "/detr_loss.safetensors");
  return t;
}

const Tensor& golden(const std::string& name) {
  auto it = loss_golden().find(name);
  REQUIRE_MESSAGE(it != loss_golden().end(), "detr_loss.safetensors has no tensor " << name);
  return it->second;
}

DETRLossConfig config_of(const std::string& name) {
  const std::vector<float> c = golden(name + ".config").to_vector();
  return {static_cast<int64_t>(c[0]), c[1], c[2], c[3], c[4], c[5], c[6], c[7]};
}

std::vector<DETRTarget> targets_of(const std::string& name) {
  std::vector<DETRTarget> targets;
  for (int64_t i = 0; i < golden(name + ".logits").size(0); ++i) {
    const std::string t = name + ".t" + std::to_string(i);
    targets.push_back({golden(t + ".labels"), golden(t + ".boxes")});
  }
  return targets;
}

// Random predictions: logits N(0, 4), boxes inside the image with w, h in (0.05, 0.55).
std::pair<Tensor, Tensor> random_predictions(int64_t B, int64_t Q, int64_t classes) {
  const Tensor logits = randn({B, Q, classes + 1}) * 2.0f;
  const Tensor centre = rand({B, Q, 2}) * 0.5f + 0.25f, size = rand({B, Q, 2}) * 0.5f + 0.05f;
  return {logits, cat({centre, size}, -1)};
}

DETRTarget random_target(int64_t n, int64_t classes) {
  const Tensor centre = rand({n, 2}) * 0.5f + 0.25f, size = rand({n, 2}) * 0.4f + 0.05f;
  return {randint(0, classes, {n}), cat({centre, size}, -1)};
}

}  // namespace

TEST_CASE("detr_loss matches PyTorch's SetCriterion: terms, scipy's matching and gradients") {
  for (const std::string name : {"default", "weights", "empty", "full"}) {
    CAPTURE(name);
    const DETRLossConfig config = config_of(name);
    Tensor logits = golden(name + ".logits").clone().requires_grad_(true);
    Tensor boxes = golden(name + ".boxes").clone().requires_grad_(true);
    const auto targets = targets_of(name);
    const auto terms = models::detr_loss_terms(logits, boxes, targets, config);
    check_close(terms.loss, golden(name + ".loss"), 1e-5f, 1e-5f, name + " loss");
    check_close(terms.loss_ce, golden(name + ".loss_ce"), 1e-5f, 1e-6f, name + " loss_ce");
    check_close(terms.loss_bbox, golden(name + ".loss_bbox"), 1e-5f, 1e-6f, name + " loss_bbox");
    check_close(terms.loss_giou, golden(name + ".loss_giou"), 1e-5f, 1e-6f, name + " loss_giou");
    for (size_t i = 0; i < targets.size(); ++i) {
      const std::vector<int64_t> m = golden(name + ".match." + std::to_string(i)).to_vector_i64();
      const size_t n = m.size() / 2;
      CHECK(terms.matches[i].queries == std::vector<int64_t>(m.begin(), m.begin() + n));
      CHECK(terms.matches[i].targets == std::vector<int64_t>(m.begin() + n, m.end()));
    }
    terms.loss.backward();
    check_close(logits.grad(), golden(name + ".grad.logits"), 1e-4f, 1e-6f, name + " d/dlogits");
    check_close(boxes.grad(), golden(name + ".grad.boxes"), 1e-4f, 1e-6f, name + " d/dboxes");
    // detr_loss is the weighted sum alone.
    check_close(models::detr_loss(logits, boxes, targets, config), terms.loss, 0.0f, 0.0f,
                name + " detr_loss");
  }
}

TEST_CASE("detr_loss: batched matching equals per-image matching; target order is irrelevant") {
  manual_seed(21);
  const int64_t B = 4, Q = 8, C = 5;
  const auto [logits, boxes] = random_predictions(B, Q, C);
  std::vector<DETRTarget> targets;
  for (int64_t n : {3, 0, 8, 1}) targets.push_back(random_target(n, C));
  const DETRLossConfig config{C};
  const auto batched = models::hungarian_match(logits, boxes, targets, config);
  for (int64_t b = 0; b < B; ++b) {
    const auto single = models::hungarian_match(logits.narrow(0, b, 1), boxes.narrow(0, b, 1),
                                                {targets[b]}, config);
    CHECK(single[0].queries == batched[b].queries);
    CHECK(single[0].targets == batched[b].targets);
    CHECK(batched[b].queries.size() == static_cast<size_t>(targets[b].labels.size(0)));
  }
  // Reversing every image's targets: the same pairs, the same loss.
  std::vector<DETRTarget> reversed;
  for (const DETRTarget& t : targets) {
    const int64_t n = t.labels.size(0);
    std::vector<int64_t> order(n);
    for (int64_t i = 0; i < n; ++i) order[i] = n - 1 - i;
    const Tensor index = tensor_i64(order, {n});
    reversed.push_back({index_select(t.labels, 0, index), index_select(t.boxes, 0, index)});
  }
  check_close(models::detr_loss(logits, boxes, reversed, config),
              models::detr_loss(logits, boxes, targets, config), 1e-6f, 1e-6f, "reversed");
}

TEST_CASE("detr_loss: images without targets give 'no object' CE only and zero box gradients") {
  manual_seed(4);
  const int64_t B = 2, Q = 5, C = 3;
  auto [logits, boxes] = random_predictions(B, Q, C);
  logits.requires_grad_(true);
  boxes.requires_grad_(true);
  const std::vector<DETRTarget> empty = {{tensor_i64({}, {0}), zeros({0, 4})},
                                         {tensor_i64({}, {0}), zeros({0, 4})}};
  const auto terms = models::detr_loss_terms(logits, boxes, empty, {C});
  // Every query's target is "no object" with weight eos_coef: the weighted mean is the mean.
  const Tensor no_object = tensor_i64(std::vector<int64_t>(B * Q, C), {B * Q});
  check_close(terms.loss_ce, cross_entropy(logits.reshape({B * Q, C + 1}), no_object), 1e-6f, 1e-6f,
              "CE");
  CHECK(terms.loss_bbox.item() == 0.0f);
  CHECK(terms.loss_giou.item() == 0.0f);
  terms.loss.backward();
  CHECK(max(abs(boxes.grad())).item() == 0.0f);
  CHECK(max(abs(logits.grad())).item() > 0.0f);
}

TEST_CASE("box conversions round-trip and GIoU of a box with itself is 1") {
  manual_seed(8);
  const DETRTarget t = random_target(6, 3);
  const Tensor xyxy = models::box_cxcywh_to_xyxy(t.boxes);
  check_close(models::box_xyxy_to_cxcywh(xyxy), t.boxes, 1e-6f, 1e-6f, "round trip");
  check_close(models::box_cxcywh_to_xyxy(models::box_xyxy_to_cxcywh(xyxy)), xyxy,
              1e-6f, 1e-6f, "round trip xyxy");
  const Tensor giou = models::generalized_box_iou(xyxy, xyxy);  // (6, 6)
  for (int64_t i = 0; i < 6; ++i)
    CHECK(giou.select(0, i).select(0, i).item() == doctest::Approx(1.0));
  CHECK(max(giou).item() <= 1.0f + 1e-6f);
  CHECK(max(-giou).item() <= 1.0f);  // GIoU is in [-1, 1]
}

TEST_CASE("GIoU loss and detr_loss gradients match finite differences") {
  manual_seed(9);
  // Overlapping and disjoint pairs, so both the IoU and the enclosing-box terms carry gradient.
  const Tensor a = tensor({0.3f, 0.4f, 0.2f, 0.3f, 0.7f, 0.6f, 0.3f, 0.2f}, {2, 4});
  const Tensor b = tensor({0.35f, 0.45f, 0.25f, 0.2f, 0.2f, 0.2f, 0.2f, 0.2f}, {2, 4});
  auto giou_loss = [](const std::vector<Tensor>& x) {
    return models::generalized_box_iou_loss(models::box_cxcywh_to_xyxy(x[0]),
                                                    models::box_cxcywh_to_xyxy(x[1]),
                                                    nn::functional::Reduction::Sum);
  };
  gradcheck(giou_loss, {a, b}, 1e-3f, 2e-2f, 1e-3f, "GIoU loss");
  const auto [logits, boxes] = random_predictions(2, 4, 3);
  const std::vector<DETRTarget> targets = {random_target(2, 3), random_target(1, 3)};
  auto loss = [&](const std::vector<Tensor>& x) {
    return models::detr_loss(x[0], x[1], targets, {3});
  };
  // Small steps keep the matching fixed (it is piecewise constant in the inputs).
  gradcheck(loss, {logits, boxes}, 1e-3f, 3e-2f, 2e-3f, "detr_loss");
}

TEST_CASE("detr_loss rejects bad shapes, labels, degenerate or NaN boxes with loom::Error") {
  const auto [logits, boxes] = random_predictions(2, 3, 4);
  const DETRTarget ok = {tensor_i64({1}, {1}), tensor({0.5f, 0.5f, 0.2f, 0.2f}, {1, 4})};
  const DETRLossConfig config{4};
  expect_error([&] { models::detr_loss(logits, boxes, {ok}, config); },
               {"detr_loss", "1 targets", "batch of 2"});
  expect_error(
      [&] {
        models::detr_loss(logits, boxes, {ok, ok}, {5});
      },
      {"detr_loss", "[B, Q, 6]", "[2,3,5]"});
  expect_error(
      [&] {
        models::detr_loss(logits, boxes.narrow(1, 0, 2), {ok, ok}, config);
      },
      {"detr_loss", "[2, 3, 4]", "[2,2,4]"});
  const DETRTarget bad_label = {tensor_i64({4}, {1}), ok.boxes};
  expect_error(
      [&] {
        models::detr_loss(logits, boxes, {ok, bad_label}, config);
      },
      {"detr_loss", "target 1", "label 4", "[0, 4)"});
  const DETRTarget flat = {tensor_i64({0}, {1}), tensor({0.5f, 0.5f, 0.0f, 0.2f}, {1, 4})};
  expect_error(
      [&] {
        models::detr_loss(logits, boxes, {flat, ok}, config);
      },
      {"detr_loss", "target 0 box 0", "degenerate"});
  const DETRTarget nan_box = {tensor_i64({0}, {1}), tensor({NAN, 0.5f, 0.1f, 0.2f}, {1, 4})};
  expect_error(
      [&] {
        models::detr_loss(logits, boxes, {ok, nan_box}, config);
      },
      {"detr_loss", "target 1", "not finite"});
  const DETRTarget wrong = {tensor_i64({0, 1}, {2}), ok.boxes};
  expect_error(
      [&] {
        models::detr_loss(logits, boxes, {ok, wrong}, config);
      },
      {"detr_loss", "target 1", "[2]", "[1,4]"});
  // A NaN prediction is an error too (from the matcher's GIoU), not a silent NaN loss.
  const Tensor nan_boxes = boxes.masked_fill(gt(rand(boxes.shape()), 0.5f), NAN);
  expect_error([&] { models::detr_loss(logits, nan_boxes, {ok, ok}, config); }, {"NaN"});
}
