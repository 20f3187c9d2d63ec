#!/usr/bin/python3
"""Golden encoder-decoder Transformer values from PyTorch for tests/models/test_transformer.cpp.

The model is the Seq2Seq of bench/reference/models.py (same classes, same module names, so the
same state_dict keys: emb, enc.N.{attn.{q,k,v,o}, ln1, ff.0, ff.2, ln2}, dec.N.{self_attn, ln1,
cross_attn, ln2, ff.0, ff.2, ln3}, and the buffer pe), at a tiny size, with one addition that
the benchmark's random tokens do not need: key padding masks (pad id 0) on the source in the
encoder and in cross-attention, and on the target in the decoder's self-attention (with the
causal mask), as the Annotated Transformer's src_mask / tgt_mask. models.py is not imported
because its classes take no mask.

Writes transformer.safetensors next to this script, computed in float64 (stored as float32):
    <name>            the tiny model's state_dict (CONFIG), "pe" included, as torch saves it
    input.src         int64 [B, S]   with padding at the end of row 1
    input.tgt_in      int64 [B, T]   bos-first decoder input, padding at the end of row 1
    input.tgt_out     int64 [B, T]   the targets (pad where the input is pad)
    out.logits        [B, T, V]
    out.loss          []             cross-entropy, label smoothing 0.1, pad targets ignored
    grad.<name>       d loss / d parameter
    count.<preset>    int64 []       parameter counts of loom's presets built in PyTorch

Run: /usr/bin/python3 tests/golden/gen_transformer.py   (from anywhere)
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

CONFIG = dict(vocab=11, d=16, h=2, ff=32, n_enc=2, n_dec=2, max_len=16)
PAD = 0
PRESETS = {  # loom's TransformerConfig::preset values (shared embeddings)
    "seq2seq-mini": dict(vocab=1000, d=256, h=4, ff=1024, n_enc=3, n_dec=3, max_len=512),
    "transformer-base": dict(vocab=37000, d=512, h=8, ff=2048, n_enc=6, n_dec=6, max_len=512),
}


class MultiHeadAttention(nn.Module):  # bench/reference/models.py's, plus an additive mask
    def __init__(self, d, h, causal):
        super().__init__()
        self.h, self.causal = h, causal
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x, mem=None, key_pad=None):
        mem = x if mem is None else mem
        B, T, D = x.shape
        S, hd = mem.shape[1], D // self.h
        q = self.q(x).view(B, T, self.h, hd).transpose(1, 2)
        k = self.k(mem).view(B, S, self.h, hd).transpose(1, 2)
        v = self.v(mem).view(B, S, self.h, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        if self.causal:
            mask = torch.ones(T, S, dtype=torch.bool).tril()
            att = att.masked_fill(~mask, float("-inf"))
        if key_pad is not None:                           # (B, S) True = padding
            att = att.masked_fill(key_pad[:, None, None, :], float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(B, T, D))


def mlp(d, hidden, act):
    return nn.Sequential(nn.Linear(d, hidden), act, nn.Linear(hidden, d))


class EncoderLayer(nn.Module):
    def __init__(self, d, h, ff):
        super().__init__()
        self.attn, self.ln1 = MultiHeadAttention(d, h, False), nn.LayerNorm(d)
        self.ff, self.ln2 = mlp(d, ff, nn.ReLU()), nn.LayerNorm(d)

    def forward(self, x, src_pad):
        x = self.ln1(x + self.attn(x, key_pad=src_pad))
        return self.ln2(x + self.ff(x))


class DecoderLayer(nn.Module):
    def __init__(self, d, h, ff):
        super().__init__()
        self.self_attn, self.ln1 = MultiHeadAttention(d, h, True), nn.LayerNorm(d)
        self.cross_attn, self.ln2 = MultiHeadAttention(d, h, False), nn.LayerNorm(d)
        self.ff, self.ln3 = mlp(d, ff, nn.ReLU()), nn.LayerNorm(d)

    def forward(self, x, mem, tgt_pad, src_pad):
        x = self.ln1(x + self.self_attn(x, key_pad=tgt_pad))
        x = self.ln2(x + self.cross_attn(x, mem, key_pad=src_pad))
        return self.ln3(x + self.ff(x))


class Seq2Seq(nn.Module):
    def __init__(self, vocab=1000, d=256, h=4, ff=1024, n_enc=3, n_dec=3, max_len=512):
        super().__init__()
        self.d = d
        self.emb = nn.Embedding(vocab, d)
        self.enc = nn.ModuleList(EncoderLayer(d, h, ff) for _ in range(n_enc))
        self.dec = nn.ModuleList(DecoderLayer(d, h, ff) for _ in range(n_dec))
        pos = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        pe = torch.zeros(max_len, d)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.register_buffer("pe", pe)

    def embed(self, tokens):
        return self.emb(tokens) * math.sqrt(self.d) + self.pe[: tokens.shape[1]]

    def forward(self, src, tgt_in):
        src_pad, tgt_pad = src == PAD, tgt_in == PAD
        mem = self.embed(src)
        for layer in self.enc:
            mem = layer(mem, src_pad)
        x = self.embed(tgt_in)
        for layer in self.dec:
            x = layer(x, mem, tgt_pad, src_pad)
        return x @ self.emb.weight.t()


def main():
    torch.manual_seed(0)
    model = Seq2Seq(**CONFIG).double()
    gen = torch.Generator().manual_seed(4321)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".weight") and p.dim() == 1:  # LayerNorm gain near 1
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            p.copy_(p.float().double())  # exactly what loom loads
    src = torch.tensor([[3, 7, 2, 9, 5], [4, 8, 6, PAD, PAD]])
    tgt_in = torch.tensor([[1, 6, 3, 10], [1, 9, PAD, PAD]])
    tgt_out = torch.tensor([[6, 3, 10, 2], [9, 2, PAD, PAD]])
    logits = model(src, tgt_in)
    loss = F.cross_entropy(logits.reshape(-1, CONFIG["vocab"]), tgt_out.reshape(-1),
                           ignore_index=PAD, label_smoothing=0.1)
    loss.backward()

    out = {name: t.detach().float().contiguous() for name, t in model.state_dict().items()}
    out.update({
        "input.src": src, "input.tgt_in": tgt_in, "input.tgt_out": tgt_out,
        "out.logits": logits.detach().float(), "out.loss": loss.detach().float(),
    })
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.float()
    for preset, cfg in PRESETS.items():
        with torch.no_grad():
            count = sum(p.numel() for p in Seq2Seq(**cfg).parameters())
        out["count." + preset] = torch.tensor(count, dtype=torch.int64)
        print(f"{preset}: {count:,} parameters")
    path = os.path.join(HERE, "transformer.safetensors")
    save(path, out)
    print(f"wrote {path} ({len(out)} tensors)")


if __name__ == "__main__":
    main()
