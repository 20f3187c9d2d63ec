"""COCO box AP exactly as pycocotools' COCOeval computes it (iouType "bbox", area "all",
maxDets 100), as loom's metrics::average_precision (metrics/coco.h) does; pycocotools is not
installed, so it is written out here.

  box IoU      float64 on (x, y, w, h), maskApi.c's bbIou (no +1)
  matching     per class and image, detections by descending score (stable); each takes the
               not yet matched ground-truth box of highest IoU >= the threshold (ties: the later)
  precision    per class, the detections of all images (image order) by descending score
               (stable) give cumulative tp / fp; recall = tp / ground-truth count, precision =
               tp / (tp + fp + 2^-52) made non-increasing from the end, read at the 101 recall
               points 0, .01, ..., 1 (first index with recall >= the point; 0 past the last)
  AP           the mean over the IoU thresholds .5, .55, ..., .95 and the classes that have
               ground truth; AP50 and AP75 at one threshold
"""
import numpy as np

IOU_THRESHOLDS = np.linspace(.5, 0.95, int(np.round((0.95 - .5) / .05)) + 1, endpoint=True)
RECALL_POINTS = np.linspace(.0, 1.00, int(np.round((1.00 - .0) / .01)) + 1, endpoint=True)


def box_iou_xyxy(a, b):
    """IoU of pixel boxes (x0, y0, x1, y1), (n, 4) x (m, 4) -> (n, m) float64, computed as
    pycocotools' bbIou on (x, y, w, h): no +1, 0 when the boxes do not overlap."""
    a, b = np.asarray(a, np.float64).reshape(-1, 4), np.asarray(b, np.float64).reshape(-1, 4)
    ax, ay, aw, ah = (c[:, None] for c in xywh(a))         # (n, 1) each
    bx, by, bw, bh = (c[None] for c in xywh(b))            # (1, m) each
    w = np.fmin(aw + ax, bw + bx) - np.fmax(ax, bx)
    h = np.fmin(ah + ay, bh + by) - np.fmax(ay, by)
    inter = w * h
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / ((aw * ah + bw * bh) - inter)
    return np.where((w <= 0) | (h <= 0), 0.0, iou)


def xywh(boxes):
    """(n, 4) x0 y0 x1 y1 -> columns x, y, w, h."""
    return boxes[:, 0], boxes[:, 1], boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]


def match_image(ious, hits):
    """COCOeval.evaluateImg's loop for one image and class: ious (detections by descending
    score, ground truth); sets hits[t, d] when detection d is a true positive at threshold t."""
    for t, threshold in enumerate(IOU_THRESHOLDS):
        taken = np.zeros(ious.shape[1], bool)
        for d in range(ious.shape[0]):
            best, m = min(threshold, 1 - 1e-10), -1
            for g in range(ious.shape[1]):
                if taken[g] or ious[d, g] < best:
                    continue
                best, m = ious[d, g], g
            if m >= 0:
                taken[m] = hits[t, d] = True


def class_precision(dets, gts, c, max_dets):
    """(thresholds, 101) interpolated precision of class c, or None without ground truth."""
    scores, hits, n_gt = [], [], 0
    for (db, ds, dl), (gb, gl) in zip(dets, gts):
        di, gi = np.flatnonzero(np.asarray(dl) == c), np.flatnonzero(np.asarray(gl) == c)
        n_gt += len(gi)
        if not len(di):
            continue
        ds = np.asarray(ds, np.float64)
        di = di[np.argsort(-ds[di], kind="mergesort")][:max_dets]
        hit = np.zeros((len(IOU_THRESHOLDS), len(di)), bool)
        if len(gi):
            match_image(box_iou_xyxy(np.asarray(db)[di], np.asarray(gb)[gi]), hit)
        scores.append(ds[di])
        hits.append(hit)
    precision = np.zeros((len(IOU_THRESHOLDS), len(RECALL_POINTS)))
    if not scores:                                         # ground truth, no detections: 0
        return precision
    order = np.argsort(-np.concatenate(scores), kind="mergesort")
    hit = np.concatenate(hits, 1)[:, order]
    tp = np.cumsum(hit, 1).astype(np.float64)
    fp = np.cumsum(~hit, 1).astype(np.float64)
    for t in range(len(IOU_THRESHOLDS)):
        recall = tp[t] / n_gt
        p = tp[t] / (fp[t] + tp[t] + np.spacing(1))
        p = np.maximum.accumulate(p[::-1])[::-1]           # non-increasing from the end
        idx = np.searchsorted(recall, RECALL_POINTS, side="left")
        ok = idx < len(p)
        precision[t, :len(idx[ok])] = p[idx[ok]]
    return precision


