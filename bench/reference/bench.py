#!/usr/bin/python3
"""PyTorch's side of loom's benchmarks: each case of bench/{ops,gpt,vision,seq2seq,bert,detr}
on the same model (models.py), data, optimizer and timing, printing one JSON line with the keys
of the loom program's line plus "framework": "pytorch", "torch" (its version) and "omp_wait".

Usage:  /usr/bin/python3 bench/reference/bench.py CASE [--steps N] [--threads T]
            [--blas-threads B] [--omp-wait passive|default|active] [--flops]
            [--device cpu|cuda] [--tf32] [--bf16] [--sdpa] [--fused-adamw] [--fast] [--compile]
            [--gpt2-init] [--profile]

CASE (loom's program in brackets):
  sgemm                   [ops sgemm] torch.mm of two 1024x1024 float32 matrices
  einsum, topk, index,    [ops CASE] one tensor op on a [256, 1024] float32 x (and y):
  cumsum                  einsum("ij,kj->ik", x, y); topk(x, 10) along the last dim;
                          x[rows] with 256 int64 row indices, then x[x > 0] (a bool mask);
                          cumsum(x, 1)
  gpt-mini                [gpt] training step, byte-level GPT (3,257,856 params), batch 16 x 128
  gpt2                    [gpt] training step, GPT-2 small (124,439,808 params), batch 8 x 1024
                          (for a GPU)
  gpt-mini-generate       [gpt, --no-cache] greedy decoding, batch 1, 16-token random prompt,
                          128 new tokens, no KV cache: every token re-runs the context (cropped
                          to the last 128 tokens)
  vit-fmnist, swin-fmnist [vision] training step on 128 / 64 random 1x28x28 images,
                          AdamW(lr 1e-3, wd 0.05), cross-entropy; Swin's drop-path on
  seq2seq-mini            [seq2seq] training step, 32 random 32-token sources and 33-token
                          targets, cross-entropy with label smoothing 0.1, Adam(betas (0.9, 0.98),
                          eps 1e-9) with the Noam schedule (d 256, warmup 4000)
  seq2seq-mini-translate  [seq2seq] 32 random 24-token sources, 24 tokens decoded from BOS id 1
                          with the KV cache, greedy (ms_per_step) and beam 4 (beam_*);
                          cache_matches_full checks the greedy tokens against a full re-run
  bert-mini               [bert] MLM + NSP step, batch 32 x 128, exactly 614 masked positions,
                          AdamW(lr 1e-4, eps 1e-6, wd 0.01), dropout on
  detr-fmnist             [detr] training step on 32 random 1x64x64 scenes of 1-4 boxes, set
                          loss over the 3 decoder layers, AdamW(lr 1e-4, backbone 1e-5, wd 1e-4),
                          grad-norm clip 0.1; matcher_ms: median time per step in the 3
                          matchings, matcher_share = matcher_ms / ms_per_step

Protocol (bench/bench_util.h's): torch.manual_seed(0); the model, then its data, drawn once on
the CPU and moved to --device; 3 untimed warm-up steps, then N timed ones (default 10; sgemm
20); ms_per_step is the median. A training step is forward + loss + backward + optimizer step
(+ schedule) + zero_grad (in place, PyTorch 1.13's default) and ends with loss.item(), which
waits for the GPU. Every step reuses the same batch, so loss_last < loss_first only shows
memorisation; loss_first is the first warm-up step's, before any update.

Threads: see threads.py. --threads T sizes ATen's pool and, unless --blas-threads says
otherwise, OpenBLAS's; idle OpenMP workers sleep (--omp-wait passive) unless told otherwise.

--flops counts one more (untimed) step's matrix-product FLOPs at PyTorch's dispatcher: forward
and backward aten mm, addmm, bmm, baddbmm, convolution and convolution_backward, 2 per
multiply-add; it adds "flops_per_step" (GFLOP) and "gflops_per_s".

GPU (--device cuda; the models live on the device). For the GPT training cases (gpt-mini, gpt2)
PyTorch's fast path is opt-in: --bf16 runs the forward under
torch.autocast(bfloat16), --sdpa uses F.scaled_dot_product_attention (FlashAttention),
--fused-adamw AdamW(fused=True), --fast all three, --compile torch.compile on top; --gpt2-init
scales the residual projections' init as GPT-2 and loom's models::GPT do; --profile prints one
more step's CUDA kernels to stderr. --tf32 allows TF32 matrix products in every case. The GPT
training cases also print "mfu": model FLOPs per second (6 x parameters + 12 x layers x d x seq
per token, PaLM's count, the tied embedding once) over the H100/H200 bf16 dense peak, 989
TFLOP/s, whatever the precision of the run.
"""
import argparse
import json
import math
import statistics
import sys
import time

