#!/usr/bin/python3
"""Golden values from PyTorch for tests/nn: every layer's output and gradients, every loss.

Each case builds a PyTorch module (or loss), perturbs its default parameters so that no weight
is a trivial 0 or 1, runs it on random inputs, back-propagates a random cotangent `dout` and
writes, under the case's prefix:
    <case>.state.<name>     the module's state_dict() before the forward (loom loads this with
                            nn::load_state_dict, so the names must match PyTorch's exactly)
    <case>.in<i>            the inputs (int64 for ids, targets and boolean masks, where nonzero
                            means True: loom has no bool dtype)
    <case>.out              the output; <case>.weights for attention weights where asked
    <case>.dout             the cotangent: the C++ test calls out.backward(dout)
    <case>.grad.in<i>       d(out . dout)/d input i, for the float inputs
    <case>.grad.<name>      d(out . dout)/d parameter <name>
Module reprs (the text PyTorch prints for a module tree) go into the file's metadata.

Writes tests/golden/nn.safetensors and tests/golden/nn_state_dict.safetensors (the state_dict of
a small PyTorch model that loom must load as a checkpoint; its input and output are in
nn.safetensors under "state_dict.*").

Run: /usr/bin/python3 tests/golden/gen_nn.py   (from anywhere)
"""

import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from safetensors_io import save  # noqa: E402

TENSORS = {}
METADATA = {}


def put(name, t):
    assert name not in TENSORS, name
    TENSORS[name] = t.detach().clone().contiguous()


def perturb(module):
    """Adds N(0, 0.1^2) noise to every parameter (zero biases, unit norm gains become generic)."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return module


def case(prefix, module, inputs, run, extra=None):
    """Records state, inputs, output, cotangent and gradients of out = run(*inputs).

    `run` may return (out, {name: tensor}) to record extra outputs such as attention weights.
    Inputs that are int64 or bool are stored as int64 and get no gradient."""
    if module is not None:
        for name, t in module.state_dict().items():
            put(f"{prefix}.state.{name}", t)
    leaves = []
    for i, x in enumerate(inputs):
        if x.dtype == torch.bool:
            put(f"{prefix}.in{i}", x.to(torch.int64))
            leaves.append(x)
        elif x.is_floating_point():
            leaf = x.detach().clone().requires_grad_(True)
            put(f"{prefix}.in{i}", leaf)
            leaves.append(leaf)
        else:
            put(f"{prefix}.in{i}", x)
            leaves.append(x)
    result = run(*leaves)
    out, extras = result if isinstance(result, tuple) else (result, {})
    dout = torch.randn_like(out)
    out.backward(dout)
    put(f"{prefix}.out", out)
    put(f"{prefix}.dout", dout)
    for name, t in extras.items():
        put(f"{prefix}.{name}", t)
    for i, leaf in enumerate(leaves):
        if leaf.is_floating_point() and leaf.grad is not None:
            put(f"{prefix}.grad.in{i}", leaf.grad)
    if module is not None:
        for name, p in module.named_parameters():
            if p.grad is not None:
                put(f"{prefix}.grad.{name}", p.grad)


def causal(n):
    """Float mask with -inf above the diagonal (nn.Transformer.generate_square_subsequent_mask)."""
    return torch.triu(torch.full((n, n), float("-inf")), diagonal=1)


def padding(batch, length, padded):
    """Bool key-padding mask [batch, length]: the last padded[b] keys of sequence b are padding."""
    mask = torch.zeros(batch, length, dtype=torch.bool)
    for b, n in enumerate(padded):
        if n:
            mask[b, length - n:] = True
    return mask


# ------------------------------------------------------------------------------ basic layers
def gen_basic_layers():
    lin = perturb(nn.Linear(5, 4))
    case("linear", lin, [torch.randn(2, 3, 5)], lin)
    lin_nb = perturb(nn.Linear(5, 3, bias=False))
    case("linear_nobias", lin_nb, [torch.randn(4, 5)], lin_nb)
    emb = nn.Embedding(10, 4)
    case("embedding", emb, [torch.tensor([[1, 3, 3], [9, 0, 1]])], emb)
    ln = perturb(nn.LayerNorm(6))
    case("layer_norm", ln, [torch.randn(2, 3, 6) * 2 + 1], ln)
    ln_eps = perturb(nn.LayerNorm(6, eps=1e-3))
    case("layer_norm_eps", ln_eps, [torch.randn(4, 6) * 0.05], ln_eps)


class FeedForward(nn.Module):
    """loom's nn::FeedForward in PyTorch terms (the feed-forward half of TransformerEncoderLayer)."""

    def __init__(self, d_model, dim_feedforward, activation):
        super().__init__()
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.dropout = nn.Dropout(0.0)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.activation = activation

    def forward(self, x):
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


