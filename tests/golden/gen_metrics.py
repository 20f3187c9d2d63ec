#!/usr/bin/python3
"""Golden values for loom's metrics (tests/metrics): writes tests/golden/metrics_golden.txt.

  /usr/bin/python3 tests/golden/gen_metrics.py

BLEU: NLTK's corpus_bleu (an implementation independent of sacreBLEU) on pre-tokenised random
sentences (lower-case words only, so sacreBLEU's 13a tokeniser leaves them as they are), with
SmoothingFunction().method3, NLTK's name for mteval's 'exp' smoothing that sacreBLEU uses by
default: loom's corpus_bleu must give 100 x NLTK's number.

13a and chrF on messy text: sacreBLEU is not installed, so its Tokenizer13a (tokenizer_13a.py +
tokenizer_re.py: the same regexes) and CHRF's statistics and F-score (chrf.py, helpers.py) are
written out below and run on random strings mixing punctuation, digits, entities, non-ASCII
letters and Python's Unicode whitespace; strings are stored as hex UTF-8.

COCO AP: pycocotools is not installed, so COCOeval's evaluate / accumulate / summarize for
iouType "bbox" are written out below with cocoeval.py's structure and names (_prepare's
grouping by (image, category), computeIoU with maskApi.c's bbIou, evaluateImg's matching loop,
accumulate's mergesort, searchsorted and -1 for absent categories, summarize's mean over entries
> -1), run on random scenes in float32 coordinates.

Fashion-MNIST scenes (tests/data/test_fashion_mnist_scenes.cpp): fashion_mnist_scenes.txt holds
numpy default_rng draws for a few seeds (NumpyPCG64 must repeat them) and, when the data set is
installed, scenes made by the PyTorch reference's make_scene (bench/reference/scenes.py): all 1000
evaluation scenes (default_rng([0, 0]) on t10k), training streams default_rng([1, seed]) and
loom's per-scene streams default_rng([3, seed_lo, seed_hi, i_lo, i_hi]); per scene its items
(label x0 y0 x1 y1) and the 64-bit FNV-1a hash of the canvas's float32 bytes.

The file is line oriented, one record per line, fields separated by tabs:
  bleu <segments> <nltk score x 100>, then per segment "hyp <text>" and "ref <text>"
  tok13a <hex input> <hex output>
  chrf <segments> <score>, then per segment "pair <hex hypothesis> <hex reference>"
  coco <detections> <ground truth> <ap> <ap50> <ap75>, then "det image label x0 y0 x1 y1 score"
       and "gt image label x0 y0 x1 y1" lines
"""
import os
import random
import sys
from collections import defaultdict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "metrics_golden.txt")
SCENES_OUT = os.path.join(HERE, "fashion_mnist_scenes.txt")
REFERENCE = os.path.join(HERE, "..", "..", "bench", "reference")  # scenes.py, data.py

WORDS = ("the a dog cat man woman bit saw ran home fast slow red blue house tree of in on "
         "and it was not very quite big small").split()


def sentence(rng, lo, hi):
    return [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]


def bleu_cases(rng):
    """Corpora of random sentences; references are edited copies (so all orders match) or
    unrelated sentences (so some higher orders have no match and method3 smoothing acts)."""
    # imported here: bench/reference's translation task imports tokenize_13a without NLTK
    from nltk.translate.bleu_score import SmoothingFunction, corpus_bleu
    lines = []
    for case in range(8):
        n = rng.randint(1, 6)
        hyps, refs = [], []
        for _ in range(n):
            ref = sentence(rng, 5, 14)
            if case < 5:   # an edited copy: some words replaced, dropped or added
                hyp = [w if rng.random() > 0.2 else rng.choice(WORDS) for w in ref]
                if rng.random() < 0.5:
                    del hyp[rng.randrange(len(hyp))]
                if rng.random() < 0.5:
                    hyp.insert(rng.randrange(len(hyp) + 1), rng.choice(WORDS))
            else:          # unrelated: few matches beyond unigrams
                hyp = sentence(rng, 4, 10)
            hyps.append(hyp)
            refs.append(ref)
        score = corpus_bleu([[r] for r in refs], hyps,
                            smoothing_function=SmoothingFunction().method3)
        lines.append(f"bleu\t{n}\t{100 * float(score)!r}")
        for h, r in zip(hyps, refs):
            lines.append("hyp\t" + " ".join(h))
            lines.append("ref\t" + " ".join(r))
    return lines


