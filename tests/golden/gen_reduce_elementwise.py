#!/usr/bin/python3
"""PyTorch golden values for the reductions, elementwise functions and linear algebra of the
PyTorch-style API (multi-dim sum/mean/var/std, prod, logsumexp, norm, cumsum/cumprod; the
unary table's functions and clamp's forms; einsum, outer, bmm, baddbmm, addmm), written to
tests/golden/reduce_elementwise.safetensors and checked by
tests/autograd/test_golden_reduce_elementwise.cpp.

    /usr/bin/python3 tests/golden/gen_reduce_elementwise.py

The stored parts of each case are those of gen_ops.py (whose add_case this script uses): the
inputs, the output computed in float64, a random weight w and the gradients of sum(out * w).
Cases are appended at the end of their family only, since every case draws from one seeded
stream.
"""

import math
import os

import torch
import torch.nn.functional as F

import gen_ops
from gen_ops import add_case, pos, rn

HERE = os.path.dirname(os.path.abspath(__file__))


def with_values(x, values):
    """x with its first elements replaced: the special points (zeros, ties, halves) a case needs."""
    flat = x.clone().reshape(-1)
    flat[:len(values)] = torch.tensor(values)
    return flat.reshape(x.shape)


def elementwise():
    add_case("neg", torch.neg, rn(3, 4))
    add_case("reciprocal", torch.reciprocal, pos(3, 4))
    add_case("square", torch.square, rn(3, 4))
    add_case("log1p", torch.log1p, pos(3, 4) - 0.9)
    add_case("expm1", torch.expm1, rn(3, 4))
    add_case("log2", torch.log2, pos(3, 4))
    add_case("exp2", torch.exp2, rn(3, 4))
    add_case("erf", torch.erf, rn(3, 4))
    halves = [0.5, 1.5, 2.5, -0.5, -2.5, -1.5]
    add_case("floor", torch.floor, with_values(rn(3, 4) * 3, halves))
    add_case("ceil", torch.ceil, with_values(rn(3, 4) * 3, halves))
    add_case("round", torch.round, with_values(rn(3, 4) * 3, halves))  # half to even
    add_case("trunc", torch.trunc, with_values(rn(3, 4) * 3, halves))
    add_case("silu", F.silu, rn(3, 4) * 3)
    add_case("silu_transposed", lambda x: F.silu(x.t()), rn(4, 3))
    add_case("softplus", F.softplus, rn(3, 4) * 12)  # past the threshold 20 too
    add_case("softplus_beta_threshold", lambda x: F.softplus(x, beta=2.0, threshold=5.0),
             rn(3, 4) * 3)
    add_case("leaky_relu", F.leaky_relu, rn(3, 4))
    add_case("leaky_relu_slope", lambda x: F.leaky_relu(x, 0.2), rn(3, 4))
    add_case("elu", F.elu, rn(3, 4) * 2)
    add_case("elu_alpha", lambda x: F.elu(x, alpha=0.5), rn(3, 4) * 2)
    add_case("mish", F.mish, rn(3, 4) * 3)
    add_case("hardswish", F.hardswish, rn(3, 4) * 3)
    add_case("logit", torch.logit, torch.rand(3, 4) * 0.9 + 0.05)
    add_case("logit_eps", lambda x: torch.logit(x, eps=0.2), torch.rand(3, 4))
    add_case("relu6", F.relu6, rn(3, 4) * 4)
    add_case("clamp_max_only", lambda x: torch.clamp(x, max=0.5), rn(3, 4))
    add_case("clamp_min_only", lambda x: torch.clamp(x, min=-0.5), rn(3, 4))
    add_case("clamp_min", lambda x: torch.clamp_min(x, 0.25), rn(3, 4))
    add_case("clamp_max", lambda x: torch.clamp_max(x, -0.25), rn(3, 4))
    add_case("abs_method", lambda x: x.abs(), rn(3, 4))
    add_case("sigmoid_method", lambda x: x.sigmoid(), rn(3, 4))


