#!/usr/bin/env python3
"""PyTorch reference for bench/gpt on a GPU: the GPT of ../shared/bench/torch_ref.py, eager fp32.

Usage:  python3 bench/torch_gpu_ref.py CASE [--steps N] [--device cuda] [--tf32] [--compile]
                                          [--gpt2-init] [--bf16] [--sdpa] [--fused-adamw] [--fast]
CASE:   gpt-mini   training step, byte-level gpt-mini (4 layers, d 256), batch 16 x 128
        gpt2       training step, GPT-2 small (12 layers, d 768, 12 heads, vocab 50257,
                   context 1024, 124,439,808 parameters), batch 8 x 1024

../shared/bench/torch_ref.py times these models on the CPU; this script builds the same
model (the same conventions: four Linear(d, d) attention projections with bias, causal
masking by masked_fill(-inf) before softmax, LayerNorm eps 1e-5, GELU(tanh) MLP, tied LM
head, N(0, 0.02) init) and times it the same way (median of N steps after 3 warm-ups, AdamW
lr 3e-4, betas (0.9, 0.95), weight decay 0.1, the same batch every step), on any device.
The step ends with loss.item(), which waits for the GPU, exactly as bench/gpt does.
Defaults are PyTorch's: float32 without TF32 (torch.backends.cuda.matmul.allow_tf32 False),
the eager attention above (no fused scaled_dot_product_attention), foreach AdamW.
PyTorch's fast path, the bar of bf16 training on a GPU, is opt-in: --bf16 runs the forward
pass under torch.autocast("cuda", dtype=torch.bfloat16), --sdpa replaces the eager attention
by F.scaled_dot_product_attention(is_causal=True) (FlashAttention on an H100), --fused-adamw
uses AdamW(fused=True); --fast is all three (add --compile for torch.compile on top).
Prints one JSON line with the keys of bench/gpt, plus "mfu": model FLOPs per second (6 x
parameters + 12 x layers x d_model x seq per token, PaLM's count, the tied embedding counted
once) over the H100/H200 bf16 dense peak of 989 TFLOP/s, whatever the precision of the run.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

WARMUP = 3


class MultiHeadAttention(nn.Module):
    def __init__(self, d, h, sdpa=False):
        super().__init__()
        self.h, self.sdpa = h, sdpa
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        B, T, D = x.shape
        hd = D // self.h
        q = self.q(x).view(B, T, self.h, hd).transpose(1, 2)      # (B, h, T, hd)
        k = self.k(x).view(B, T, self.h, hd).transpose(1, 2)
        v = self.v(x).view(B, T, self.h, hd).transpose(1, 2)
        if self.sdpa:  # PyTorch's fused attention (FlashAttention kernels on the GPU)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o(y.transpose(1, 2).reshape(B, T, D))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)           # (B, h, T, T)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf"))
        y = F.softmax(att, dim=-1) @ v                            # (B, h, T, hd)
        return self.o(y.transpose(1, 2).reshape(B, T, D))


class Block(nn.Module):
    def __init__(self, d, h, sdpa=False):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(d), MultiHeadAttention(d, h, sdpa)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, ctx, n_layer, h, d, sdpa=False):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, h, sdpa) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        self.head.weight = self.tok.weight

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


CASES = {  # name: (vocab, ctx, n_layer, heads, d_model, batch, seq)
    "gpt-mini": (256, 128, 4, 4, 256, 16, 128),
    "gpt2": (50257, 1024, 12, 12, 768, 8, 1024),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 tensor-core matmuls")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--gpt2-init", action="store_true",
                    help="scale the residual output projections' init by 1/sqrt(2 n_layer), as "
                         "GPT-2 and loom's models::GPT do (torch_ref.py does not)")
    ap.add_argument("--bf16", action="store_true", help="forward under autocast(bfloat16)")
    ap.add_argument("--sdpa", action="store_true", help="F.scaled_dot_product_attention")
    ap.add_argument("--fused-adamw", action="store_true", help="AdamW(fused=True)")
    ap.add_argument("--fast", action="store_true", help="--bf16 --sdpa --fused-adamw")
    ap.add_argument("--profile", action="store_true",
                    help="after timing, profile one more step (torch.profiler) and print its "
                         "CUDA kernels by time to stderr")
    args = ap.parse_args()
    if args.fast:
        args.bf16 = args.sdpa = args.fused_adamw = True
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.manual_seed(0)
    vocab, ctx, n_layer, h, d, B, T = CASES[args.case]
    model = GPT(vocab, ctx, n_layer, h, d, sdpa=args.sdpa)
    if args.gpt2_init:
        for blk in model.blocks:
            for proj in (blk.attn.o, blk.mlp[2]):
                nn.init.normal_(proj.weight, 0.0, 0.02 / math.sqrt(2 * n_layer))
    model = model.to(args.device)
    params = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    fwd = torch.compile(model) if args.compile else model
    data = torch.randint(0, vocab, (B, T + 1), device=args.device)
    x, y = data[:, :-1], data[:, 1:]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            **({"fused": True} if args.fused_adamw else {}))

    def step():
        with torch.autocast(device_type=torch.device(args.device).type, dtype=torch.bfloat16,
                            enabled=args.bf16):
            logits = fwd(x)
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss.item()

    losses = [step() for _ in range(WARMUP)]
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    if args.profile:
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=60, max_name_column_width=100),
              file=sys.stderr)
    flops_per_token = 6 * params + 12 * n_layer * d * T
    print(json.dumps({
        "case": args.case, "batch": B, "seq": T, "tokens_per_s": round(B * T / med, 2),
        "ms_per_step": round(med * 1e3, 3), "ms_min": round(min(times) * 1e3, 3),
        "ms_max": round(max(times) * 1e3, 3), "steps": args.steps, "warmup": WARMUP,
        "params": params, "device": args.device, "tf32": args.tf32, "compile": args.compile,
        "bf16": args.bf16, "sdpa": args.sdpa, "fused_adamw": args.fused_adamw,
        "mfu": round(flops_per_token * B * T / med / 989e12, 4), "gpt2_init": args.gpt2_init,
        "framework": "torch " + torch.__version__,
        "loss_first": round(losses[0], 5), "loss_last": round(losses[-1], 5)}))


if __name__ == "__main__":
    main()
