"""PyTorch twins of the models loom's benchmarks time (bench/{gpt,vision,seq2seq,bert,detr}).

    import models
    model = models.build("gpt-mini")        # any name in models.NAMES, in training mode
    models.n_params(model)                  # 3,257,856: tied weights counted once

Each model has loom's parameter count and the same arithmetic, so timing one against the other
compares the frameworks, not the models (bench/reference/bench.py; README.md has the table).

Conventions (shared by GPT, ViT and Seq2Seq, so another implementation rebuilds them exactly):
  * Linear layers have a bias unless stated; y = x W^T + b.
  * Attention: Q, K, V and output projections are four separate Linear(d, d) with bias; h heads
    split d into chunks of d/h; att = softmax(q k^T / sqrt(d/h)) v (Vaswani et al. 2017, eq. 1),
    causal masking by masked_fill(-inf) before the softmax.
  * LayerNorm: eps 1e-5, elementwise affine.
Swin, BERT and DETR follow their original code instead (microsoft/Swin-Transformer, Hugging
Face's BertForPreTraining, facebookresearch/detr), with the originals' state-dict names.

Shapes: B batch, T sequence length, D model width, h heads, hd = D / h, V vocabulary.
Importing this module has no side effects: no argument parsing, no thread setup, no RNG use.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


# ============================================================================ shared layers
class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al. 2017, sec. 3.2.2) with four separate projections.

    forward(x (B, T, D), mem (B, S, D) or None) -> (B, T, D): self-attention on x, or
    cross-attention from x to mem. causal=True blocks key positions after the query's.
    sdpa=True computes the same attention with F.scaled_dot_product_attention (PyTorch >= 2.0,
    FlashAttention kernels on a GPU).
    """

    def __init__(self, d, h, causal, sdpa=False):
        super().__init__()
        self.h, self.causal, self.sdpa = h, causal, sdpa
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def split_heads(self, x):                              # (B, T, D) -> (B, h, T, hd)
        B, T, D = x.shape
        return x.view(B, T, self.h, D // self.h).transpose(1, 2)

    def forward(self, x, mem=None):
        mem = x if mem is None else mem
        B, T, D = x.shape
        q, k, v = self.split_heads(self.q(x)), self.split_heads(self.k(mem)), \
            self.split_heads(self.v(mem))                  # (B, h, T or S, hd)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(D // self.h)       # (B, h, T, S)
            if self.causal:
                keep = torch.ones(T, k.shape[2], dtype=torch.bool, device=x.device).tril()
                att = att.masked_fill(~keep, float("-inf"))
            y = F.softmax(att, dim=-1) @ v                 # (B, h, T, hd)
        return self.o(y.transpose(1, 2).reshape(B, T, D))  # heads concatenated, (B, T, D)


def feed_forward(d, hidden, activation):
    """Position-wise FFN (Vaswani et al. 2017, eq. 2): Linear(d, hidden), activation,
    Linear(hidden, d); as nn.Sequential, so its weights are named 0.* and 2.*."""
    return nn.Sequential(nn.Linear(d, hidden), activation, nn.Linear(hidden, d))


class PreNormBlock(nn.Module):
    """x + Attn(LN(x)), then x + MLP(LN(x)): the pre-norm block of GPT-2 (Radford et al. 2019,
    sec. 2.3) and ViT (Dosovitskiy et al. 2020, eq. 2-3). forward: (B, T, D) -> (B, T, D)."""

    def __init__(self, d, h, hidden, activation, causal, sdpa=False):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(d), MultiHeadAttention(d, h, causal, sdpa)
        self.ln2, self.mlp = nn.LayerNorm(d), feed_forward(d, hidden, activation)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


def init_normal_002(module):
    """GPT-2's initialisation: Linear and Embedding weights N(0, 0.02), biases 0, LN (1, 0)."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)


# ============================================================================ GPT
@dataclass
class GPTConfig:
    vocab: int = 256        # token ids (bytes for gpt-mini)
    ctx: int = 128          # longest sequence: rows of the position embedding
    n_layer: int = 4
    n_head: int = 4
    d: int = 256            # model width; the MLP is 4 d wide
    sdpa: bool = False      # attention by F.scaled_dot_product_attention (PyTorch >= 2.0)

    @staticmethod
    def preset(name):
        return {"gpt-mini": GPTConfig(),                    # 3,257,856 parameters
                "gpt2": GPTConfig(50257, 1024, 12, 12, 768),  # GPT-2 small, 124,439,808
                }[name]


class GPT(nn.Module):
    """Decoder-only language model in GPT-2's layout (Radford et al. 2019; nanoGPT's model.py).

    forward(idx (B, T) int64, T <= ctx) -> logits (B, T, vocab).
    Token + learned position embeddings, n_layer causal pre-norm blocks with a GELU(tanh) MLP,
    final LayerNorm, LM head tied to the token embedding (no bias). Init N(0, 0.02).
    """

    def __init__(self, config):
        super().__init__()
        c = self.config = config
        self.tok = nn.Embedding(c.vocab, c.d)
        self.pos = nn.Embedding(c.ctx, c.d)
        self.blocks = nn.ModuleList(
            PreNormBlock(c.d, c.n_head, 4 * c.d, nn.GELU(approximate="tanh"), True, c.sdpa)
            for _ in range(c.n_layer))
        self.ln_f = nn.LayerNorm(c.d)
        self.head = nn.Linear(c.d, c.vocab, bias=False)
        init_normal_002(self)
        self.head.weight = self.tok.weight                 # tied LM head

    def scale_residual_init(self):
        """GPT-2 (sec. 2.3): residual-branch output weights drawn N(0, 0.02 / sqrt(2 n_layer)),
        as loom's models::GPT does; the benchmark's default model keeps plain N(0, 0.02)."""
        std = 0.02 / math.sqrt(2 * self.config.n_layer)
        for blk in self.blocks:
            for proj in (blk.attn.o, blk.mlp[2]):
                nn.init.normal_(proj.weight, 0.0, std)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))   # (B, T, D)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))                     # (B, T, vocab)


# ============================================================================ ViT
@dataclass
class ViTConfig:
    img: int = 28           # square 1-channel images
    patch: int = 4
    d: int = 128
    n_layer: int = 6
    n_head: int = 4
    hidden: int = 512       # MLP width
    classes: int = 10

    @staticmethod
    def preset(name):
        return {"vit-fmnist": ViTConfig(),                                  # 1,199,882
                "vit-tiny": ViTConfig(patch=7, d=64, n_layer=4, hidden=128),  # 139,018
                }[name]


class ViT(nn.Module):
    """Vision Transformer (Dosovitskiy et al. 2020) for 1-channel images.

    forward(img (B, 1, img, img)) -> class logits (B, classes).
    Patches (row-major, pixels row-major inside) -> Linear(patch^2, D) (= a stride-patch conv),
    [cls, patches] + learned positions (eq. 1), pre-norm blocks with exact-GELU MLPs (eq. 2-3),
    final LayerNorm, head on the class token (eq. 4). Init N(0, 0.02); no dropout.
    """

    def __init__(self, config):
        super().__init__()
        c = self.config = config
        n = (c.img // c.patch) ** 2
        self.patch_embed = nn.Linear(c.patch * c.patch, c.d)
        self.cls = nn.Parameter(torch.zeros(1, 1, c.d))
        self.pos = nn.Parameter(torch.zeros(1, n + 1, c.d))
        self.blocks = nn.ModuleList(PreNormBlock(c.d, c.n_head, c.hidden, nn.GELU(), False)
                                    for _ in range(c.n_layer))
        self.ln_f = nn.LayerNorm(c.d)
        self.head = nn.Linear(c.d, c.classes)
        init_normal_002(self)
        nn.init.normal_(self.cls, 0.0, 0.02)
        nn.init.normal_(self.pos, 0.0, 0.02)

    def forward(self, img):
        B, p, n = img.shape[0], self.config.patch, self.config.img // self.config.patch
        x = img.reshape(B, n, p, n, p).permute(0, 1, 3, 2, 4)            # (B, n, n, p, p)
        x = self.patch_embed(x.reshape(B, n * n, p * p))                   # (B, N, D)
        x = torch.cat([self.cls.expand(B, -1, -1), x], dim=1) + self.pos   # (B, 1 + N, D)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x)[:, 0])               # (B, classes)


# ============================================================================ Seq2Seq
class EncoderLayer(nn.Module):
    """Post-norm (Vaswani et al. 2017, sec. 3.1): x = LN(x + SelfAttn(x)); x = LN(x + FF(x))."""

    def __init__(self, d, h, ff):
        super().__init__()
        self.attn, self.ln1 = MultiHeadAttention(d, h, False), nn.LayerNorm(d)
        self.ff, self.ln2 = feed_forward(d, ff, nn.ReLU()), nn.LayerNorm(d)

    def forward(self, x):                                  # (B, S, D) -> (B, S, D)
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.ff(x))


class DecoderLayer(nn.Module):
    """Post-norm: masked self-attention, cross-attention to the encoder's memory, FF; each
    + residual + LN (sec. 3.1)."""

    def __init__(self, d, h, ff):
        super().__init__()
        self.self_attn, self.ln1 = MultiHeadAttention(d, h, True), nn.LayerNorm(d)
        self.cross_attn, self.ln2 = MultiHeadAttention(d, h, False), nn.LayerNorm(d)
        self.ff, self.ln3 = feed_forward(d, ff, nn.ReLU()), nn.LayerNorm(d)

    def forward(self, x, mem):                             # (B, T, D), (B, S, D) -> (B, T, D)
        x = self.ln1(x + self.self_attn(x))
        x = self.ln2(x + self.cross_attn(x, mem))
        return self.ln3(x + self.ff(x))


class Seq2Seq(nn.Module):
    """Encoder-decoder Transformer (Vaswani et al. 2017), base layout shrunk: one vocabulary of
    1000 shared by source, target and output (sec. 3.4), d 256, 4 heads, 3 + 3 post-norm layers,
    FF 1024 ReLU, sinusoidal positions (sec. 3.5, a buffer "pe"), no final LayerNorm, no dropout,
    no padding mask. Xavier-uniform matrices, zero biases, LayerNorm gains 1.

    forward(src (B, S) int64, tgt_in (B, T) int64) -> logits (B, T, vocab).
    encode(src) -> memory (B, S, D); embed(tokens, start=0) adds positions start, start + 1, ...
    """

    def __init__(self, vocab=1000, d=256, h=4, ff=1024, n_enc=3, n_dec=3, max_len=512):
        super().__init__()
        self.d = d
        self.emb = nn.Embedding(vocab, d)
        self.enc = nn.ModuleList(EncoderLayer(d, h, ff) for _ in range(n_enc))
        self.dec = nn.ModuleList(DecoderLayer(d, h, ff) for _ in range(n_dec))
        # PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)   (sec. 3.5)
        pos = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        pe = torch.zeros(max_len, d)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.register_buffer("pe", pe)                     # (max_len, D)
        for p in self.parameters():
            nn.init.xavier_uniform_(p) if p.dim() > 1 else nn.init.zeros_(p)
        for m in self.modules():
            if isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)

    def embed(self, tokens, start=0):                      # (B, T) -> (B, T, D)
        T = tokens.shape[1]
        return self.emb(tokens) * math.sqrt(self.d) + self.pe[start:start + T]   # sec. 3.4

    def encode(self, src):
        mem = self.embed(src)
        for layer in self.enc:
            mem = layer(mem)
        return mem                                         # (B, S, D)

    def forward(self, src, tgt_in):
        mem, x = self.encode(src), self.embed(tgt_in)
        for layer in self.dec:
            x = layer(x, mem)
        return x @ self.emb.weight.t()                     # tied output projection, (B, T, V)


class IncrementalDecoder:
    """KV-cached decoding with a Seq2Seq's own weights; the logits equal re-running the prefix.

    The encoder runs once, and each decoder layer's cross-attention K/V of the memory are
    projected once. step(tok (R,)) embeds only the newest token (position t), appends its
    self-attention K/V to per-layer caches (R, h, max_len, hd) and attends over positions 0..t
    (no causal mask needed) -> logits (R, vocab). Rows R are the sentences (greedy) or, with
    repeat=k, k adjacent beams per sentence; reorder(rows) makes row i continue row rows[i].
    """

    def __init__(self, model, src, max_len, repeat=1):
        self.m, self.t = model, 0
        mem = model.encode(src)                            # (B, S, D)
        rep = lambda x: x.repeat_interleave(repeat, dim=0)                 # beams adjacent
        self.cross = [(rep(l.cross_attn.split_heads(l.cross_attn.k(mem))),
                       rep(l.cross_attn.split_heads(l.cross_attn.v(mem)))) for l in model.dec]
        rows, h = src.shape[0] * repeat, model.dec[0].self_attn.h
        shape = (rows, h, max_len, model.d // h)
        self.kv = [(torch.empty(shape, device=src.device), torch.empty(shape, device=src.device))
                   for _ in model.dec]

    @staticmethod
    def attend(attn, q, k, v):                             # q (R, h, 1, hd), k/v (R, h, S, hd)
        y = F.softmax((q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1]), dim=-1) @ v
        return attn.o(y.transpose(1, 2).reshape(y.shape[0], 1, -1))      # (R, 1, D)

    def step(self, tok):
        m, t = self.m, self.t
        x = m.embed(tok[:, None], start=t)                 # (R, 1, D)
        for layer, (kc, vc), (km, vm) in zip(m.dec, self.kv, self.cross):
            a = layer.self_attn
            kc[:, :, t:t + 1], vc[:, :, t:t + 1] = a.split_heads(a.k(x)), a.split_heads(a.v(x))
            y = self.attend(a, a.split_heads(a.q(x)), kc[:, :, :t + 1], vc[:, :, :t + 1])
            x = layer.ln1(x + y)
            c = layer.cross_attn
            x = layer.ln2(x + self.attend(c, c.split_heads(c.q(x)), km, vm))
            x = layer.ln3(x + layer.ff(x))
        self.t += 1
        return x[:, 0] @ m.emb.weight.t()                  # (R, vocab)

    def reorder(self, rows):
        """Beam search: row i continues row rows[i] of the same sentence (so the
        cross-attention K/V, equal for all of a sentence's beams, need no reordering)."""
        for k, v in self.kv:
            k[:, :, :self.t] = k[:, :, :self.t].index_select(0, rows)
            v[:, :, :self.t] = v[:, :, :self.t].index_select(0, rows)


@torch.no_grad()
def translate_greedy(model, src, new, bos=1):
    """src (B, S) -> (B, new) greedy tokens. Fixed length: no EOS stop, every sentence gets
    exactly `new` tokens, so any implementation does the same work."""
    dec = IncrementalDecoder(model, src, new)
    tok, out = torch.full((src.shape[0],), bos, dtype=torch.long, device=src.device), []
    for _ in range(new):
        tok = dec.step(tok).argmax(-1)
        out.append(tok)
    return torch.stack(out, 1)


@torch.no_grad()
def translate_beam(model, src, new, k, bos=1):
    """Beam search of width k, fixed length `new` (so no length penalty, no finished beams).
    Score = sum of log-softmax; each step keeps the top k of the k * vocab extensions of each
    sentence (at step 0 only beam 0 is live). src (B, S) -> best beams (B, new), scores (B,)."""
    B, dev = src.shape[0], src.device
    dec = IncrementalDecoder(model, src, new, repeat=k)
    score = torch.full((B, k), float("-inf"), device=dev)
    score[:, 0] = 0.0
    tok = torch.full((B * k,), bos, dtype=torch.long, device=dev)
    hist = torch.empty(B * k, 0, dtype=torch.long, device=dev)
    for _ in range(new):
        logp = F.log_softmax(dec.step(tok), dim=-1)       # (B k, V)
        V = logp.shape[-1]
        top = (score.reshape(-1, 1) + logp).view(B, k * V).topk(k, dim=1)    # (B, k)
        beam = torch.div(top.indices, V, rounding_mode="floor")
        rows = (torch.arange(B, device=dev)[:, None] * k + beam).reshape(-1)  # parent rows
        tok, score = (top.indices % V).reshape(-1), top.values
        dec.reorder(rows)
        hist = torch.cat([hist.index_select(0, rows), tok[:, None]], dim=1)
    best = score.argmax(-1) + torch.arange(B, device=dev) * k
    return hist[best], score.max(-1).values


# ============================================================================ Swin
class DropPath(nn.Module):
    """Stochastic depth (Huang et al. 2016) as timm's drop_path: in training, zero a sample's
    whole residual branch with probability p and scale the kept ones by 1 / (1 - p)."""

    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if self.p == 0.0 or not self.training:
            return x
        keep = 1.0 - self.p
        mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
        return x * mask.div_(keep)


def window_partition(x, w):                                # (B, H, W, C) -> (B nW, w w, C)
    B, H, W, C = x.shape
    x = x.view(B, H // w, w, W // w, w, C).permute(0, 1, 3, 2, 4, 5)   # (B, H/w, W/w, w, w, C)
    return x.reshape(-1, w * w, C)                         # windows row-major, then pixels


def window_reverse(win, w, H, W):                          # (B nW, w w, C) -> (B, H, W, C)
    C = win.shape[-1]
    x = win.view(-1, H // w, W // w, w, w, C).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, H, W, C)


def shifted_window_mask(res, w, shift):
    """(nW, w w, w w): 0 where two pixels of a window come from the same region of the rolled
    map, -100 where the cyclic shift made them neighbours (Liu et al. 2021, sec. 3.2, fig. 4)."""
    img, region = torch.zeros(1, res, res, 1), 0
    bands = (slice(0, -w), slice(-w, -shift), slice(-shift, None))
    for hs in bands:
        for ws in bands:
            img[:, hs, ws, :] = region
            region += 1
    win = window_partition(img, w).squeeze(-1)             # (nW, w w): region labels
    diff = win.unsqueeze(1) - win.unsqueeze(2)
    return diff.masked_fill(diff != 0, -100.0).masked_fill(diff == 0, 0.0)


class WindowAttention(nn.Module):
    """W-MSA (Liu et al. 2021, eq. 4): Attention = softmax(Q K^T / sqrt(hd) + B) V, with the
    relative position bias B gathered from a ((2w-1)^2, heads) table; one Linear(C, 3C) for
    q, k, v. forward(x (B nW, N = w w, C), mask (nW, N, N) or None) -> (B nW, N, C)."""

    def __init__(self, dim, w, heads):
        super().__init__()
        self.h, self.scale = heads, (dim // heads) ** -0.5
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * w - 1) ** 2, heads))
        c = torch.stack(torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij")).flatten(1)
        rel = (c[:, :, None] - c[:, None, :]).permute(1, 2, 0) + (w - 1)   # (N, N, 2), >= 0
        self.register_buffer("relative_position_index", rel[..., 0] * (2 * w - 1) + rel[..., 1])
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def forward(self, x, mask=None):
        Bw, N, C = x.shape
        qkv = self.qkv(x).reshape(Bw, N, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4)
        att = (qkv[0] * self.scale) @ qkv[1].transpose(-2, -1)           # (B nW, h, N, N)
        bias = self.relative_position_bias_table[self.relative_position_index.view(-1)]
        att = att + bias.view(N, N, -1).permute(2, 0, 1).unsqueeze(0)     # + B  (h, N, N)
        if mask is not None:
            nW = mask.shape[0]
            att = att.view(Bw // nW, nW, self.h, N, N) + mask.unsqueeze(1).unsqueeze(0)
            att = att.view(-1, self.h, N, N)
        x = (F.softmax(att, dim=-1) @ qkv[2]).transpose(1, 2).reshape(Bw, N, C)
        return self.proj(x)


class SwinMlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))               # exact (erf) GELU


class SwinBlock(nn.Module):
    """Swin block (Liu et al. 2021, eq. 3): x + DropPath((S)W-MSA(LN(x))), then
    x + DropPath(MLP(LN(x))); odd blocks shift the windows by w/2 (torch.roll). A map no larger
    than the window is one window, never shifted. forward: (B, res^2, C) -> (B, res^2, C)."""

    def __init__(self, dim, res, heads, window, shift, mlp_ratio, drop_path):
        super().__init__()
        if res <= window:
            window, shift = res, 0
        self.res, self.w, self.shift = res, window, shift
        self.norm1, self.attn = nn.LayerNorm(dim), WindowAttention(dim, window, heads)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2, self.mlp = nn.LayerNorm(dim), SwinMlp(dim, int(dim * mlp_ratio))
        mask = shifted_window_mask(res, window, shift) if shift > 0 else None
        self.register_buffer("attn_mask", mask)

    def forward(self, x):
        B, L, C = x.shape
        s, w, r = self.shift, self.w, self.res
        y = self.norm1(x).view(B, r, r, C)
        if s:
            y = torch.roll(y, shifts=(-s, -s), dims=(1, 2))
        y = window_reverse(self.attn(window_partition(y, w), self.attn_mask), w, r, r)
        if s:
            y = torch.roll(y, shifts=(s, s), dims=(1, 2))
        x = x + self.drop_path(y.reshape(B, L, C))
        return x + self.drop_path(self.mlp(self.norm2(x)))


class PatchMerging(nn.Module):
    """(B, res^2, C) -> (B, (res/2)^2, 2C): each 2x2 neighbourhood concatenated in the order
    (0,0), (1,0), (0,1), (1,1) [(row, col)], LayerNorm(4C), Linear(4C, 2C) without bias."""

    def __init__(self, res, dim):
        super().__init__()
        self.res = res
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = nn.LayerNorm(4 * dim)

    def forward(self, x):
        B, L, C = x.shape
        x = x.view(B, self.res, self.res, C)
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], -1)
        return self.reduction(self.norm(x.view(B, -1, 4 * C)))


