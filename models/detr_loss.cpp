// DETR's Hungarian matcher and set criterion (labels + boxes); see detr_loss.h.
#include "models/detr_loss.h"

#include <chrono>
#include <cmath>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "models/detr_boxes.h"
#include "nn/functional.h"
#include "optim/linear_sum_assignment.h"

namespace loom::models {

namespace fn = nn::functional;

namespace {

void check_inputs(const Tensor& logits, const Tensor& boxes, const std::vector<DETRTarget>& targets,
                  const DETRLossConfig& config) {
  LOOM_CHECK(config.num_classes > 0 && config.eos_coef >= 0.0f,
             "detr_loss: num_classes {} must be positive and eos_coef {} non-negative",
             config.num_classes, config.eos_coef);
  LOOM_CHECK(logits.defined() && logits.dtype() == DType::Float32 && logits.dim() == 3 &&
                 logits.size(2) == config.num_classes + 1,
             "detr_loss: expected float32 logits [B, Q, {}] (num_classes + 1), got {}",
             config.num_classes + 1, logits.defined() ? shape_str(logits.shape()) : "undefined");
  LOOM_CHECK(boxes.defined() && boxes.dtype() == DType::Float32 &&
                 boxes.shape() == Shape({logits.size(0), logits.size(1), 4}),
             "detr_loss: expected float32 boxes [{}, {}, 4] beside logits {}, got {}",
             logits.size(0), logits.size(1), shape_str(logits.shape()),
             boxes.defined() ? shape_str(boxes.shape()) : "undefined");
  LOOM_CHECK(static_cast<int64_t>(targets.size()) == logits.size(0),
             "detr_loss: {} targets for a batch of {}", targets.size(), logits.size(0));
  for (size_t i = 0; i < targets.size(); ++i) {
    const DETRTarget& t = targets[i];
    LOOM_CHECK(t.labels.defined() && t.labels.dtype() == DType::Int64 && t.labels.dim() == 1 &&
                   t.boxes.defined() && t.boxes.dtype() == DType::Float32 &&
                   t.boxes.shape() == Shape({t.labels.size(0), 4}),
               "detr_loss: target {} needs int64 labels [n] and float32 boxes [n, 4], got {} "
               "and {}",
               i, t.labels.defined() ? shape_str(t.labels.shape()) : "undefined",
               t.boxes.defined() ? shape_str(t.boxes.shape()) : "undefined");
    for (int64_t label : t.labels.to_vector_i64())
      LOOM_CHECK(label >= 0 && label < config.num_classes,
                 "detr_loss: target {} has label {} outside [0, {})", i, label, config.num_classes);
    // util/box_ops.py asserts on degenerate boxes; here a clear error names the box.
    const std::vector<float> b = t.boxes.to_vector();
    for (size_t k = 0; k < b.size(); k += 4)
      LOOM_CHECK(std::isfinite(b[k]) && std::isfinite(b[k + 1]) && b[k + 2] > 0.0f &&
                     b[k + 3] > 0.0f && std::isfinite(b[k + 2]) && std::isfinite(b[k + 3]),
                 "detr_loss: target {} box {} (cx, cy, w, h) = ({}, {}, {}, {}) is degenerate or "
                 "not finite (w and h must be > 0)",
                 i, k / 4, b[k], b[k + 1], b[k + 2], b[k + 3]);
  }
}

// The matcher's cost [B * Q, T] for all predictions against all T targets of the batch.
Tensor cost_matrix(const Tensor& logits, const Tensor& boxes, const Tensor& labels,
                   const Tensor& target_boxes, const DETRLossConfig& c) {
  const Tensor prob = softmax(logits.flatten(0, 1), -1);     // (B Q, classes + 1)
  const Tensor out_boxes = boxes.flatten(0, 1);              // (B Q, 4)
  const Tensor cost_class = -index_select(prob, 1, labels);  // (B Q, T)
  // torch.cdist(p=1), one coordinate at a time: (B Q, 1) - (1, T) -> (B Q, T), summed over the 4
  // (broadcasting rows against a contiguous row is faster than a (B Q, T, 4) difference).
  const Tensor target_coords = target_boxes.t().contiguous();  // (4, T)
  Tensor cost_bbox;
  for (int64_t k = 0; k < 4; ++k) {
    const Tensor d = abs(out_boxes.narrow(1, k, 1) - target_coords.narrow(0, k, 1));  // (B Q, T)
    cost_bbox = k == 0 ? d : cost_bbox + d;
  }
  const Tensor cost_giou =
      -generalized_box_iou(box_cxcywh_to_xyxy(out_boxes), box_cxcywh_to_xyxy(target_boxes));
  return c.cost_bbox * cost_bbox + c.cost_class * cost_class + c.cost_giou * cost_giou;
}

// Every target of the batch side by side: labels (T,) on the host and boxes (T, 4) on `device`
// (undefined when T = 0); image b's targets start at the sum of the earlier images' counts.
struct BatchTargets {
  std::vector<int64_t> labels;
  Tensor boxes;
};

BatchTargets side_by_side(const std::vector<DETRTarget>& targets, Device device) {
  BatchTargets all;
  std::vector<Tensor> boxes;
  for (const DETRTarget& t : targets) {
    const std::vector<int64_t> l = t.labels.to_vector_i64();
    all.labels.insert(all.labels.end(), l.begin(), l.end());
    if (!l.empty()) boxes.push_back(t.boxes.to(device));
  }
  if (!boxes.empty()) all.boxes = cat(boxes, 0);
  return all;
}

std::vector<DETRMatch> match(const Tensor& logits, const Tensor& boxes,
                             const std::vector<DETRTarget>& targets, const BatchTargets& all,
                             const DETRLossConfig& config) {
  const int64_t B = logits.size(0), Q = logits.size(1);
  std::vector<DETRMatch> matches(B);
  const int64_t T = static_cast<int64_t>(all.labels.size());
  if (T == 0) return matches;
  const Tensor all_labels = tensor_i64(all.labels, {T}).to(logits.device());
  std::vector<float> cost;
  {
    NoGradGuard no_grad;  // DETR's matcher runs under torch.no_grad()
    // One device-to-host copy for the whole batch: (B Q, T) row-major.
    cost = cost_matrix(logits, boxes, all_labels, all.boxes, config).to_vector();
  }
  for (size_t k = 0; k < cost.size(); ++k)
    LOOM_CHECK(!std::isnan(cost[k]),
               "detr_loss: the matching cost of image {} query {} is NaN (predictions with NaN "
               "or degenerate boxes)",
               static_cast<int64_t>(k) / T / Q, static_cast<int64_t>(k) / T % Q);
  int64_t offset = 0;  // the first column of image b's targets
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = targets[b].labels.size(0);
    std::vector<double> block(Q * n);  // image b's (Q, n) block of the cost
    for (int64_t q = 0; q < Q; ++q)
      for (int64_t j = 0; j < n; ++j) block[q * n + j] = cost[(b * Q + q) * T + offset + j];
    auto [rows, cols] = linear_sum_assignment(block, Q, n);
    matches[b] = {std::move(rows), std::move(cols)};
    offset += n;
  }
  return matches;
}

}  // namespace

