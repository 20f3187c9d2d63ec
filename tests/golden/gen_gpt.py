#!/usr/bin/python3
"""Golden GPT values from PyTorch for tests/models/test_gpt.cpp.

Writes two files next to this script:

gpt.safetensors — a tiny GPT-2 style model (CONFIG below) with random weights, in loom's names
and layouts (nn.Linear weights [out, in]), evaluated in float64 on fixed token ids:
    param.<name>        every parameter, float32 (the values loom loads)
    ids, targets        int64 [B, T]
    logits              [B, T, vocab]       the model's output
    loss                []                  mean cross-entropy of logits against targets
    grad.<name>         d loss / d parameter, for every parameter
    generate.prompt     int64 [P]           a prompt ...
    generate.greedy     int64 [P + N]       ... and its greedy continuation (no KV cache; the
                                            context is cropped to the last CONTEXT tokens, so
                                            the window slides for the last tokens)
    count.<preset>      int64 []            parameter counts (tied head counted once) of
                                            PyTorch GPTs built with loom's presets
gpt_hf.safetensors — the same weights in Hugging Face's GPT2LMHeadModel layout: names with a
    "transformer." prefix, Conv1D weights stored [in, out], the causal-mask buffers
    h.N.attn.bias and h.N.attn.masked_bias, and lm_head.weight (= wte.weight). Its logits are
    recomputed by a second, Conv1D-based implementation (x @ W + b, as transformers' GPT2) and
    must equal the ones in gpt.safetensors.

The model follows nanoGPT (model.py): token + learned position embeddings, pre-norm blocks of
causal self-attention (fused c_attn) and a GELU(tanh) MLP, final LayerNorm, LM head tied to
wte. Weights are drawn larger than GPT-2's initialisation (and LayerNorm gains and biases are
not 1 and 0) so that every parameter matters to the logits.

Run: /usr/bin/python3 tests/golden/gen_gpt.py   (from anywhere)
"""

import math
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from safetensors_io import save  # noqa: E402

CONFIG = dict(vocab_size=13, context=9, n_layer=2, n_head=2, d_model=12)
B, T = 2, 7
PROMPT_LEN, NEW_TOKENS = 4, 10
PRESETS = {  # loom's GPTConfig::preset values: (vocab, context, n_layer, n_head, d_model)
    "gpt-mini": (256, 128, 4, 4, 256),
    "gpt2": (50257, 1024, 12, 12, 768),
    "gpt2-medium": (50257, 1024, 24, 16, 1024),
}


def param_shapes(vocab_size, context, n_layer, n_head, d_model):
    """Parameter names (loom = HF GPT-2 names) and shapes, nn.Linear layout [out, in]."""
    d = d_model
    shapes = {"wte.weight": (vocab_size, d), "wpe.weight": (context, d)}
    for i in range(n_layer):
        p = f"h.{i}."
        shapes.update({
            p + "ln_1.weight": (d,), p + "ln_1.bias": (d,),
            p + "attn.c_attn.weight": (3 * d, d), p + "attn.c_attn.bias": (3 * d,),
            p + "attn.c_proj.weight": (d, d), p + "attn.c_proj.bias": (d,),
            p + "ln_2.weight": (d,), p + "ln_2.bias": (d,),
            p + "mlp.c_fc.weight": (4 * d, d), p + "mlp.c_fc.bias": (4 * d,),
            p + "mlp.c_proj.weight": (d, 4 * d), p + "mlp.c_proj.bias": (d,),
        })
    shapes.update({"ln_f.weight": (d,), "ln_f.bias": (d,)})
    return shapes


def random_params(gen):
    params = {}
    for name, shape in param_shapes(**CONFIG).items():
        if name.endswith(".weight") and len(shape) == 1:        # LayerNorm gain near 1
            t = 1.0 + 0.2 * torch.randn(shape, generator=gen)
        elif name.endswith(".bias"):
            t = 0.1 * torch.randn(shape, generator=gen)
        else:
            t = 0.3 * torch.randn(shape, generator=gen)
        params[name] = t.float()
    return params