class Swin(nn.Module):
    """Swin Transformer (Liu et al. 2021; microsoft/Swin-Transformer), Swin-T's layout shrunk for
    1x28x28: 2x2 patches -> 14x14 x 64, stages of depths (2, 4) and heads (2, 4), window 7
    (shift 3 on stage 1's odd blocks; stage 2 is 7x7 = one window), PatchMerging between them
    -> 7x7 x 128, mlp_ratio 4, no absolute position embedding, drop-path linspace(0, 0.1) over
    the 6 blocks, final LN, mean over tokens, Linear head. Original state-dict names.

    forward(img (B, 1, 28, 28)) -> logits (B, classes).
    """

    def __init__(self, img=28, patch=2, in_chans=1, classes=10, embed_dim=64, depths=(2, 4),
                 heads=(2, 4), window=7, mlp_ratio=4.0, drop_path=0.1):
        super().__init__()
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(in_chans, embed_dim, patch, stride=patch)
        self.patch_embed.norm = nn.LayerNorm(embed_dim)
        dpr = [x.item() for x in torch.linspace(0, drop_path, sum(depths))]
        self.layers = nn.ModuleList()
        for i, (depth, h) in enumerate(zip(depths, heads)):
            dim, res, first = embed_dim * 2 ** i, img // patch // 2 ** i, sum(depths[:i])
            stage = nn.Module()
            stage.blocks = nn.ModuleList(
                SwinBlock(dim, res, h, window, 0 if j % 2 == 0 else window // 2, mlp_ratio,
                          dpr[first + j]) for j in range(depth))
            stage.downsample = PatchMerging(res, dim) if i < len(depths) - 1 else None
            self.layers.append(stage)
        width = embed_dim * 2 ** (len(depths) - 1)
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, classes)
        for m in self.modules():                           # the conv keeps PyTorch's default
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, img):
        x = self.patch_embed.proj(img).flatten(2).transpose(1, 2)           # (B, 196, 64)
        x = self.patch_embed.norm(x)
        for stage in self.layers:
            for blk in stage.blocks:
                x = blk(x)
            if stage.downsample is not None:
                x = stage.downsample(x)                    # (B, 49, 128)
        return self.head(self.norm(x).mean(1))             # = AdaptiveAvgPool1d(1), (B, classes)


