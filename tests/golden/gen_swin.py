#!/usr/bin/python3
"""Golden Swin Transformer values from PyTorch for tests/nn/test_swin_layers.cpp and
tests/models/test_swin.cpp.

The model is the official one (microsoft/Swin-Transformer, models/swin_transformer.py: patch_norm
on, no absolute position embedding), reduced to what loom's Swin covers and copied here so the
script stands alone; names, buffers and semantics are the official ones. CONFIG is tiny but
exercises every rule: 16x16x2 images, patch 2 -> an 8x8 map, window 4, so stage 0 (8x8) has a
shifted block (shift 2) and stage 1 (4x4 <= window) uses one 4x4 window without shift, with
PatchMerging between them.

Writes next to this script:

swin_official.safetensors — the model's state_dict exactly as the official code saves it,
    WITH the buffers layers.I.blocks.J.attn.relative_position_index (int64) and
    layers.0.blocks.1.attn_mask (float), as nn::load must read it.
swin.safetensors — goldens:
    images [B, 2, 16, 16], logits [B, 3] (eval mode), targets int64 [B], loss [],
    grad.<name>                d loss / d parameter (eval mode), every parameter
    window.x [2, 8, 8, 3], window.partition [8, 16, 3] (window 4), window.reverse = window.x
    window.relative_position_index int64 [16, 16] (window 4)
    window.mask [4, 16, 16]    the shifted-window mask of layers.0.blocks.1 (8x8, w 4, shift 2)
    window.mask_6_3_1 [4, 9, 9] shifted_window_mask(6, 6, window 3, shift 1)
    merge.x [2, 64, 8], merge.out [2, 16, 16]   layers.0.downsample on a random input
    drop_path.x [4, 3, 5], drop_path.eval = drop_path.x (DropPath(0.5) in eval mode)
    count.swin-fmnist, count.swin-t  int64 []   parameter counts of bench/reference/models.py's
                                               Swin() and the official Swin-T
Parameters are drawn larger than the official init (and LayerNorm gains and biases away from
1 and 0) so that every one of them matters to the logits. Model in float64, saved as float32.

Run: /usr/bin/python3 tests/golden/gen_swin.py   (from anywhere)
"""

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from safetensors_io import save  # noqa: E402

CONFIG = dict(img_size=16, patch_size=2, in_chans=2, num_classes=3, embed_dim=8, depths=(2, 2),
              num_heads=(2, 4), window_size=4, mlp_ratio=4.0, drop_path_rate=0.1)
B = 2


# ----------------------------------------------------------------------------- official Swin
def drop_path(x, drop_prob=0.0, training=False):
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    return x * random_tensor.div_(keep_prob)


class DropPath(nn.Module):
    def __init__(self, drop_prob=0.0):
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training)


class Mlp(nn.Module):
    def __init__(self, in_features, hidden_features):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_features, in_features)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def window_partition(x, window_size):
    B, H, W, C = x.shape
    x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)