import threads

CASES = ["sgemm", "einsum", "topk", "index", "cumsum", "gpt-mini", "gpt2", "gpt-mini-generate",
         "vit-fmnist", "swin-fmnist", "seq2seq-mini", "seq2seq-mini-translate", "bert-mini",
         "detr-fmnist"]
GPT_TRAINING = ("gpt-mini", "gpt2")
WARMUP = 3
PEAK_BF16_FLOPS = 989e12                                   # H100 / H200 SXM, dense


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("case", choices=CASES)
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default 10; sgemm 20)")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (ATen/OpenMP)")
    ap.add_argument("--blas-threads", type=int, default=None, help="OpenBLAS pool (default: T)")
    ap.add_argument("--omp-wait", choices=threads.OMP_WAIT, default="passive",
                    help="OMP_WAIT_POLICY for libgomp; 'default' leaves it unset")
    ap.add_argument("--flops", action="store_true",
                    help="count one step's matmul/conv FLOPs (flops_per_step, gflops_per_s)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--tf32", action="store_true", help="CUDA: TF32 tensor-core matmuls")
    ap.add_argument("--bf16", action="store_true", help="GPT: forward under autocast(bfloat16)")
    ap.add_argument("--sdpa", action="store_true", help="GPT: F.scaled_dot_product_attention")
    ap.add_argument("--fused-adamw", action="store_true", help="GPT, CUDA: AdamW(fused=True)")
    ap.add_argument("--fast", action="store_true", help="--bf16 --sdpa --fused-adamw")
    ap.add_argument("--compile", action="store_true", help="GPT: torch.compile the model")
    ap.add_argument("--gpt2-init", action="store_true",
                    help="GPT: residual projections' init scaled by 1/sqrt(2 n_layer), as GPT-2 "
                         "and loom's models::GPT (the default model does not)")
    ap.add_argument("--profile", action="store_true",
                    help="GPT, CUDA: profile one more step, its CUDA kernels by time to stderr")
    args = ap.parse_args()
    if args.fast:
        args.bf16 = args.sdpa = args.fused_adamw = True
    args.steps = args.steps or (20 if args.case == "sgemm" else 10)
    gpt_only = [f for f in ("bf16", "sdpa", "fused_adamw", "compile", "gpt2_init", "profile")
                if getattr(args, f)]
    if gpt_only and args.case not in GPT_TRAINING:
        ap.error(f"--{gpt_only[0].replace('_', '-')} is for the GPT training cases "
                 f"({', '.join(GPT_TRAINING)})")
    cuda_only = [f for f in ("tf32", "fused_adamw", "profile") if getattr(args, f)]
    if cuda_only and args.device != "cuda":
        ap.error(f"--{cuda_only[0].replace('_', '-')} needs --device cuda")
    return args


# Thread pools are sized from the environment when `import torch` loads them (threads.py).
ARGS = parse_args()
threads.before_torch(ARGS.threads, ARGS.blas_threads, ARGS.omp_wait)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import models  # noqa: E402


# ----------------------------------------------------------------------------- measuring
def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def count_flops(step):
    """Matrix-product FLOPs of one call of step(), counted at the ATen dispatcher (below
    autograd, so the backward's products are seen too): 2 per multiply-add."""
    from torch.utils._python_dispatch import TorchDispatchMode
    aten, total = torch.ops.aten, [0]

    def conv(w_shape, out_shape):                          # 2 N Cout prod(out) Cin/groups prod(k)
        return 2 * out_shape[0] * math.prod(out_shape[2:]) * math.prod(w_shape)

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            f = func.overloadpacket
            if f in (aten.mm, aten.addmm):                 # (n, k) @ (k, m)
                a, b = args[-2], args[-1]
                total[0] += 2 * a.shape[0] * a.shape[1] * b.shape[1]
            elif f in (aten.bmm, aten.baddbmm):            # (batch, n, k) @ (batch, k, m)
                a, b = args[-2], args[-1]
                total[0] += 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
            elif f is aten.convolution:
                total[0] += conv(args[1].shape, out.shape)
            elif f is aten.convolution_backward:           # grad of input and/or of weight
                grad_out, weight, mask = args[0], args[2], args[-1]
                total[0] += conv(weight.shape, grad_out.shape) * sum(mask[:2])
            return out

    with Count():
        step()
    return total[0]


