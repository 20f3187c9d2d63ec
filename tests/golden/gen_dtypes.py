#!/usr/bin/python3
"""PyTorch golden values for loom's dtypes (autograd/ops_dtype.h), written to
tests/golden/dtypes.safetensors and checked by tests/autograd/test_golden_dtypes.cpp.

    /usr/bin/python3 tests/golden/gen_dtypes.py

Stored tensors:
    promote.tensor_tensor   [4, 4] int64: torch.result_type of two 1-D tensors of DTYPES[i] and
                            DTYPES[j], as an index into DTYPES
    promote.tensor_scalar   [4, 3] int64: result_type of a tensor of DTYPES[i] and SCALARS[j]
    result.<op>             [4, 4] int64: the dtype index of op(tensor of DTYPES[i], tensor of
                            DTYPES[j]), -1 where PyTorch raises
    <case>.in0, .in1, ...   the inputs of a value case (float32, int64 or bool)
    <case>.in_dtypes        their dtypes as indices into DTYPES (loom reads BOOL as int64)
    <case>.out, .out_dtype  its output, in PyTorch's dtype (bool as BOOL), and that dtype's index
    <case>.w, .grad<i>      for the differentiable cases (where, masked_fill): a weight with out's
                            shape and d sum(out * w) / d in_i of every float input
The C++ test mirrors every case, line for line, and fails on a fixture case it does not run.
"""

import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import safetensors_io  # noqa: E402

DTYPES = [torch.bool, torch.int64, torch.bfloat16, torch.float32]
SCALARS = [True, 2, 2.5]
TENSORS = {}


def dtype_index(t):
    return DTYPES.index(t.dtype)


def promotion_tables():
    ones = [torch.ones(2, dtype=d) for d in DTYPES]
    TENSORS["promote.tensor_tensor"] = torch.tensor(
        [[DTYPES.index(torch.result_type(a, b)) for b in ones] for a in ones])
    TENSORS["promote.tensor_scalar"] = torch.tensor(
        [[DTYPES.index(torch.result_type(a, s)) for s in SCALARS] for a in ones])


# The binary ops whose result dtype is tabled; each name is mirrored in the C++ test.
RESULT_OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "maximum": torch.maximum,
    "eq": lambda a, b: a == b,
    "lt": lambda a, b: a < b,
    "logical_and": torch.logical_and,
    "bitwise_and": lambda a, b: a & b,
    "where": lambda a, b: torch.where(torch.tensor([True, False]), a, b),
}


def result_tables():
    ones = [torch.ones(2, dtype=d) for d in DTYPES]
    for name, op in RESULT_OPS.items():
        table = []
        for a in ones:
            row = []
            for b in ones:
                try:
                    row.append(dtype_index(op(a, b)))
                except RuntimeError:
                    row.append(-1)
            table.append(row)
        TENSORS[f"result.{name}"] = torch.tensor(table)


CASES = []


def add_case(name, fn, *inputs, grad=False):
    """Records the inputs, fn's output and, with grad, the gradients of sum(out * w)."""
    assert name not in CASES and "." not in name, name
    CASES.append(name)
    args = [t.clone().requires_grad_(grad and t.is_floating_point()) for t in inputs]
    out = fn(*args)
    for i, t in enumerate(inputs):
        TENSORS[f"{name}.in{i}"] = t
    TENSORS[f"{name}.in_dtypes"] = torch.tensor([dtype_index(t) for t in inputs])
    TENSORS[f"{name}.out"] = out.detach()
    TENSORS[f"{name}.out_dtype"] = torch.tensor(dtype_index(out))
    if not grad:
        return
    w = torch.randn(out.shape)
    TENSORS[f"{name}.w"] = w
    floats = [(i, a) for i, a in enumerate(args) if a.is_floating_point()]
    grads = torch.autograd.grad((out * w).sum(), [a for _, a in floats], allow_unused=True)
    for (i, a), g in zip(floats, grads):
        TENSORS[f"{name}.grad{i}"] = torch.zeros_like(a) if g is None else g


def integers(shape, low, high, avoid_zero=False):
    t = torch.randint(low, high, shape)
    return torch.where(t == 0, torch.full_like(t, 3), t) if avoid_zero else t


