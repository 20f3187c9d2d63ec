"""Multi-object Fashion-MNIST scenes for DETR, drawn as loom's data/fashion_mnist_scenes.h draws
them (the same numpy PCG64 draws, the same pixels; tests/golden/gen_metrics.py checks loom
against make_scene below).

A scene (64x64, one channel): a canvas of zeros (float32); n items, n uniform in {1, 2, 3, 4};
for each item in turn: an image k uniform over the split (pixels / 255, no other normalisation:
the canvas, values in [0, 1], is the model input); a scale s uniform in [0.6, 1.4), side =
floor(28 s + 0.5) (17..39 px); the image resized to side x side by F.interpolate(bilinear,
align_corners=False, antialias=False); its box = the tight extent of the resized pixels > 0.1,
(x0, y0, x1, y1) in pixel-edge coordinates. Then at most 50 attempts at a position: px, then py,
each an integer uniform in [0, 64 - side]; the first whose box has IoU <= 0.3 with every box
already placed is taken and the item pasted as canvas = max(canvas, item) over its square; after
50 rejections the item is dropped. Draws per scene, in this order: n; then per item k, s, and
per attempt px, py (numpy Generator.integers / .uniform).

Streams (numpy default_rng entropy): the evaluation scenes [0, 0] on t10k, one after another,
whatever the seed; loom's training scene i of a run with seed S: its own stream
[3, S_lo, S_hi, i_lo, i_hi] on train (32-bit words), so a resumed run draws the same scenes.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

from coco_ap import box_iou_xyxy

SCENE = 64                      # pixels a side
N_EVAL = 1000                   # held-out scenes


def make_scene(imgs, labels, rng, n=None):
    """One scene -> (64x64 float32 canvas, labels, pixel boxes [x0, y0, x1, y1])."""
    canvas = np.zeros((SCENE, SCENE), np.float32)
    cls, boxes = [], []
    n = int(rng.integers(1, 5)) if n is None else n
    for _ in range(n):
        k = int(rng.integers(0, len(imgs)))
        side = int(math.floor(28 * rng.uniform(0.6, 1.4) + 0.5))
        item = F.interpolate(imgs[k][None, None], size=(side, side), mode="bilinear",
                             align_corners=False, antialias=False)[0, 0].numpy()
        on = item > 0.1
        rows, cols = np.flatnonzero(on.any(1)), np.flatnonzero(on.any(0))
        for _attempt in range(50):
            px, py = int(rng.integers(0, SCENE - side + 1)), int(rng.integers(0, SCENE - side + 1))
            if not len(rows):                              # never happens with Fashion-MNIST
                continue
            box = [px + cols[0], py + rows[0], px + cols[-1] + 1, py + rows[-1] + 1]
            if boxes and box_iou_xyxy(box, boxes).max() > 0.3:
                continue
            square = canvas[py:py + side, px:px + side]
            np.maximum(square, item, out=square)
            cls.append(int(labels[k]))
            boxes.append([int(v) for v in box])
            break
    return canvas, cls, boxes


def eval_scenes(imgs, labels, count=N_EVAL):
    """The held-out scenes: default_rng([0, 0]) on t10k, one after another."""
    rng = np.random.default_rng([0, 0])
    return [make_scene(imgs, labels, rng) for _ in range(count)]


def training_scene(imgs, labels, seed, i):
    """loom's training scene i for --seed: its own stream [3, seed_lo, seed_hi, i_lo, i_hi]."""
    words = [3, seed & 0xFFFFFFFF, seed >> 32, i & 0xFFFFFFFF, i >> 32]
    return make_scene(imgs, labels, np.random.default_rng(words))


def overfit_scene(imgs, labels, seed):
    """--overfit-one's fixed scene: default_rng([2, seed]) with 4 items drawn."""
    return make_scene(imgs, labels, np.random.default_rng([2, seed]), n=4)


def scene_batch(scenes):
    """[(canvas, labels, pixel boxes)] -> images (B, 1, 64, 64), DETR targets: per scene
    {"labels": (m,) int64, "boxes": (m, 4) normalised (cx, cy, w, h) float32}."""
    imgs = torch.from_numpy(np.stack([c for c, _, _ in scenes]))[:, None]
    targets = []
    for _, cls, boxes in scenes:
        b = np.asarray(boxes, np.float64).reshape(-1, 4)
        cxcywh = np.stack([(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2,
                           b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], 1) / SCENE
        targets.append({"labels": torch.tensor(cls, dtype=torch.int64),
                        "boxes": torch.from_numpy(cxcywh.astype(np.float32))})
    return imgs, targets


def ground_truth(scenes):
    """Per scene (pixel boxes (m, 4) float64, labels (m,)): coco_ap's gts."""
    return [(np.asarray(b, np.float64).reshape(-1, 4), np.asarray(c)) for _, c, b in scenes]

