// DETR's PostProcess (facebookresearch/detr models/detr.py, as the detr-fmnist task of
// bench/reference/train.py applies it), shared by train_detr and detect: the last decoder
// layer's logits through a softmax, "no object" dropped, score = the best class probability,
// label = its class; every query is a detection. Boxes stay normalised (cx, cy, w, h) for
// drawing and are turned into pixel corners (x0, y0, x1, y1) = (cx -+ w/2, cy -+ h/2) * side
// for COCO AP. Below: the detections of a model on scenes, and their COCO AP (metrics/coco.h)
// against the scenes' boxes, its printed line, and pictures of the detections.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "loom.h"

namespace loom::detr_example {

struct ImageDetections {
  std::vector<float> boxes;     // [q * 4] normalised (cx, cy, w, h)
  std::vector<float> scores;    // [q]
  std::vector<int64_t> labels;  // [q]

  int64_t size() const { return static_cast<int64_t>(scores.size()); }
  // For data::write_scene_png: predictions below min_score are not drawn.
  data::SceneDetections for_drawing(float min_score) const {
    return {tensor(boxes, {size(), 4}), tensor_i64(labels, {size()}), tensor(scores, {size()}),
            min_score};
  }
  // Detection i as a COCO box in pixels of a side x side canvas. A box of zero width or height
  // (a sigmoid output that underflowed) is widened by one float step, so that it still counts as
  // a false positive (IoU 0), as in the reference, instead of being refused by the metric.
  metrics::Box pixel_box(int64_t i, int64_t image, float side) const {
    const float* b = boxes.data() + i * 4;
    metrics::Box box{image, labels[static_cast<size_t>(i)], (b[0] - 0.5f * b[2]) * side,
                     (b[1] - 0.5f * b[3]) * side, (b[0] + 0.5f * b[2]) * side,
                     (b[1] + 0.5f * b[3]) * side, scores[static_cast<size_t>(i)]};
    const float inf = std::numeric_limits<float>::infinity();
    if (!(box.x1 > box.x0)) box.x1 = std::nextafter(box.x0, inf);
    if (!(box.y1 > box.y0)) box.y1 = std::nextafter(box.y0, inf);
    return box;
  }
};

// logits [B, Q, C + 1], boxes [B, Q, 4] (any device) -> one ImageDetections per image.
inline std::vector<ImageDetections> postprocess(const Tensor& logits, const Tensor& boxes) {
  LOOM_CHECK(logits.dim() == 3 && boxes.dim() == 3 && boxes.size(2) == 4 &&
                 logits.size(0) == boxes.size(0) && logits.size(1) == boxes.size(1),
             "postprocess: logits {} and boxes {} are not [B, Q, C + 1] and [B, Q, 4]",
             shape_str(logits.shape()), shape_str(boxes.shape()));
  const int64_t B = logits.size(0), Q = logits.size(1), C = logits.size(2) - 1;
  const std::vector<float> prob = softmax(logits, -1).to(Device::CPU).to_vector();  // (B, Q, C+1)
  const std::vector<float> box = boxes.to_vector();  // (B, Q, 4)
  std::vector<ImageDetections> out(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    ImageDetections& d = out[static_cast<size_t>(b)];
    d.boxes.assign(box.begin() + b * Q * 4, box.begin() + (b + 1) * Q * 4);
    for (int64_t q = 0; q < Q; ++q) {
      const float* p = prob.data() + (b * Q + q) * (C + 1);
      int64_t best = 0;  // torch.max: the first maximum
      for (int64_t c = 1; c < C; ++c)
        if (p[c] > p[best]) best = c;
      d.scores.push_back(p[best]);
      d.labels.push_back(best);
    }
  }
  return out;
}

// DETR's PostProcess on scenes[0, count), in eval mode, in chunks of 100.
inline std::vector<ImageDetections> detect(models::DETR& model,
                                           const std::vector<data::Scene>& scenes, int64_t count,
                                           Device device) {
  NoGradGuard no_grad;
  model.eval();
  std::vector<ImageDetections> all;
  const int64_t chunk = 100;
  for (int64_t s = 0; s < count; s += chunk) {
    std::vector<Tensor> images;
    for (int64_t i = s; i < std::min(count, s + chunk); ++i)
      images.push_back(scenes[static_cast<size_t>(i)].image);
    const models::DETROutput out = model.forward(stack(images, 0).to(device));  // (n, 1, 64, 64)
    for (ImageDetections& d : postprocess(out.logits, out.boxes))
      all.push_back(std::move(d));
  }
  model.train();
  return all;
}

// COCO AP, AP50, AP75 of the detections of scenes[0, count) (metrics/coco.h).
inline metrics::APResult average_precision(const std::vector<ImageDetections>& detections,
                                           const std::vector<data::Scene>& scenes) {
  std::vector<metrics::Box> dets, truth;
  for (size_t i = 0; i < detections.size(); ++i) {
    const data::Scene& s = scenes[i];
    const auto side = static_cast<float>(s.image.size(2));
    for (int64_t q = 0; q < detections[i].size(); ++q)
      dets.push_back(detections[i].pixel_box(q, static_cast<int64_t>(i), side));
    const std::vector<int64_t> labels = s.labels.to_vector_i64();
    for (size_t k = 0; k < labels.size(); ++k) {
      const auto& b = s.pixel_boxes[k];
      truth.push_back({static_cast<int64_t>(i), labels[k], static_cast<float>(b[0]),
                       static_cast<float>(b[1]), static_cast<float>(b[2]),
                       static_cast<float>(b[3])});
    }
  }
  return metrics::coco_average_precision(dets, truth);
}

// Pictures of scenes[0, count), <dir>/detections_<i>.png: each scene with its ground truth
// (green) and the detections scoring at least `min_score` (orange).
inline void write_detection_pngs(const std::string& dir, const std::vector<data::Scene>& scenes,
                                 const std::vector<ImageDetections>& detections, int64_t count,
                                 float min_score) {
  for (size_t i = 0; i < static_cast<size_t>(count); ++i)
    data::write_scene_png(fmt::format("{}/detections_{}.png", dir, i), scenes[i],
                          detections[i].for_drawing(min_score));
}

// The COCO AP of `model` on scenes[0, count).
inline metrics::APResult evaluate(models::DETR& model, const std::vector<data::Scene>& scenes,
                                  int64_t count, Device device) {
  return average_precision(detect(model, scenes, count, device), scenes);
}

// "AP 0.4312 | AP50 0.6543 | AP75 0.4021", as train_detr prints it.
inline std::string format_ap(const metrics::APResult& r) {
  return fmt::format("AP {:.4f} | AP50 {:.4f} | AP75 {:.4f}", r.ap, r.ap50, r.ap75);
}

}  // namespace loom::detr_example