# --------------------------------------------------------------------------- 13a and chrF
import re  # noqa: E402

TOK_RE = [(re.compile(r'([\{-\~\[-\` -\&\(-\+\:-\@\/])'), r' \1 '),
          (re.compile(r'([^0-9])([\.,])'), r'\1 \2 '),
          (re.compile(r'([\.,])([^0-9])'), r' \1 \2'),
          (re.compile(r'([0-9])(-)'), r'\1 \2 ')]


def tokenize_13a(line):
    """BLEU._preprocess_segment: rstrip, then Tokenizer13a."""
    line = line.rstrip()
    for a, b in [("<skipped>", ""), ("-\n", ""), ("\n", " "), ("&quot;", '"'), ("&amp;", "&"),
                 ("&lt;", "<"), ("&gt;", ">")]:
        line = line.replace(a, b)
    line = " {} ".format(line)
    for r, repl in TOK_RE:
        line = r.sub(repl, line)
    return " ".join(line.strip().split())


def chrf(hyps, refs, order=6, beta=2):
    """CHRF(char_order=6, word_order=0, beta=2, whitespace=False, eps_smoothing=False)."""
    stats = [0] * (3 * order)
    for h, r in zip(hyps, refs):
        h, r = "".join(h.split()), "".join(r.split())
        for n in range(1, order + 1):
            hc = defaultdict(int)
            rc = defaultdict(int)
            for i in range(len(h) - n + 1):
                hc[h[i:i + n]] += 1
            for i in range(len(r) - n + 1):
                rc[r[i:i + n]] += 1
            match = sum(min(c, rc[g]) for g, c in hc.items() if g in rc)
            stats[3 * (n - 1):3 * n] = [a + b for a, b in zip(
                stats[3 * (n - 1):3 * n], [sum(hc.values()) if rc else 0, sum(rc.values()), match])]
    factor, prec, rec, eff = beta ** 2, 0.0, 0.0, 0
    for i in range(order):
        n_hyp, n_ref, n_match = stats[3 * i:3 * i + 3]
        if n_hyp > 0 and n_ref > 0:
            prec += n_match / n_hyp
            rec += n_match / n_ref
            eff += 1
    if eff == 0:
        return 0.0
    prec, rec = prec / eff, rec / eff
    if prec + rec == 0:
        return 0.0
    return 100 * (1 + factor) * prec * rec / (factor * prec + rec)


PIECES = (list("abcdeXYZ0123456789.,-'\"!?;:()[]{}<>/\\&%$#@*+=_~`|^") +
          ["é", "ü", "ß", "日本", "мир", "🙂", " ", " ", " ", "\t", "\n", "\u00a0", "\u3000",
           "\u2009", "\u0085", "&quot;", "&amp;", "&lt;", "&gt;", "<skipped>", "-\n", "3.14",
           "1,000", "U.S.", "e.g.,", "5-6", "x-y", "word", "text"])


def messy(rng, lo, hi):
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(lo, hi)))


def text_cases(rng):
    lines = []
    for _ in range(150):
        t = messy(rng, 0, 25)
        lines.append(f"tok13a\t{t.encode().hex()}\t{tokenize_13a(t).encode().hex()}")
    for case in range(20):
        n = rng.randint(1, 4)
        hyps = [messy(rng, 0, 20) for _ in range(n)]
        refs = [messy(rng, 1, 20) for _ in range(n)]
        if case % 2:   # related: the hypothesis with a few pieces added around it
            refs = [messy(rng, 0, 3) + h + messy(rng, 0, 3) for h in hyps]
        refs = [r if r else "x" for r in refs]
        lines.append(f"chrf\t{n}\t{chrf(hyps, refs)!r}")
        lines += [f"pair\t{h.encode().hex()}\t{r.encode().hex()}" for h, r in zip(hyps, refs)]
    return lines


