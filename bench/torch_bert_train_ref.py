#!/usr/bin/python3
"""PyTorch reference for examples/train_bert: the same BERT pre-training run, on the same data.

    build/examples/train_bert --dump-data DIR          # the tokenized pairs, written by loom
    /usr/bin/python3 bench/torch_bert_train_ref.py DIR --minutes 10 [--threads 2]

Reads DIR/train.safetensors and DIR/val.safetensors (see dump_pairs in examples/train_bert.cpp)
and trains Hugging Face's BertForPreTraining (written out below with HF's module names and math,
as tests/golden/gen_bert.py; transformers is not installed) with train_bert's recipe and defaults:
bert-mini (H 256, 4 layers, 4 heads, intermediate 1024, 128 positions, dropout 0.1), batch 32,
AdamW (lr 5e-4, betas 0.9/0.999, eps 1e-6, weight decay 0.01 except LayerNorm and biases),
linear warm-up (300 steps) then linear decay to 0 at the planned last step, gradient norm clipped
to 1, batches of pairs of similar length (train_bert's BatchPlanner), loss = MLM CE + NSP CE with
the MLM head applied at the predicted positions only (google's run_pretraining.py and loom's
Bert::pretraining_loss; --all-positions: at every one, as HF). The batches and their masking are
exactly train_bert's: the same SplitMix64 permutations and create_pretraining_data masking,
re-implemented here and checked against the epoch-0 masking loom wrote into val.safetensors. With
--minutes the steps are planned as train_bert plans them (scripts/time_budget.py): per padded token,
times the epoch's mean padded tokens a step, at step 21 and then every 20 steps, evaluations not
counted. Held-out MLM / NSP accuracy on the first 512 validation pairs every --eval-every steps; one
JSON line at the end.
"""
import argparse
import json
import math
import os
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("--minutes", type=float, default=0.0)
ap.add_argument("--steps", type=int, default=3000)
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--lr", type=float, default=5e-4)
ap.add_argument("--warmup", type=int, default=300)
ap.add_argument("--eval-every", type=int, default=250)
ap.add_argument("--eval-pairs", type=int, default=512)
ap.add_argument("--hidden", type=int, default=256)
ap.add_argument("--layers", type=int, default=4)
ap.add_argument("--heads", type=int, default=4)
ap.add_argument("--intermediate", type=int, default=1024)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--all-positions", action="store_true",
                help="MLM logits at every position (Hugging Face) instead of the predicted ones")
args = ap.parse_args()
os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from safetensors_io import load_with_metadata  # noqa: E402
from splitmix import SplitMix64, mix_seeds, random_permutation  # noqa: E402
from time_budget import TimeBudget  # noqa: E402


# ----------------------------------------------------------------------------- loom's data rules
def mask_tokens(ids, rule, seed):  # data/bert_pretraining.cpp (create_pretraining_data's rule)
    out, labels = list(ids), [-100] * len(ids)
    cand = [i for i, t in enumerate(ids) if t not in (rule["cls_id"], rule["sep_id"])]
    if not cand:
        return out, labels
    g = SplitMix64(seed)
    for i in range(len(cand) - 1, 0, -1):
        j = g.uniform(i + 1)
        cand[i], cand[j] = cand[j], cand[i]
    wanted = min(rule["max_predictions"], max(1, round(len(ids) * rule["masked_lm_prob"])))
    for i in cand[:wanted]:
        labels[i] = ids[i]
        if g.uniform01() < 0.8:
            out[i] = rule["mask_id"]
        elif g.uniform01() >= 0.5:
            out[i] = g.uniform(rule["vocab_size"])
    return out, labels


class Pairs:
    def __init__(self, path):
        t, meta = load_with_metadata(path)
        self.ids, self.lengths = t["ids"].tolist(), t["lengths"].tolist()
        self.segment_a, self.nsp = t["segment_a"].tolist(), t["nsp_labels"]
        self.check_ids, self.check_labels = t["masked_ids"], t["mlm_labels"]
        self.rule = {k: (float(v) if k == "masked_lm_prob" else int(v)) for k, v in meta.items()
                     if k != "format"}
        self.n = len(self.lengths)

    def example(self, i, epoch):
        ids = self.ids[i][: self.lengths[i]]
        seed = mix_seeds(mix_seeds(self.rule["seed"], epoch), i)
        return mask_tokens(ids, self.rule, seed)

    def batch(self, indices, epoch):
        T = max(self.lengths[i] for i in indices)
        ids = torch.full((len(indices), T), self.rule["pad_id"], dtype=torch.long)
        types, mask = torch.zeros_like(ids), torch.zeros_like(ids)
        labels = torch.full_like(ids, -100)
        for b, i in enumerate(indices):
            x, y = self.example(i, epoch)
            n = len(x)
            ids[b, :n], labels[b, :n], mask[b, :n] = torch.tensor(x), torch.tensor(y), 1
            types[b, self.segment_a[i]:n] = 1
        return ids, types, mask, labels, self.nsp[indices]