def gen_feed_forward():
    ff = perturb(FeedForward(6, 12, F.gelu))
    case("feed_forward_gelu", ff, [torch.randn(2, 3, 6)], ff)
    ff = perturb(FeedForward(6, 12, F.relu))
    case("feed_forward_relu", ff, [torch.randn(2, 3, 6)], ff)


def gen_positional_encoding():
    # Vaswani et al. 2017, section 3.5, evaluated in float64 straight from the formula.
    max_len, d = 50, 16
    pe = torch.zeros(max_len, d, dtype=torch.float64)
    for pos in range(max_len):
        for i in range(0, d, 2):
            angle = pos / (10000.0 ** (i / d))
            pe[pos, i] = math.sin(angle)
            pe[pos, i + 1] = math.cos(angle)
    put("sinusoidal.table", pe.float())


# ------------------------------------------------------------------------------ attention
def gen_attention():
    d, heads = 8, 2
    # Self-attention: causal float mask plus a key-padding mask, averaged weights.
    mha = perturb(nn.MultiheadAttention(d, heads, batch_first=True))
    x = torch.randn(2, 5, d)

    def self_attn(x, mask, kpm):
        out, w = mha(x, x, x, attn_mask=mask, key_padding_mask=kpm, need_weights=True)
        return out, {"weights": w}
    case("mha_self", mha, [x, causal(5), padding(2, 5, [0, 2])], self_attn)

    # Cross-attention with distinct key and value and a per-head float mask [B*heads, T_q, T_k];
    # per-head weights.
    mha = perturb(nn.MultiheadAttention(d, heads, batch_first=True))

    def cross_attn(q, k, v, mask):
        out, w = mha(q, k, v, attn_mask=mask, need_weights=True, average_attn_weights=False)
        return out, {"weights": w}
    case("mha_cross", mha,
         [torch.randn(2, 3, d), torch.randn(2, 5, d), torch.randn(2, 5, d),
          torch.randn(2 * heads, 3, 5)], cross_attn)

    # Key and value the same tensor (memory of a decoder), boolean attn_mask [T_q, T_k].
    mha = perturb(nn.MultiheadAttention(d, heads, batch_first=True))
    block = torch.tensor([[0, 0, 1, 0, 1], [1, 0, 0, 0, 0], [0, 1, 1, 1, 0]], dtype=torch.bool)

    def memory_attn(q, memory, mask):
        return mha(q, memory, memory, attn_mask=mask, need_weights=False)[0]
    case("mha_memory", mha, [torch.randn(2, 3, d), torch.randn(2, 5, d), block], memory_attn)


def gen_transformer_layers():
    d, heads, ff = 8, 2, 16
    for norm_first, act, tag in [(False, "relu", "post"), (True, "gelu", "pre")]:
        enc = perturb(nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation=act,
                                                 batch_first=True, norm_first=norm_first))

        def run_enc(src, mask, kpm, enc=enc):
            return enc(src, src_mask=mask, src_key_padding_mask=kpm)
        case(f"encoder_{tag}", enc, [torch.randn(2, 4, d), causal(4), padding(2, 4, [1, 0])],
             run_enc)

        dec = perturb(nn.TransformerDecoderLayer(d, heads, ff, dropout=0.0, activation=act,
                                                 batch_first=True, norm_first=norm_first))

        def run_dec(tgt, memory, tgt_mask, mem_kpm, dec=dec):
            return dec(tgt, memory, tgt_mask=tgt_mask, memory_key_padding_mask=mem_kpm)
        case(f"decoder_{tag}", dec,
             [torch.randn(2, 4, d), torch.randn(2, 5, d), causal(4), padding(2, 5, [0, 2])],
             run_dec)