# --------------------------------------------------------------------------- COCOeval (bbox)
IOU_THRS = np.linspace(.5, 0.95, int(np.round((0.95 - .5) / .05)) + 1, endpoint=True)
REC_THRS = np.linspace(.0, 1.00, int(np.round((1.00 - .0) / .01)) + 1, endpoint=True)
MAX_DETS = [1, 10, 100]
AREA_RNG = [[0 ** 2, 1e5 ** 2], [0 ** 2, 32 ** 2], [32 ** 2, 96 ** 2], [96 ** 2, 1e5 ** 2]]


def bb_iou(dt, gt):
    """maskApi.c bbIou, iscrowd 0: (D, G) IoU of (x, y, w, h) boxes, in double."""
    o = np.zeros((len(dt), len(gt)))
    for g, G in enumerate(gt):
        ga = G[2] * G[3]
        for d, D in enumerate(dt):
            da = D[2] * D[3]
            w = min(D[2] + D[0], G[2] + G[0]) - max(D[0], G[0])
            if w <= 0:
                continue
            h = min(D[3] + D[1], G[3] + G[1]) - max(D[1], G[1])
            if h <= 0:
                continue
            i = w * h
            o[d, g] = i / (da + ga - i)
    return o


class COCOevalBbox:
    """cocoeval.py's COCOeval for iouType "bbox", useCats 1, params as Params.setDetParams."""

    def __init__(self, gts, dts):
        self.gts_all, self.dts_all = gts, dts
        img_ids = sorted({a["image_id"] for a in gts} | {a["image_id"] for a in dts})
        self.imgIds = list(np.unique(img_ids)) if img_ids else []
        self.catIds = sorted({a["category_id"] for a in gts})     # cocoGt.getCatIds()

    def _prepare(self):
        self._gts, self._dts = defaultdict(list), defaultdict(list)
        for gt in self.gts_all:
            gt["ignore"] = 0
            self._gts[gt["image_id"], gt["category_id"]].append(gt)
        for dt in self.dts_all:
            self._dts[dt["image_id"], dt["category_id"]].append(dt)

    def computeIoU(self, imgId, catId):
        gt, dt = self._gts[imgId, catId], self._dts[imgId, catId]
        if len(gt) == 0 and len(dt) == 0:
            return []
        inds = np.argsort([-d["score"] for d in dt], kind="mergesort")
        dt = [dt[i] for i in inds][:MAX_DETS[-1]]
        if len(dt) == 0 or len(gt) == 0:
            return []                                             # maskUtils.iou on empty
        return bb_iou([d["bbox"] for d in dt], [g["bbox"] for g in gt])

    def evaluateImg(self, imgId, catId, aRng, maxDet):
        gt, dt = self._gts[imgId, catId], self._dts[imgId, catId]
        if len(gt) == 0 and len(dt) == 0:
            return None
        for g in gt:
            g["_ignore"] = 1 if (g["ignore"] or g["area"] < aRng[0] or g["area"] > aRng[1]) else 0
        gtind = np.argsort([g["_ignore"] for g in gt], kind="mergesort")
        gt = [gt[i] for i in gtind]
        dtind = np.argsort([-d["score"] for d in dt], kind="mergesort")
        dt = [dt[i] for i in dtind[0:maxDet]]
        ious = self.ious[imgId, catId][:, gtind] if len(self.ious[imgId, catId]) > 0 \
            else self.ious[imgId, catId]
        T, G, D = len(IOU_THRS), len(gt), len(dt)
        gtm, dtm = np.zeros((T, G)), np.zeros((T, D))
        gtIg = np.array([g["_ignore"] for g in gt])
        dtIg = np.zeros((T, D))
        if not len(ious) == 0:
            for tind, t in enumerate(IOU_THRS):
                for dind, d in enumerate(dt):
                    iou = min([t, 1 - 1e-10])
                    m = -1
                    for gind, g in enumerate(gt):
                        if gtm[tind, gind] > 0:
                            continue
                        if m > -1 and gtIg[m] == 0 and gtIg[gind] == 1:
                            break
                        if ious[dind, gind] < iou:
                            continue
                        iou = ious[dind, gind]
                        m = gind
                    if m == -1:
                        continue
                    dtIg[tind, dind] = gtIg[m]
                    dtm[tind, dind] = gt[m]["id"]
                    gtm[tind, m] = d["id"]
        a = np.array([d["area"] < aRng[0] or d["area"] > aRng[1] for d in dt]).reshape((1, len(dt)))
        dtIg = np.logical_or(dtIg, np.logical_and(dtm == 0, np.repeat(a, T, 0)))
        return {"dtMatches": dtm, "dtScores": [d["score"] for d in dt], "gtIgnore": gtIg,
                "dtIgnore": dtIg}

    def evaluate(self):
        self._prepare()
        self.ious = {(i, c): self.computeIoU(i, c) for i in self.imgIds for c in self.catIds}
        self.evalImgs = [self.evaluateImg(i, c, a, MAX_DETS[-1])
                         for c in self.catIds for a in AREA_RNG for i in self.imgIds]

    def accumulate(self):
        T, R, K, A, M = len(IOU_THRS), len(REC_THRS), len(self.catIds), len(AREA_RNG), len(MAX_DETS)
        precision = -np.ones((T, R, K, A, M))
        I0, A0 = len(self.imgIds), len(AREA_RNG)
        for k in range(K):
            for a in range(A):
                for m, maxDet in enumerate(MAX_DETS):
                    E = [self.evalImgs[k * A0 * I0 + a * I0 + i] for i in range(I0)]
                    E = [e for e in E if e is not None]
                    if len(E) == 0:
                        continue
                    dtScores = np.concatenate([e["dtScores"][0:maxDet] for e in E])
                    inds = np.argsort(-dtScores, kind="mergesort")
                    dtm = np.concatenate([e["dtMatches"][:, 0:maxDet] for e in E], axis=1)[:, inds]
                    dtIg = np.concatenate([e["dtIgnore"][:, 0:maxDet] for e in E], axis=1)[:, inds]
                    gtIg = np.concatenate([e["gtIgnore"] for e in E])
                    npig = np.count_nonzero(gtIg == 0)
                    if npig == 0:
                        continue
                    tps = np.logical_and(dtm, np.logical_not(dtIg))
                    fps = np.logical_and(np.logical_not(dtm), np.logical_not(dtIg))
                    tp_sum = np.cumsum(tps, axis=1).astype(dtype=np.float64)
                    fp_sum = np.cumsum(fps, axis=1).astype(dtype=np.float64)
                    for t, (tp, fp) in enumerate(zip(tp_sum, fp_sum)):
                        nd = len(tp)
                        rc = tp / npig
                        pr = (tp / (fp + tp + np.spacing(1))).tolist()
                        q = [0.0] * R
                        for i in range(nd - 1, 0, -1):
                            if pr[i] > pr[i - 1]:
                                pr[i - 1] = pr[i]
                        inds_r = np.searchsorted(rc, REC_THRS, side="left")
                        try:
                            for ri, pi in enumerate(inds_r):
                                q[ri] = pr[pi]
                        except IndexError:
                            pass
                        precision[t, :, k, a, m] = np.array(q)
        self.precision = precision

    def summarize(self):
        """(AP, AP50, AP75) at area "all", maxDets 100, as _summarizeDets' first three."""
        def one(iouThr=None):
            s = self.precision
            if iouThr is not None:
                s = s[np.where(iouThr == IOU_THRS)[0]]
            s = s[:, :, :, 0, 2]
            return -1.0 if len(s[s > -1]) == 0 else float(np.mean(s[s > -1]))
        return one(), one(.5), one(.75)