def reductions():
    add_case("sum_dims", lambda x: torch.sum(x, (0, 2)), rn(2, 3, 4))
    add_case("sum_dims_keepdim", lambda x: torch.sum(x, (0, 2), keepdim=True), rn(2, 3, 4))
    add_case("sum_dims_negative", lambda x: torch.sum(x, (-1, -2)), rn(2, 3, 4))
    add_case("sum_dims_transposed", lambda x: torch.sum(x.transpose(0, 2), (0, 1)), rn(4, 3, 2))
    add_case("mean_dims", lambda x: torch.mean(x, (0, 2)), rn(2, 3, 4))
    add_case("mean_dims_keepdim", lambda x: torch.mean(x, (1, 2), keepdim=True), rn(2, 3, 4))
    add_case("prod_all", torch.prod, rn(3, 4))
    add_case("prod_dim", lambda x: torch.prod(x, 1), rn(3, 4))
    add_case("prod_dim_keepdim", lambda x: torch.prod(x, 0, keepdim=True), rn(3, 4))
    add_case("prod_one_zero", lambda x: torch.prod(x, 1), with_values(rn(3, 4), [0.0]))
    add_case("prod_two_zeros", lambda x: torch.prod(x, 1), with_values(rn(3, 4), [0.0, 1.0, 0.0]))
    add_case("prod_all_one_zero", torch.prod, with_values(rn(2, 3), [1.5, 0.0]))
    add_case("var_dims", lambda x: torch.var(x, (0, 2)), rn(2, 3, 4))
    add_case("var_dims_correction0_keepdim",
             lambda x: torch.var(x, (1, 2), correction=0, keepdim=True), rn(2, 3, 4))
    add_case("var_dim_correction2", lambda x: torch.var(x, (1,), correction=2), rn(3, 5))
    add_case("std_dims", lambda x: torch.std(x, (0, 2)), rn(2, 3, 4))
    add_case("std_dim", lambda x: torch.std(x, 1, unbiased=False, keepdim=True), rn(3, 5))
    add_case("std_constant_row", lambda x: torch.std(x, 1), torch.tensor([[2.0, 2, 2], [1, 2, 4]]))
    add_case("logsumexp_dim", lambda x: torch.logsumexp(x, 1), rn(3, 5) * 10)
    add_case("logsumexp_dims_keepdim", lambda x: torch.logsumexp(x, (0, 2), keepdim=True),
             rn(2, 3, 4))
    add_case("logsumexp_transposed", lambda x: torch.logsumexp(x.t(), 0), rn(4, 3))
    add_case("logsumexp_neg_inf_row", lambda x: torch.logsumexp(x, 1),
             torch.tensor([[-math.inf, -math.inf], [0.5, -math.inf]]), grad=False)
    add_case("norm_2", torch.norm, rn(3, 4))
    add_case("norm_2_dim", lambda x: torch.norm(x, 2, 1), rn(3, 4))
    add_case("norm_2_zero_row", lambda x: torch.norm(x, 2, 1),
             torch.tensor([[0.0, 0.0, 0.0], [1.0, -2.0, 2.0]]))
    add_case("norm_1_dims", lambda x: torch.norm(x, 1, (0, 2)), with_values(rn(2, 3, 4), [0.0]))
    add_case("norm_inf", lambda x: torch.norm(x, math.inf, 1), rn(3, 4))
    add_case("norm_inf_ties", lambda x: torch.norm(x, math.inf, 1),
             torch.tensor([[1.0, -1.0, 0.5], [0.25, 2.0, -2.0]]))
    add_case("norm_neg_inf", lambda x: torch.norm(x, -math.inf, 1, keepdim=True), rn(3, 4))
    add_case("norm_0", lambda x: torch.norm(x, 0, 1), with_values(rn(3, 4), [0.0, 0.0]))
    add_case("norm_3_dims", lambda x: torch.norm(x, 3, (0, 1)), rn(3, 4, 2))
    add_case("norm_half", lambda x: torch.norm(x, 0.5, 1), pos(3, 4))
    add_case("norm_1_5_zero_row", lambda x: torch.norm(x, 1.5, 1),
             torch.tensor([[0.0, 0.0], [1.0, -2.0]]))
    add_case("cumsum_0", lambda x: torch.cumsum(x, 0), rn(4, 5))
    add_case("cumsum_1", lambda x: torch.cumsum(x, 1), rn(4, 5))
    add_case("cumsum_transposed", lambda x: torch.cumsum(x.t(), -1), rn(5, 4))
    add_case("cumsum_3d_middle", lambda x: torch.cumsum(x, 1), rn(2, 6, 3))
    add_case("cumprod_1", lambda x: torch.cumprod(x, 1), rn(4, 5))
    add_case("cumprod_0", lambda x: torch.cumprod(x, 0), rn(4, 3))
    add_case("cumprod_zeros", lambda x: torch.cumprod(x, 1),
             torch.tensor([[1.5, 0.0, 2.0, -1.0], [0.0, 2.0, 0.0, 3.0], [2.0, 0.5, 1.5, 0.0]]))
    add_case("cumprod_zeros_dim0", lambda x: torch.cumprod(x, 0),
             torch.tensor([[1.5, 0.0], [0.0, 2.0], [2.0, 0.5]]))


