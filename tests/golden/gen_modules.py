#!/usr/bin/python3
"""Golden values from PyTorch for the modules and functional ops a PyTorch user reaches for:
activations, Flatten/Unflatten, Conv1d, Conv2d with rectangular sizes, dilation and groups,
ConvTranspose2d, the pooling layers, BatchNorm1d, GroupNorm, RMSNorm, a Sequential of them, pad,
interpolate and the losses beyond gen_nn.py's (nll_loss, kl_div, weighted BCE, cosine similarity,
normalize).

The layout of every case is gen_nn.py's (its `case` helper writes <case>.state.<name>,
<case>.in<i>, <case>.out, <case>.dout, <case>.grad.in<i> and <case>.grad.<parameter>); the C++
tests (tests/nn/test_modules.cpp) read this file beside nn.safetensors through nn_golden.h, so
case names differ from gen_nn.py's.

Writes tests/golden/modules.safetensors.
Run: /usr/bin/python3 tests/golden/gen_modules.py   (from anywhere)
"""

import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import gen_nn  # noqa: E402  (case, perturb and the TENSORS they fill)
from gen_nn import case, perturb, put  # noqa: E402
from safetensors_io import save  # noqa: E402


class RMSNorm(nn.Module):
    """torch.nn.RMSNorm (PyTorch >= 2.4; this is 1.13): x / sqrt(mean(x^2) + eps) * weight."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def gen_activations():
    x = torch.randn(3, 4) * 2
    case("act_silu", None, [x], nn.SiLU())
    case("act_sigmoid", None, [x], nn.Sigmoid())
    case("act_tanh", None, [x], nn.Tanh())
    case("act_softmax", None, [torch.randn(2, 3, 4)], nn.Softmax(dim=1))
    case("act_leaky_relu", None, [x], nn.LeakyReLU(0.2))
    case("flatten", None, [torch.randn(2, 3, 2, 2)], nn.Flatten())
    case("flatten_mid", None, [torch.randn(2, 3, 2, 2)], nn.Flatten(1, 2))
    case("unflatten", None, [torch.randn(2, 12)], nn.Unflatten(1, (3, 4)))


def gen_conv():
    conv1 = perturb(nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2))
    case("conv1d", conv1, [torch.randn(2, 4, 11)], conv1)
    conv = perturb(nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2),
                             groups=2))
    case("conv2d_rect", conv, [torch.randn(2, 4, 7, 8)], conv)
    depthwise = perturb(nn.Conv2d(3, 6, 3, padding=1, groups=3, bias=False))
    case("conv2d_depthwise", depthwise, [torch.randn(1, 3, 5, 4)], depthwise)
    up = perturb(nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2))
    case("conv_transpose2d", up, [torch.randn(2, 4, 4, 5)], up)
    up2 = perturb(nn.ConvTranspose2d(3, 2, (2, 3), stride=(1, 2), padding=(0, 1), bias=False,
                                     dilation=2))
    case("conv_transpose2d_dilated", up2, [torch.randn(1, 3, 3, 4)], up2)


def gen_pooling():
    x = torch.randn(2, 3, 7, 6)
    case("max_pool_rect", None, [x], nn.MaxPool2d((3, 2), stride=(2, 1), padding=(1, 0)))
    case("avg_pool", None, [x], nn.AvgPool2d(3, stride=2, padding=1))
    case("avg_pool_rect", None, [x], nn.AvgPool2d((2, 3)))
    case("adaptive_avg_pool2d", None, [torch.randn(2, 3, 7, 10)], nn.AdaptiveAvgPool2d((3, 4)))
    case("adaptive_avg_pool1d", None, [torch.randn(2, 3, 10)], nn.AdaptiveAvgPool1d(4))


def gen_norms():
    for name, shape in [("batch_norm1d_2d", (5, 4)), ("batch_norm1d_3d", (3, 4, 6))]:
        bn = perturb(nn.BatchNorm1d(4))
        case(name, bn, [torch.randn(*shape) * 2 + 0.5], bn)
        for key, t in bn.state_dict().items():
            put(f"{name}.state_after.{key}", t)
    bn = perturb(nn.BatchNorm1d(4))
    with torch.no_grad():
        bn.running_mean.copy_(torch.randn(4) * 0.1)
        bn.running_var.copy_(torch.rand(4) + 0.5)
    bn.eval()
    case("batch_norm1d_eval", bn, [torch.randn(3, 4, 2)], bn)
    gn = perturb(nn.GroupNorm(2, 6))
    case("group_norm", gn, [torch.randn(2, 6, 3, 4) * 2 + 1], gn)
    gn3 = perturb(nn.GroupNorm(3, 3, eps=1e-3, affine=False))
    case("group_norm_3d", gn3, [torch.randn(2, 3, 5)], gn3)
    rms = perturb(RMSNorm(5))
    case("rms_norm", rms, [torch.randn(2, 3, 5)], rms)


def gen_sequential():
    # A small CNN classifier as one Sequential: its parameters are "0.weight", "1.weight", ...
    net = perturb(nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1), nn.GroupNorm(2, 4), nn.SiLU(), nn.AvgPool2d(2),
        nn.Conv2d(4, 4, (1, 3), padding=(0, 1), groups=2), nn.BatchNorm2d(4), nn.Tanh(),
        nn.AdaptiveAvgPool2d((2, 1)), nn.Flatten(), nn.Linear(8, 6), nn.LeakyReLU(0.1),
        nn.Unflatten(1, (2, 3)), nn.Softmax(dim=-1), nn.Identity()))
    case("sequential", net, [torch.randn(3, 2, 6, 5)], net)


def gen_functional():
    x = torch.randn(1, 2, 4, 5)
    case("pad_constant", None, [x], lambda t: F.pad(t, (1, 2, 2, 1), value=0.5))
    case("pad_constant_crop", None, [torch.randn(2, 3, 6)], lambda t: F.pad(t, (-1, 3, 1, -2)))
    case("pad_reflect", None, [x], lambda t: F.pad(t, (1, 3, 2, 1), mode="reflect"))
    case("pad_replicate", None, [x], lambda t: F.pad(t, (2, 3, 3, 1), mode="replicate"))
    case("pad_circular", None, [x], lambda t: F.pad(t, (1, 4, 2, 1), mode="circular"))
    case("pad_reflect_1d", None, [torch.randn(2, 3, 5)], lambda t: F.pad(t, (2, 2), mode="reflect"))

    img = torch.randn(1, 2, 4, 6)
    case("interp_nearest", None, [img], lambda t: F.interpolate(t, size=(7, 5), mode="nearest"))
    case("interp_nearest_scale", None, [img],
         lambda t: F.interpolate(t, scale_factor=(2.0, 1.5), mode="nearest"))
    case("interp_bilinear", None, [img],
         lambda t: F.interpolate(t, size=(7, 9), mode="bilinear", align_corners=False))
    case("interp_bilinear_corners", None, [img],
         lambda t: F.interpolate(t, size=(7, 9), mode="bilinear", align_corners=True))
    case("interp_bilinear_down", None, [img],
         lambda t: F.interpolate(t, size=(3, 4), mode="bilinear", align_corners=False))
    case("interp_bilinear_scale", None, [img],
         lambda t: F.interpolate(t, scale_factor=(1.5, 2.0), mode="bilinear"))
    case("interp_linear", None, [torch.randn(2, 3, 5)],
         lambda t: F.interpolate(t, size=8, mode="linear", align_corners=False))


def gen_losses():
    # Class weights are constants (PyTorch does not differentiate them): stored as
    # <case>.weight / <case>.pos_weight beside the inputs.
    logits, target = torch.randn(3, 4) * 2, torch.rand(3, 4)
    weight, pos_weight = torch.rand(3, 4) + 0.5, torch.rand(4) * 2 + 0.5
    put("bce_weighted.weight", weight)
    put("bce_weighted.pos_weight", pos_weight)
    case("bce_weighted", None, [logits, target],
         lambda x, y: F.binary_cross_entropy_with_logits(x, y, weight=weight,
                                                          pos_weight=pos_weight))
    put("bce_pos_weight_sum.pos_weight", pos_weight)
    case("bce_pos_weight_sum", None, [logits, target],
         lambda x, y: F.binary_cross_entropy_with_logits(x, y, pos_weight=pos_weight,
                                                          reduction="sum"))

    log_probs = F.log_softmax(torch.randn(6, 5), dim=1)
    labels = torch.tensor([0, 4, -100, 2, 2, 1])
    class_weight = torch.rand(5) + 0.5
    case("nll", None, [log_probs, labels], lambda x, t: F.nll_loss(x, t))
    put("nll_weighted.weight", class_weight)
    case("nll_weighted", None, [log_probs, labels],
         lambda x, t: F.nll_loss(x, t, weight=class_weight))
    case("nll_ignore_sum", None, [log_probs, labels.clamp(min=0)],
         lambda x, t: F.nll_loss(x, t, ignore_index=2, reduction="sum"))
    log_probs3 = F.log_softmax(torch.randn(2, 4, 3), dim=1)
    labels3 = torch.tensor([[1, 0, 3], [3, -100, 2]])
    put("nll_3d_none.weight", class_weight[:4])
    case("nll_3d_none", None, [log_probs3, labels3],
         lambda x, t: F.nll_loss(x, t, weight=class_weight[:4], reduction="none"))

    q = F.log_softmax(torch.randn(3, 5), dim=1)
    p = F.softmax(torch.randn(3, 5), dim=1)
    case("kl_div_batchmean", None, [q, p], lambda x, t: F.kl_div(x, t, reduction="batchmean"))
    case("kl_div_mean", None, [q, p], lambda x, t: F.kl_div(x, t))
    case("kl_div_log_target", None, [q, p.log()],
         lambda x, t: F.kl_div(x, t, reduction="sum", log_target=True))

    a, b = torch.randn(3, 4, 2), torch.randn(3, 4, 2)
    case("cosine_similarity", None, [a, b], lambda x, y: F.cosine_similarity(x, y))
    case("cosine_similarity_broadcast", None, [a, torch.randn(4, 1)],
         lambda x, y: F.cosine_similarity(x, y, dim=-2))
    case("normalize", None, [a], lambda x: F.normalize(x))
    case("normalize_p1", None, [a], lambda x: F.normalize(x, p=1.0, dim=-1))


def main():
    # kl_div's note that reduction="mean" is not the KL divergence: the case pins that down.
    warnings.filterwarnings("ignore", message="reduction: 'mean' divides")
    torch.manual_seed(0)
    gen_activations()
    gen_conv()
    gen_pooling()
    gen_norms()
    gen_sequential()
    gen_functional()
    gen_losses()
    save(os.path.join(HERE, "modules.safetensors"), gen_nn.TENSORS)
    print(f"wrote {len(gen_nn.TENSORS)} tensors to modules.safetensors")


if __name__ == "__main__":
    main()