# ============================================================================ BERT
class Bag(nn.Module):
    """A module that only holds submodules, so state-dict names follow Hugging Face's."""

    def __init__(self, /, **children):                 # "/": a child may be named "self"
        super().__init__()
        for name, child in children.items():
            setattr(self, name, child)


class BertLayer(nn.Module):
    """Post-norm encoder layer (Devlin et al. 2019, = Vaswani et al. 2017's):
    x = LN(x + Drop(Wo Attn(x))); x = LN(x + Drop(W2 GELU(W1 x))); LN eps 1e-12; dropout also
    on the attention probabilities. forward: (B, T, D) -> (B, T, D); `ext` (B, 1, 1, T), when
    given, is added to the attention scores (HF's extended attention mask: 0 for a token, the
    float32 minimum for padding)."""

    def __init__(self, d, h, inter, p):
        super().__init__()
        self.h, self.p = h, p
        self.attention = Bag(
            self=Bag(query=nn.Linear(d, d), key=nn.Linear(d, d), value=nn.Linear(d, d)),
            output=Bag(dense=nn.Linear(d, d), LayerNorm=nn.LayerNorm(d, eps=1e-12)))
        self.intermediate = Bag(dense=nn.Linear(d, inter))
        self.output = Bag(dense=nn.Linear(inter, d), LayerNorm=nn.LayerNorm(d, eps=1e-12))

    def forward(self, x, ext=None):
        B, T, D = x.shape
        drop = lambda t: F.dropout(t, self.p, self.training)
        s, hd = self.attention.self, D // self.h
        q, k, v = (f(x).view(B, T, self.h, hd).transpose(1, 2)             # (B, h, T, hd)
                   for f in (s.query, s.key, s.value))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(hd)                 # (B, h, T, T)
        if ext is not None:
            scores = scores + ext
        att = drop(F.softmax(scores, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(B, T, D)
        o = self.attention.output
        x = o.LayerNorm(drop(o.dense(y)) + x)
        y = self.output.dense(F.gelu(self.intermediate.dense(x)))
        return self.output.LayerNorm(drop(y) + x)


class BertForPreTraining(nn.Module):
    """BERT pre-training (Devlin et al. 2019) as Hugging Face's BertForPreTraining, BERT-mini-like:
    vocab 8192, d 256, 4 layers, 4 heads, intermediate 1024, 128 positions, 2 token types,
    dropout 0.1, exact GELU, LN eps 1e-12.
      embeddings: word (padding_idx 0) + token type + learned position -> LN -> dropout;
      encoder: post-norm BertLayers; pooler: tanh(Linear(h[:, 0]));
      MLM head: LN(GELU(Linear(h))) -> decoder whose weight IS the word-embedding matrix, plus
      its own bias; NSP head: Linear(d, 2) on the pooler.
    Init as HF: Linear and Embedding N(0, 0.02), biases 0, padding row 0, LN (1, 0).

    forward(ids (B, T) int64, token_types (B, T) int64, mask=None, positions=None) ->
    (MLM logits (B, T, vocab), NSP logits (B, 2)): the MLM logits cover every position, as HF
    computes them, or the flat `positions` (of B * T) only (google's gather_indexes, as loom's
    Bert::pretraining_loss: (n, vocab)). `mask` (B, T), 1 for a token and 0 for padding, keeps
    the padding out of attention (HF's attention_mask; the benchmark's batches have no padding
    and pass none: an all-ones mask would add zeros).
    """

    def __init__(self, vocab=8192, d=256, n_layer=4, h=4, inter=1024, max_pos=128, types=2,
                 p=0.1):
        super().__init__()
        self.p = p
        emb = Bag(word_embeddings=nn.Embedding(vocab, d, padding_idx=0),
                  position_embeddings=nn.Embedding(max_pos, d),
                  token_type_embeddings=nn.Embedding(types, d),
                  LayerNorm=nn.LayerNorm(d, eps=1e-12))
        self.bert = Bag(embeddings=emb,
                        encoder=Bag(layer=nn.ModuleList(BertLayer(d, h, inter, p)
                                                        for _ in range(n_layer))),
                        pooler=Bag(dense=nn.Linear(d, d)))
        pred = Bag(transform=Bag(dense=nn.Linear(d, d), LayerNorm=nn.LayerNorm(d, eps=1e-12)),
                   decoder=nn.Linear(d, vocab, bias=False))
        self.cls = Bag(predictions=pred, seq_relationship=nn.Linear(d, 2))
        init_normal_002(self)
        with torch.no_grad():
            emb.word_embeddings.weight[0].zero_()
        pred.decoder.weight = emb.word_embeddings.weight   # tied
        pred.bias = nn.Parameter(torch.zeros(vocab))
        pred.decoder.bias = pred.bias                      # one parameter under two names, as HF

    def forward(self, ids, token_types, mask=None, positions=None):
        e = self.bert.embeddings
        ext = None
        if mask is not None:                               # (B, 1, 1, T), added to the scores
            ext = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        x = e.word_embeddings(ids) + e.token_type_embeddings(token_types)
        x = x + e.position_embeddings(torch.arange(ids.shape[1], device=ids.device))  # (B, T, D)
        x = F.dropout(e.LayerNorm(x), self.p, self.training)
        for layer in self.bert.encoder.layer:
            x = layer(x, ext)
        pooled = torch.tanh(self.bert.pooler.dense(x[:, 0]))                # (B, D)
        if positions is not None:
            x = x.reshape(-1, x.shape[-1])[positions]                       # (n, D)
        t = self.cls.predictions.transform
        mlm = self.cls.predictions.decoder(t.LayerNorm(F.gelu(t.dense(x))))  # (B, T, V) or (n, V)
        return mlm, self.cls.seq_relationship(pooled)      # and (B, 2)


def bert_pretraining_loss(outputs, labels):
    """MLM cross-entropy over the positions whose label is not -100, + NSP cross-entropy
    (Devlin et al. 2019, sec. 3.1; both means). outputs = forward's pair, labels =
    (mlm_labels (B, T) int64, nsp_labels (B,) int64)."""
    (mlm, nsp), (mlm_labels, nsp_labels) = outputs, labels
    mlm_loss = F.cross_entropy(mlm.reshape(-1, mlm.shape[-1]), mlm_labels.reshape(-1),
                               ignore_index=-100)
    return mlm_loss + F.cross_entropy(nsp, nsp_labels)


# ============================================================================ DETR
class DetrEncoderLayer(nn.Module):
    """DETR's post-norm encoder layer (transformer.py forward_post): positions are added to the
    queries and keys only, q = k = src + pos, v = src. Sequence first: (HW, B, d) -> same."""

    def __init__(self, d, h, ff, p):
        super().__init__()
        self.p = p
        self.self_attn = nn.MultiheadAttention(d, h, dropout=p)
        self.linear1, self.linear2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, src, pos):
        drop = lambda t: F.dropout(t, self.p, self.training)
        q = k = src + pos
        src = self.norm1(src + drop(self.self_attn(q, k, src, need_weights=False)[0]))
        return self.norm2(src + drop(self.linear2(drop(F.relu(self.linear1(src))))))


class DetrDecoderLayer(nn.Module):
    """DETR's post-norm decoder layer: self-attention (q = k = tgt + query_pos, v = tgt),
    cross-attention (q = tgt + query_pos, k = memory + pos, v = memory), FF; each + residual +
    LN. forward(tgt (Q, B, d), memory (HW, B, d), pos (HW, B, d), query_pos (Q, B, d))."""

    def __init__(self, d, h, ff, p):
        super().__init__()
        self.p = p
        self.self_attn = nn.MultiheadAttention(d, h, dropout=p)
        self.multihead_attn = nn.MultiheadAttention(d, h, dropout=p)
        self.linear1, self.linear2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, tgt, memory, pos, query_pos):
        drop = lambda t: F.dropout(t, self.p, self.training)
        q = k = tgt + query_pos
        tgt = self.norm1(tgt + drop(self.self_attn(q, k, tgt, need_weights=False)[0]))
        y = self.multihead_attn(tgt + query_pos, memory + pos, memory, need_weights=False)[0]
        tgt = self.norm2(tgt + drop(y))
        return self.norm3(tgt + drop(self.linear2(drop(F.relu(self.linear1(tgt))))))