def measure(step, steps, flops=False):
    """WARMUP untimed calls, (--flops: one counted call), `steps` timed calls.
    -> (per-call seconds of the timed calls, results of warm-up and timed calls, FLOPs/None)."""
    results = [step() for _ in range(WARMUP)]
    per_step = count_flops(step) if flops else None
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        results.append(step())
        times.append(time.perf_counter() - t0)
    return times, results, per_step


def timing_fields(times, prefix=""):
    return {prefix + "ms_per_step": round(statistics.median(times) * 1e3, 3),
            prefix + "ms_min": round(min(times) * 1e3, 3),
            prefix + "ms_max": round(max(times) * 1e3, 3)}


def training_step(model, opt, inputs, labels, loss_fn, sched=None):
    """One training step on a fixed batch, as a function returning the loss (a float)."""
    def step():
        loss = loss_fn(model(*inputs), labels)
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        opt.zero_grad(set_to_none=False)                   # in place, as loom and PyTorch 1.13
        return loss.item()
    return step


def train_report(args, model, step, per_step, unit):
    """Times a training step -> the JSON fields of a training case."""
    times, losses, flops = measure(step, args.steps, args.flops)
    out = {unit: round(per_step / statistics.median(times), 2), **timing_fields(times),
           "params": models.n_params(model),
           "loss_first": round(losses[0], 5), "loss_last": round(losses[-1], 5)}
    return out, times, flops


# ----------------------------------------------------------------------------- cases
def case_sgemm(args, dev):
    n = 1024
    a, b = torch.randn(n, n).to(dev), torch.randn(n, n).to(dev)

    def step():
        torch.mm(a, b)
        synchronize(dev)
    times, _, flops = measure(step, args.steps, args.flops)
    return {"n": n, **timing_fields(times),
            "gflops": round(2 * n ** 3 / 1e9 / statistics.median(times), 2)}, times, flops


def case_tensor_op(args, dev):
    """einsum / topk / index / cumsum on a [256, 1024] float32 x (and y), as bench/ops does."""
    x, y = torch.randn(256, 1024).to(dev), torch.randn(256, 1024).to(dev)
    rows = torch.randint(0, 256, (256,)).to(dev)
    op = {"einsum": lambda: torch.einsum("ij,kj->ik", x, y),
          "topk": lambda: torch.topk(x, 10),
          "index": lambda: (x[rows], x[x > 0]),
          "cumsum": lambda: torch.cumsum(x, 1)}[args.case]

    def step():
        op()
        synchronize(dev)
    times, _, flops = measure(step, args.steps, args.flops)
    return {"shape": "[256, 1024]", **timing_fields(times)}, times, flops


def case_gpt(args, dev):
    """gpt-mini / gpt2 training: AdamW(lr 3e-4, betas (0.9, 0.95), wd 0.1 on every parameter)."""
    B, T = {"gpt-mini": (16, 128), "gpt2": (8, 1024)}[args.case]
    model = models.build(args.case, sdpa=args.sdpa)
    if args.gpt2_init:
        model.scale_residual_init()
    model.to(dev)
    c = model.config
    data = torch.randint(0, c.vocab, (B, T + 1)).to(dev)  # next-token prediction, random tokens
    x, y = data[:, :-1], data[:, 1:]
    forward = torch.compile(model) if args.compile else model
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            **({"fused": True} if args.fused_adamw else {}))

    def step():
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=args.bf16):
            logits = forward(x)                            # (B, T, vocab)
        loss = F.cross_entropy(logits.float().reshape(-1, c.vocab), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss.item()

    out, times, flops = train_report(args, model, step, B * T, "tokens_per_s")
    flops_per_token = 6 * out["params"] + 12 * c.n_layer * c.d * T
    out = {"batch": B, "seq": T, **out,
           "mfu": round(flops_per_token * B * T / statistics.median(times) / PEAK_BF16_FLOPS, 4),
           "tf32": args.tf32, "bf16": args.bf16, "fused_attention": args.sdpa,
           "fused_adamw": args.fused_adamw, "compile": args.compile, "gpt2_init": args.gpt2_init}
    if args.profile:
        profile(step)
    return out, times, flops


def profile(step):
    from torch.profiler import profile as torch_profile, ProfilerActivity
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=60,
                                    max_name_column_width=100), file=sys.stderr)