std::vector<DETRMatch> hungarian_match(const Tensor& logits, const Tensor& boxes,
                                       const std::vector<DETRTarget>& targets,
                                       const DETRLossConfig& config) {
  check_inputs(logits, boxes, targets, config);
  return match(logits, boxes, targets, side_by_side(targets, logits.device()), config);
}

DETRLossTerms detr_loss_terms(const Tensor& logits, const Tensor& boxes,
                              const std::vector<DETRTarget>& targets, const DETRLossConfig& config,
                              float num_boxes_override) {
  // logits (B, Q, C + 1), boxes (B, Q, 4) -> the loss terms
  check_inputs(logits, boxes, targets, config);
  LOOM_CHECK(std::isfinite(num_boxes_override) && num_boxes_override >= 0,
             "detr_loss: num_boxes {} must be a finite number >= 0", num_boxes_override);
  const int64_t B = logits.size(0), Q = logits.size(1), C = config.num_classes;
  const Device dev = logits.device();
  DETRLossTerms out;
  const auto t0 = std::chrono::steady_clock::now();
  const BatchTargets all = side_by_side(targets, dev);
  out.matches = match(logits, boxes, targets, all, config);
  out.match_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // The class of every query (matched: its target's, else "no object") and its CE weight.
  // flat_query: the matched queries of the batch (b * Q + q); flat_target: their targets, as
  // rows of the batch's targets side by side.
  std::vector<int64_t> target_class(B * Q, C), flat_query, flat_target;
  std::vector<float> weight(B * Q, config.eos_coef);
  int64_t offset = 0;  // image b's first target
  for (int64_t b = 0; b < B; ++b) {
    const DETRMatch& m = out.matches[b];
    for (size_t i = 0; i < m.queries.size(); ++i) {
      const int64_t k = b * Q + m.queries[i];
      target_class[k] = all.labels[offset + m.targets[i]];
      weight[k] = 1.0f;
      flat_query.push_back(k);
      flat_target.push_back(offset + m.targets[i]);
    }
    offset += targets[b].labels.size(0);
  }
  const int64_t num_boxes = offset;
  const float normaliser = num_boxes_override > 0
                               ? num_boxes_override
                               : static_cast<float>(std::max<int64_t>(num_boxes, 1));

  // Weighted-mean cross-entropy, F.cross_entropy(weight=empty_weight): sum w_i nll_i / sum w_i.
  const Tensor log_probs = log_softmax(logits, -1);                    // (B, Q, C + 1)
  const Tensor classes = tensor_i64(target_class, {B, Q, 1}).to(dev);  // (B, Q, 1)
  const Tensor nll = -gather(log_probs, 2, classes).squeeze(2);        // (B, Q)
  double weight_sum = 0.0;
  for (float w : weight) weight_sum += w;
  out.loss_ce = sum(nll * tensor(weight, {B, Q}).to(dev)) / static_cast<float>(weight_sum);

  const int64_t N = static_cast<int64_t>(flat_query.size());
  if (N == 0) {  // no target in the batch: zero box terms, still connected to boxes
    out.loss_bbox = out.loss_giou = sum(boxes) * 0.0f;
  } else {
    const Tensor src =
        index_select(boxes.reshape({B * Q, 4}), 0, tensor_i64(flat_query, {N}).to(dev));  // (N, 4)
    const Tensor tgt = index_select(all.boxes, 0, tensor_i64(flat_target, {N}).to(dev));  // (N, 4)
    out.loss_bbox = sum(abs(src - tgt)) / normaliser;
    out.loss_giou = generalized_box_iou_loss(box_cxcywh_to_xyxy(src), box_cxcywh_to_xyxy(tgt),
                                             fn::Reduction::Sum) /
                    normaliser;
  }
  out.loss = config.loss_ce * out.loss_ce + config.loss_bbox * out.loss_bbox +
             config.loss_giou * out.loss_giou;
  return out;
}

Tensor detr_loss(const Tensor& logits, const Tensor& boxes, const std::vector<DETRTarget>& targets,
                 const DETRLossConfig& config, float num_boxes) {
  return detr_loss_terms(logits, boxes, targets, config, num_boxes).loss;
}

}  // namespace loom::models