def coco_eval(dets, gts):
    """dets: (image, label, x0, y0, x1, y1, score), gts: (image, label, x0, y0, x1, y1)."""
    def ann(i, b, score=None):
        x0, y0, x1, y1 = (float(v) for v in b[2:6])
        bbox = [x0, y0, x1 - x0, y1 - y0]
        a = {"id": i + 1, "image_id": b[0], "category_id": b[1], "bbox": bbox,
             "area": bbox[2] * bbox[3], "iscrowd": 0}
        if score is not None:
            a["score"] = float(score)
        return a
    E = COCOevalBbox([ann(i, g) for i, g in enumerate(gts)],
                     [ann(i, d, d[6]) for i, d in enumerate(dets)])
    E.evaluate()
    E.accumulate()
    return E.summarize()


def f32(v):
    return float(np.float32(v))


def random_scene(rng, n_images, n_classes, jitter, tie_scores, many=False, huge=False):
    images = rng.sample(range(0, 50), n_images)
    gts, dets = [], []
    for im in images:
        for _ in range(rng.randint(0, 5)):
            x0, y0 = rng.uniform(0, 50), rng.uniform(0, 50)
            w, h = rng.uniform(4, 30), rng.uniform(4, 30)
            if huge and rng.random() < 0.5:
                w, h = 2e5, 1e5                                   # area > 1e10: ignored
            c = rng.randrange(n_classes)
            g = (im, c, f32(x0), f32(y0), f32(x0 + w), f32(y0 + h))
            gts.append(g)
            for _ in range(rng.choice([0, 1, 1, 1, 2])):          # missed, found, duplicated
                j = lambda v: v + rng.uniform(-jitter, jitter)
                x0d, y0d = j(x0), j(y0)
                dets.append((im, c if rng.random() < 0.9 else rng.randrange(n_classes + 1),
                             f32(x0d), f32(y0d), f32(max(j(x0 + w), x0d + 1)),
                             f32(max(j(y0 + h), y0d + 1)), 0.0))
        for _ in range(rng.randint(250, 350) if many else rng.randint(0, 3)):        # false positives
            x0, y0 = rng.uniform(0, 60), rng.uniform(0, 60)
            dets.append((im, rng.randrange(n_classes + 1), f32(x0), f32(y0),
                         f32(x0 + rng.uniform(2, 30)), f32(y0 + rng.uniform(2, 30)), 0.0))
    rng.shuffle(dets)
    score = (lambda: f32(rng.randint(1, 9) / 10)) if tie_scores else (lambda: f32(rng.random()))
    dets = [d[:6] + (score(),) for d in dets]
    return dets, gts


