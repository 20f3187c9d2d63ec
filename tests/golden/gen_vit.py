#!/usr/bin/python3
"""Golden ViT values from PyTorch for tests/models/test_vit.cpp.

timm is not installed on the build machines, so the model below is a small re-implementation of
timm's VisionTransformer (class token, no distillation token, global_pool='token', no
LayerScale, qk_norm or pre-norm) whose module names — and so whose state_dict keys — are exactly
timm's: cls_token, pos_embed, patch_embed.proj, blocks.N.{norm1, attn.qkv, attn.proj, norm2,
mlp.fc1, mlp.fc2}, norm, head. loom's models::ViT loads the state_dict name-for-name.

Writes vit.safetensors next to this script, evaluated in float64 (stored as float32):
    <name>            every entry of the tiny model's state_dict (CONFIG below), as timm saves it
                      (no prefix), so nn::load reads this file directly into a loom ViT
    input.images      [B, C, H, W]
    input.targets     int64 [B]
    out.logits        [B, num_classes]
    out.attn0         [B, heads, 1+N, 1+N]   block 0's attention probabilities
    out.loss          []                     mean cross-entropy of the logits against the targets
    grad.<name>       d loss / d parameter, for every parameter
    count.<preset>    int64 []               parameter counts of PyTorch ViTs of loom's presets
Weights are drawn larger than timm's initialisation (and LayerNorm gains and biases are not 1
and 0) so that every parameter matters to the logits.

Run: /usr/bin/python3 tests/golden/gen_vit.py   (from anywhere)
"""

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from safetensors_io import save  # noqa: E402

# image_size, patch_size, in_channels, num_classes, d_model, n_layer, n_head, d_ff
CONFIG = dict(image_size=8, patch_size=4, in_channels=2, num_classes=3, d_model=16, n_layer=2,
              n_head=2, d_ff=32)
B = 2
PRESETS = {  # loom's ViTConfig::preset values
    "vit-tiny-fmnist": dict(image_size=28, patch_size=7, in_channels=1, num_classes=10,
                            d_model=64, n_layer=4, n_head=4, d_ff=128),
    "vit-fmnist": dict(image_size=28, patch_size=4, in_channels=1, num_classes=10, d_model=128,
                       n_layer=6, n_head=4, d_ff=512),
    "vit-b16": dict(image_size=224, patch_size=16, in_channels=3, num_classes=1000, d_model=768,
                    n_layer=12, n_head=12, d_ff=3072),
}


class PatchEmbed(nn.Module):  # timm.layers.PatchEmbed, flatten=True, norm=Identity
    def __init__(self, patch_size, in_channels, d_model):
        super().__init__()
        self.proj = nn.Conv2d(in_channels, d_model, patch_size, stride=patch_size)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)  # [B, N, D]


class Attention(nn.Module):  # timm.models.vision_transformer.Attention
    def __init__(self, d_model, n_head):
        super().__init__()
        self.num_heads, self.head_dim = n_head, d_model // n_head
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.last_attn = None

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
        self.last_attn = attn
        x = (attn @ v).transpose(1, 2).reshape(b, n, c)
        return self.proj(x)


class Mlp(nn.Module):  # timm.layers.Mlp
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.act = nn.GELU()  # exact (erf)
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):  # timm.models.vision_transformer.Block
    def __init__(self, d_model, n_head, d_ff):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model, eps=1e-6)
        self.attn = Attention(d_model, n_head)
        self.norm2 = nn.LayerNorm(d_model, eps=1e-6)
        self.mlp = Mlp(d_model, d_ff)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    def __init__(self, image_size, patch_size, in_channels, num_classes, d_model, n_layer, n_head,
                 d_ff):
        super().__init__()
        n = (image_size // patch_size) ** 2
        self.patch_embed = PatchEmbed(patch_size, in_channels, d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + n, d_model))
        self.blocks = nn.Sequential(*[Block(d_model, n_head, d_ff) for _ in range(n_layer)])
        self.norm = nn.LayerNorm(d_model, eps=1e-6)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, images):
        x = self.patch_embed(images)                                            # [B, N, D]
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)    # [B, 1+N, D]
        x = self.blocks(x + self.pos_embed)
        return self.head(self.norm(x)[:, 0])                                    # [B, classes]


def main():
    torch.manual_seed(0)
    model = VisionTransformer(**CONFIG).double()
    gen = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".weight") and p.dim() == 1:  # LayerNorm gain near 1
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            p.copy_(p.float().double())  # exactly what loom loads
    c = CONFIG
    images = torch.randn(B, c["in_channels"], c["image_size"], c["image_size"], generator=gen,
                         dtype=torch.float64).float().double()
    targets = torch.randint(0, c["num_classes"], (B,), generator=gen)
    logits = model(images)
    loss = F.cross_entropy(logits, targets)
    loss.backward()

    out = {name: t.detach().float().contiguous() for name, t in model.state_dict().items()}
    out.update({
        "input.images": images.float(),
        "input.targets": targets,
        "out.logits": logits.detach().float(),
        "out.attn0": model.blocks[0].attn.last_attn.detach().float(),
        "out.loss": loss.detach().float(),
    })
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.float()
    for preset, cfg in PRESETS.items():
        with torch.no_grad():
            count = sum(p.numel() for p in VisionTransformer(**cfg).parameters())
        out["count." + preset] = torch.tensor(count, dtype=torch.int64)
        print(f"{preset}: {count:,} parameters")
    path = os.path.join(HERE, "vit.safetensors")
    save(path, out)
    print(f"wrote {path} ({len(out)} tensors)")


if __name__ == "__main__":
    main()