def case_gpt_generate(args, dev):
    """Greedy, batch 1, NO KV cache: each new token re-runs the forward over the context, cropped
    to the model's last 128 positions, and takes the argmax of the last position's logits."""
    new, prompt_len = 128, 16
    model = models.build("gpt-mini").to(dev).eval()
    prompt = torch.randint(0, model.config.vocab, (1, prompt_len)).to(dev)

    @torch.no_grad()
    def generate():
        idx = prompt
        for _ in range(new):
            logits = model(idx[:, -model.config.ctx:])     # (1, t, vocab)
            idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        return idx.cpu()                                   # waits for the GPU
    times, _, flops = measure(generate, args.steps, args.flops)
    return {"batch": 1, "prompt": prompt_len, "new_tokens": new, "kv_cache": False,
            "new_tokens_per_s": round(new / statistics.median(times), 2),
            "host_sampling": False, "cuda_graphs": False, **timing_fields(times),
            "params": models.n_params(model), "tf32": args.tf32, "bf16": False,
            "fused_attention": False}, times, flops


def case_vision(args, dev):
    B = {"vit-fmnist": 128, "swin-fmnist": 64}[args.case]
    model = models.build(args.case).to(dev)                # training mode: Swin's drop-path on
    imgs, labels = torch.rand(B, 1, 28, 28).to(dev), torch.randint(0, 10, (B,)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    step = training_step(model, opt, (imgs,), labels, F.cross_entropy)
    out, times, flops = train_report(args, model, step, B, "images_per_s")
    return {"batch": B, **out}, times, flops


def case_seq2seq(args, dev):
    B, T, V = 32, 32, 1000
    model = models.build("seq2seq-mini").to(dev)
    src, tgt = torch.randint(0, V, (B, T)).to(dev), torch.randint(0, V, (B, T + 1)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    # Noam (Vaswani et al. 2017, eq. 3): d^-0.5 min(n^-0.5, n warmup^-1.5) at optimizer step n;
    # LambdaLR's counter s starts at 0, so n = s + 1.
    noam = lambda s: model.d ** -0.5 * min((s + 1) ** -0.5, (s + 1) * 4000 ** -1.5)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, noam)
    loss_fn = lambda logits, y: F.cross_entropy(logits.reshape(-1, V), y.reshape(-1),
                                                label_smoothing=0.1)
    step = training_step(model, opt, (src, tgt[:, :-1]), tgt[:, 1:], loss_fn, sched)
    out, times, flops = train_report(args, model, step, B * T, "tokens_per_s")
    return {"batch": B, "src_len": T, "tgt_len": T, **out}, times, flops


def case_translate(args, dev):
    B, S, new, beam = 32, 24, 24, 4
    model = models.build("seq2seq-mini").to(dev).eval()
    src = torch.randint(0, 1000, (B, S)).to(dev)
    greedy = models.translate_greedy(model, src, new)
    with torch.no_grad():                                  # the cache equals a full re-run
        tgt_in = torch.cat([torch.ones(B, 1, dtype=torch.long, device=dev), greedy[:, :-1]], 1)
        matches = bool((model(src, tgt_in).argmax(-1) == greedy).all())
    times, _, flops = measure(lambda: models.translate_greedy(model, src, new).cpu(), args.steps,
                              args.flops)
    times_b, _, _ = measure(lambda: models.translate_beam(model, src, new, beam)[0].cpu(),
                            args.steps)
    return {"batch": B, "src_len": S, "new_tokens": new, "beam": beam, "kv_cache": True,
            "cache_matches_full": matches, **timing_fields(times_b, "beam_"),
            "beam_new_tokens_per_s": round(B * new / statistics.median(times_b), 2),
            "new_tokens_per_s": round(B * new / statistics.median(times), 2),
            **timing_fields(times), "params": models.n_params(model)}, times, flops


def case_bert(args, dev):
    B, T, V = 32, 128, 8192
    model = models.build("bert-mini").to(dev)              # training mode: dropout on
    ids = torch.randint(1, V, (B, T))                      # never the padding id 0
    n_mask = round(0.15 * B * T)                           # exactly 614 of the 4096 positions
    masked = torch.randperm(B * T)[:n_mask]
    mlm_labels = torch.full((B * T,), -100, dtype=torch.long)
    mlm_labels[masked] = ids.view(-1)[masked]
    ids.view(-1)[masked] = 4                               # a [MASK] id
    types = torch.cat([torch.zeros(B, T // 2), torch.ones(B, T - T // 2)], 1).long()
    nsp_labels = torch.randint(0, 2, (B,))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01)
    labels = (mlm_labels.view(B, T).to(dev), nsp_labels.to(dev))
    step = training_step(model, opt, (ids.to(dev), types.to(dev)), labels,
                         models.bert_pretraining_loss)
    out, times, flops = train_report(args, model, step, B * T, "tokens_per_s")
    return {"batch": B, "seq": T, "masked": n_mask, **out}, times, flops


class TimedMatcher(torch.nn.Module):
    """A matcher that adds the seconds spent in it to .seconds (cost matrices + assignment)."""

    def __init__(self, matcher):
        super().__init__()
        self.matcher, self.seconds = matcher, 0.0

    def forward(self, *inputs):
        t0 = time.perf_counter()
        result = self.matcher(*inputs)
        self.seconds += time.perf_counter() - t0
        return result


def case_detr(args, dev):
    B, classes, queries = 32, 10, 10
    model = models.build("detr-fmnist").to(dev)            # training mode: dropout, BN batch stats
    imgs, targets = models.detr_scenes(B, classes=classes)
    imgs = imgs.to(dev)
    targets = [{k: v.to(dev) for k, v in t.items()} for t in targets]
    matcher = TimedMatcher(models.HungarianMatcher())
    criterion = models.SetCriterion(classes, matcher).to(dev)
    in_backbone = lambda name: name.startswith("backbone.")
    opt = torch.optim.AdamW(                               # DETR's: the backbone at lr / 10
        [{"params": [p for n, p in model.named_parameters() if not in_backbone(n)], "lr": 1e-4},
         {"params": [p for n, p in model.named_parameters() if in_backbone(n)], "lr": 1e-5}],
        weight_decay=1e-4)

    def step():
        matcher.seconds = 0.0
        logits, boxes = model(imgs)                        # (L, B, Q, 11), (L, B, Q, 4)
        loss = models.detr_loss(criterion, logits, boxes, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss.item(), matcher.seconds

    times, results, flops = measure(step, args.steps, args.flops)
    match_ms = statistics.median(r[1] for r in results[WARMUP:]) * 1e3
    med = statistics.median(times)
    return {"batch": B, "boxes": sum(len(t["labels"]) for t in targets), "queries": queries,
            "matcher_ms": round(match_ms, 3), "matcher_share": round(match_ms / 1e3 / med, 4),
            **timing_fields(times), "images_per_s": round(B / med, 2),
            "params": models.n_params(model), "loss_first": round(results[0][0], 5),
            "loss_last": round(results[-1][0], 5)}, times, flops


RUN = {"sgemm": case_sgemm, "einsum": case_tensor_op, "topk": case_tensor_op,
       "index": case_tensor_op, "cumsum": case_tensor_op, "gpt-mini": case_gpt, "gpt2": case_gpt,
       "gpt-mini-generate": case_gpt_generate, "vit-fmnist": case_vision,
       "swin-fmnist": case_vision, "seq2seq-mini": case_seq2seq,
       "seq2seq-mini-translate": case_translate, "bert-mini": case_bert,
       "detr-fmnist": case_detr}


def main(args):
    blas = threads.after_torch(torch, args.threads, args.blas_threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench.py: --device cuda, but PyTorch sees no CUDA GPU "
                 f"(torch {torch.__version__}, torch.cuda.is_available() is False)")
    if args.sdpa and not hasattr(F, "scaled_dot_product_attention"):
        sys.exit(f"bench.py: --sdpa needs PyTorch >= 2.0 (this is {torch.__version__})")
    if args.compile and not hasattr(torch, "compile"):
        sys.exit(f"bench.py: --compile needs PyTorch >= 2.0 (this is {torch.__version__})")
    dev = torch.device(args.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
    torch.manual_seed(0)
    out, times, flops = RUN[args.case](args, dev)
    out = {"case": args.case, **out, "steps": args.steps, "warmup": WARMUP}
    if flops is not None:
        out["flops_per_step"] = round(flops / 1e9, 4)
        out["gflops_per_s"] = round(flops / 1e9 / statistics.median(times), 2)
    out.update(threads=torch.get_num_threads(), blas_threads=blas, omp_wait=args.omp_wait,
               device=args.device, framework="pytorch", torch=torch.__version__)
    if dev.type == "cuda":
        out["gpu"] = torch.cuda.get_device_name()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(ARGS)
