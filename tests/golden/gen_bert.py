#!/usr/bin/python3
"""Golden BERT values from PyTorch for tests/models/test_bert.cpp.

transformers is not installed on the build machines, so the model below re-implements Hugging
Face's BertForPreTraining (modeling_bert.py, eager attention) with its exact module names -- and
so its exact state_dict keys -- and math: embeddings (word + token type + position) -> LayerNorm
(eps 1e-12) -> dropout; post-norm layers attention.self.{query,key,value}, attention.output.
{dense,LayerNorm}, intermediate.dense (exact GELU), output.{dense,LayerNorm}; the additive
attention mask (1 - mask) * finfo.min; pooler tanh(dense(h[:, 0])); cls.predictions.transform.
{dense, LayerNorm}, decoder tied to the word embeddings with bias cls.predictions.bias;
cls.seq_relationship. The position_ids buffer is persistent, as in transformers < 4.31.

Writes next to this script, evaluated in float64 (stored as float32):
    bert.safetensors
      <name>            every entry of the tiny model's state_dict (CONFIG below), including
                        bert.embeddings.position_ids (int64) and the tied
                        cls.predictions.decoder.{weight,bias}
      input.ids, input.token_type_ids, input.attention_mask   int64 [B, T] (sequence 1 padded)
      input.mlm_labels  int64 [B, T] (-100 = no loss), input.nsp_labels int64 [B]
      out.hidden [B, T, H], out.pooled [B, H], out.mlm_logits [B, T, V], out.nsp_logits [B, 2]
      out.loss          []  MLM cross-entropy (mean over labelled positions) + NSP cross-entropy
      grad.<name>       d loss / d parameter for every named parameter (tied ones once, under
                        Hugging Face's first name)
      count.<preset>    int64 [] parameter counts of PyTorch BertForPreTraining of loom's presets
    bert_hf_gamma.safetensors   the same weights as an older checkpoint: LayerNorm.gamma/beta,
                        no position_ids, no decoder entries
Weights are drawn larger than HF's initialisation (LayerNorm gains and biases are not 1 and 0)
so that every parameter matters to the outputs.

Run: /usr/bin/python3 tests/golden/gen_bert.py   (from anywhere)
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

CONFIG = dict(vocab_size=40, hidden=16, n_layer=2, n_head=2, intermediate=24, max_position=12,
              type_vocab_size=2)
PRESETS = {
    "bert-mini": dict(vocab_size=8192, hidden=256, n_layer=4, n_head=4, intermediate=1024,
                      max_position=128, type_vocab_size=2),
    "bert-base": dict(vocab_size=30522, hidden=768, n_layer=12, n_head=12, intermediate=3072,
                      max_position=512, type_vocab_size=2),
}
EPS = 1e-12


class Container(nn.Module):
    def __init__(*args, **mods):  # no named `self`: HF has a submodule called "self"
        container = args[0]
        super(Container, container).__init__()
        for name, mod in mods.items():
            setattr(container, name, mod)


class BertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c["vocab_size"], c["hidden"], padding_idx=0)
        self.position_embeddings = nn.Embedding(c["max_position"], c["hidden"])
        self.token_type_embeddings = nn.Embedding(c["type_vocab_size"], c["hidden"])
        self.LayerNorm = nn.LayerNorm(c["hidden"], eps=EPS)
        self.register_buffer("position_ids", torch.arange(c["max_position"]).expand((1, -1)))

    def forward(self, ids, types):
        pos = self.position_ids[:, : ids.shape[1]]
        x = self.word_embeddings(ids) + self.token_type_embeddings(types)
        return self.LayerNorm(x + self.position_embeddings(pos))


class BertSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden"]
        self.n_head, self.hd = c["n_head"], h // c["n_head"]
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)

    def split(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.n_head, self.hd).permute(0, 2, 1, 3)

    def forward(self, x, ext_mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.hd) + ext_mask
        ctx = F.softmax(scores, dim=-1) @ v
        B, _, T, _ = ctx.shape
        return ctx.permute(0, 2, 1, 3).reshape(B, T, -1)


class AddNorm(nn.Module):  # HF's BertSelfOutput / BertOutput
    def __init__(self, c, fan_in):
        super().__init__()
        self.dense = nn.Linear(fan_in, c["hidden"])
        self.LayerNorm = nn.LayerNorm(c["hidden"], eps=EPS)

    def forward(self, x, residual):
        return self.LayerNorm(self.dense(x) + residual)


class BertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = Container(self=BertSelfAttention(c), output=AddNorm(c, c["hidden"]))
        self.intermediate = Container(dense=nn.Linear(c["hidden"], c["intermediate"]))
        self.output = AddNorm(c, c["intermediate"])

    def forward(self, x, ext_mask):
        a = self.attention.output(self.attention.self(x, ext_mask), x)
        return self.output(F.gelu(self.intermediate.dense(a)), a)


class BertForPreTraining(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bert = Container(embeddings=BertEmbeddings(c),
                              encoder=Container(layer=nn.ModuleList(
                                  BertLayer(c) for _ in range(c["n_layer"]))),
                              pooler=Container(dense=nn.Linear(c["hidden"], c["hidden"])))
        pred = Container(transform=Container(dense=nn.Linear(c["hidden"], c["hidden"]),
                                             LayerNorm=nn.LayerNorm(c["hidden"], eps=EPS)),
                         decoder=nn.Linear(c["hidden"], c["vocab_size"], bias=False))
        pred.bias = nn.Parameter(torch.zeros(c["vocab_size"]))
        pred.decoder.bias = pred.bias
        pred.decoder.weight = self.bert.embeddings.word_embeddings.weight
        self.cls = Container(predictions=pred, seq_relationship=nn.Linear(c["hidden"], 2))

    def forward(self, ids, types, mask):
        ext = (1.0 - mask[:, None, None, :].to(torch.float64)) * torch.finfo(torch.float64).min
        x = self.bert.embeddings(ids, types)
        for layer in self.bert.encoder.layer:
            x = layer(x, ext)
        pooled = torch.tanh(self.bert.pooler.dense(x[:, 0]))
        t = self.cls.predictions.transform
        mlm = self.cls.predictions.decoder(t.LayerNorm(F.gelu(t.dense(x))))
        return x, pooled, mlm, self.cls.seq_relationship(pooled)


def main():
    torch.manual_seed(0)
    c = CONFIG
    model = BertForPreTraining(c).double().eval()
    gen = torch.Generator().manual_seed(4321)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            p.copy_(p.float().double())  # exactly what loom loads
    B, T = 2, 7
    ids = torch.randint(1, c["vocab_size"], (B, T), generator=gen)
    ids[:, 0] = 2                                   # [CLS]
    types = torch.tensor([[0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 0, 0]])
    mask = torch.tensor([[1] * 7, [1, 1, 1, 1, 1, 0, 0]])
    ids[1, 5:] = 0                                  # [PAD]
    mlm_labels = torch.full((B, T), -100, dtype=torch.long)
    for b, t in [(0, 1), (0, 3), (0, 6), (1, 2), (1, 4)]:
        mlm_labels[b, t] = int(torch.randint(0, c["vocab_size"], (1,), generator=gen))
    nsp_labels = torch.tensor([1, 0])

    hidden, pooled, mlm, nsp = model(ids, types, mask)
    loss = (F.cross_entropy(mlm.reshape(-1, c["vocab_size"]), mlm_labels.reshape(-1),
                            ignore_index=-100) + F.cross_entropy(nsp, nsp_labels))
    loss.backward()

    state = {name: t.detach().clone().contiguous() for name, t in model.state_dict().items()}
    out = {n: (t.float() if t.is_floating_point() else t) for n, t in state.items()}
    out.update({
        "input.ids": ids, "input.token_type_ids": types, "input.attention_mask": mask,
        "input.mlm_labels": mlm_labels, "input.nsp_labels": nsp_labels,
        "out.hidden": hidden.detach().float(), "out.pooled": pooled.detach().float(),
        "out.mlm_logits": mlm.detach().float(), "out.nsp_logits": nsp.detach().float(),
        "out.loss": loss.detach().float(),
    })
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.float()
    for preset, cfg in PRESETS.items():
        with torch.no_grad():
            count = sum(p.numel() for p in BertForPreTraining(cfg).parameters())
        out["count." + preset] = torch.tensor(count, dtype=torch.int64)
        print(f"{preset}: {count:,} parameters")
    save(os.path.join(HERE, "bert.safetensors"), out)

    old = {}
    for name, t in state.items():
        if name.startswith("cls.predictions.decoder") or name.endswith("position_ids"):
            continue
        name = name.replace("LayerNorm.weight", "LayerNorm.gamma")
        name = name.replace("LayerNorm.bias", "LayerNorm.beta")
        old[name] = t.float()
    save(os.path.join(HERE, "bert_hf_gamma.safetensors"), old)
    print(f"wrote bert.safetensors ({len(out)} tensors), bert_hf_gamma.safetensors ({len(old)})")


if __name__ == "__main__":
    main()