def coco_cases(rng):
    lines = []
    configs = [(3, 3, 2.0, False), (4, 2, 6.0, True), (5, 4, 4.0, True), (2, 1, 1.0, False),
               (6, 3, 8.0, True), (3, 2, 3.0, True, True), (4, 3, 3.0, True, False, True)]
    for cfg in configs:
        dets, gts = random_scene(rng, *cfg)
        ap = coco_eval(dets, gts)
        lines.append(f"coco\t{len(dets)}\t{len(gts)}\t" + "\t".join(repr(v) for v in ap))
        lines += ["det\t" + "\t".join(repr(v) for v in d) for d in dets]
        lines += ["gt\t" + "\t".join(repr(v) for v in g) for g in gts]
    return lines


def check_coco_eval():
    """bench/reference/coco_ap.py's hand-made cases (image ids 0, 1), through the COCOeval
    replica."""
    g2 = [(0, 3, 0, 0, 10, 10), (0, 3, 20, 20, 40, 40)]
    fp = (50, 50, 60, 60)
    assert abs(coco_eval([(0, 3, 0, 0, 10, 10, .9), (0, 3, 20, 20, 40, 40, .8)], g2)[0] - 1) < 1e-12
    got = coco_eval([(0, 3) + fp + (.95,), (0, 3, 0, 0, 10, 10, .9), (0, 3, 20, 20, 40, 40, .8)],
                    g2)
    assert abs(got[0] - 2 / 3) < 1e-12, got
    got = coco_eval([(0, 1, 0, 0, 10, 7.2, .5)], [(0, 1, 0, 0, 10, 10)])
    assert abs(got[0] - .5) < 1e-12 and abs(got[1] - 1) < 1e-12 and got[2] == 0.0, got
    assert coco_eval([], []) == (-1.0, -1.0, -1.0)


