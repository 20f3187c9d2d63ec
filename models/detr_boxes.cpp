// Box utilities and the generalized IoU of Rezatofighi et al. 2019, as DETR's util/box_ops.py.
// Boxes are [..., 4]; xyxy = (x0, y0, x1, y1) corners, cxcywh = (centre x, centre y, w, h).
#include <limits>

#include "autograd/ops.h"
#include "core/error.h"
#include "models/detr_boxes.h"

namespace loom::models {

using nn::functional::Reduction;

namespace {

void check_boxes(const Tensor& boxes, const char* op) {
  LOOM_CHECK(
      boxes.defined() && boxes.dtype() == DType::Float32 && boxes.dim() >= 1 && boxes.size(-1) == 4,
      "{}: expected float32 boxes [..., 4], got {}", op,
      boxes.defined() ? shape_str(boxes.shape()) : "undefined");
}

// Degenerate boxes would give NaN or negative areas; DETR asserts the same.
void check_xyxy(const Tensor& boxes, const char* op) {
  check_boxes(boxes, op);
  if (boxes.numel() == 0) return;
  const Tensor bad = lt(boxes.narrow(-1, 2, 2), boxes.narrow(-1, 0, 2)) |
                     ne(boxes.narrow(-1, 0, 2), boxes.narrow(-1, 0, 2));  // x1 < x0, or NaN
  LOOM_CHECK(!any(bad).item<bool>(),
             "{}: boxes of shape {} contain a box with x1 < x0 or y1 < y0 (or NaN)", op,
             shape_str(boxes.shape()));
}

// The coordinates x0, y0, x1, y1 of xyxy boxes [..., 4] as four contiguous planes [...]: the
// pairwise broadcasts below ([N, 1] against [1, M]) then run along whole rows, several times
// faster than over [..., 2] corner pairs. The arithmetic per element is unchanged.
struct Corners {
  Tensor x0, y0, x1, y1;
};

Corners corners(const Tensor& xyxy) {
  Shape order = {xyxy.dim() - 1};  // the coordinate axis first: [4, ...]
  for (int64_t d = 0; d + 1 < xyxy.dim(); ++d) order.push_back(d);
  const Tensor planes = xyxy.permute(order).contiguous();
  return {planes.select(0, 0), planes.select(0, 1), planes.select(0, 2), planes.select(0, 3)};
}

Tensor area(const Corners& c) { return (c.x1 - c.x0) * (c.y1 - c.y0); }

// The area of the box [lo_x, hi_x] x [lo_y, hi_y], 0 when it is empty.
Tensor clamped_area(const Tensor& lo_x, const Tensor& hi_x, const Tensor& lo_y,
                    const Tensor& hi_y) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  return clamp(hi_x - lo_x, 0.0f, inf) * clamp(hi_y - lo_y, 0.0f, inf);
}

struct Overlap {
  Tensor iou, union_area, enclosing_area;
};

// IoU, union and smallest-enclosing-box area of a and b, broadcast against each other.
Overlap overlap(const Tensor& a_boxes, const Tensor& b_boxes) {
  const Corners a = corners(a_boxes), b = corners(b_boxes);
  const Tensor inter = clamped_area(maximum(a.x0, b.x0), minimum(a.x1, b.x1), maximum(a.y0, b.y0),
                                    minimum(a.y1, b.y1));
  const Tensor union_area = area(a) + area(b) - inter;
  const Tensor enclosing = clamped_area(minimum(a.x0, b.x0), maximum(a.x1, b.x1),
                                        minimum(a.y0, b.y0), maximum(a.y1, b.y1));
  return {inter / union_area, union_area, enclosing};
}

// GIoU = IoU - |C \ (A u B)| / |C|, C the smallest box enclosing A and B.
Tensor giou(const Overlap& o) {
  return o.iou - (o.enclosing_area - o.union_area) / o.enclosing_area;
}

void check_pairwise(const Tensor& boxes1, const Tensor& boxes2, const char* op) {
  check_xyxy(boxes1, op);
  check_xyxy(boxes2, op);
  LOOM_CHECK(boxes1.dim() == 2 && boxes2.dim() == 2,
             "{}: expected boxes [N, 4] and [M, 4], got {} and {}", op, shape_str(boxes1.shape()),
             shape_str(boxes2.shape()));
}

}  // namespace

Tensor box_cxcywh_to_xyxy(const Tensor& boxes) {
  check_boxes(boxes, "box_cxcywh_to_xyxy");
  const Tensor c = boxes.narrow(-1, 0, 2), half = boxes.narrow(-1, 2, 2) * 0.5f;
  return cat({c - half, c + half}, -1);  // [..., 4]
}

Tensor box_xyxy_to_cxcywh(const Tensor& boxes) {
  check_boxes(boxes, "box_xyxy_to_cxcywh");
  const Tensor lo = boxes.narrow(-1, 0, 2), hi = boxes.narrow(-1, 2, 2);
  return cat({(lo + hi) * 0.5f, hi - lo}, -1);  // [..., 4]
}

Tensor box_iou(const Tensor& boxes1, const Tensor& boxes2) {
  check_pairwise(boxes1, boxes2, "box_iou");
  // [N, 1, 4] against [1, M, 4] -> [N, M]
  return overlap(boxes1.unsqueeze(1), boxes2.unsqueeze(0)).iou;
}

Tensor generalized_box_iou(const Tensor& boxes1, const Tensor& boxes2) {
  check_pairwise(boxes1, boxes2, "generalized_box_iou");
  return giou(overlap(boxes1.unsqueeze(1), boxes2.unsqueeze(0)));  // [N, M]
}

Tensor generalized_box_iou_loss(const Tensor& boxes1, const Tensor& boxes2, Reduction reduction) {
  check_xyxy(boxes1, "generalized_box_iou_loss");
  check_xyxy(boxes2, "generalized_box_iou_loss");
  LOOM_CHECK(boxes1.shape() == boxes2.shape(),
             "generalized_box_iou_loss: boxes of shapes {} and {} differ",
             shape_str(boxes1.shape()), shape_str(boxes2.shape()));
  return reduce(1.0f - giou(overlap(boxes1, boxes2)), reduction);  // [...] before reduction
}

}  // namespace loom::models