def gen_more_masks():
    """Cases added later; generated last so the random draws of the cases above stay the same."""
    d, heads, ff = 8, 2, 16
    # Decoder with every mask: causal tgt_mask, boolean memory_mask [T, S] (no row fully
    # blocked), tgt and memory key padding.
    memory_mask = torch.tensor([[0, 1, 0, 0, 0], [0, 0, 1, 1, 0], [1, 0, 0, 0, 0],
                                [0, 0, 0, 0, 1]], dtype=torch.bool)
    for norm_first, act, tag in [(False, "relu", "post"), (True, "gelu", "pre")]:
        dec = perturb(nn.TransformerDecoderLayer(d, heads, ff, dropout=0.0, activation=act,
                                                 batch_first=True, norm_first=norm_first))

        def run_dec(tgt, memory, tgt_mask, mem_mask, tgt_kpm, mem_kpm, dec=dec):
            return dec(tgt, memory, tgt_mask=tgt_mask, memory_mask=mem_mask,
                       tgt_key_padding_mask=tgt_kpm, memory_key_padding_mask=mem_kpm)
        case(f"decoder_all_masks_{tag}", dec,
             [torch.randn(2, 4, d), torch.randn(2, 5, d), causal(4), memory_mask,
              padding(2, 4, [0, 1]), padding(2, 5, [1, 0])], run_dec)
    # MultiheadAttention without biases (bias=False): in_proj_weight and out_proj.weight only.
    mha = perturb(nn.MultiheadAttention(d, heads, bias=False, batch_first=True))

    def self_attn(x):
        return mha(x, x, x, need_weights=False)[0]
    case("mha_nobias", mha, [torch.randn(2, 4, d)], self_attn)


# ------------------------------------------------------------------------------ convolution
def gen_conv():
    conv = perturb(nn.Conv2d(3, 4, 3, stride=2, padding=1))
    case("conv_strided", conv, [torch.randn(2, 3, 7, 6)], conv)
    conv = perturb(nn.Conv2d(2, 3, 2, bias=False))
    case("conv_nobias", conv, [torch.randn(1, 2, 5, 5)], conv)
    case("max_pool", None, [torch.randn(2, 3, 6, 6)], lambda x: F.max_pool2d(x, 2))
    case("max_pool_padded", None, [torch.randn(1, 2, 7, 7)],
         lambda x: F.max_pool2d(x, 3, stride=2, padding=1))

    # BatchNorm2d: a training step (batch statistics, running statistics updated) ...
    bn = perturb(nn.BatchNorm2d(4))
    case("batch_norm_train", bn, [torch.randn(3, 4, 5, 5) * 2 + 0.5], bn)
    for name, t in bn.state_dict().items():
        put(f"batch_norm_train.state_after.{name}", t)
    # ... then evaluation with the running statistics.
    bn.eval()
    bn.zero_grad()
    case("batch_norm_eval", bn, [torch.randn(2, 4, 3, 3)], bn)


# ------------------------------------------------------------------------------ losses
def box_cxcywh_to_xyxy(b):
    cx, cy, w, h = b.unbind(-1)
    return torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], dim=-1)


def box_area(b):
    return (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])