# --------------------------------------------------------------------------- scenes
RNG_ENTROPIES = [[0, 0], [1, 0], [1, 12345], [1, 7, 256], [3, 5, 0, 17, 0], [42],
                 [3, 4294967295, 4294967295, 4294967295, 4294967295]]


def rng_lines():
    """Per entropy: 4 raw 64-bit draws, then 12 rounds of the calls make_scene makes."""
    lines = []
    for words in RNG_ENTROPIES:
        raw = np.random.default_rng(words).bit_generator.random_raw(4)
        g = np.random.default_rng(words)
        draws = []
        for _ in range(12):
            draws += [g.integers(1, 5), g.integers(0, 60000), g.uniform(0.6, 1.4),
                      g.integers(0, 26), g.integers(0, 4294967295)]
        lines.append("rng\t" + " ".join(map(str, words)))
        lines.append("raw\t" + " ".join(str(int(v)) for v in raw))
        lines.append("draws\t" + " ".join(repr(float(v)) if isinstance(v, float) else str(int(v))
                                           for v in draws))
    return lines


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def scene_lines():
    """Scenes from bench/reference/scenes.py's make_scene, or [] without the data set."""
    if not os.path.exists("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"):
        print("skipping scenes: the Fashion-MNIST data set is absent")
        return []
    sys.path.insert(0, REFERENCE)
    from data import fashion_mnist_raw
    from scenes import N_EVAL, make_scene
    test, train = fashion_mnist_raw("t10k"), fashion_mnist_raw("train")
    lines = []

    def emit(split, mode, seed, scenes):
        lines.append(f"scenes\t{split}\t{mode}\t{seed}\t{len(scenes)}")
        for canvas, cls, boxes in scenes:
            h = fnv1a64(np.ascontiguousarray(canvas, dtype="<f4").tobytes())
            items = " ".join(f"{c} {b[0]} {b[1]} {b[2]} {b[3]}" for c, b in zip(cls, boxes))
            lines.append(f"scene\t{len(cls)}\t{h:016x}\t{items}")

    def sequential(data, stream, seed, count):
        g = np.random.default_rng([stream, seed])
        return [make_scene(*data, g) for _ in range(count)]

    def per_scene(data, seed, count):
        lo, hi = seed & 0xFFFFFFFF, seed >> 32
        return [make_scene(*data, np.random.default_rng([3, lo, hi, i & 0xFFFFFFFF, i >> 32]))
                for i in range(count)]

    emit("t10k", "sequential", 0, sequential(test, 0, 0, N_EVAL))
    emit("train", "sequential", 0, sequential(train, 1, 0, 100))
    emit("train", "sequential", 7, sequential(train, 1, 7, 50))
    emit("t10k", "per_scene", 5, per_scene(test, 5, 50))
    emit("train", "per_scene", 2 ** 33 + 1, per_scene(train, 2 ** 33 + 1, 20))
    return lines


def main():
    rng = random.Random(2024)
    lines = bleu_cases(rng)
    check_coco_eval()
    lines += coco_cases(rng)
    lines += text_cases(random.Random(7))
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {OUT} ({len(lines)} lines)")
    scenes = scene_lines()
    if scenes:
        with open(SCENES_OUT, "w") as f:
            f.write("\n".join(rng_lines() + scenes) + "\n")
        print(f"wrote {SCENES_OUT} ({len(scenes)} scene lines)")


if __name__ == "__main__":
    main()
