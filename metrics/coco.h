// COCO box average precision as pycocotools' COCOeval computes it (Lin et al. 2014, "Microsoft
// COCO: Common Objects in Context"; cocoapi PythonAPI/pycocotools/cocoeval.py), the number object
// detection papers such as DETR report.
//
// Conventions (COCOeval's, with iouType "bbox", areaRng "all", maxDets 100, useCats 1):
//   - boxes are absolute pixel corners (x0, y0, x1, y1), x0 < x1 and y0 < y1; COCOeval's (x, y, w,
//     h) is (x0, y0, x1 - x0, y1 - y0) computed in double, and IoU is maskApi.c's bbIou in double
//     (no +1; 0 when the boxes do not overlap);
//   - the images are every image id in either list, the categories every label with ground truth
//     (a label that only detections use has no ground truth: COCOeval leaves it at -1 and the mean
//     skips it); an image id or label is any int64;
//   - per image and category: detections sorted by descending score, stable (numpy's mergesort:
//     tied scores keep their input order), the first 100 kept; for each IoU threshold
//     t in np.linspace(.5, .95, 10), each detection in turn takes the not yet matched ground truth
//     box of highest IoU >= t (a later box wins a tie: evaluateImg's loop);
//   - per category: the detections of all images (image ids ascending) sorted by descending score,
//     stable; cumulative tp and fp give recall tp / n_gt and precision tp / (tp + fp + 2^-52),
//     made non-increasing from the end and read at the 101 recall points np.linspace(0, 1, 101)
//     (the first detection whose recall reaches the point; 0 beyond the last);
//   - ap = mean of that precision over the 10 thresholds, 101 points and the categories with
//     ground truth; ap50 and ap75 the same at t = .5 and t = .75 only; all three -1 when there is
//     no ground truth at all (an empty evaluation, as COCOeval's summarize);
//   - a ground truth box of area above 1e10 (COCO's area range "all" is [0, 1e5^2]) is ignored, and
//     a detection of such an area that matches nothing is ignored, as COCOeval does.
// A non-finite coordinate or score, or a box with x1 <= x0 or y1 <= y0, throws loom::Error naming
// the list, the index and the values.
#pragma once

#include <cstdint>
#include <vector>

namespace loom::metrics {

struct Box {
  int64_t image;
  int64_t label;
  float x0, y0, x1, y1;
  float score = 1.0f;  // ignored for ground truth
};

struct APResult {
  double ap, ap50, ap75;
};

APResult coco_average_precision(const std::vector<Box>& detections,
                                const std::vector<Box>& ground_truth);

// COCOeval's IoU of two boxes (maskApi.c bbIou on (x0, y0, x1 - x0, y1 - y0), in double).
double coco_box_iou(const Box& detection, const Box& ground_truth);

}  // namespace loom::metrics
