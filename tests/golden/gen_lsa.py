#!/usr/bin/python3
"""Golden linear sum assignments from scipy for tests/optim/test_linear_sum_assignment.cpp.

Each case is a float32 cost matrix solved by scipy.optimize.linear_sum_assignment (which works
in float64 on the float32 values). Writes lsa.safetensors next to this script:
    <case>.cost    float32 [n, m]
    <case>.rows    int64 [min(n, m)]   scipy's row indices (ascending)
    <case>.cols    int64 [min(n, m)]   scipy's column indices
    <case>.total   float32 []          sum of cost[rows, cols], computed in float64
The test compares the totals and the pairs themselves: loom's solver searches and breaks ties
as scipy's rectangular_lsap.cpp does, so even the integer cases with many ties give scipy's pairs.

Run: /usr/bin/python3 tests/golden/gen_lsa.py   (from anywhere)
"""

import os
import sys

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from safetensors_io import save  # noqa: E402


def cases(rng):
    yield "uniform_30x40", rng.random((30, 40))
    yield "uniform_40x30", rng.random((40, 30))
    yield "normal_50x50", rng.standard_normal((50, 50))
    yield "wide_10x100", rng.random((10, 100))
    yield "tall_100x7", rng.random((100, 7))
    yield "integer_ties_20x20", rng.integers(0, 4, (20, 20)).astype(np.float64)
    yield "integer_ties_15x25", rng.integers(0, 3, (15, 25)).astype(np.float64)
    yield "huge_25x25", rng.standard_normal((25, 25)) * 1e7
    yield "detr_like_10x4", 5 * rng.random((10, 4)) - rng.random((10, 4)) - 2 * rng.random((10, 4))
    c = rng.random((30, 30))  # a random half of the pairs forbidden, but a diagonal kept
    c[rng.random((30, 30)) < 0.5] = np.inf
    c[np.arange(30), rng.permutation(30)] = rng.random(30)
    yield "forbidden_30x30", c


def main():
    rng = np.random.default_rng(1234)
    out = {}
    for name, cost in cases(rng):
        cost = cost.astype(np.float32)
        rows, cols = linear_sum_assignment(cost)
        total = cost.astype(np.float64)[rows, cols].sum()
        out[name + ".cost"] = torch.from_numpy(cost)
        out[name + ".rows"] = torch.from_numpy(rows.astype(np.int64))
        out[name + ".cols"] = torch.from_numpy(cols.astype(np.int64))
        out[name + ".total"] = torch.tensor(total, dtype=torch.float32)
    save(os.path.join(HERE, "lsa.safetensors"), out)


if __name__ == "__main__":
    main()