# ----------------------------------------------------------------------------- the model
class Container(nn.Module):
    def __init__(*a, **mods):  # no `self` parameter: HF has a submodule called "self"
        super(Container, a[0]).__init__()
        for k, v in mods.items():
            setattr(a[0], k, v)


class Layer(nn.Module):
    def __init__(self, d, h, inter, p):
        super().__init__()
        self.h, self.p = h, p
        ln = lambda: nn.LayerNorm(d, eps=1e-12)  # noqa: E731
        self.attention = Container(
            self=Container(query=nn.Linear(d, d), key=nn.Linear(d, d), value=nn.Linear(d, d)),
            output=Container(dense=nn.Linear(d, d), LayerNorm=ln()))
        self.intermediate = Container(dense=nn.Linear(d, inter))
        self.output = Container(dense=nn.Linear(inter, d), LayerNorm=ln())

    def forward(self, x, ext):
        B, T, D = x.shape
        drop = lambda t: F.dropout(t, self.p, self.training)  # noqa: E731
        s, hd = self.attention.self, D // self.h
        q, k, v = (f(x).view(B, T, self.h, hd).transpose(1, 2) for f in (s.query, s.key, s.value))
        att = drop(F.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd) + ext, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(B, T, D)
        o = self.attention.output
        x = o.LayerNorm(drop(o.dense(y)) + x)
        y = self.output.dense(F.gelu(self.intermediate.dense(x)))
        return self.output.LayerNorm(drop(y) + x)


class BertForPreTraining(nn.Module):
    def __init__(self, vocab, d, n_layer, h, inter, max_pos=128, p=0.1):
        super().__init__()
        self.p = p
        emb = Container(word_embeddings=nn.Embedding(vocab, d, padding_idx=0),
                        position_embeddings=nn.Embedding(max_pos, d),
                        token_type_embeddings=nn.Embedding(2, d),
                        LayerNorm=nn.LayerNorm(d, eps=1e-12))
        layers = nn.ModuleList(Layer(d, h, inter, p) for _ in range(n_layer))
        self.bert = Container(embeddings=emb, encoder=Container(layer=layers),
                              pooler=Container(dense=nn.Linear(d, d)))
        pred = Container(transform=Container(dense=nn.Linear(d, d),
                                             LayerNorm=nn.LayerNorm(d, eps=1e-12)),
                         decoder=nn.Linear(d, vocab, bias=False))
        self.cls = Container(predictions=pred, seq_relationship=nn.Linear(d, 2))
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        with torch.no_grad():
            emb.word_embeddings.weight[0].zero_()
        pred.decoder.weight = emb.word_embeddings.weight
        pred.bias = nn.Parameter(torch.zeros(vocab))
        pred.decoder.bias = pred.bias

    def forward(self, ids, types, mask, positions=None):
        """MLM logits at every position (HF), or at the flat `positions` only (google's
        gather_indexes, as loom's Bert::pretraining_loss)."""
        e = self.bert.embeddings
        ext = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        x = e.word_embeddings(ids) + e.token_type_embeddings(types)
        x = F.dropout(e.LayerNorm(x + e.position_embeddings(torch.arange(ids.shape[1]))),
                      self.p, self.training)
        for layer in self.bert.encoder.layer:
            x = layer(x, ext)
        pooled = torch.tanh(self.bert.pooler.dense(x[:, 0]))
        if positions is not None:
            x = x.reshape(-1, x.shape[-1])[positions]
        t = self.cls.predictions.transform
        return self.cls.predictions.decoder(t.LayerNorm(F.gelu(t.dense(x)))), \
            self.cls.seq_relationship(pooled)


def evaluate(model, val, count, batch):
    model.eval()
    right = total = nsp_right = 0
    with torch.no_grad():
        for s in range(0, min(count, val.n), batch):
            idx = list(range(s, min(s + batch, count, val.n)))
            ids, types, mask, labels, nsp = val.batch(idx, 0)
            mlm, nsp_logits = model(ids, types, mask)
            sel = labels != -100
            right += int((mlm.argmax(-1)[sel] == labels[sel]).sum())
            total += int(sel.sum())
            nsp_right += int((nsp_logits.argmax(-1) == nsp).sum())
    model.train()
    return right / max(total, 1), nsp_right / min(count, val.n)