def position_embedding_sine(B, H, W, num_pos_feats, device=None, temperature=10000.0):
    """DETR's PositionEmbeddingSine(normalize=True, scale=2 pi) without a padding mask ->
    (B, 2 num_pos_feats, H, W): y features first, then x; sin and cos interleaved in each."""
    ones = torch.ones(B, H, W, device=device)
    y, x = ones.cumsum(1), ones.cumsum(2)                  # 1-based row / column numbers
    eps, scale = 1e-6, 2 * math.pi
    y, x = y / (y[:, -1:, :] + eps) * scale, x / (x[:, :, -1:] + eps) * scale
    dim_t = torch.arange(num_pos_feats, dtype=torch.float32, device=device)
    dim_t = temperature ** (2 * torch.div(dim_t, 2, rounding_mode="floor") / num_pos_feats)
    px, py = x[:, :, :, None] / dim_t, y[:, :, :, None] / dim_t            # (B, H, W, F)
    px = torch.stack((px[:, :, :, 0::2].sin(), px[:, :, :, 1::2].cos()), dim=4).flatten(3)
    py = torch.stack((py[:, :, :, 0::2].sin(), py[:, :, :, 1::2].cos()), dim=4).flatten(3)
    return torch.cat((py, px), dim=3).permute(0, 3, 1, 2)