def box_iou(a, b):
    """DETR util/box_ops.py."""
    area1, area2 = box_area(a), box_area(b)
    lt = torch.max(a[:, None, :2], b[:, :2])
    rb = torch.min(a[:, None, 2:], b[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area1[:, None] + area2 - inter
    return inter / union, union


def generalized_box_iou(a, b):
    """DETR util/box_ops.py."""
    iou, union = box_iou(a, b)
    lt = torch.min(a[:, None, :2], b[:, :2])
    rb = torch.max(a[:, None, 2:], b[:, 2:])
    wh = (rb - lt).clamp(min=0)
    area = wh[:, :, 0] * wh[:, :, 1]
    return iou - (area - union) / area


def random_boxes(n):
    centre = torch.rand(n, 2)
    size = torch.rand(n, 2) * 0.5 + 0.1
    return box_cxcywh_to_xyxy(torch.cat([centre, size], dim=-1))


def gen_losses():
    logits = torch.randn(6, 5) * 2
    target = torch.tensor([0, 4, -100, 2, 2, 1])
    case("ce", None, [logits, target], lambda x, t: F.cross_entropy(x, t))
    case("ce_smooth", None, [logits, target],
         lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1))
    # [B, T, C] logits with [B, T] targets, a custom ignore_index and smoothing.
    logits3 = torch.randn(2, 3, 5)
    target3 = torch.tensor([[1, 0, 4], [3, 1, 2]])
    case("ce_3d", None, [logits3, target3],
         lambda x, t: F.cross_entropy(x.reshape(-1, 5), t.reshape(-1), ignore_index=1,
                                      label_smoothing=0.2))

    a, b = torch.randn(3, 4), torch.randn(3, 4)
    for reduction in ["mean", "sum", "none"]:
        case(f"mse_{reduction}", None, [a, b],
             lambda x, y, r=reduction: F.mse_loss(x, y, reduction=r))
        case(f"l1_{reduction}", None, [a, b],
             lambda x, y, r=reduction: F.l1_loss(x, y, reduction=r))
        case(f"smooth_l1_{reduction}", None, [a, b],
             lambda x, y, r=reduction: F.smooth_l1_loss(x, y, reduction=r))
        case(f"bce_{reduction}", None, [a * 3, torch.rand(3, 4)],
             lambda x, y, r=reduction: F.binary_cross_entropy_with_logits(x, y, reduction=r))
    case("smooth_l1_beta", None, [a, b],
         lambda x, y: F.smooth_l1_loss(x, y, beta=0.5))

    boxes1, boxes2 = random_boxes(3), random_boxes(2)
    case("giou", None, [boxes1, boxes2], generalized_box_iou)
    case("box_iou", None, [boxes1, boxes2], lambda x, y: box_iou(x, y)[0])
    boxes3 = random_boxes(3)
    case("giou_loss", None, [boxes1, boxes3],
         lambda x, y: (1 - torch.diag(generalized_box_iou(x, y))).mean())


# ------------------------------------------------------------------------------ module trees
class Net(nn.Module):
    """A tree with a ModuleList, for the printing test (tests/nn/test_module.cpp builds the same)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4, bias=False)])
        self.norm = nn.LayerNorm(4, eps=1e-6)


def gen_reprs():
    mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.LayerNorm(8), nn.Dropout(0.1),
                        nn.Linear(8, 2, bias=False), nn.GELU())
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Conv2d(8, 4, 3, stride=2, bias=False))
    net = Net()
    for name, module in [("mlp", mlp), ("cnn", cnn), ("net", net)]:
        METADATA[f"repr.{name}"] = repr(module)
        METADATA[f"num_parameters.{name}"] = str(sum(p.numel() for p in module.parameters()))
        METADATA[f"names.{name}"] = ",".join(n for n, _ in module.named_parameters())


# ------------------------------------------------------------------------------ a PyTorch checkpoint
class Tiny(nn.Module):
    """Conv, batch norm (with trained running statistics), linear, layer norm and attention: the
    checkpoint loom must load directly (tests/nn/test_checkpoint.cpp builds the same model)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1)
        self.bn = nn.BatchNorm2d(2)
        self.proj = nn.Linear(8, 4)
        self.norm = nn.LayerNorm(4)
        self.attn = nn.MultiheadAttention(4, 2, batch_first=True)

    def forward(self, x):                                    # x [2, 1, 4, 4]
        h = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)  # [2, 2, 2, 2]
        h = self.norm(self.proj(h.flatten(1)))              # [2, 4]
        h = h.unsqueeze(0)                                   # [1, 2, 4]
        return self.attn(h, h, h, need_weights=False)[0]    # [1, 2, 4]


def gen_state_dict():
    model = perturb(Tiny())
    with torch.no_grad():
        for _ in range(2):              # two training batches move the running statistics
            model(torch.randn(2, 1, 4, 4))
        model.eval()
        x = torch.randn(2, 1, 4, 4)
        put("state_dict.in0", x)
        put("state_dict.out", model(x))
    save(os.path.join(HERE, "nn_state_dict.safetensors"), model.state_dict(),
         metadata={"format": "pt"})


def main():
    torch.manual_seed(0)
    gen_basic_layers()
    gen_feed_forward()
    gen_positional_encoding()
    gen_attention()
    gen_transformer_layers()
    gen_conv()
    gen_losses()
    gen_reprs()
    gen_state_dict()
    gen_more_masks()
    save(os.path.join(HERE, "nn.safetensors"), TENSORS, metadata=METADATA)
    print(f"wrote {len(TENSORS)} tensors to nn.safetensors")


if __name__ == "__main__":
    main()
