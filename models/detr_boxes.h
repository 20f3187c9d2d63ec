// Box utilities and the generalized IoU of Rezatofighi et al. 2019, as DETR's util/box_ops.py:
// the geometry DETR's matcher and box losses are made of (models/detr_loss.cpp).
// Boxes are [..., 4]: (x0, y0, x1, y1) corners or (cx, cy, w, h) centre and size.
#pragma once

#include "core/tensor.h"
#include "nn/functional.h"  // Reduction

namespace loom::models {

Tensor box_cxcywh_to_xyxy(const Tensor& boxes);
Tensor box_xyxy_to_cxcywh(const Tensor& boxes);
// Pairwise IoU and generalized IoU (Rezatofighi et al. 2019) of xyxy boxes [N, 4] and [M, 4]
// -> [N, M]. Throws if a box has x1 < x0 or y1 < y0.
Tensor box_iou(const Tensor& boxes1, const Tensor& boxes2);
Tensor generalized_box_iou(const Tensor& boxes1, const Tensor& boxes2);
// 1 - GIoU of matching boxes [N, 4] and [N, 4] (torchvision.ops.generalized_box_iou_loss).
Tensor generalized_box_iou_loss(const Tensor& boxes1, const Tensor& boxes2,
                                nn::functional::Reduction reduction =
                                    nn::functional::Reduction::Mean);

}  // namespace loom::models
