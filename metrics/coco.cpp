// COCOeval's evaluate + accumulate + summarize for boxes, replicated step by step (see coco.h).
// Names follow cocoeval.py (gtIg, dtIg, dtm, npig, recThrs) so the two read side by side.
#include "metrics/coco.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "core/error.h"

namespace loom::metrics {
namespace {

constexpr int kThresholds = 10, kRecallPoints = 101, kMaxDets = 100;
constexpr double kMaxArea = 1e10;  // areaRng "all": [0 ** 2, 1e5 ** 2]

// np.linspace(.5, 0.95, 10) bit for bit (written out: i * step + .5 may be fused otherwise).
constexpr std::array<double, kThresholds> kIouThrs = {
    0x1.0000000000000p-1, 0x1.199999999999ap-1, 0x1.3333333333333p-1, 0x1.4cccccccccccdp-1,
    0x1.6666666666666p-1, 0x1.8000000000000p-1, 0x1.999999999999ap-1, 0x1.b333333333333p-1,
    0x1.cccccccccccccp-1, 0x1.e666666666666p-1};

// np.linspace(0, 1, 101): i * 0.01 (one rounding, so no fusing question), the last exactly 1.
double recall_threshold(int i) { return i == kRecallPoints - 1 ? 1.0 : i * 0.01; }

// `a * b` rounded on its own, never fused into a following addition: maskApi.c rounds twice.
double product(double a, double b) {
  volatile double p = a * b;
  return p;
}

// COCOeval's (x, y, w, h) in double.
struct XYWH {
  double x, y, w, h;
};
XYWH xywh(const Box& b) {
  const double x0 = b.x0, y0 = b.y0;
  return {x0, y0, static_cast<double>(b.x1) - x0, static_cast<double>(b.y1) - y0};
}
double area(const Box& b) {
  const XYWH v = xywh(b);
  return product(v.w, v.h);
}

void check_boxes(const std::vector<Box>& boxes, const char* list, bool scored) {
  for (size_t i = 0; i < boxes.size(); ++i) {
    const Box& b = boxes[i];
    LOOM_CHECK(std::isfinite(b.x0) && std::isfinite(b.y0) && std::isfinite(b.x1) &&
                   std::isfinite(b.y1) && (!scored || std::isfinite(b.score)),
               "coco_average_precision: {}[{}] has a non-finite value (x0 {}, y0 {}, x1 {}, y1 {}, "
               "score {})", list, i, b.x0, b.y0, b.x1, b.y1, b.score);
    LOOM_CHECK(b.x1 > b.x0 && b.y1 > b.y0,
               "coco_average_precision: {}[{}] is degenerate: (x0 {}, y0 {}, x1 {}, y1 {}) needs "
               "x0 < x1 and y0 < y1", list, i, b.x0, b.y0, b.x1, b.y1);
  }
}

// One image and category after evaluateImg: per kept detection (score order) its score, and per
// threshold whether it matched and whether it is ignored; the count of non-ignored ground truth.
struct ImageEval {
  std::vector<double> scores;
  std::array<std::vector<char>, kThresholds> matched, ignored;
  int64_t npig = 0;
};

// COCOeval.evaluateImg for one image and category.
ImageEval evaluate_image(std::vector<const Box*> gt, std::vector<const Box*> dt) {
  // sort gt ignore last, dt highest score first (both stable, as mergesort)
  const auto ignored_gt = [](const Box* g) { return area(*g) > kMaxArea; };
  std::stable_sort(gt.begin(), gt.end(),
                   [&](const Box* a, const Box* b) { return !ignored_gt(a) && ignored_gt(b); });
  std::stable_sort(dt.begin(), dt.end(), [](const Box* a, const Box* b) {
    return static_cast<double>(a->score) > static_cast<double>(b->score);
  });
  if (dt.size() > static_cast<size_t>(kMaxDets)) dt.resize(kMaxDets);
  const size_t G = gt.size(), D = dt.size();
  std::vector<char> gtIg(G);
  ImageEval out;
  for (size_t g = 0; g < G; ++g) {
    gtIg[g] = ignored_gt(gt[g]);
    out.npig += !gtIg[g];
  }
  std::vector<double> ious(D * G);  // [D, G]
  for (size_t d = 0; d < D; ++d)
    for (size_t g = 0; g < G; ++g) ious[d * G + g] = coco_box_iou(*dt[d], *gt[g]);
  for (size_t d = 0; d < D; ++d) out.scores.push_back(dt[d]->score);
  for (int t = 0; t < kThresholds; ++t) {
    std::vector<char> gtm(G, 0);
    auto& dtm = out.matched[t];
    auto& dtIg = out.ignored[t];
    dtm.assign(D, 0);
    dtIg.assign(D, 0);
    for (size_t d = 0; d < D; ++d) {
      double iou = std::min(kIouThrs[t], 1 - 1e-10);  // best match so far
      int64_t m = -1;
      for (size_t g = 0; g < G; ++g) {
        if (gtm[g]) continue;                          // already matched (no crowd boxes here)
        if (m > -1 && !gtIg[m] && gtIg[g]) break;      // matched a regular box; the rest ignored
        if (ious[d * G + g] < iou) continue;           // ties go to the later box
        iou = ious[d * G + g];
        m = static_cast<int64_t>(g);
      }
      if (m == -1) continue;
      dtIg[d] = gtIg[m];
      dtm[d] = 1;
      gtm[m] = 1;
    }
    // unmatched detections outside the area range are ignored
    for (size_t d = 0; d < D; ++d)
      if (!dtm[d] && area(*dt[d]) > kMaxArea) dtIg[d] = 1;
  }
  return out;
}

// COCOeval.accumulate for one category: precision [T, R] added into `sum`; false if the category
// has no non-ignored ground truth (its precision stays -1 and the mean skips it).
bool accumulate_category(const std::vector<ImageEval>& images,
                         std::array<std::array<double, kRecallPoints>, kThresholds>& precision) {
  std::vector<double> scores;
  int64_t npig = 0;
  for (const auto& e : images) {
    scores.insert(scores.end(), e.scores.begin(), e.scores.end());
    npig += e.npig;
  }
  if (npig == 0) return false;
  std::vector<size_t> inds(scores.size());
  for (size_t i = 0; i < inds.size(); ++i) inds[i] = i;
  std::stable_sort(inds.begin(), inds.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  const size_t nd = scores.size();
  for (int t = 0; t < kThresholds; ++t) {
    std::vector<char> matched, ignored;
    for (const auto& e : images) {
      matched.insert(matched.end(), e.matched[t].begin(), e.matched[t].end());
      ignored.insert(ignored.end(), e.ignored[t].begin(), e.ignored[t].end());
    }
    std::vector<double> rc(nd), pr(nd);
    double tp = 0, fp = 0;
    for (size_t i = 0; i < nd; ++i) {
      const size_t k = inds[i];
      tp += matched[k] && !ignored[k];
      fp += !matched[k] && !ignored[k];
      rc[i] = tp / static_cast<double>(npig);
      pr[i] = tp / (fp + tp + 0x1p-52);  // np.spacing(1)
    }
    for (size_t i = nd; i-- > 1;) pr[i - 1] = std::max(pr[i - 1], pr[i]);
    auto& q = precision[t];
    q.fill(0.0);
    for (int r = 0; r < kRecallPoints; ++r) {
      // np.searchsorted(rc, recThrs, side="left"): the first index with rc >= threshold
      const size_t pi = static_cast<size_t>(
          std::lower_bound(rc.begin(), rc.end(), recall_threshold(r)) - rc.begin());
      if (pi >= nd) break;  // COCOeval's try/except: the remaining points stay 0
      q[r] = pr[pi];
    }
  }
  return true;
}

}  // namespace

double coco_box_iou(const Box& detection, const Box& ground_truth) {
  const XYWH d = xywh(detection), g = xywh(ground_truth);
  const double w = std::fmin(d.w + d.x, g.w + g.x) - std::fmax(d.x, g.x);
  if (w <= 0) return 0.0;
  const double h = std::fmin(d.h + d.y, g.h + g.y) - std::fmax(d.y, g.y);
  if (h <= 0) return 0.0;
  const double i = product(w, h);
  return i / (product(d.w, d.h) + product(g.w, g.h) - i);
}

APResult coco_average_precision(const std::vector<Box>& detections,
                                const std::vector<Box>& ground_truth) {
  check_boxes(detections, "detections", true);
  check_boxes(ground_truth, "ground_truth", false);
  // category -> image (ascending) -> boxes in input order
  std::map<int64_t, std::map<int64_t, std::pair<std::vector<const Box*>, std::vector<const Box*>>>>
      by_category;
  for (const Box& g : ground_truth) by_category[g.label][g.image].first.push_back(&g);
  double sum = 0, sum50 = 0, sum75 = 0;
  int64_t categories = 0;
  for (auto& [label, images] : by_category) {
    for (const Box& d : detections)
      if (d.label == label) images[d.image].second.push_back(&d);
    std::vector<ImageEval> evals;
    for (const auto& [image, boxes] : images)
      evals.push_back(evaluate_image(boxes.first, boxes.second));
    std::array<std::array<double, kRecallPoints>, kThresholds> precision{};
    if (!accumulate_category(evals, precision)) continue;
    ++categories;
    for (int t = 0; t < kThresholds; ++t) {
      for (double p : precision[t]) {
        sum += p;
        if (t == 0) sum50 += p;
        if (t == 5) sum75 += p;  // kIouThrs[5] == .75 exactly
      }
    }
  }
  if (categories == 0) return {-1.0, -1.0, -1.0};
  const double n = static_cast<double>(categories) * kRecallPoints;
  return {sum / (n * kThresholds), sum50 / n, sum75 / n};
}

}  // namespace loom::metrics
