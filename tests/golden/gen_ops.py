#!/usr/bin/python3
"""PyTorch golden values for every op of autograd/ops.h (creation ops excepted), written to
tests/golden/ops.safetensors and checked by tests/autograd/test_golden_ops.cpp.

    /usr/bin/python3 tests/golden/gen_ops.py

Each case stores, under "<case>.<part>":
    in0, in1, ...   the inputs as loom sees them (float32 values, int64 indices), contiguous
    out             the output (float32; int64 for argmax/argmin; comparisons give 1/0 floats)
    w               a random weight with out's shape (only for differentiable cases)
    grad0, ...      d sum(out * w) / d in_i for every float input i

The reference is computed in float64 from the float32 inputs and rounded to float32 at the end,
so it is the exact answer to float32 precision and loom is held to its own rounding error only.
A case's function here and its lambda in the C++ test do the same thing step by step, including
views: where a case name says "transposed" or "permuted", the stored input is laid out so that
both sides transpose it before use, which feeds the op a non-contiguous tensor.
"""

import math
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import safetensors_io  # noqa: E402

TENSORS = {}
CASES = []


def add_case(name, fn, *inputs, grad=True):
    """Runs fn on float64 copies of `inputs` and records inputs, output, weight and gradients."""
    assert name not in CASES and "." not in name, name
    CASES.append(name)
    stored = [t.contiguous() for t in inputs]
    args = [t.double().requires_grad_(grad) if t.is_floating_point() else t.clone()
            for t in stored]
    with torch.set_grad_enabled(grad):
        out = fn(*args)
    for i, t in enumerate(stored):
        TENSORS[f"{name}.in{i}"] = t
    if out.dtype == torch.bool:
        out = out.double()
    TENSORS[f"{name}.out"] = out.detach().float() if out.is_floating_point() else out.detach()
    if not grad:
        return
    w = torch.randn(out.shape)
    TENSORS[f"{name}.w"] = w
    floats = [(i, a) for i, a in enumerate(args) if a.is_floating_point()]
    loss = (out * w.double()).sum()
    grads = torch.autograd.grad(loss, [a for _, a in floats], allow_unused=True)
    for (i, a), g in zip(floats, grads):
        TENSORS[f"{name}.grad{i}"] = (torch.zeros_like(a) if g is None else g).float()


# ---- input makers (float32 / int64, drawn from the seeded global generator)
def rn(*shape):
    return torch.randn(shape)


def pos(*shape):
    """Positive values in [0.5, 2), for log, sqrt, division and powers."""
    return torch.rand(shape) * 1.5 + 0.5


def halves(*shape):
    """Multiples of 0.5 in [-1, 1], so that comparisons meet ties."""
    return torch.randint(-2, 3, shape).float() / 2


def ids(values):
    return torch.tensor(values, dtype=torch.int64)


def mask01(*shape):
    return (torch.rand(shape) < 0.4).float()


# ---- families; the C++ test has one TEST_CASE per function below
def elementwise_binary():
    add_case("add_same", lambda a, b: a + b, rn(3, 4), rn(3, 4))
    add_case("add_broadcast", lambda a, b: a + b, rn(2, 3, 4), rn(3, 1))
    add_case("add_0d", lambda a, b: a + b, rn(2, 3), rn())
    add_case("add_transposed", lambda a, b: a.t() + b, rn(4, 3), rn(3, 4))
    add_case("sub_broadcast", lambda a, b: a - b, rn(4, 1), rn(1, 5))
    add_case("sub_same", lambda a, b: a - b, rn(3, 4), rn(3, 4))
    add_case("mul_broadcast", lambda a, b: a * b, rn(2, 1, 4), rn(3, 1))
    add_case("mul_self", lambda a: a * a, rn(3, 4))
    add_case("div_broadcast", lambda a, b: a / b, rn(3, 4), pos(4))
    add_case("div_same", lambda a, b: a / b, rn(2, 3), pos(2, 3))
    add_case("pow_tensor", lambda a, b: torch.pow(a, b), pos(3, 4), rn(3, 4))
    add_case("pow_tensor_broadcast", lambda a, b: torch.pow(a, b), pos(2, 3), rn(3))
    add_case("maximum", torch.maximum, rn(3, 4), rn(3, 4))
    add_case("minimum_broadcast", torch.minimum, rn(3, 4), rn(4))


