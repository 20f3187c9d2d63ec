// Chapter 11 (docs/learn/11-detr.md): DETR's Hungarian matching and set loss.
// 1. linear_sum_assignment on a 4 x 3 cost matrix (queries x targets), one target added at a
//    time as the solver does, against brute force; 2. the set loss's three terms on one scene
//    (Fashion-MNIST scene 0 when the data is present, two hand-made boxes otherwise), the box terms
//    recomputed by hand; 3. the scene with its boxes as a PNG (only with the data).
//   learn_11_detr [out.png]   (default learn_11_detr.png)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "examples/learn/learn.h"
#include "loom.h"
using namespace loom;
namespace {
// GIoU of two (cx, cy, w, h) boxes (Rezatofighi et al. 2019): IoU - |C \ (A u B)| / |C|.
double giou(const float* a, const float* b) {
  auto lo = [](const float* x, int k) { return x[k] - x[k + 2] / 2.0; };
  auto hi = [](const float* x, int k) { return x[k] + x[k + 2] / 2.0; };
  double inter = 1.0, hull = 1.0;  // the overlap's and the enclosing box's sides, multiplied
  for (int k = 0; k < 2; ++k) {
    inter *= std::max(0.0, std::min(hi(a, k), hi(b, k)) - std::max(lo(a, k), lo(b, k)));
    hull *= std::max(hi(a, k), hi(b, k)) - std::min(lo(a, k), lo(b, k));
  }
  const double uni = double(a[2]) * a[3] + double(b[2]) * b[3] - inter;
  return inter / uni - (hull - uni) / hull;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string out = learn::picture_path(
      argc, argv, "Chapter 11 (docs/learn/11-detr.md): Hungarian matching and DETR's set loss.");
  // 1. Rows are predictions (queries), columns targets, as DETR's matcher builds them.
  const int64_t Q = 4, T = 3;
  const std::vector<double> cost = {1, 2, 8, 2, 9, 7, 6, 4, 3, 9, 8, 2};
  std::printf("cost [4 queries, 3 targets]:\n");
  for (int64_t q = 0; q < Q; ++q)
    std::printf("  q%lld  %3.0f %3.0f %3.0f\n", (long long)q, cost[q * T], cost[q * T + 1],
                cost[q * T + 2]);
  double best = 0.0;
  for (int64_t n = 1; n <= T; ++n) {  // the first n targets (the solver adds one at a time)
    std::vector<double> part;
    for (int64_t q = 0; q < Q; ++q) part.insert(part.end(), &cost[q * T], &cost[q * T + n]);
    const auto [rows, cols] = linear_sum_assignment(part, Q, n);
    std::printf("targets 0..%lld:", (long long)n - 1);
    best = 0.0;
    for (size_t i = 0; i < rows.size(); ++i) {
      std::printf("  t%lld->q%lld", (long long)cols[i], (long long)rows[i]);
      best += cost[rows[i] * T + cols[i]];
    }
    std::printf("   total %.0f\n", best);
  }
  std::vector<int64_t> order = {0, 1, 2, 3};  // brute force: targets to distinct queries
  double brute = 1e30;
  do brute = std::min(brute, cost[order[0] * T] + cost[order[1] * T + 1] + cost[order[2] * T + 2]);
  while (std::next_permutation(order.begin(), order.end()));
  std::printf("Hungarian %.0f, brute force over 24 assignments %.0f\n\n", best, brute);

  // 2. One scene: its targets, and 5 queries of a would-be detector (3 near targets, 2 empty).
  const bool have_data =
      std::filesystem::exists(std::string(data::kFashionMnistDir) + "/t10k-images-idx3-ubyte.gz");
  data::Scene scene;
  if (have_data) {
    const data::FashionMNIST t10k(data::kFashionMnistDir, "t10k", false);
    scene = data::FashionMnistScenes(t10k, 1, 0).scene(0);
  } else {
    std::printf("(no Fashion-MNIST in %s: two hand-made boxes, no picture)\n",
                data::kFashionMnistDir);
    scene.labels = tensor_i64({3, 7}, {2});
    scene.boxes = tensor({0.3f, 0.3f, 0.3f, 0.4f, 0.7f, 0.6f, 0.4f, 0.3f}, {2, 4});
  }
  const int64_t n = scene.labels.size(0), P = 5, C = 10;
  manual_seed(0);
  Tensor logits = randn({1, P, C + 1}), boxes = full({1, P, 4}, 0.2f);  // empty: small boxes
  const std::vector<int64_t> labels = scene.labels.to_vector_i64();
  for (int64_t i = 0; i < std::min<int64_t>(n, 3); ++i) {  // query 4 - i predicts target i, shifted
    NoGradGuard no_grad;
    boxes.select(1, 4 - i).copy_(scene.boxes.select(0, i).unsqueeze(0) +
                                 tensor({0.02f, -0.01f, 0.03f, 0.0f}, {1, 4}));
    logits.select(1, 4 - i).select(1, labels[i]).fill_(4.0f);
  }
  const models::DETRLossConfig config{.num_classes = C};
  const auto terms = models::detr_loss_terms(logits, boxes, {{scene.labels, scene.boxes}}, config);
  double l1 = 0.0, one_minus_giou = 0.0;
  const std::vector<float> pb = boxes.to_vector(), tb = scene.boxes.to_vector();
  for (size_t i = 0; i < terms.matches[0].queries.size(); ++i) {
    const int64_t q = terms.matches[0].queries[i], t = terms.matches[0].targets[i];
    std::printf("query %lld <-> target %lld (class %s)\n", (long long)q, (long long)t,
                data::fashion_mnist_classes()[labels[t]].c_str());
    for (int k = 0; k < 4; ++k) l1 += std::abs(pb[q * 4 + k] - tb[t * 4 + k]);
    one_minus_giou += 1.0 - giou(&pb[q * 4], &tb[t * 4]);
  }
  l1 /= double(n), one_minus_giou /= double(n);
  std::printf(
      "loss_ce %.4f   loss_bbox %.4f (by hand %.4f)   loss_giou %.4f (by hand %.4f)\n"
      "loss = 1 ce + 5 bbox + 2 giou = %.4f\n",
      terms.loss_ce.item(), terms.loss_bbox.item(), l1, terms.loss_giou.item(), one_minus_giou,
      terms.loss.item());

  // 3. The scene, ground truth in green, the queries that are confident of an object in orange.
  if (have_data) {
    const Tensor probs =
        softmax(logits, -1).select(0, 0).narrow(1, 0, C);  // (P, C) without "no object"
    data::write_scene_png(out, scene, {boxes.select(0, 0), argmax(probs, 1), max(probs, 1), 0.5f});
    std::printf("wrote %s\n", out.c_str());
  }
  const bool ok = best == brute && std::abs(l1 - terms.loss_bbox.item()) < 1e-5 &&
                  std::abs(one_minus_giou - terms.loss_giou.item()) < 1e-5;
  return ok ? 0 : 1;
}