def window_reverse(windows, window_size, H, W):
    B = int(windows.shape[0] / (H * W / window_size / window_size))
    x = windows.view(B, H // window_size, W // window_size, window_size, window_size, -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)


class WindowAttention(nn.Module):
    def __init__(self, dim, window_size, num_heads):
        super().__init__()
        self.dim, self.window_size, self.num_heads = dim, window_size, num_heads
        head_dim = dim // num_heads
        self.scale = head_dim ** -0.5
        self.relative_position_bias_table = nn.Parameter(
            torch.zeros((2 * window_size[0] - 1) * (2 * window_size[1] - 1), num_heads))
        coords_h = torch.arange(self.window_size[0])
        coords_w = torch.arange(self.window_size[1])
        coords = torch.stack(torch.meshgrid([coords_h, coords_w], indexing="ij"))
        coords_flatten = torch.flatten(coords, 1)
        relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]
        relative_coords = relative_coords.permute(1, 2, 0).contiguous()
        relative_coords[:, :, 0] += self.window_size[0] - 1
        relative_coords[:, :, 1] += self.window_size[1] - 1
        relative_coords[:, :, 0] *= 2 * self.window_size[1] - 1
        relative_position_index = relative_coords.sum(-1)
        self.register_buffer("relative_position_index", relative_position_index)
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x, mask=None):
        B_, N, C = x.shape
        qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, C // self.num_heads)
        qkv = qkv.permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        relative_position_bias = self.relative_position_bias_table[
            self.relative_position_index.view(-1)].view(
            self.window_size[0] * self.window_size[1], self.window_size[0] * self.window_size[1],
            -1)
        relative_position_bias = relative_position_bias.permute(2, 0, 1).contiguous()
        attn = attn + relative_position_bias.unsqueeze(0)
        if mask is not None:
            nW = mask.shape[0]
            attn = attn.view(B_ // nW, nW, self.num_heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, N, N)
        attn = self.softmax(attn)
        x = (attn @ v).transpose(1, 2).reshape(B_, N, C)
        return self.proj(x)


def shifted_window_mask(H, W, window_size, shift_size):
    img_mask = torch.zeros((1, H, W, 1))
    h_slices = (slice(0, -window_size), slice(-window_size, -shift_size),
                slice(-shift_size, None))
    w_slices = (slice(0, -window_size), slice(-window_size, -shift_size),
                slice(-shift_size, None))
    cnt = 0
    for h in h_slices:
        for w in w_slices:
            img_mask[:, h, w, :] = cnt
            cnt += 1
    mask_windows = window_partition(img_mask, window_size)
    mask_windows = mask_windows.view(-1, window_size * window_size)
    attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
    return attn_mask.masked_fill(attn_mask != 0, float(-100.0)).masked_fill(attn_mask == 0,
                                                                           float(0.0))


class SwinTransformerBlock(nn.Module):
    def __init__(self, dim, input_resolution, num_heads, window_size=7, shift_size=0,
                 mlp_ratio=4.0, drop_path=0.0):
        super().__init__()
        self.dim, self.input_resolution = dim, input_resolution
        self.window_size, self.shift_size = window_size, shift_size
        if min(self.input_resolution) <= self.window_size:
            self.shift_size = 0
            self.window_size = min(self.input_resolution)
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, window_size=(self.window_size, self.window_size),
                                    num_heads=num_heads)
        self.drop_path = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        attn_mask = None
        if self.shift_size > 0:
            H, W = self.input_resolution
            attn_mask = shifted_window_mask(H, W, self.window_size, self.shift_size)
        self.register_buffer("attn_mask", attn_mask)

    def forward(self, x):
        H, W = self.input_resolution
        B, L, C = x.shape
        shortcut = x
        x = self.norm1(x).view(B, H, W, C)
        if self.shift_size > 0:
            x = torch.roll(x, shifts=(-self.shift_size, -self.shift_size), dims=(1, 2))
        x_windows = window_partition(x, self.window_size).view(-1, self.window_size ** 2, C)
        attn_windows = self.attn(x_windows, mask=self.attn_mask)
        attn_windows = attn_windows.view(-1, self.window_size, self.window_size, C)
        x = window_reverse(attn_windows, self.window_size, H, W)
        if self.shift_size > 0:
            x = torch.roll(x, shifts=(self.shift_size, self.shift_size), dims=(1, 2))
        x = shortcut + self.drop_path(x.view(B, H * W, C))
        return x + self.drop_path(self.mlp(self.norm2(x)))


class PatchMerging(nn.Module):
    def __init__(self, input_resolution, dim):
        super().__init__()
        self.input_resolution, self.dim = input_resolution, dim
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = nn.LayerNorm(4 * dim)

    def forward(self, x):
        H, W = self.input_resolution
        B, L, C = x.shape
        x = x.view(B, H, W, C)
        x0 = x[:, 0::2, 0::2, :]
        x1 = x[:, 1::2, 0::2, :]
        x2 = x[:, 0::2, 1::2, :]
        x3 = x[:, 1::2, 1::2, :]
        x = torch.cat([x0, x1, x2, x3], -1).view(B, -1, 4 * C)
        return self.reduction(self.norm(x))


class BasicLayer(nn.Module):
    def __init__(self, dim, input_resolution, depth, num_heads, window_size, mlp_ratio,
                 drop_path, downsample):
        super().__init__()
        self.blocks = nn.ModuleList([
            SwinTransformerBlock(dim, input_resolution, num_heads, window_size,
                                 0 if (i % 2 == 0) else window_size // 2, mlp_ratio,
                                 drop_path[i]) for i in range(depth)])
        self.downsample = downsample(input_resolution, dim) if downsample is not None else None

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return self.downsample(x) if self.downsample is not None else x


class PatchEmbed(nn.Module):
    def __init__(self, img_size, patch_size, in_chans, embed_dim):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x):
        return self.norm(self.proj(x).flatten(2).transpose(1, 2))