def elementwise_scalar():
    add_case("scalar_add", lambda x: x + 1.5, rn(2, 3))
    add_case("scalar_radd", lambda x: 1.5 + x, rn(2, 3))
    add_case("scalar_sub", lambda x: x - 0.75, rn(2, 3))
    add_case("scalar_rsub", lambda x: 0.75 - x, rn(2, 3))
    add_case("scalar_mul", lambda x: x * -2.0, rn(2, 3))
    add_case("scalar_rmul", lambda x: 3.0 * x, rn(2, 3))
    add_case("scalar_div", lambda x: x / 4.0, rn(2, 3))
    add_case("scalar_rdiv", lambda x: 2.0 / x, pos(2, 3))
    add_case("neg", lambda x: -x, rn(2, 3))
    add_case("pow_3", lambda x: torch.pow(x, 3.0), rn(2, 3))
    add_case("pow_2_negative_base", lambda x: torch.pow(x, 2.0), rn(2, 3))
    add_case("pow_half", lambda x: torch.pow(x, 0.5), pos(2, 3))
    add_case("pow_minus_1_5", lambda x: torch.pow(x, -1.5), pos(2, 3))


def elementwise_unary():
    add_case("exp", torch.exp, rn(3, 4))
    add_case("exp_transposed", lambda x: torch.exp(x.t()), rn(4, 3))
    add_case("log", torch.log, pos(3, 4))
    add_case("sqrt", torch.sqrt, pos(3, 4))
    add_case("rsqrt", torch.rsqrt, pos(3, 4))
    add_case("tanh", torch.tanh, rn(3, 4))
    add_case("sigmoid", torch.sigmoid, rn(3, 4) * 3)
    add_case("relu", torch.relu, rn(3, 4))
    add_case("gelu", F.gelu, rn(3, 4) * 2)
    add_case("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), rn(3, 4) * 2)
    add_case("abs", torch.abs, rn(3, 4))
    add_case("sin", torch.sin, rn(3, 4) * 2)
    add_case("cos", torch.cos, rn(3, 4) * 2)
    add_case("sign", torch.sign, rn(3, 4))
    add_case("clamp", lambda x: torch.clamp(x, -0.5, 0.8), rn(3, 4))


def comparison():
    add_case("eq", torch.eq, halves(3, 4), halves(3, 4), grad=False)
    add_case("ne_broadcast", torch.ne, halves(3, 4), halves(4), grad=False)
    add_case("lt", torch.lt, halves(3, 4), halves(3, 4), grad=False)
    add_case("le_broadcast", torch.le, halves(2, 3, 1), halves(3, 4), grad=False)
    add_case("gt", torch.gt, halves(3, 4), halves(3, 4), grad=False)
    add_case("ge", torch.ge, halves(3, 4), halves(3, 4), grad=False)
    add_case("eq_scalar", lambda a: torch.eq(a, 0.5), halves(3, 4), grad=False)
    add_case("lt_scalar", lambda a: torch.lt(a, 0.0), halves(3, 4), grad=False)
    add_case("gt_scalar", lambda a: torch.gt(a, -0.5), halves(3, 4), grad=False)


def selection():
    add_case("where", lambda c, a, b: torch.where(c != 0, a, b), mask01(3, 4), rn(3, 4), rn(3, 4))
    add_case("where_broadcast", lambda c, a, b: torch.where(c != 0, a, b),
             mask01(3, 1), rn(3, 4), rn(4))
    add_case("masked_fill", lambda x, m: x.masked_fill(m != 0, -2.5), rn(3, 4), mask01(3, 4))
    add_case("masked_fill_broadcast", lambda x, m: x.masked_fill(m != 0, 7.0),
             rn(2, 3, 4), mask01(3, 1))
    add_case("masked_fill_neg_inf", lambda x, m: x.masked_fill(m != 0, -math.inf),
             rn(2, 4), mask01(4))


def reduction():
    add_case("sum_all", torch.sum, rn(3, 4))
    add_case("sum_dim0", lambda x: x.sum(0), rn(3, 4))
    add_case("sum_dim1_3d", lambda x: x.sum(1), rn(2, 3, 4))
    add_case("sum_neg_dim_keepdim", lambda x: x.sum(-1, keepdim=True), rn(2, 3, 4))
    add_case("mean_all", torch.mean, rn(3, 4))
    add_case("mean_dim1", lambda x: x.mean(1), rn(3, 4))
    add_case("mean_dim0_keepdim", lambda x: x.mean(0, keepdim=True), rn(2, 3, 4))
    add_case("max_all", torch.max, rn(3, 4))
    add_case("max_dim1", lambda x: torch.max(x, 1)[0], rn(3, 4))
    add_case("max_dim0_keepdim", lambda x: torch.max(x, 0, keepdim=True)[0], rn(2, 3, 4))
    add_case("min_neg_dim", lambda x: torch.min(x, -1)[0], rn(2, 3, 4))
    add_case("min_dim1_keepdim", lambda x: torch.min(x, 1, keepdim=True)[0], rn(2, 3, 4))
    add_case("argmax_dim1", lambda x: torch.argmax(x, 1), rn(3, 4), grad=False)
    add_case("argmax_dim0_keepdim", lambda x: torch.argmax(x, 0, keepdim=True), rn(3, 4),
             grad=False)
    add_case("argmin_neg_dim", lambda x: torch.argmin(x, -1), rn(2, 3, 4), grad=False)
    add_case("var_unbiased", lambda x: torch.var(x, 1), rn(3, 5))
    add_case("var_biased_keepdim", lambda x: torch.var(x, 0, unbiased=False, keepdim=True),
             rn(4, 3))
    add_case("var_neg_dim_3d", lambda x: torch.var(x, -1), rn(2, 3, 4))
    add_case("sum_to_3x1", lambda x: x.sum_to_size(3, 1), rn(2, 3, 4))
    add_case("sum_to_4", lambda x: x.sum_to_size(4), rn(2, 3, 4))
    add_case("sum_to_same", lambda x: x.sum_to_size(2, 3), rn(2, 3))


def softmax():
    add_case("softmax_last", lambda x: torch.softmax(x, -1), rn(3, 5))
    add_case("softmax_dim0", lambda x: torch.softmax(x, 0), rn(3, 5))
    add_case("softmax_middle", lambda x: torch.softmax(x, 1), rn(2, 3, 4))
    add_case("softmax_large_values", lambda x: torch.softmax(x, -1), rn(2, 6) * 40)
    add_case("softmax_transposed", lambda x: torch.softmax(x.t(), -1), rn(5, 3))
    add_case("log_softmax_last", lambda x: torch.log_softmax(x, -1), rn(3, 5))
    add_case("log_softmax_dim0", lambda x: torch.log_softmax(x, 0), rn(3, 5))
    add_case("log_softmax_middle", lambda x: torch.log_softmax(x, 1), rn(2, 3, 4))
    add_case("log_softmax_large_values", lambda x: torch.log_softmax(x, -1), rn(2, 6) * 40)


def matmul():
    mm = torch.matmul
    add_case("matmul_1d_1d", mm, rn(4), rn(4))
    add_case("matmul_1d_2d", mm, rn(4), rn(4, 3))
    add_case("matmul_2d_1d", mm, rn(3, 4), rn(4))
    add_case("matmul_2d_2d", mm, rn(3, 4), rn(4, 5))
    add_case("matmul_3d_3d", mm, rn(2, 3, 4), rn(2, 4, 5))
    add_case("matmul_3d_2d", mm, rn(2, 3, 4), rn(4, 5))
    add_case("matmul_2d_3d", mm, rn(3, 4), rn(2, 4, 5))
    add_case("matmul_1d_3d", mm, rn(4), rn(2, 4, 5))
    add_case("matmul_3d_1d", mm, rn(2, 3, 4), rn(4))
    add_case("matmul_broadcast_batch", mm, rn(2, 1, 3, 4), rn(1, 3, 4, 5))
    add_case("matmul_broadcast_batch_4d_3d", mm, rn(2, 2, 3, 4), rn(2, 4, 5))
    add_case("matmul_transposed_a", lambda a, b: mm(a.t(), b), rn(4, 3), rn(4, 5))
    add_case("matmul_transposed_b", lambda a, b: mm(a, b.t()), rn(3, 4), rn(5, 4))
    add_case("matmul_transposed_both", lambda a, b: mm(a.t(), b.t()), rn(4, 3), rn(5, 4))
    add_case("matmul_batched_transposed",
             lambda a, b: mm(a.transpose(1, 2), b.transpose(-2, -1)), rn(2, 4, 3), rn(2, 5, 4))
    add_case("matmul_permuted", lambda a, b: mm(a.permute(1, 0, 2), b), rn(3, 2, 4), rn(4, 5))
    add_case("matmul_expanded_batch", lambda a, b: mm(a, b.unsqueeze(0).expand(3, 4, 5)),
             rn(3, 2, 4), rn(4, 5))
    add_case("matmul_narrowed", lambda a, b: mm(a.narrow(1, 1, 4), b), rn(3, 6), rn(4, 2))


def views():
    add_case("reshape", lambda x: x.reshape(6, 4), rn(2, 3, 4))
    add_case("reshape_infer_then_sum", lambda x: x.reshape(-1, 2).sum(0), rn(2, 3, 4))
    add_case("reshape_of_transposed", lambda x: x.t().reshape(12), rn(3, 4))
    add_case("view_then_mean", lambda x: x.view(4, 6).mean(1), rn(2, 3, 4))
    add_case("transpose_then_sum", lambda x: x.transpose(0, 2).sum(1), rn(2, 3, 4))
    add_case("permute", lambda x: x.permute(2, 0, 1), rn(2, 3, 4))
    add_case("permute_then_sum", lambda x: x.permute(2, 0, 1).sum(1), rn(2, 3, 4))
    add_case("permute_then_softmax", lambda x: torch.softmax(x.permute(1, 2, 0), -1), rn(2, 3, 4))
    add_case("narrow", lambda x: x.narrow(1, 1, 3), rn(4, 5))
    add_case("narrow_then_mean", lambda x: x.narrow(1, 1, 3).mean(0), rn(4, 5))
    add_case("select_then_sum", lambda x: x.select(1, 2).sum(-1), rn(3, 4, 5))
    add_case("select_negative_index", lambda x: x.select(0, -1), rn(3, 4))
    add_case("expand", lambda x: x.expand(3, 4), rn(3, 1))
    add_case("expand_new_dims_then_sum", lambda x: x.expand(2, 3, 4).sum(0), rn(1, 4))
    add_case("squeeze_dim", lambda x: x.squeeze(1), rn(3, 1, 4))
    add_case("squeeze_all", lambda x: x.squeeze(), rn(1, 3, 1))
    add_case("unsqueeze_then_mul", lambda x, y: x.unsqueeze(1) * y, rn(3, 4), rn(3, 2, 4))
    add_case("flatten_from_1", lambda x: x.flatten(1), rn(2, 3, 4))
    add_case("flatten_all_then_max", lambda x: torch.max(x.flatten(), 0)[0], rn(2, 3, 4))
    add_case("flatten_range_of_permuted", lambda x: x.permute(1, 0, 2).flatten(0, 1),
             rn(2, 3, 4))
    add_case("contiguous_of_transposed", lambda x: x.t().contiguous().mean(0), rn(3, 4))
    add_case("t_then_matmul", lambda x, y: torch.matmul(x.t(), y), rn(3, 4), rn(3, 2))
    add_case("clone", lambda x: x.clone() * 2.0, rn(2, 3))
    add_case("chain_permute_narrow_reshape",
             lambda x: x.permute(0, 2, 1, 3).narrow(3, 1, 2).reshape(2, 4, 6).sum(1),
             rn(2, 3, 4, 5))


def indexing():
    add_case("cat_dim0", lambda a, b: torch.cat([a, b], 0), rn(2, 3), rn(4, 3))
    add_case("cat_dim1_three", lambda a, b, c: torch.cat([a, b, c], 1), rn(2, 3), rn(2, 1),
             rn(2, 2))
    add_case("cat_neg_dim_3d", lambda a, b: torch.cat([a, b], -1), rn(2, 3, 2), rn(2, 3, 4))
    add_case("cat_transposed", lambda a, b: torch.cat([a.t(), b], 0), rn(3, 2), rn(1, 3))
    add_case("stack_dim0", lambda a, b, c: torch.stack([a, b, c], 0), rn(2, 3), rn(2, 3),
             rn(2, 3))
    add_case("stack_dim1", lambda a, b: torch.stack([a, b], 1), rn(2, 3), rn(2, 3))
    add_case("stack_neg_dim", lambda a, b: torch.stack([a, b], -1), rn(2, 3), rn(2, 3))
    add_case("index_select_dim0_repeats", lambda x, i: torch.index_select(x, 0, i), rn(5, 3),
             ids([4, 0, 4, 2]))
    add_case("index_select_dim1", lambda x, i: torch.index_select(x, 1, i), rn(2, 5, 3),
             ids([1, 3]))
    add_case("gather_dim1", lambda x, i: torch.gather(x, 1, i), rn(3, 4),
             ids([[0, 3], [2, 2], [1, 0]]))
    add_case("gather_dim0_repeats", lambda x, i: torch.gather(x, 0, i), rn(3, 4),
             ids([[0, 1, 2, 0], [2, 2, 1, 0]]))
    add_case("gather_neg_dim_3d", lambda x, i: torch.gather(x, -1, i), rn(2, 3, 4),
             ids([[[3], [0], [1]], [[2], [2], [0]]]))
    add_case("embedding_2d_ids", lambda w, i: F.embedding(i, w), rn(6, 3),
             ids([[1, 5, 1, 0], [3, 3, 2, 5]]))
    add_case("embedding_1d_ids", lambda w, i: F.embedding(i, w), rn(5, 2), ids([4, 0, 4]))
    add_case("tril", torch.tril, rn(4, 4))
    add_case("tril_below", lambda x: torch.tril(x, -1), rn(3, 5))
    add_case("tril_above", lambda x: torch.tril(x, 2), rn(3, 4))
    add_case("triu_above", lambda x: torch.triu(x, 1), rn(4, 4))
    add_case("triu_batched", torch.triu, rn(2, 3, 3))


def nn_functions():
    add_case("layer_norm", lambda x, w, b: F.layer_norm(x, (5,), w, b, 1e-5),
             rn(2, 3, 5), rn(5), rn(5))
    add_case("layer_norm_offset_eps", lambda x, w, b: F.layer_norm(x, (6,), w, b, 1e-3),
             rn(4, 6) * 3 + 5, rn(6), rn(6))
    add_case("cross_entropy", lambda x, t: F.cross_entropy(x, t), rn(5, 4), ids([0, 3, 1, 1, 2]))
    add_case("cross_entropy_ignore_default",
             lambda x, t: F.cross_entropy(x, t, ignore_index=-100),
             rn(5, 4), ids([0, -100, 1, -100, 3]))
    add_case("cross_entropy_ignore_2", lambda x, t: F.cross_entropy(x, t, ignore_index=2),
             rn(4, 3), ids([2, 0, 2, 1]))
    add_case("cross_entropy_label_smoothing",
             lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), rn(4, 5), ids([4, 0, 2, 2]))
    add_case("cross_entropy_smoothing_and_ignore",
             lambda x, t: F.cross_entropy(x, t, ignore_index=-100, label_smoothing=0.2),
             rn(5, 3), ids([1, -100, 0, 2, -100]))
    add_case("cross_entropy_large_logits", lambda x, t: F.cross_entropy(x, t),
             rn(3, 4) * 30, ids([1, 0, 3]))
    add_case("dropout_eval", lambda x: F.dropout(x, 0.5, training=False), rn(3, 4))
    add_case("dropout_p0_training", lambda x: F.dropout(x, 0.0, training=True), rn(3, 4))