def int64_arithmetic():
    a, b = integers((24,), -20, 21), integers((24,), -7, 8, avoid_zero=True)
    add_case("int_add", lambda a, b: a + b, a, b)
    add_case("int_sub", lambda a, b: a - b, a, b)
    add_case("int_mul", lambda a, b: a * b, a, b)
    add_case("int_maximum", torch.maximum, a, b)
    add_case("int_minimum", torch.minimum, a, b)
    add_case("int_true_div", lambda a, b: a / b, a, b)
    add_case("int_div_floor", lambda a, b: torch.div(a, b, rounding_mode="floor"), a, b)
    add_case("int_div_trunc", lambda a, b: torch.div(a, b, rounding_mode="trunc"), a, b)
    add_case("int_mul_int", lambda a: a * 3, a)
    add_case("int_mul_float", lambda a: a * 2.5, a)
    add_case("int_div_int", lambda a: a / 3, a)
    add_case("int_rsub_int", lambda a: 7 - a, a)
    add_case("int_div_floor_scalar", lambda a: torch.div(a, -4, rounding_mode="floor"), a)
    add_case("int_plus_float_tensor", lambda a, x: a + x, a, torch.randn(24))
    add_case("bool_plus_int", lambda m: m + 2, torch.rand(24) < 0.5)
    m, n = torch.rand(24) < 0.5, torch.rand(24) < 0.5
    add_case("bool_add", lambda m, n: m + n, m, n)
    add_case("bool_mul", lambda m, n: m * n, m, n)
    add_case("bool_sum", lambda m: m.sum(), torch.rand(3, 4) < 0.5)
    add_case("int_sum_dim", lambda a: a.sum(1), integers((3, 4), -9, 10))


def float_rounding_division():
    x, y = torch.randn(24) * 5, torch.randn(24) * 2
    x[0], y[0] = 7.0, 2.0   # exact quotients and signs mixed in
    x[1], y[1] = -7.0, 2.0
    x[2], y[2] = 7.0, -2.0
    x[3], y[3] = 6.0, -3.0
    add_case("float_div_floor", lambda x, y: torch.div(x, y, rounding_mode="floor"), x, y)
    add_case("float_div_trunc", lambda x, y: torch.div(x, y, rounding_mode="trunc"), x, y)


def comparisons():
    x = torch.randint(-3, 4, (4, 6)).float() / 2
    y = torch.randint(-3, 4, (4, 6)).float() / 2
    x[0, 0] = y[0, 1] = math.nan
    ops = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
           "ge": torch.ge}
    for name, op in ops.items():
        add_case(f"cmp_{name}", op, x, y)
        add_case(f"cmp_{name}_scalar", lambda x, op=op: op(x, 0.5), x)
    add_case("cmp_broadcast", torch.lt, torch.randn(3, 1), torch.randn(4))
    i = integers((12,), -3, 4)
    add_case("cmp_int_int_scalar", lambda i: i >= 1, i)
    add_case("cmp_int_float_scalar", lambda i: i < 0.5, i)
    add_case("cmp_int_float_tensor", lambda i, x: i == x, i, torch.randint(-3, 4, (12,)).float())
    add_case("cmp_bool", lambda m, n: m < n, torch.rand(12) < 0.5, torch.rand(12) < 0.5)
    add_case("cmp_scalar_left", lambda x: 0.5 < x, x)


def logical_and_bitwise():
    x = torch.randint(-1, 2, (3, 5)).float()
    x[0, 0] = math.nan
    i = integers((3, 5), -2, 3)
    add_case("logical_and", torch.logical_and, x, i)
    add_case("logical_or", torch.logical_or, x, i)
    add_case("logical_xor", torch.logical_xor, x, i)
    add_case("logical_not", torch.logical_not, x)
    a, b = integers((16,), -100, 100), integers((16,), -100, 100)
    add_case("bitwise_and", lambda a, b: a & b, a, b)
    add_case("bitwise_or", lambda a, b: a | b, a, b)
    add_case("bitwise_xor", lambda a, b: a ^ b, a, b)
    add_case("bitwise_not", lambda a: ~a, a)
    m, n = torch.rand(16) < 0.5, torch.rand(16) < 0.5
    add_case("bool_and", lambda m, n: m & n, m, n)
    add_case("bool_or", lambda m, n: m | n, m, n)
    add_case("bool_xor", lambda m, n: m ^ n, m, n)
    add_case("bool_not", lambda m: ~m, m)
    add_case("bool_int_and", lambda m, a: m & a, m, a)