def gpt_forward(p, ids, n_layer, n_head):
    """nanoGPT's forward with loom's layouts: Linear y = x W^T + b."""
    Bn, Tn = ids.shape
    d = p["wte.weight"].shape[1]
    hs = d // n_head
    x = p["wte.weight"][ids] + p["wpe.weight"][torch.arange(Tn)]            # (B, T, C)
    causal = torch.ones(Tn, Tn, dtype=torch.bool).tril()
    for i in range(n_layer):
        pre = f"h.{i}."
        ln = lambda y, n: F.layer_norm(y, (d,), p[pre + n + ".weight"], p[pre + n + ".bias"], 1e-5)
        lin = lambda y, n: F.linear(y, p[pre + n + ".weight"], p[pre + n + ".bias"])
        q, k, v = lin(ln(x, "ln_1"), "attn.c_attn").split(d, dim=2)          # (B, T, C) each
        q, k, v = (t.view(Bn, Tn, n_head, hs).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)                      # (B, nh, T, T)
        att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(Bn, Tn, d)                     # (B, T, C)
        x = x + lin(y, "attn.c_proj")
        x = x + lin(F.gelu(lin(ln(x, "ln_2"), "mlp.c_fc"), approximate="tanh"), "mlp.c_proj")
    x = F.layer_norm(x, (d,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    return x @ p["wte.weight"].T                                             # (B, T, vocab)


def hf_forward(sd, ids, n_layer, n_head):
    """transformers' GPT2LMHeadModel arithmetic on an HF state dict: Conv1D y = x W + b with
    W [in, out], the causal mask taken from the h.N.attn.bias buffers."""
    t = lambda n: sd["transformer." + n]
    Bn, Tn = ids.shape
    d = t("wte.weight").shape[1]
    hs = d // n_head
    conv1d = lambda y, n: torch.addmm(t(n + ".bias"), y.reshape(-1, y.shape[-1]),
                                      t(n + ".weight")).view(Bn, Tn, -1)
    h = t("wte.weight")[ids] + t("wpe.weight")[torch.arange(Tn)]
    for i in range(n_layer):
        pre = f"h.{i}."
        ln = lambda y, n: F.layer_norm(y, (d,), t(pre + n + ".weight"), t(pre + n + ".bias"), 1e-5)
        qkv = conv1d(ln(h, "ln_1"), pre + "attn.c_attn")
        q, k, v = (s.reshape(Bn, Tn, n_head, hs).permute(0, 2, 1, 3) for s in qkv.split(d, dim=2))
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hs)
        mask = t(pre + "attn.bias")[:, :, :Tn, :Tn].bool()
        w = torch.where(mask, w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        a = torch.matmul(F.softmax(w, dim=-1), v).permute(0, 2, 1, 3).reshape(Bn, Tn, d)
        h = h + conv1d(a, pre + "attn.c_proj")
        m = F.gelu(conv1d(ln(h, "ln_2"), pre + "mlp.c_fc"), approximate="tanh")
        h = h + conv1d(m, pre + "mlp.c_proj")
    h = F.layer_norm(h, (d,), t("ln_f.weight"), t("ln_f.bias"), 1e-5)
    return h @ sd["lm_head.weight"].T


def to_hf(params):
    """loom names/layouts -> GPT2LMHeadModel's state dict (Conv1D weights transposed)."""
    conv1d = (".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight")
    sd = {}
    for name, value in params.items():
        sd["transformer." + name] = value.t().contiguous() if name.endswith(conv1d) else value
    ctx = CONFIG["context"]
    for i in range(CONFIG["n_layer"]):
        sd[f"transformer.h.{i}.attn.bias"] = torch.ones(ctx, ctx, dtype=torch.bool).tril().view(1, 1, ctx, ctx)
        sd[f"transformer.h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    sd["lm_head.weight"] = params["wte.weight"]
    return sd


def greedy(params, prompt):
    """Greedy decoding without a cache; each step sees the last `context` tokens."""
    idx = prompt.view(1, -1)
    for _ in range(NEW_TOKENS):
        logits = gpt_forward(params, idx[:, -CONFIG["context"]:], CONFIG["n_layer"],
                             CONFIG["n_head"])[0, -1]
        top2 = logits.topk(2).values
        assert top2[0] - top2[1] > 1e-3, "near-tie in greedy decoding: pick another seed"
        idx = torch.cat([idx, logits.argmax().view(1, 1)], dim=1)
    return idx.view(-1)


def count_params(vocab, context, n_layer, n_head, d_model):
    """Parameters of a PyTorch GPT with these sizes (built on the meta device: no memory)."""
    shapes = param_shapes(vocab, context, n_layer, n_head, d_model)
    modules = [torch.nn.Embedding(vocab, d_model, device="meta"),
               torch.nn.Embedding(context, d_model, device="meta")]
    for _ in range(n_layer):
        modules += [torch.nn.LayerNorm(d_model, device="meta"),
                    torch.nn.Linear(d_model, 3 * d_model, device="meta"),
                    torch.nn.Linear(d_model, d_model, device="meta"),
                    torch.nn.LayerNorm(d_model, device="meta"),
                    torch.nn.Linear(d_model, 4 * d_model, device="meta"),
                    torch.nn.Linear(4 * d_model, d_model, device="meta")]
    modules.append(torch.nn.LayerNorm(d_model, device="meta"))
    total = sum(p.numel() for m in modules for p in m.parameters())   # head tied: not counted
    assert total == sum(math.prod(s) for s in shapes.values())
    return total


def main():
    gen = torch.Generator().manual_seed(20190214)   # GPT-2's release date
    params = random_params(gen)
    ids = torch.randint(0, CONFIG["vocab_size"], (B, T), generator=gen)
    targets = torch.randint(0, CONFIG["vocab_size"], (B, T), generator=gen)
    prompt = torch.randint(0, CONFIG["vocab_size"], (PROMPT_LEN,), generator=gen)

    p64 = {n: v.double().requires_grad_(True) for n, v in params.items()}
    logits = gpt_forward(p64, ids, CONFIG["n_layer"], CONFIG["n_head"])
    loss = F.cross_entropy(logits.reshape(-1, CONFIG["vocab_size"]), targets.reshape(-1))
    loss.backward()

    hf = to_hf({n: v.double() for n, v in params.items()})
    hf_logits = hf_forward(hf, ids, CONFIG["n_layer"], CONFIG["n_head"])
    assert torch.allclose(hf_logits, logits.detach(), rtol=1e-10, atol=1e-10), "HF layout mismatch"

    with torch.no_grad():
        continuation = greedy({n: v.double() for n, v in params.items()}, prompt)

    out = {"param." + n: v for n, v in params.items()}
    out.update({"grad." + n: p.grad.float() for n, p in p64.items()})
    out.update(ids=ids, targets=targets, logits=logits.detach().float(), loss=loss.detach().float(),
               **{"generate.prompt": prompt, "generate.greedy": continuation})
    for name, sizes in PRESETS.items():
        out["count." + name] = torch.tensor(count_params(*sizes), dtype=torch.int64)
    meta = {"generator": "tests/golden/gen_gpt.py", "torch": torch.__version__,
            **{k: str(v) for k, v in CONFIG.items()}}
    save(os.path.join(HERE, "gpt.safetensors"), out, metadata=meta)
    save(os.path.join(HERE, "gpt_hf.safetensors"), {n: v.float() if v.is_floating_point() else v
                                                     for n, v in to_hf(params).items()},
         metadata={"generator": "tests/golden/gen_gpt.py", "layout": "transformers GPT2LMHeadModel"})
    print(f"wrote gpt.safetensors ({len(out)} tensors) and gpt_hf.safetensors; loss {loss.item():.6f}")
    for name in PRESETS:
        print(f"  {name}: {out['count.' + name].item():,} parameters")


if __name__ == "__main__":
    main()
