#!/usr/bin/python3
"""PyTorch golden values for torch::indexing and its shape ops (autograd/indexing.h), written to
tests/golden/indexing.safetensors and checked by tests/autograd/test_indexing.cpp.

    /usr/bin/python3 tests/golden/gen_indexing.py

Each case stores, under "<case>.<part>", with gen_ops.py's add_case:
    in0, in1, ...   the inputs (float32 values; int64 index tensors; masks as int64 0/1, which
                    both sides turn into bool before use)
    out             the output (float32, or int64 for nonzero)
    w               a random weight with out's shape (differentiable cases only)
    grad<i>         d sum(out * w) / d in_i for every float input i
computed in float64 from the float32 inputs. A case's function here and its lambda in the C++
test do the same thing step by step: x[1::2, :-1] here is x.index({Slice(1, None, 2),
Slice(None, -1)}) there.
"""

import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import safetensors_io  # noqa: E402
# gen_ops.py's recorder and input makers; its cases run only when it is the script run.
from gen_ops import CASES, TENSORS, add_case, ids, rn  # noqa: E402


def mask(*shape):
    """A 0/1 int64 mask (about half true); both sides index with mask.bool()."""
    return (torch.rand(shape) < 0.5).long()


def basic():
    add_case("slice_step", lambda x: x[1::2, :-1], rn(5, 6))
    add_case("slice_clamped", lambda x: x[-10:100, 4:2], rn(3, 5))
    add_case("slice_negative_start", lambda x: x[:, -3::2], rn(2, 7))
    add_case("int_select", lambda x: x[1, :, -1], rn(3, 4, 5))
    add_case("ellipsis_int_none", lambda x: x[..., 0, None], rn(2, 3, 4))
    add_case("none_slice_none", lambda x: x[None, 1:, None], rn(3, 2))
    add_case("ellipsis_middle", lambda x: x[1, ..., ::2], rn(2, 3, 4, 5))
    add_case("slice_method", lambda x: x[:, 1:5:2] * 2.0, rn(3, 6))
    add_case("bool_true", lambda x: x[True], rn(2, 3))


def advanced():
    add_case("index_rows_repeated", lambda x, i: x[i], rn(4, 3), ids([3, 0, 3]))
    add_case("index_negative_cols", lambda x, i: x[:, i], rn(3, 4), ids([-1, 0]))
    add_case("index_2d", lambda x, i: x[i], rn(3, 4), ids([[0, 1], [2, 0]]))
    add_case("index_pair_adjacent", lambda x, i, j: x[:, i, j], rn(3, 4, 5), ids([0, 2, 3]),
             ids([1, 3, 1]))
    add_case("index_pair_separated", lambda x, i, j: x[i, :, j], rn(3, 4, 5), ids([0, 2]),
             ids([1, 3]))
    add_case("index_broadcast", lambda x, i, j: x[i, j], rn(3, 4, 5), ids([[0], [2]]),
             ids([1, 3, 0]))
    add_case("int_then_index", lambda x, i: x[0, :, i], rn(3, 4, 5), ids([1, 2]))
    add_case("index_and_slice", lambda x, i: x[i, 2:4], rn(4, 6), ids([3, 0, 3]))
    add_case("mask_full", lambda x, m: x[m.bool()], rn(4, 5), mask(4, 5))
    add_case("mask_rows", lambda x, m: x[m.bool()], rn(6, 3), mask(6))
    add_case("mask_middle", lambda x, m: x[:, m.bool()], rn(2, 3, 4), mask(3, 4))
    add_case("mask_then_index", lambda x, m, i: x[m.bool(), i], rn(5, 4), mask(5), ids([1]))
    add_case("index_on_strided", lambda x, i: x[::2][i], rn(6, 3), ids([2, 0]))


def puts():
    add_case("index_put_rows", lambda x, i, v: torch.index_put(x, (i,), v), rn(4, 3),
             ids([1, 3]), rn(2, 3))
    add_case("index_put_accumulate",
             lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True), rn(4, 3),
             ids([1, 1, 3]), rn(3, 3))
    add_case("index_put_broadcast", lambda x, i, v: torch.index_put(x, (i,), v), rn(4, 3),
             ids([0, 2]), rn(3))
    add_case("index_put_mask", lambda x, m, v: torch.index_put(x, (m.bool(),), v), rn(3, 4),
             mask(3, 4), rn(1))
    add_case("index_put_pair_accumulate",
             lambda x, i, j, v: torch.index_put(x, (i, j), v, accumulate=True), rn(3, 4),
             ids([0, 2, 0]), ids([1, 3, 1]), rn(3))

    def put_slice_index(x, i, v):
        y = x.clone()
        y[1:, i] = v
        return y
    add_case("index_put_slice_index", put_slice_index, rn(3, 4), ids([0, 2]), rn(2, 2))

    def put_basic(x, v):
        y = x.clone()
        y[:, 1::2] = v
        return y
    add_case("index_put_basic", put_basic, rn(3, 5), rn(3, 1))


def shape_ops():
    add_case("masked_select_broadcast", lambda x, m: torch.masked_select(x, m.bool()),
             rn(3, 4), mask(1, 4))
    add_case("nonzero", lambda m: torch.nonzero(m), mask(3, 4), grad=False)
    add_case("unbind", lambda x: torch.unbind(x, 1)[2] * 3.0, rn(2, 4))
    add_case("unflatten", lambda x: torch.unflatten(x, 1, (2, -1)), rn(3, 6))
    add_case("repeat", lambda x: x.repeat(2, 1, 3), rn(2, 3))
    add_case("flip", lambda x: torch.flip(x, [0, -1]), rn(3, 4))
    add_case("free_views",
             lambda x: torch.flatten(torch.unsqueeze(torch.squeeze(x), 0).expand(2, 3, 4), 1),
             rn(3, 1, 4))


FAMILIES = [basic, advanced, puts, shape_ops]


def main():
    torch.manual_seed(20240607)
    for family in FAMILIES:
        family()
    path = os.path.join(HERE, "indexing.safetensors")
    safetensors_io.save(path, TENSORS, {"generator": "tests/golden/gen_indexing.py",
                                        "torch": torch.__version__, "cases": str(len(CASES))})
    print(f"wrote {len(CASES)} cases to {path}")


if __name__ == "__main__":
    main()