def tests():
    x = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, -2.0, 0.5, 3.0], [0.0, 1.0, 0.0, math.nan]])
    add_case("any_all", torch.any, x)
    add_case("all_all", torch.all, x)
    add_case("any_dim", lambda x: torch.any(x, 1), x)
    add_case("all_dim_keepdim", lambda x: torch.all(x, 0, keepdim=True), x)
    add_case("any_empty", torch.any, torch.zeros(0, 3))
    add_case("all_empty", torch.all, torch.zeros(0, 3))
    a = torch.randn(5)
    add_case("equal_same", lambda a, b: torch.tensor(torch.equal(a, b)), a, a.clone())
    b = a.clone()
    b[2] += 1e-3
    add_case("equal_differs", lambda a, b: torch.tensor(torch.equal(a, b)), a, b)
    add_case("allclose_near", lambda a, b: torch.tensor(torch.allclose(a, b, atol=1e-2)), a, b)
    add_case("allclose_far", lambda a, b: torch.tensor(torch.allclose(a, b)), a, b)
    inf = torch.tensor([math.inf, -math.inf, 1.0])
    add_case("allclose_inf", lambda a, b: torch.tensor(torch.allclose(a, b)), inf, inf.clone())
    add_case("allclose_nan", lambda a: torch.tensor(torch.allclose(a, a)),
             torch.tensor([1.0, math.nan]))


def casts():
    f = torch.tensor([-2.7, -0.5, 0.0, 0.5, 2.7, 1e6, -0.0])
    add_case("float_to_int64", lambda f: f.to(torch.int64), f)
    special = torch.tensor([0.0, -0.0, math.nan, math.inf, 1e-30, -3.0])
    add_case("float_to_bool", lambda f: f.to(torch.bool), special)
    add_case("bfloat16_to_bool", lambda f: f.to(torch.bfloat16).to(torch.bool), special)
    i = torch.tensor([-3, 0, 1, 2, 1 << 40])
    add_case("int64_to_float", lambda i: i.to(torch.float32), i)
    add_case("int64_to_bool", lambda i: i.to(torch.bool), i)
    m = torch.tensor([True, False, True])
    add_case("bool_to_float", lambda m: m.to(torch.float32), m)
    add_case("bool_to_int64", lambda m: m.to(torch.int64), m)


def selection_with_masks():
    x, y = torch.randn(3, 4), torch.randn(4)
    cond = torch.rand(3, 4) < 0.5
    add_case("where_bool", torch.where, cond, x, y, grad=True)
    add_case("where_scalar", lambda c, x: torch.where(c, x, 2.0), cond, x, grad=True)
    add_case("where_float_cond", lambda c, x, y: torch.where(c != 0, x, y),
             torch.randint(0, 2, (3, 4)).float(), x, y, grad=True)
    add_case("where_int_float", torch.where, cond, integers((3, 4), -5, 5), y, grad=True)
    add_case("masked_fill_bool", lambda x, m: x.masked_fill(m, -1.5), x, torch.rand(4) < 0.5,
             grad=True)
    add_case("masked_fill_int", lambda i, m: i.masked_fill(m, 7), integers((3, 4), -5, 5), cond)
    add_case("mask_times_float", lambda m, x: m * x, cond, x, grad=True)


def main():
    torch.manual_seed(0)
    promotion_tables()
    result_tables()
    for family in (int64_arithmetic, float_rounding_division, comparisons, logical_and_bitwise,
                   tests, casts, selection_with_masks):
        family()
    safetensors_io.save(os.path.join(HERE, "dtypes.safetensors"), TENSORS)
    print(f"wrote {len(TENSORS)} tensors ({len(CASES)} cases) to tests/golden/dtypes.safetensors")


if __name__ == "__main__":
    main()