class MLP(nn.Module):
    """DETR's MLP: Linear layers with ReLU between them (none after the last)."""

    def __init__(self, d_in, hidden, d_out, n):
        super().__init__()
        dims = [d_in] + [hidden] * (n - 1)
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:] + [d_out]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x) if i == len(self.layers) - 1 else F.relu(layer(x))
        return x


class DETR(nn.Module):
    """DETR (Carion et al. 2020; facebookresearch/detr's layout and names), small, for 1x64x64
    scenes. The backbone replaces ResNet-50 by 4 x [Conv3x3 stride 2 pad 1 (no bias) ->
    BatchNorm2d (batch statistics in training) -> ReLU], channels 1-32-64-128-128, so
    64x64 -> 4x4 = 16 memory tokens; input_proj Conv1x1(128 -> d, bias); sine positions;
    post-norm transformer d 128, 4 heads, FF 512 ReLU, dropout 0.1, 3 encoder layers (no final
    norm) and 3 decoder layers whose outputs all go through the shared decoder LayerNorm (the
    auxiliary outputs, sec. 3.2); 10 learned queries (target starts at 0); class_embed
    Linear(d, classes + 1 "no object"); bbox_embed MLP d-d-d-4 + sigmoid -> (cx, cy, w, h) in
    [0, 1]. Transformer matrices Xavier-uniform (DETR's _reset_parameters), the rest PyTorch's
    defaults.

    forward(img (B, 1, 64, 64)) -> logits (L, B, Q, classes + 1), boxes (L, B, Q, 4): one
    prediction per decoder layer L, the last being the model's output.
    """

    def __init__(self, classes=10, d=128, h=4, n_enc=3, n_dec=3, ff=512, p=0.1, queries=10,
                 chans=(1, 32, 64, 128, 128)):
        super().__init__()
        self.backbone = nn.Sequential(*(m for cin, cout in zip(chans, chans[1:]) for m in (
            nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(cout),
            nn.ReLU())))                                   # backbone.{3k} conv, {3k+1} BN
        self.input_proj = nn.Conv2d(chans[-1], d, kernel_size=1)
        self.transformer = Bag(
            encoder=Bag(layers=nn.ModuleList(DetrEncoderLayer(d, h, ff, p)
                                             for _ in range(n_enc))),
            decoder=Bag(layers=nn.ModuleList(DetrDecoderLayer(d, h, ff, p)
                                             for _ in range(n_dec)),
                        norm=nn.LayerNorm(d)))
        for prm in self.transformer.parameters():
            if prm.dim() > 1:
                nn.init.xavier_uniform_(prm)
        self.query_embed = nn.Embedding(queries, d)
        self.class_embed = nn.Linear(d, classes + 1)
        self.bbox_embed = MLP(d, d, 4, 3)

    def forward(self, img):
        src = self.input_proj(self.backbone(img))          # (B, d, 4, 4)
        B, d, H, W = src.shape
        pos = position_embedding_sine(B, H, W, d // 2, img.device)
        pos = pos.flatten(2).permute(2, 0, 1)              # (HW, B, d)
        src = src.flatten(2).permute(2, 0, 1)              # (HW, B, d), sequence first
        query_pos = self.query_embed.weight.unsqueeze(1).repeat(1, B, 1)   # (Q, B, d)
        for layer in self.transformer.encoder.layers:
            src = layer(src, pos)
        tgt, hs = torch.zeros_like(query_pos), []
        for layer in self.transformer.decoder.layers:
            tgt = layer(tgt, src, pos, query_pos)
            hs.append(self.transformer.decoder.norm(tgt))  # the next layer gets un-normed tgt
        hs = torch.stack(hs).transpose(1, 2)               # (L, B, Q, d)
        return self.class_embed(hs), self.bbox_embed(hs).sigmoid()


def box_cxcywh_to_xyxy(b):                                 # (..., 4) -> (..., 4)
    cx, cy, w, h = b.unbind(-1)
    return torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], dim=-1)