def tensor_methods():
    add_case("method_sum", lambda x: x.sum(), rn(3, 4))
    add_case("method_sum_dim", lambda x: x.sum(1, keepdim=True), rn(3, 4))
    add_case("method_mean", lambda x: x.mean(), rn(3, 4))
    add_case("method_mean_dim", lambda x: x.mean(0), rn(3, 4))
    add_case("method_max_dim", lambda x: x.max(1)[0], rn(3, 4))
    add_case("method_argmax", lambda x: x.argmax(1, keepdim=True), rn(3, 4), grad=False)
    add_case("method_exp_log_sqrt_abs", lambda x: x.exp().log().abs().sqrt(), rn(3, 4))
    add_case("method_pow", lambda x: x.pow(2.0), rn(3, 4))
    add_case("method_softmax", lambda x: x.softmax(1), rn(3, 4))
    add_case("method_log_softmax", lambda x: x.log_softmax(0), rn(3, 4))
    add_case("method_matmul", lambda a, b: a.matmul(b), rn(2, 3), rn(3, 2))
    add_case("method_masked_fill", lambda x, m: x.masked_fill(m != 0, 1.0), rn(3, 4), mask01(4))


def compositions():
    # Two-layer MLP classifier, y = W2 relu(W1 x + b1) + b2, with softmax cross-entropy;
    # weights in nn.Linear's [out, in] layout.
    def mlp(x, w1, b1, w2, b2, target):
        h = torch.relu(torch.matmul(x, w1.t()) + b1)
        return F.cross_entropy(torch.matmul(h, w2.t()) + b2, target)

    add_case("mlp_cross_entropy", mlp, rn(4, 5), rn(6, 5) * 0.5, rn(6) * 0.1, rn(3, 6) * 0.5,
             rn(3) * 0.1, ids([0, 2, 1, 2]))

    # Scaled dot-product attention with a causal mask (Vaswani et al. 2017, eq. 1):
    # softmax(Q K^T / sqrt(d) masked above the diagonal) V; q, k, v: [B, H, T, D].
    def causal_attention(q, k, v):
        t, d = q.shape[-2], q.shape[-1]
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d)
        blocked = torch.triu(torch.ones(t, t, dtype=q.dtype), 1)
        return torch.matmul(torch.softmax(scores.masked_fill(blocked != 0, -math.inf), -1), v)

    add_case("attention_causal", causal_attention, rn(2, 2, 4, 3), rn(2, 2, 4, 3), rn(2, 2, 4, 3))

    # Multi-head self-attention with packed projections and an additive float mask (0 or -inf,
    # as PyTorch's attn_mask): x [B, T, C], in_proj [3C, C], out_proj [C, C], 2 heads.
    def self_attention(x, in_proj, out_proj):
        b, t, c = x.shape
        h = 2
        qkv = torch.matmul(x, in_proj.t())                                   # [B, T, 3C]
        qkv = qkv.reshape(b, t, 3, h, c // h).permute(2, 0, 3, 1, 4)         # [3, B, H, T, hd]
        q, k, v = qkv.select(0, 0), qkv.select(0, 1), qkv.select(0, 2)
        mask = torch.triu(torch.full((t, t), -math.inf, dtype=x.dtype), 1)   # [T, T]
        att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(c // h) + mask, -1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, c)            # [B, T, C]
        return torch.matmul(y, out_proj.t())

    add_case("self_attention_additive_mask", self_attention, rn(2, 3, 4), rn(12, 4) * 0.5,
             rn(4, 4) * 0.5)

    # Pre-norm transformer MLP sub-block: x + W2 gelu_tanh(W1 LN(x) + b1) + b2.
    def prenorm_mlp(x, g, beta, w1, b1, w2, b2):
        h = F.layer_norm(x, (x.shape[-1],), g, beta, 1e-5)
        h = F.gelu(torch.matmul(h, w1.t()) + b1, approximate="tanh")
        return x + torch.matmul(h, w2.t()) + b2

    add_case("prenorm_mlp_block", prenorm_mlp, rn(2, 3, 4), 1 + 0.1 * rn(4), 0.1 * rn(4),
             rn(8, 4) * 0.5, rn(8) * 0.1, rn(4, 8) * 0.5, rn(4) * 0.1)


def scatter_adds():
    """index_add and scatter_add, the adjoints of index_select and gather. Generated after every
    other family (they were added later), so the random draws of the earlier cases, and hence
    their stored tensors, did not change when these were added."""
    add_case("index_add_dim0_repeats", lambda x, i, s: torch.index_add(x, 0, i, s), rn(3, 2),
             ids([2, 0, 2, 1]), rn(4, 2))
    add_case("index_add_dim1_3d", lambda x, i, s: torch.index_add(x, 1, i, s), rn(2, 4, 3),
             ids([3, 1, 3]), rn(2, 3, 3))
    add_case("index_add_neg_dim_transposed", lambda x, i, s: torch.index_add(x.t(), -1, i, s.t()),
             rn(4, 3), ids([0, 3, 0]), rn(3, 3))
    add_case("scatter_add_dim1", lambda x, i, s: torch.scatter_add(x, 1, i, s), rn(3, 4),
             ids([[0, 3], [2, 2], [1, 0]]), rn(3, 2))
    add_case("scatter_add_dim0_repeats", lambda x, i, s: torch.scatter_add(x, 0, i, s), rn(3, 4),
             ids([[0, 1, 2, 0], [2, 2, 1, 0]]), rn(2, 4))
    add_case("scatter_add_neg_dim_3d", lambda x, i, s: torch.scatter_add(x, -1, i, s),
             rn(2, 3, 4), ids([[[3, 3], [0, 1], [1, 1]], [[2, 0], [2, 2], [0, 3]]]), rn(2, 3, 2))
    add_case("scatter_add_transposed", lambda x, i, s: torch.scatter_add(x.t(), 0, i, s.t()),
             rn(4, 3), ids([[2, 0, 1, 1], [2, 2, 0, 1]]), rn(4, 2))


def rolls():
    """torch.roll, composed in loom of narrow + cat. Appended after scatter_adds for the same
    reason: the earlier cases' stored tensors stay as they were."""
    add_case("roll_1d", lambda x: torch.roll(x, 2, 0), rn(5))
    add_case("roll_neg_shift", lambda x: torch.roll(x, -1, 1), rn(3, 4))
    add_case("roll_shift_beyond_size", lambda x: torch.roll(x, 9, 1), rn(3, 4))
    add_case("roll_neg_shift_beyond_size", lambda x: torch.roll(x, -10, 0), rn(3, 4))
    add_case("roll_multiple_of_size", lambda x: torch.roll(x, 8, 1), rn(3, 4))
    add_case("roll_neg_dim_3d", lambda x: torch.roll(x, 1, -2), rn(2, 3, 4))
    add_case("roll_two_dims", lambda x: torch.roll(x, (1, -2), (0, 2)), rn(2, 3, 4))
    add_case("roll_same_dim_twice", lambda x: torch.roll(x, (1, 2), (1, 1)), rn(3, 4))
    # Swin's cyclic shift of a [B, H, W, C] feature map by -window_size/2 (Liu et al. 2021, 3.2).
    add_case("roll_swin_cyclic_shift", lambda x: torch.roll(x, (-1, -1), (1, 2)), rn(2, 4, 4, 3))
    add_case("roll_transposed", lambda x: torch.roll(x.t(), 1, 0), rn(4, 3))
    add_case("roll_method", lambda x: x.roll(-1, 0), rn(3, 2))


# Append new families at the end only: each case draws its inputs and weight from one seeded
# stream, so inserting a case earlier would change every later case's stored tensors.
def fused_functions():
    """loom's fused functions against PyTorch's unfused ops: add_layer_norm returns
    (h, layer_norm(h)) with h = x + r; bias_gelu(x, b) is gelu(x + b); linear_activation(x, w,
    b, act) is act(linear(x, w, b))."""
    def add_ln(x, r, w, b, eps=1e-5):
        h = x + r
        return h, F.layer_norm(h, (h.shape[-1],), w, b, eps)
    add_case("add_layer_norm", lambda x, r, w, b: add_ln(x, r, w, b)[1],
             rn(2, 3, 5), rn(2, 3, 5), rn(5), rn(5))
    # Both outputs used, as in a pre-norm block (h also feeds the next residual add).
    add_case("add_layer_norm_both_used",
             lambda x, r, w, b: (lambda h, y: y * 2.0 + h.sin())(*add_ln(x, r, w, b, 1e-3)),
             rn(4, 6) * 3 + 5, rn(4, 6), rn(6), rn(6))
    # loom's bias_gelu / bias_gelu_tanh / bias_relu: the activation of x + bias (a Linear run
    # without its bias, then the activation with the bias added in its kernel).
    add_case("bias_gelu", lambda x, b: F.gelu(x + b), rn(3, 4, 7) * 2, rn(7))
    add_case("bias_gelu_tanh", lambda x, b: F.gelu(x + b, approximate="tanh"), rn(5, 9) * 2, rn(9))
    add_case("bias_relu", lambda x, b: F.relu(x + b), rn(4, 6), rn(6))
    # loom's linear_activation: the activation of a Linear (torch's _addmm_activation).
    add_case("linear_activation_gelu_tanh",
             lambda x, w, b: F.gelu(F.linear(x, w, b), approximate="tanh"),
             rn(2, 3, 5), rn(4, 5), rn(4))
    add_case("linear_activation_relu", lambda x, w, b: F.relu(F.linear(x, w, b)),
             rn(3, 6), rn(5, 6), rn(5))
    add_case("linear_activation_gelu_no_bias", lambda x, w: F.gelu(F.linear(x, w)),
             rn(1, 7), rn(3, 7))


def splits():
    """torch.split and torch.chunk: views of consecutive slices, whose gradients loom joins with
    one cat (a piece left unused gets zeros)."""
    add_case("split_last_piece_smaller",
             lambda x: (lambda a, b, c: torch.cat([a.sin(), c * 3.0], 0))(*torch.split(x, 2, 0)),
             rn(5, 3))
    add_case("split_sizes_neg_dim",
             lambda x: (lambda a, e, b: a.sum(-1, keepdim=True) * b)(
                 *torch.split(x, [3, 0, 4], -1)),
             rn(2, 7))
    add_case("split_transposed",
             lambda x: (lambda a, b: a * b)(*torch.split(x.t(), 2, 0)), rn(3, 4))
    add_case("chunk_fewer_pieces",  # size 5 in 4 chunks: pieces of 2, 2, 1
             lambda x: (lambda a, b, c: torch.cat([a * b, c.exp()], 1))(*torch.chunk(x, 4, 1)),
             rn(3, 5))
    add_case("split_method", lambda x: x.split([1, 2], 0)[1].tanh(), rn(3, 4))
    add_case("chunk_method", lambda x: x.chunk(2, -1)[0] * 2.0, rn(2, 4))
    # nanoGPT's attention: q, k, v from one projection and one split.
    def qkv_attention(x, w, b):
        q, k, v = F.linear(x, w, b).split(4, -1)
        return torch.softmax(q @ k.transpose(-2, -1) / 2.0, -1) @ v
    add_case("split_qkv_attention", qkv_attention, rn(2, 3, 4), rn(12, 4), rn(12))


def fused_softmax():
    """loom's add_softmax(x, bias): softmax(x + bias, -1) with bias broadcast to x, as
    attention adds its mask (a causal or padding mask, Swin's relative position bias)."""
    def add_softmax(x, b):
        return torch.softmax(x + b, -1)
    add_case("add_softmax_row_bias", add_softmax, rn(2, 3, 5), rn(5))
    add_case("add_softmax_causal", add_softmax, rn(2, 2, 4, 4),
             torch.triu(torch.full((4, 4), -math.inf), 1))
    # Swin: a bias [nW, h, N, N] over scores [B, nW, h, N, N].
    add_case("add_softmax_windows", add_softmax, rn(2, 3, 2, 4, 4), rn(3, 2, 4, 4))
    # A key padding mask [B, 1, 1, T] (the bias's last dim 1 is a different case: x + b per row).
    add_case("add_softmax_padding", add_softmax, rn(2, 2, 3, 4),
             torch.tensor([0.0, 0.0, 0.0, -math.inf, 0.0, -math.inf, -math.inf, 0.0])
             .reshape(2, 1, 1, 4))
    add_case("add_softmax_bias_per_row", add_softmax, rn(3, 4), rn(3, 1))


FAMILIES = [elementwise_binary, elementwise_scalar, elementwise_unary, comparison, selection,
            reduction, softmax, matmul, views, indexing, nn_functions, tensor_methods,
            compositions, scatter_adds, rolls, fused_functions, splits, fused_softmax]


def main():
    torch.manual_seed(20240601)
    for family in FAMILIES:
        family()
    path = os.path.join(HERE, "ops.safetensors")
    safetensors_io.save(path, TENSORS, {"generator": "tests/golden/gen_ops.py",
                                        "torch": torch.__version__,
                                        "cases": str(len(CASES))})
    print(f"wrote {len(CASES)} cases, {len(TENSORS)} tensors, {os.path.getsize(path)} bytes "
          f"to {path}")


if __name__ == "__main__":
    main()