def linear_algebra():
    add_case("einsum_matmul", lambda a, b: torch.einsum("ij,jk->ik", a, b), rn(3, 4), rn(4, 5))
    add_case("einsum_abt", lambda a, b: torch.einsum("ij,kj->ik", a, b), rn(3, 4), rn(5, 4))
    add_case("einsum_colsum", lambda a: torch.einsum("ij->j", a), rn(3, 4))
    add_case("einsum_sum_all", lambda a: torch.einsum("ij->", a), rn(3, 4))
    add_case("einsum_diagonal", lambda a: torch.einsum("ii->i", a), rn(4, 4))
    add_case("einsum_trace", lambda a: torch.einsum("ii", a), rn(4, 4))
    add_case("einsum_attention", lambda a, b: torch.einsum("bhqd,bhkd->bhqk", a, b),
             rn(2, 3, 4, 5), rn(2, 3, 6, 5))
    add_case("einsum_ellipsis_broadcast", lambda a, b: torch.einsum("...ij,...jk->...ik", a, b),
             rn(2, 1, 3, 4), rn(5, 4, 2))
    add_case("einsum_outer", lambda a, b: torch.einsum("i,j->ij", a, b), rn(3), rn(4))
    add_case("einsum_dot", lambda a, b: torch.einsum("ij,ij->", a, b), rn(3, 4), rn(3, 4))
    add_case("einsum_implicit", lambda a, b: torch.einsum("kj,ji", a, b), rn(3, 4), rn(4, 5))
    add_case("einsum_implicit_upper", lambda a, b: torch.einsum("bA,Ab", a, b), rn(3, 4), rn(4, 3))
    add_case("einsum_three", lambda a, b, c: torch.einsum("ij,jk,kl->il", a, b, c),
             rn(2, 3), rn(3, 4), rn(4, 5))
    add_case("einsum_hadamard", lambda a, b: torch.einsum("i,i->i", a, b), rn(5), rn(5))
    add_case("einsum_permute", lambda a: torch.einsum("abc->cba", a), rn(2, 3, 4))
    add_case("einsum_diag_batch", lambda a, b: torch.einsum("iij,jk->ki", a, b), rn(3, 3, 4),
             rn(4, 2))
    add_case("einsum_bilinear", lambda a, w, b: torch.einsum("bi,oij,bj->bo", a, w, b),
             rn(2, 3), rn(4, 3, 5), rn(2, 5))
    add_case("einsum_transposed_operand", lambda a, b: torch.einsum("ij,jk->ik", a.t(), b),
             rn(4, 3), rn(4, 5))
    add_case("outer", torch.outer, rn(3), rn(4))
    add_case("bmm", torch.bmm, rn(2, 3, 4), rn(2, 4, 5))
    add_case("baddbmm", lambda i, a, b: torch.baddbmm(i, a, b, beta=0.5, alpha=2.0),
             rn(2, 3, 5), rn(2, 3, 4), rn(2, 4, 5))
    add_case("baddbmm_broadcast", torch.baddbmm, rn(3, 5), rn(2, 3, 4), rn(2, 4, 5))
    add_case("addmm", torch.addmm, rn(3, 5), rn(3, 4), rn(4, 5))
    add_case("addmm_beta0", lambda i, a, b: torch.addmm(i, a, b, beta=0.0, alpha=0.5),
             rn(3, 5), rn(3, 4), rn(4, 5))
    add_case("addmm_broadcast", lambda i, a, b: torch.addmm(i, a, b, beta=2.0), rn(5), rn(3, 4),
             rn(4, 5))
    # "..." in the operands but not in the output: its dims are summed away, as torch.einsum.
    add_case("einsum_ellipsis_summed", lambda a, b: torch.einsum("...ij,jk->ik", a, b),
             rn(5, 2, 3), rn(3, 4))


FAMILIES = [elementwise, reductions, linear_algebra]


def main():
    torch.manual_seed(20260601)
    for family in FAMILIES:
        family()
    path = os.path.join(HERE, "reduce_elementwise.safetensors")
    gen_ops.safetensors_io.save(path, gen_ops.TENSORS,
                                {"generator": "tests/golden/gen_reduce_elementwise.py",
                                 "torch": torch.__version__, "cases": str(len(gen_ops.CASES))})
    print(f"wrote {len(gen_ops.CASES)} cases, {len(gen_ops.TENSORS)} tensors, "
          f"{os.path.getsize(path)} bytes to {path}")


if __name__ == "__main__":
    main()
