"""bert: examples/train_bert in PyTorch, on the pairs loom writes with `build/bench/dump_data
bert --out DIR` (train.py bert --data-dir DIR).

Reads DIR/train.safetensors and DIR/val.safetensors (bench/dump_data.cpp) and trains Hugging
Face's BertForPreTraining: models.py's, written out with HF's module names and math (as
tests/golden/gen_bert.py; transformers is not installed), given the attention mask over the
padding that the benchmark's unpadded batches have no need of. train_bert's
recipe and defaults: bert-mini (H 256, 4 layers, 4 heads, intermediate 1024, 128 positions,
dropout 0.1), batch 32, AdamW (lr 5e-4, betas 0.9/0.999, eps 1e-6, weight decay 0.01 except
LayerNorm and biases), linear warm-up (300 steps) then linear decay to 0 at the planned last
step, gradient norm clipped to 1, batches of pairs of similar length (train_bert's
BatchPlanner), loss = MLM CE + NSP CE with the MLM head applied at the predicted positions only
(google's run_pretraining.py and loom's Bert::pretraining_loss; --all-positions: at every one,
as HF). The batches and their masking are exactly train_bert's: the same SplitMix64
permutations and create_pretraining_data masking, re-implemented here and checked against the
epoch-0 masking loom wrote into val.safetensors. With --minutes the steps are planned as
train_bert plans them (run.py): per padded token, times the epoch's mean padded tokens a step,
evaluations not counted. Held-out loss, MLM and NSP accuracy on the first --eval-pairs
validation pairs every --eval-every steps and at the end.
"""
import os
import sys

import torch
import torch.nn.functional as F

import dump
import models
from run import TrainingRun, set_lr, warmup_linear_lr

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from safetensors_io import load_with_metadata  # noqa: E402
from splitmix import SplitMix64, mix_seeds, random_permutation  # noqa: E402


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
        self.meta = meta
        self.rule = {k: (float(meta[k]) if k == "masked_lm_prob" else int(meta[k]))
                     for k in ("cls_id", "sep_id", "mask_id", "pad_id", "vocab_size",
                               "masked_lm_prob", "max_predictions", "seed")}
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


@torch.no_grad()
def evaluate(model, val, count, batch):
    """train_bert's evaluate: on the first `count` held-out pairs, masked as in epoch 0, in
    chunks of `batch`: the loss (MLM at the predicted positions + NSP, mean over the pairs),
    MLM accuracy (argmax = label at the predicted positions) and NSP accuracy."""
    model.eval()
    n = min(count, val.n)
    loss = right = total = nsp_right = 0
    for s in range(0, n, batch):
        idx = list(range(s, min(s + batch, n)))
        ids, types, mask, labels, nsp = b = val.batch(idx, 0)
        loss += pretraining_loss(model, b, all_positions=False).item() * len(idx)
        mlm, nsp_logits = model(ids, types, mask)
        sel = labels != -100
        right += int((mlm.argmax(-1)[sel] == labels[sel]).sum())
        total += int(sel.sum())
        nsp_right += int((nsp_logits.argmax(-1) == nsp).sum())
    model.train()
    return {"val_loss": loss / n, "val_mlm_accuracy": right / max(total, 1),
            "val_nsp_accuracy": nsp_right / n}


def check_masking(val):
    """loom's epoch-0 masking of the first validation pairs, reproduced."""
    for i in range(min(64, val.n)):
        x, y = val.example(i, 0)
        same = (x == val.check_ids[i][: len(x)].tolist()
                and y == val.check_labels[i][: len(y)].tolist())
        assert same, f"masking of validation pair {i} differs from loom's"