def generalized_box_iou(a, b):
    """GIoU (Rezatofighi et al. 2019) of xyxy boxes a (N, 4) and b (M, 4) -> (N, M):
    IoU - (hull area - union) / hull area, in [-1, 1]."""
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    wh = (torch.min(a[:, None, 2:], b[:, 2:]) - torch.max(a[:, None, :2], b[:, :2])).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    union = area_a[:, None] + area_b - inter
    wh = (torch.max(a[:, None, 2:], b[:, 2:]) - torch.min(a[:, None, :2], b[:, :2])).clamp(min=0)
    hull = wh[..., 0] * wh[..., 1]
    return inter / union - (hull - union) / hull


class HungarianMatcher(nn.Module):
    """DETR's matcher.py (Carion et al. 2020, sec. 3.1, eq. 1): the one-to-one assignment of
    queries to targets of least cost, cost = w_bbox L1(boxes) - w_class softmax prob(target
    class) - w_giou GIoU, computed for the whole batch at once, then solved per image by
    scipy.optimize.linear_sum_assignment on its (queries x targets) block, on the host.

    forward(logits (B, Q, C + 1), boxes (B, Q, 4) cxcywh, targets: B dicts of "labels" (n,)
    int64 and "boxes" (n, 4) cxcywh) -> B pairs (query indices, target indices), int64 on the
    CPU, each of length min(Q, n).
    """

    def __init__(self, w_class=1.0, w_bbox=5.0, w_giou=2.0):
        super().__init__()
        self.w_class, self.w_bbox, self.w_giou = w_class, w_bbox, w_giou

    @torch.no_grad()
    def forward(self, logits, boxes, targets):
        from scipy.optimize import linear_sum_assignment
        B, Q = logits.shape[:2]
        prob, out_bbox = logits.flatten(0, 1).softmax(-1), boxes.flatten(0, 1)   # (B Q, .)
        tgt_ids = torch.cat([t["labels"] for t in targets])
        tgt_bbox = torch.cat([t["boxes"] for t in targets])                     # (sum n, 4)
        giou = generalized_box_iou(box_cxcywh_to_xyxy(out_bbox), box_cxcywh_to_xyxy(tgt_bbox))
        C = (self.w_bbox * torch.cdist(out_bbox, tgt_bbox, p=1) - self.w_class * prob[:, tgt_ids]
             - self.w_giou * giou)
        C = C.view(B, Q, -1).cpu()                         # (B, Q, sum n)
        sizes = [len(t["boxes"]) for t in targets]
        return [tuple(torch.as_tensor(a, dtype=torch.int64) for a in linear_sum_assignment(c[i]))
                for i, c in enumerate(C.split(sizes, -1))]


