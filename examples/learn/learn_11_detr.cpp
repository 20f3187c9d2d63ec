// Chapter 11 (docs/learn/11-detr.md): DETR's Hungarian matching and set loss.
// 1. linear_sum_assignment on a 4 x 3 cost matrix (queries x targets), one target added at a
//    time as the solver does, against brute force; 2. the set loss's three terms on one scene
//    (Fashion-MNIST scene 0 when the data is present, two hand-made boxes otherwise), the box terms
//    recomputed by hand; 3. the scene with its boxes as a PNG; 4. the matching of 8 random
//    queries to the scene's targets, DETR's matching cost by hand, drawn as lines between the
//    boxes (3 and 4 only with the data).
//   learn_11_detr [out.png]   (default learn_11_detr.png; detr_matching.png beside it)
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

// The scene (scale 6) with its targets in green (t0, t1, ...), the queries' boxes in orange
// when matched and grey when left to "no object" (q0, q1, ...), and a line from each matched
// query's centre to its target's. Boxes are normalised (cx, cy, w, h), 4 floats each.
data::Image matching_picture(const data::Scene& scene, const std::vector<float>& queries,
                             const models::DETRMatch& match) {
  const int64_t scale = 6, side = scene.image.size(1) * scale;
  data::Image picture = data::resize_nearest(
      data::to_rgb(data::to_image(scene.image, 0.0f, 1.0f)), side, side);
  auto at = [&](float v) { return std::lround(v * float(side)); };
  // Box `index` of `boxes`, named by `letter` and its index.
  auto draw_box = [&](const std::vector<float>& boxes, int64_t index, char letter, data::RGB rgb,
                      int64_t width) {
    const float* b = &boxes[static_cast<size_t>(index * 4)];
    std::string name(1, letter);
    name += std::to_string(index);
    data::draw_rect(picture, at(b[0] - b[2] / 2), at(b[1] - b[3] / 2), at(b[0] + b[2] / 2),
                    at(b[1] + b[3] / 2), rgb, width);
    data::draw_text(picture, at(b[0] - b[2] / 2) + 3, at(b[1] - b[3] / 2) + 3, name, rgb);
  };
  const std::vector<float> targets = scene.boxes.to_vector();
  const data::RGB green{60, 220, 60}, orange{255, 150, 40}, grey{140, 140, 140};
  for (int64_t q = 0; q < static_cast<int64_t>(queries.size() / 4); ++q) {
    const bool matched = std::count(match.queries.begin(), match.queries.end(), q) > 0;
    draw_box(queries, q, 'q', matched ? orange : grey, 1);
  }
  for (int64_t t = 0; t < static_cast<int64_t>(targets.size() / 4); ++t)
    draw_box(targets, t, 't', green, 2);
  for (size_t i = 0; i < match.queries.size(); ++i) {
    const float* q = &queries[match.queries[i] * 4];
    const float* t = &targets[match.targets[i] * 4];
    data::draw_line(picture, at(q[0]), at(q[1]), at(t[0]), at(t[1]), {255, 230, 60}, 2);
    data::fill_rect(picture, at(q[0]) - 3, at(q[1]) - 3, at(q[0]) + 3, at(q[1]) + 3, orange);
    data::fill_rect(picture, at(t[0]) - 3, at(t[1]) - 3, at(t[0]) + 3, at(t[1]) + 3, green);
  }
  return picture;
}
}  // namespace

int main(int argc, char** argv) try {
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
  if (!have_data) return ok ? 0 : 1;

  // 4. An untrained detector: 8 queries with random boxes and class scores. DETR's matching
  // cost (sec. 3.1, its matcher.py): -p(target's class) + 5 L1 - 2 GIoU, per query and target.
  const int64_t Qr = 8;
  manual_seed(1);
  const Tensor random_boxes = rand({1, Qr, 4}) * tensor({0.7f, 0.7f, 0.3f, 0.3f}, {4}) +
                              tensor({0.15f, 0.15f, 0.1f, 0.1f}, {4});  // (1, Q, 4) cx cy w h
  const Tensor random_logits = randn({1, Qr, C + 1});
  const std::vector<float> qb = random_boxes.to_vector(),
                           prob = softmax(random_logits, -1).to_vector();
  std::vector<double> match_cost;  // (Q, n), row-major
  std::printf("\nmatching cost of 8 random queries (rows) and the %lld targets:\n",
              (long long)n);
  for (int64_t q = 0; q < Qr; ++q) {
    std::printf("  q%lld", (long long)q);
    for (int64_t t = 0; t < n; ++t) {
      double box_l1 = 0.0;
      for (int k = 0; k < 4; ++k) box_l1 += std::abs(qb[q * 4 + k] - tb[t * 4 + k]);
      match_cost.push_back(-prob[q * (C + 1) + labels[t]] + 5.0 * box_l1 -
                           2.0 * giou(&qb[q * 4], &tb[t * 4]));
      std::printf(" %6.2f", match_cost.back());
    }
    std::printf("\n");
  }
  const models::DETRMatch match =
      models::hungarian_match(random_logits, random_boxes, {{scene.labels, scene.boxes}},
                              config)[0];
  double hungarian = 0.0;
  std::printf("hungarian_match:");
  for (size_t i = 0; i < match.queries.size(); ++i) {
    std::printf("  t%lld->q%lld", (long long)match.targets[i], (long long)match.queries[i]);
    hungarian += match_cost[match.queries[i] * n + match.targets[i]];
  }
  std::vector<int64_t> queries(Qr);  // brute force: the first n of each ordering of the queries
  for (int64_t q = 0; q < Qr; ++q) queries[q] = q;
  double lowest = 1e30;
  do {
    double total = 0.0;
    for (int64_t t = 0; t < n; ++t) total += match_cost[queries[t] * n + t];
    lowest = std::min(lowest, total);
  } while (std::next_permutation(queries.begin(), queries.end()));
  std::printf("   total %.4f (brute force %.4f)\ngreedy, target by target:", hungarian, lowest);
  std::vector<bool> taken(Qr, false);  // each target takes its cheapest free query, in order
  double greedy = 0.0;
  for (int64_t t = 0; t < n; ++t) {
    int64_t pick = -1;
    for (int64_t q = 0; q < Qr; ++q)
      if (!taken[q] && (pick < 0 || match_cost[q * n + t] < match_cost[pick * n + t])) pick = q;
    taken[pick] = true;
    greedy += match_cost[pick * n + t];
    std::printf("  t%lld->q%lld", (long long)t, (long long)pick);
  }
  std::printf("   total %.4f\n", greedy);
  const std::string matching_png = learn::picture_beside(out, "detr_matching.png");
  data::write_png(matching_picture(scene, qb, match), matching_png);
  std::printf("wrote %s\n", matching_png.c_str());
  return ok && std::abs(hungarian - lowest) < 1e-4 && greedy >= hungarian ? 0 : 1;
} catch (const std::exception& e) {
  return learn::fail(e);
}