def adamw(model, args):
    """Decay on weights and embeddings, not on LayerNorms and biases (HF's no_decay)."""
    no_decay = lambda n: "LayerNorm" in n or n.endswith("bias")  # noqa: E731
    named = list(model.named_parameters())
    return torch.optim.AdamW(
        [{"params": [p for n, p in named if not no_decay(n)], "weight_decay": args.weight_decay},
         {"params": [p for n, p in named if no_decay(n)], "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.999), eps=1e-6)


class BatchPlanner:
    """train_bert's BatchPlanner: each epoch the pairs in a seeded order, sorted by length
    within groups of 50 batches, cut into batches, the batches in a seeded order."""

    def __init__(self, pairs, batch):
        self.pairs, self.batch = pairs, batch
        self.per_epoch = pairs.n // batch
        self.epoch = -1

    def plan_epoch(self, epoch):
        seed = mix_seeds(self.pairs.rule["seed"], epoch)
        perm = random_permutation(self.pairs.n, seed)[: self.per_epoch * self.batch]
        group = 50 * self.batch
        self.rows = [i for g in range(0, len(perm), group)
                     for i in sorted(perm[g:g + group], key=lambda i: self.pairs.lengths[i])]
        self.order = random_permutation(self.per_epoch, mix_seeds(seed, 0x62617463))  # "batc"
        self.epoch = epoch

    def mean_padded_tokens(self):
        """batch x longest pair, averaged over epoch 0's batches: the average step's work."""
        self.plan_epoch(0)
        lengths = self.pairs.lengths
        return sum(self.batch * max(lengths[i] for i in self.rows[k * self.batch:
                                                                  (k + 1) * self.batch])
                   for k in range(self.per_epoch)) / self.per_epoch

    def __call__(self, step):                              # -> (pair indices, epoch)
        if step // self.per_epoch != self.epoch:
            self.plan_epoch(step // self.per_epoch)
        k = self.order[step % self.per_epoch]
        return self.rows[k * self.batch:(k + 1) * self.batch], self.epoch


def pretraining_loss(model, batch, all_positions):
    """MLM cross-entropy (at the predicted positions, or at all) + NSP cross-entropy."""
    ids, types, mask, labels, nsp = batch
    if all_positions:
        mlm, nsp_logits = model(ids, types, mask)
        mlm, target = mlm.flatten(0, 1), labels.reshape(-1)
    else:
        positions = (labels.reshape(-1) != -100).nonzero().squeeze(1)
        mlm, nsp_logits = model(ids, types, mask, positions)
        target = labels.reshape(-1)[positions]
    return F.cross_entropy(mlm, target, ignore_index=-100) + F.cross_entropy(nsp_logits, nsp)


def train(args):
    train_pairs = Pairs(os.path.join(args.data_dir, "train.safetensors"))
    val = Pairs(os.path.join(args.data_dir, "val.safetensors"))
    dump.check_flags(args, train_pairs.meta, dump.BERT, "bert")
    if args.seed != int(train_pairs.meta["--seed"]):
        sys.exit(f"train.py bert: --seed {args.seed}, but the dump in {args.data_dir} was made "
                 f"with --seed {train_pairs.meta['--seed']}, which drew train_bert's split, "
                 "pairs and masking: dump again with the same --seed")
    check_masking(val)
    torch.manual_seed(args.seed)
    model = models.BertForPreTraining(train_pairs.rule["vocab_size"], args.hidden, args.layers,
                                      args.heads, args.intermediate, p=args.dropout)
    opt = adamw(model, args)
    planner = BatchPlanner(train_pairs, args.batch)
    mean_padded = planner.mean_padded_tokens()
    print(f"bert | {sum(p.numel() for p in model.parameters())} parameters | "
          f"{torch.get_num_threads()} threads | {train_pairs.n} training pairs "
          f"({planner.per_epoch} batches an epoch), {val.n} held-out", flush=True)

    run = TrainingRun(args.steps, args.minutes, args.log_every, None, "tok/s")
    step, evals = 0, None
    while step < run.total:
        lr = warmup_linear_lr(step + 1, min(args.warmup, run.total), run.total, args.lr)
        set_lr(opt, lr)
        indices, epoch = planner(step)
        batch = train_pairs.batch(indices, epoch)
        loss = pretraining_loss(model, batch, args.all_positions)
        opt.zero_grad()
        loss.backward()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        step += 1
        ids, mask = batch[0], batch[2]                     # work: the step's padded tokens
        run.step_done(step, loss.item(), work=ids.numel() / mean_padded, items=int(mask.sum()))
        run.log(step, lr, f" | epoch {epoch}")
        if (args.eval_every > 0 and step % args.eval_every == 0) or step == run.total:
            evals, seconds = run.untimed(lambda: evaluate(model, val, args.eval_pairs, args.batch))
            print(f"eval step {step} | held-out loss {evals['val_loss']:.4f} | MLM accuracy "
                  f"{100 * evals['val_mlm_accuracy']:.2f}% | NSP accuracy "
                  f"{100 * evals['val_nsp_accuracy']:.2f}% ({seconds:.1f} s)", flush=True)
    train_s = run.training_seconds()
    result = {"steps": step, "epochs": round(step / planner.per_epoch, 3), "batch": args.batch,
              "train_seconds": round(train_s, 1)}
    result.update({k: round(v, 4) for k, v in evals.items()})
    return result