class SetCriterion(nn.Module):
    """DETR's SetCriterion for one decoder layer's predictions (sec. 3.1, eq. 2): the matcher
    pairs queries with targets; the named terms are
        loss_ce    cross-entropy over all queries, unmatched ones labelled "no object" (class
                   index `classes`) with weight eos_coef; weighted mean
        loss_bbox  L1 between matched boxes, summed, / num_boxes
        loss_giou  1 - GIoU of matched boxes, summed, / num_boxes
    weighted by weight_dict (1, 5, 2). forward(logits (B, Q, C + 1), boxes (B, Q, 4), targets,
    num_boxes: the batch's total box count) -> dict of the three terms; total(terms) -> scalar.
    """

    def __init__(self, classes, matcher=None, eos_coef=0.1):
        super().__init__()
        self.classes = classes
        self.matcher = matcher if matcher is not None else HungarianMatcher()
        self.weight_dict = {"loss_ce": 1.0, "loss_bbox": 5.0, "loss_giou": 2.0}
        empty_weight = torch.ones(classes + 1)
        empty_weight[-1] = eos_coef
        self.register_buffer("empty_weight", empty_weight)

    def forward(self, logits, boxes, targets, num_boxes):
        dev = logits.device
        idx = self.matcher(logits, boxes, targets)
        b = torch.cat([torch.full_like(q, i) for i, (q, _) in enumerate(idx)]).to(dev)
        q = torch.cat([q for q, _ in idx]).to(dev)         # matched (image, query) pairs
        tgt_cls = torch.full(logits.shape[:2], self.classes, dtype=torch.int64, device=dev)
        tgt_cls[b, q] = torch.cat([t["labels"][j.to(dev)] for t, (_, j) in zip(targets, idx)])
        loss_ce = F.cross_entropy(logits.transpose(1, 2), tgt_cls, self.empty_weight)
        src_b = boxes[b, q]                                # (matches, 4)
        tgt_b = torch.cat([t["boxes"][j.to(dev)] for t, (_, j) in zip(targets, idx)])
        loss_bbox = F.l1_loss(src_b, tgt_b, reduction="none").sum() / num_boxes
        giou = generalized_box_iou(box_cxcywh_to_xyxy(src_b), box_cxcywh_to_xyxy(tgt_b))
        loss_giou = (1 - torch.diag(giou)).sum() / num_boxes
        return {"loss_ce": loss_ce, "loss_bbox": loss_bbox, "loss_giou": loss_giou}

    def total(self, terms):
        return sum(self.weight_dict[k] * v for k, v in terms.items())


