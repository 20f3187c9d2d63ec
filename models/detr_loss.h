// DETR's set prediction loss (Carion et al. 2020, sec. 3.1): facebookresearch/detr's
// HungarianMatcher (models/matcher.py) and SetCriterion (models/detr.py) for the labels and
// boxes terms.
//
//   1. Matching (eq. 1): for each image, the one-to-one assignment of predictions to targets of
//      least total cost, by linear_sum_assignment on the cost matrix [num_queries, n_targets]
//        C = cost_class * (-softmax(logits)[target class])
//          + cost_bbox  * L1(predicted box, target box)
//          + cost_giou  * (-GIoU(predicted box, target box))
//      computed for the whole batch at once, without gradient, and copied to the host once.
//   2. Loss (eq. 2), on the matched pairs:
//        loss_ce * CE   cross-entropy over every query, unmatched ones against "no object"
//                       (class num_classes), a weighted mean with weight eos_coef on "no object"
//      + loss_bbox * L1  sum over matched pairs of |box - target| / num_boxes
//      + loss_giou * (1 - GIoU)  summed over matched pairs / num_boxes
//      num_boxes = max(1, the number of target boxes in the batch); under data parallelism the
//      caller passes SetCriterion's max(1, boxes of the global batch / world size) instead, so
//      that DDP's mean over the ranks gives the box terms of the whole batch. The CE term stays
//      each rank's own weighted mean, as in the reference.
//
// Boxes are normalised (cx, cy, w, h). Auxiliary losses (sec. 3.2): call detr_loss once per
// decoder layer and add.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace loom::models {

struct DETRTarget {
  Tensor labels;  // int64 [n], in [0, num_classes)
  Tensor boxes;   // float [n, 4], (cx, cy, w, h) with w, h > 0
};

struct DETRLossConfig {
  int64_t num_classes;
  float cost_class = 1, cost_bbox = 5, cost_giou = 2;  // the matcher's weights
  float loss_ce = 1, loss_bbox = 5, loss_giou = 2, eos_coef = 0.1f;
};

// One image's matching: prediction queries[i] is assigned target targets[i] (queries ascending).
struct DETRMatch {
  std::vector<int64_t> queries, targets;
};

// The terms of the loss, each already normalised (unweighted), their weighted sum, the matching
// it used and the time spent matching (cost matrix + assignment), for logs and benchmarks.
struct DETRLossTerms {
  Tensor loss, loss_ce, loss_bbox, loss_giou;  // 0-d
  std::vector<DETRMatch> matches;              // one per image
  double match_seconds = 0.0;
};

// logits [B, Q, num_classes + 1], boxes [B, Q, 4] (sigmoid outputs), one target per image.
// Throws loom::Error for wrong shapes or dtypes, labels out of range, target boxes that are not
// finite or have w <= 0 or h <= 0, and predictions whose costs are NaN.
std::vector<DETRMatch> hungarian_match(const Tensor& logits, const Tensor& boxes,
                                       const std::vector<DETRTarget>& targets,
                                       const DETRLossConfig& config);
// num_boxes > 0 replaces the batch's own normaliser of the box terms (see above).
DETRLossTerms detr_loss_terms(const Tensor& logits, const Tensor& boxes,
                              const std::vector<DETRTarget>& targets, const DETRLossConfig& config,
                              float num_boxes = 0);
// The weighted sum alone, differentiable in logits and boxes.
Tensor detr_loss(const Tensor& logits, const Tensor& boxes, const std::vector<DETRTarget>& targets,
                 const DETRLossConfig& config, float num_boxes = 0);

}  // namespace loom::models