def coco_ap(dets, gts, max_dets=100):
    """dets: per image (boxes (n, 4) x0y0x1y1, scores (n,), labels (n,)); gts: per image
    (boxes (m, 4), labels (m,)). -> {"ap", "ap50", "ap75"}, -1 each without any ground truth."""
    classes = sorted({int(c) for _, gl in gts for c in gl})
    if not classes:
        return {"ap": -1.0, "ap50": -1.0, "ap75": -1.0}
    precision = np.stack([class_precision(dets, gts, c, max_dets) for c in classes], -1)
    return {"ap": float(precision.mean()), "ap50": float(precision[0].mean()),
            "ap75": float(precision[5].mean())}


def check_coco_ap():
    """Hand-made cases with known answers (one image unless stated); raises if one fails."""
    g2 = ([[0, 0, 10, 10], [20, 20, 40, 40]], [3, 3])
    fp = [50, 50, 60, 60]
    cases = [  # (dets, gts, AP, AP50)
        ([([[0, 0, 10, 10], [20, 20, 40, 40]], [.9, .8], [3, 3])], [g2], 1.0, 1.0),   # perfect
        # a false positive ranked first: tp/fp 0/1, 1/1, 2/1 -> precision 0, .5, 2/3 -> 2/3
        ([([fp, [0, 0, 10, 10], [20, 20, 40, 40]], [.95, .9, .8], [3, 3, 3])], [g2], 2 / 3,
         2 / 3),
        # FP second: precision 1, .5, 2/3 -> 1 for recall <= .5 (51 points), 2/3 above (50)
        ([([[0, 0, 10, 10], fp, [20, 20, 40, 40]], [.9, .8, .7], [3, 3, 3])], [g2],
         (51 + 50 * 2 / 3) / 101, (51 + 50 * 2 / 3) / 101),
        # IoU .72: matched at .5 .55 .6 .65 .7, not at .75 ... .95 -> AP50 1, AP .5
        ([([[0, 0, 10, 7.2]], [.5], [1])], [([[0, 0, 10, 10]], [1])], 0.5, 1.0),
        # duplicate ranked below the true positive: a false positive after full recall -> 1
        ([([[0, 0, 10, 10], [0, 0, 10, 10]], [.9, .8], [1, 1])], [([[0, 0, 10, 10]], [1])],
         1.0, 1.0),
        # wrong class: class 5 missed (AP 0), class 7 has no ground truth (not averaged)
        ([([[0, 0, 10, 10], [20, 20, 40, 40]], [.9, .8], [3, 7])],
         [([[0, 0, 10, 10], [20, 20, 40, 40]], [3, 5])], 0.5, 0.5),
        # two images: image 1's box found, image 2's box missed, its FP scores highest:
        # precision 0, .5 -> .5 up to recall .5 (51 of the 101 points), 0 beyond
        ([([[0, 0, 10, 10]], [.6], [2]), ([fp], [.7], [2])],
         [([[0, 0, 10, 10]], [2]), ([[20, 20, 40, 40]], [2])], 51 * .5 / 101, 51 * .5 / 101),
    ]
    for i, (dets, gts, want_ap, want_ap50) in enumerate(cases):
        got = coco_ap(dets, gts)
        if abs(got["ap"] - want_ap) > 1e-12 or abs(got["ap50"] - want_ap50) > 1e-12:
            raise AssertionError(f"coco_ap case {i}: got {got}, want AP {want_ap}, AP50 "
                                 f"{want_ap50}")
    if coco_ap([([], [], [])], [([], [])])["ap"] != -1.0:
        raise AssertionError("coco_ap without ground truth must be -1")