def detr_loss(criterion, logits, boxes, targets):
    """DETR's training loss with auxiliary decoding losses (sec. 3.2): the weighted set loss of
    every decoder layer's predictions, summed. logits (L, B, Q, C + 1), boxes (L, B, Q, 4)."""
    num_boxes = float(max(sum(len(t["labels"]) for t in targets), 1))
    return sum(criterion.total(criterion(logits[i], boxes[i], targets, num_boxes))
               for i in range(logits.shape[0]))


def detr_scenes(B, size=64, classes=10):
    """The benchmark's random scenes (bench/detr.cpp's detr_scenes): 1-4 boxes per image, w and h
    uniform in [0.15, 0.45) of the side, inside the image; box areas painted with uniform noise
    over a faint (0.1 x uniform) background; random labels. Draws from torch's global generator.
    -> images (B, 1, size, size), B dicts {"labels" (n,) int64, "boxes" (n, 4) cxcywh in [0, 1]}.
    """
    imgs, targets = torch.rand(B, 1, size, size) * 0.1, []
    for i in range(B):
        n = int(torch.randint(1, 5, ()))
        wh = torch.rand(n, 2) * 0.3 + 0.15
        c = wh / 2 + torch.rand(n, 2) * (1 - wh)
        boxes = torch.cat([c, wh], 1)                      # (n, 4) cxcywh
        for x0, y0, x1, y1 in (box_cxcywh_to_xyxy(boxes) * size).round().long().tolist():
            imgs[i, 0, y0:y1, x0:x1] = torch.rand(y1 - y0, x1 - x0)
        targets.append({"labels": torch.randint(0, classes, (n,)), "boxes": boxes})
    return imgs, targets


# ============================================================================ factory
NAMES = ["gpt-mini", "gpt2", "vit-fmnist", "vit-tiny", "swin-fmnist", "seq2seq-mini",
         "bert-mini", "detr-fmnist"]


def build(name, **config):
    """The model of a benchmark case, freshly initialised from torch's global generator, in
    training mode. Keyword arguments override GPTConfig / ViTConfig fields (sdpa=True) or the
    other models' constructor arguments (DETR's dropout p=0.0)."""
    if name in ("gpt-mini", "gpt2"):
        return GPT(GPTConfig(**{**vars(GPTConfig.preset(name)), **config}))
    if name in ("vit-fmnist", "vit-tiny"):
        return ViT(ViTConfig(**{**vars(ViTConfig.preset(name)), **config}))
    models = {"swin-fmnist": Swin, "seq2seq-mini": Seq2Seq, "bert-mini": BertForPreTraining,
              "detr-fmnist": DETR}
    if name not in models:
        raise ValueError(f"build: unknown model '{name}' (known: {', '.join(NAMES)})")
    return models[name](**config)


def n_params(model):
    """Parameter count, each tensor once (tied weights and shared biases are one tensor)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