class SwinTransformer(nn.Module):
    def __init__(self, img_size, patch_size, in_chans, num_classes, embed_dim, depths, num_heads,
                 window_size, mlp_ratio, drop_path_rate):
        super().__init__()
        self.num_layers = len(depths)
        self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim)
        res = img_size // patch_size
        dpr = [x.item() for x in torch.linspace(0, drop_path_rate, sum(depths))]
        self.layers = nn.ModuleList()
        for i in range(self.num_layers):
            self.layers.append(BasicLayer(
                int(embed_dim * 2 ** i), (res // 2 ** i, res // 2 ** i), depths[i], num_heads[i],
                window_size, mlp_ratio, dpr[sum(depths[:i]):sum(depths[:i + 1])],
                PatchMerging if i < self.num_layers - 1 else None))
        self.num_features = int(embed_dim * 2 ** (self.num_layers - 1))
        self.norm = nn.LayerNorm(self.num_features)
        self.avgpool = nn.AdaptiveAvgPool1d(1)
        self.head = nn.Linear(self.num_features, num_classes)

    def forward(self, x):
        x = self.patch_embed(x)
        for layer in self.layers:
            x = layer(x)
        x = self.avgpool(self.norm(x).transpose(1, 2))
        return self.head(torch.flatten(x, 1))


# ----------------------------------------------------------------------------- goldens
def count(model):
    return torch.tensor(sum(p.numel() for p in model.parameters()), dtype=torch.int64)


def main():
    torch.manual_seed(0)
    model = SwinTransformer(**CONFIG).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or ".norm1.weight" in name or ".norm2.weight" in name:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            else:
                p.copy_(0.3 * torch.randn_like(p))
    model.eval()
    f32 = lambda t: t.detach().float().contiguous()  # noqa: E731

    images = torch.randn(B, CONFIG["in_chans"], CONFIG["img_size"], CONFIG["img_size"],
                         dtype=torch.float64)
    targets = torch.tensor([2, 0], dtype=torch.int64)
    logits = model(images)
    loss = F.cross_entropy(logits, targets)
    loss.backward()

    state = {k: (v if v.dtype == torch.int64 else f32(v)) for k, v in model.state_dict().items()}
    assert "layers.0.blocks.1.attn_mask" in state
    assert "layers.0.blocks.0.attn.relative_position_index" in state
    save(os.path.join(HERE, "swin_official.safetensors"), state)

    g = {"images": f32(images), "logits": f32(logits), "targets": targets, "loss": f32(loss)}
    for name, p in model.named_parameters():
        g["grad." + name] = f32(p.grad)

    x = torch.randn(2, 8, 8, 3)
    part = window_partition(x, 4).view(-1, 16, 3)
    g["window.x"], g["window.partition"] = x, part
    g["window.reverse"] = window_reverse(part.view(-1, 4, 4, 3), 4, 8, 8)
    g["window.relative_position_index"] = model.layers[0].blocks[0].attn.relative_position_index
    g["window.mask"] = f32(model.layers[0].blocks[1].attn_mask)
    g["window.mask_6_3_1"] = shifted_window_mask(6, 6, 3, 1)

    merge = model.layers[0].downsample
    mx = torch.randn(2, 64, 8, dtype=torch.float64)
    g["merge.x"], g["merge.out"] = f32(mx), f32(merge(mx))

    dp = DropPath(0.5).eval()
    dx = torch.randn(4, 3, 5)
    g["drop_path.x"], g["drop_path.eval"] = dx, dp(dx)

    fm = dict(img_size=28, patch_size=2, in_chans=1, num_classes=10, embed_dim=64, depths=(2, 4),
              num_heads=(2, 4), window_size=7, mlp_ratio=4.0, drop_path_rate=0.1)
    t = dict(img_size=224, patch_size=4, in_chans=3, num_classes=1000, embed_dim=96,
             depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24), window_size=7, mlp_ratio=4.0,
             drop_path_rate=0.2)
    g["count.swin-fmnist"] = count(SwinTransformer(**fm))
    g["count.swin-t"] = count(SwinTransformer(**t))
    save(os.path.join(HERE, "swin.safetensors"), {k: v.contiguous() for k, v in g.items()})
    print("logits", logits.tolist(), "counts", g["count.swin-fmnist"].item(),
          g["count.swin-t"].item())


if __name__ == "__main__":
    main()
