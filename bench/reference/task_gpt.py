"""gpt-fortunes: examples/train_gpt --tokenizer byte in PyTorch (train.py's docstring has the
recipe): byte-level gpt-mini on the Debian fortunes, validation loss and bits per byte."""
import math

import torch
import torch.nn.functional as F

import models
from data import fortune_splits
from run import TrainingRun, set_lr, update, warmup_cosine_lr


# ----------------------------------------------------------------------------- data
def read_corpus(args):
    """(train bytes, validation bytes): the fortunes split as loom splits them."""
    train, val, entries = fortune_splits(args.fortunes)
    print(f"fortunes: {entries} entries, train {len(train)} bytes, val {len(val)} bytes",
          flush=True)
    return train, val


def window_offsets(val, count, context):
    """train_gpt's validation_windows: `count` windows of context + 1 bytes evenly spaced over
    the validation bytes."""
    last = len(val) - context - 1
    return [last * i // max(count - 1, 1) for i in range(count)]


class Windows:
    """Every window of context + 1 bytes of the training text, a fresh permutation each epoch
    (loom's LanguageModelDataset, stride 1, in a shuffled DataLoader dropping the last batch)."""

    def __init__(self, text, context, batch, gen):
        self.data = torch.frombuffer(bytearray(text), dtype=torch.uint8)
        self.span = torch.arange(context + 1)
        self.count, self.batch, self.gen = len(text) - context, batch, gen
        self.order, self.pos, self.epoch = None, self.count, -1

    def next(self):                                        # -> x, y (B, T) int64
        if self.pos + self.batch > self.count:
            self.order, self.pos = torch.randperm(self.count, generator=self.gen), 0
            self.epoch += 1
        w = self.data[self.order[self.pos:self.pos + self.batch, None] + self.span].long()
        self.pos += self.batch
        return w[:, :-1], w[:, 1:]


# ----------------------------------------------------------------------------- model
def adamw(model, args):
    """nanoGPT's configure_optimizers: weight decay on matrices only."""
    params = list(model.parameters())                      # the tied matrix appears once
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": args.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(args.beta1, args.beta2), eps=1e-8)


@torch.no_grad()
def evaluate(model, windows):
    """Mean cross-entropy over every position of the windows (N, T + 1), in chunks of 50: nats
    per byte, and bits per byte."""
    model.eval()
    nats = sum(F.cross_entropy(model(w[:, :-1]).flatten(0, 1), w[:, 1:].flatten(),
                               reduction="sum").item() for w in windows.split(50))
    model.train()
    loss = nats / windows[:, 1:].numel()
    return loss, loss / math.log(2)


@torch.no_grad()
def generate(model, prompt, n_new, temperature, top_k, gen):
    """No KV cache: the cropped context again for each new byte; temperature 0 = greedy."""
    model.eval()
    idx = torch.tensor([list(prompt.encode("utf-8"))])
    for _ in range(n_new):
        logits = model(idx[:, -model.config.ctx:])[:, -1]   # (1, V)
        if temperature == 0:
            nxt = logits.argmax(-1, keepdim=True)
        else:
            logits = logits / temperature
            if top_k > 0:
                kth = logits.topk(min(top_k, logits.shape[-1])).values[:, -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            nxt = torch.multinomial(F.softmax(logits, -1), 1, generator=gen)
        idx = torch.cat([idx, nxt], dim=1)
    model.train()
    return bytes(idx[0].tolist()).decode("utf-8", errors="replace")


# ----------------------------------------------------------------------------- training
def train(args):
    torch.manual_seed(args.seed)                           # weights
    gen = torch.Generator().manual_seed(args.seed)         # batches, sampling
    model = models.build("gpt-mini")
    model.scale_residual_init()                            # as loom's models::GPT
    T = model.config.ctx
    train_text, val_text = read_corpus(args)
    offsets = window_offsets(val_text, args.eval_windows, T)
    val_data = torch.frombuffer(bytearray(val_text), dtype=torch.uint8)
    val_windows = val_data[torch.tensor(offsets)[:, None] + torch.arange(T + 1)].long()
    batches = Windows(train_text, T, args.batch, gen)
    opt = adamw(model, args)
    print(f"gpt-mini | {models.n_params(model)} parameters | {torch.get_num_threads()} threads | "
          f"{batches.count} training windows, {len(offsets)} validation windows", flush=True)

    run = TrainingRun(args.steps, args.minutes, args.log_every, args.batch * T, "tok/s")
    step, losses = 0, []
    while step < run.total:
        lr = warmup_cosine_lr(step + 1, min(args.warmup, run.total), run.total, args.lr,
                              args.min_lr)
        set_lr(opt, lr)
        x, y = batches.next()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        update(opt, loss, model.parameters(), args.grad_clip)
        step += 1
        losses.append(loss.item())
        run.step_done(step, losses[-1])
        run.log(step, lr)
        if step % args.eval_every == 0 and step != run.total:
            (val_loss, bpb), seconds = run.untimed(lambda: evaluate(model, val_windows))
            print(f"eval step {step} | val loss {val_loss:.4f} | perplexity "
                  f"{math.exp(val_loss):.2f} | {bpb:.3f} bits/byte ({seconds:.1f} s)", flush=True)
    train_s = run.training_seconds()

    val_loss, bpb = evaluate(model, val_windows)
    print(f"final (step {step}, {train_s:.0f} s training): val loss {val_loss:.4f} | perplexity "
          f"{math.exp(val_loss):.2f} | {bpb:.3f} bits/byte", flush=True)
    greedy = generate(model, args.prompt, args.sample_tokens, 0.0, 0, gen)
    sampled = generate(model, args.prompt, args.sample_tokens, args.temperature, args.top_k, gen)
    print(f"\n--- greedy ---\n{greedy}\n\n--- temperature {args.temperature} ---\n{sampled}\n",
          flush=True)
    return {"steps": step, "epochs": round(step * args.batch / batches.count, 4),
            "params": models.n_params(model), "train_seconds": round(train_s, 1),
            "tokens_per_s": round(step * args.batch * T / train_s, 1),
            "train_loss_last100": round(sum(losses[-100:]) / len(losses[-100:]), 4),
            "val_loss": round(val_loss, 4), "bits_per_byte": round(bpb, 4),
            "sample_greedy": greedy, "sample_temperature": sampled}
