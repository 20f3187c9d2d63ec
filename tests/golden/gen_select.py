#!/usr/bin/python3
"""PyTorch golden values for selection and sorting (autograd/selection.h): topk, sort, argsort,
amax, amin, min, scatter, one_hot and the index ops' method forms, written to
tests/golden/select.safetensors and checked by tests/autograd/test_golden_select.cpp.

    /usr/bin/python3 tests/golden/gen_select.py

Cases are stored as gen_ops.py stores them (its add_case: "<case>.in0", ".out", ".w",
".grad0", ...; float64 reference rounded to float32). topk and sort return two tensors, so each
becomes a case of its values (differentiable) and a case of its indices (int64, exact), on the
same input. Sorts are stable (stable=True), the order loom gives on every device; topk's indices
are stored only for inputs without ties, where PyTorch's choice is unique.
"""

import math
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_ops  # noqa: E402
from gen_ops import add_case, halves, ids, rn  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import safetensors_io  # noqa: E402


def add_pair(name, fn, x):
    """A function returning (values, indices): one case of each, on the same input x."""
    add_case(name, lambda t: fn(t)[0], x)
    add_case(name + "_indices", lambda t: fn(t)[1], x, grad=False)


def distinct_rows(rows, cols, n):
    """int64 [rows, cols] whose every column holds distinct values in [0, n): a scatter index
    along dim 0 with no repeated target, so the result does not depend on write order."""
    return torch.stack([torch.randperm(n)[:rows] for _ in range(cols)], 1)


# ---- families; the C++ test has one list per function below
def sorting():
    add_pair("topk_last", lambda x: torch.topk(x, 3), rn(4, 7))
    add_pair("topk_smallest_dim0", lambda x: torch.topk(x, 2, dim=0, largest=False), rn(5, 3))
    add_pair("topk_transposed", lambda x: torch.topk(x.t(), 2, dim=1), rn(6, 4))
    add_pair("topk_middle_dim", lambda x: torch.topk(x, 2, dim=1), rn(2, 5, 3))
    add_pair("topk_k_is_n", lambda x: torch.topk(x, 5, dim=-1, largest=False), rn(3, 5))
    # Ties: the values (and so which of equal values is picked) are unique only up to ties, so
    # only the values, without gradients, are compared.
    add_case("topk_ties_values", lambda x: torch.topk(x, 4).values, halves(3, 9), grad=False)
    add_pair("sort_ties", lambda x: torch.sort(x, stable=True), halves(3, 8))
    add_pair("sort_descending_dim0",
             lambda x: torch.sort(x, dim=0, descending=True, stable=True), halves(6, 3))
    add_pair("sort_transposed", lambda x: torch.sort(x.t(), dim=1, stable=True), rn(5, 3))
    add_pair("sort_method_3d", lambda x: x.sort(stable=True, dim=1, descending=True),
             halves(2, 4, 3))
    add_case("argsort_descending",
             lambda x: torch.argsort(x, dim=1, descending=True, stable=True), halves(4, 6),
             grad=False)
    add_case("argsort_dim0", lambda x: torch.argsort(x, dim=0, stable=True), halves(5, 2),
             grad=False)
    # NaN sorts above every number; -0 and +0 are equal (index order).
    specials = torch.tensor([[3.0, math.nan, -math.inf, 0.0, -0.0, math.inf, 1.0, math.nan],
                             [-0.0, 0.0, math.nan, -1.0, -1.0, 2.0, math.inf, -math.inf]])
    add_case("sort_specials_indices", lambda x: torch.sort(x, stable=True)[1], specials,
             grad=False)
    add_case("sort_specials_descending_indices",
             lambda x: torch.sort(x, descending=True, stable=True)[1], specials, grad=False)
    add_case("topk_specials_indices", lambda x: torch.topk(x, 3)[1], specials, grad=False)


def extrema():
    add_case("amax_dims_0_2", lambda x: torch.amax(x, (0, 2)), rn(3, 4, 5))
    add_case("amax_ties_keepdim", lambda x: torch.amax(x, 1, keepdim=True), halves(3, 4))
    add_case("amax_all", lambda x: torch.amax(x), halves(3, 4))
    add_case("amin_neg_dim", lambda x: torch.amin(x, (-1,)), halves(2, 3, 4))
    add_case("amin_transposed", lambda x: torch.amin(x.t(), (0, 1), keepdim=True), rn(4, 3))
    add_case("min_all_ties", torch.min, halves(3, 4))


def scatters():
    add_case("scatter_src_dim0", lambda x, i, s: torch.scatter(x, 0, i, s), rn(3, 5),
             distinct_rows(2, 5, 3), rn(2, 5))
    # index smaller than x outside dim (PyTorch 1.13 has no gradient for a src larger than
    # index: the gradcheck covers that form)
    add_case("scatter_index_smaller_than_x", lambda x, i, s: torch.scatter(x, 1, i, s), rn(4, 6),
             distinct_rows(2, 3, 6).t().contiguous(), rn(3, 2))
    add_case("scatter_value", lambda x, i: torch.scatter(x, 1, i, 2.5), rn(3, 4),
             distinct_rows(2, 3, 4).t().contiguous())
    add_case("scatter_method_transposed", lambda x, i, s: x.t().scatter(0, i, s), rn(4, 3),
             distinct_rows(2, 4, 3), rn(2, 4))
    add_case("scatter_int64", lambda x, i, s: torch.scatter(x, 1, i, s),
             torch.randint(-5, 5, (3, 4)), distinct_rows(2, 3, 4).t().contiguous(),
             torch.randint(10, 20, (3, 2)), grad=False)
    add_case("one_hot", lambda x: F.one_hot(x), ids([[0, 2], [1, 3], [3, 3]]), grad=False)
    add_case("one_hot_num_classes", lambda x: F.one_hot(x, 6), ids([4, 0, 1]), grad=False)
    add_case("gather_method", lambda x, i: x.gather(1, i), rn(3, 4), ids([[0, 3], [2, 2], [1, 0]]))
    add_case("index_select_method", lambda x, i: x.index_select(1, i), rn(2, 4), ids([3, 0, 3]))
    add_case("scatter_add_method", lambda x, i, s: x.scatter_add(0, i, s), rn(3, 2),
             ids([[0, 1], [0, 0]]), rn(2, 2))


FAMILIES = [sorting, extrema, scatters]


def main():
    torch.manual_seed(20251129)
    for family in FAMILIES:
        family()
    path = os.path.join(HERE, "select.safetensors")
    safetensors_io.save(path, gen_ops.TENSORS, {"generator": "tests/golden/gen_select.py",
                                                "torch": torch.__version__,
                                                "cases": str(len(gen_ops.CASES))})
    print(f"wrote {len(gen_ops.CASES)} cases, {len(gen_ops.TENSORS)} tensors, "
          f"{os.path.getsize(path)} bytes to {path}")


if __name__ == "__main__":
    main()