def main():
    torch.set_num_threads(args.threads)
    train, val = Pairs(os.path.join(args.dir, "train.safetensors")), Pairs(
        os.path.join(args.dir, "val.safetensors"))
    for i in range(min(64, val.n)):  # loom's epoch-0 masking, reproduced
        x, y = val.example(i, 0)
        same = (x == val.check_ids[i][: len(x)].tolist()
                and y == val.check_labels[i][: len(y)].tolist())
        assert same, f"masking of validation pair {i} differs from loom's"
    torch.manual_seed(args.seed)
    model = BertForPreTraining(train.rule["vocab_size"], args.hidden, args.layers, args.heads,
                               args.intermediate)
    no_decay = lambda n: "LayerNorm" in n or n.endswith("bias")  # noqa: E731
    named = list(model.named_parameters())
    opt = torch.optim.AdamW(
        [{"params": [p for n, p in named if not no_decay(n)], "weight_decay": 0.01},
         {"params": [p for n, p in named if no_decay(n)], "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.999), eps=1e-6)
    per_epoch = train.n // args.batch

    def epoch_batches(epoch):  # train_bert's BatchPlanner: length-grouped batches, shuffled
        seed = mix_seeds(train.rule["seed"], epoch)
        perm = random_permutation(train.n, seed)[: per_epoch * args.batch]
        group = 50 * args.batch
        perm = [i for g in range(0, len(perm), group)
                for i in sorted(perm[g:g + group], key=lambda i: train.lengths[i])]
        return perm, random_permutation(per_epoch, mix_seeds(seed, 0x62617463))

    perm0 = epoch_batches(0)[0]  # mean padded tokens a step, for planning --minutes
    batches0 = (perm0[k * args.batch:(k + 1) * args.batch] for k in range(per_epoch))
    mean_padded = sum(args.batch * max(train.lengths[i] for i in b) for b in batches0) / per_epoch
    total, step, plan_epoch, t0 = args.steps, 0, -1, time.time()
    tokens, evals, budget = 0, [], None
    if args.minutes > 0:
        total, budget = 10 ** 9, TimeBudget(args.minutes)
    while step < total:
        lr = args.lr * min((step + 1) / max(min(args.warmup, total), 1),
                           max(0.0, (total - step - 1) / max(total - min(args.warmup, total), 1)))
        for g in opt.param_groups:
            g["lr"] = lr
        epoch = step // per_epoch
        if epoch != plan_epoch:
            (perm, batch_order), plan_epoch = epoch_batches(epoch), epoch
        k = batch_order[step % per_epoch]
        indices = perm[k * args.batch:(k + 1) * args.batch]
        ids, types, mask, labels, nsp = train.batch(indices, epoch)
        if args.all_positions:
            mlm, nsp_logits = model(ids, types, mask)
            mlm, target = mlm.reshape(-1, mlm.shape[-1]), labels.reshape(-1)
        else:
            positions = (labels.reshape(-1) != -100).nonzero().squeeze(1)
            mlm, nsp_logits = model(ids, types, mask, positions)
            target = labels.reshape(-1)[positions]
        loss = F.cross_entropy(mlm, target, ignore_index=-100) + F.cross_entropy(nsp_logits, nsp)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += int(mask.sum())
        # per padded token, as train_bert; t0 leaves the evaluations out
        work = ids.numel() / mean_padded       # in average steps
        planned = budget.plan(step, time.time() - t0, work, "ms/step expected") if budget else None
        total = total if planned is None else planned
        if step % 20 == 0:
            print(f"step {step}/{total} | loss {loss.item():.4f} | lr {lr:.2e} | "
                  f"{tokens / (time.time() - t0):.0f} tok/s", flush=True)
        if (args.eval_every > 0 and step % args.eval_every == 0) or step == total:
            te = time.time()
            mlm_acc, nsp_acc = evaluate(model, val, args.eval_pairs, args.batch)
            evals.append((step, mlm_acc, nsp_acc))
            print(f"eval step {step} | MLM accuracy {100 * mlm_acc:.2f}% | "
                  f"NSP accuracy {100 * nsp_acc:.2f}%", flush=True)
            t0 += time.time() - te  # evaluation stays out of tok/s
    print(json.dumps({"case": "bert-pretrain", "steps": step, "batch": args.batch,
                      "tokens_per_s": round(tokens / (time.time() - t0), 1),
                      "val_mlm_accuracy": evals[-1][1], "val_nsp_accuracy": evals[-1][2],
                      "threads": args.threads, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
