"""translation: examples/train_translate in PyTorch, on the data loom writes with
`build/bench/dump_data translation --out DIR` (train.py translation --data-dir DIR).

Reads what dump_data writes (bench/dump_data.cpp: train/valid/test.tsv, tokenizer.txt,
data.safetensors, init.safetensors) and trains the encoder-decoder Transformer of
models/transformer.h: models.py's Seq2Seq layout under the same parameter names (emb,
enc.N.attn.{q,k,v,o}, enc.N.ln1, enc.N.ff.0, enc.N.ff.2, ..., dec.N.ln3), written out below with
what train_translate adds to it: key padding masks on source and target, and dropout where loom
puts it (on embeddings + positions, on the attention probabilities, on the FFN's hidden
activations, on each sub-layer's output before the residual add); post-norm, or, when the dumped
run used --norm-first, pre-norm layers and a final LayerNorm after each stack (enc_norm,
dec_norm), as models::Transformer. Same initialisation rule (Xavier-uniform matrices, zero
biases, LayerNorm gains 1; --loom-init starts from loom's very weights instead), the model of the
dump and train_translate's recipe and defaults: seq2seq-mini (D 256, 4 heads, 3 + 3
layers, FF 1024, dropout 0.1, shared embeddings), Adam (0.9, 0.98, 1e-9) on the Noam schedule
(warmup 400, factor 1), label smoothing 0.1, gradient norm clipped to 1; the same batches in the
same order: train_translate's make_batches (pairs sorted by (target, source) length, cut into
runs of at most --batch-tokens padded tokens) and epoch_order (SplitMix64, data/splitmix.h),
re-implemented here and checked against the dump. With --minutes the steps are planned as
optim::TimeBudget plans them (run.py); evaluations not counted. Every --eval-every steps and at
the end: validation loss (first --eval-pairs pairs), validation BLEU (first --bleu-pairs pairs,
beam search) and sample translations; at the end the test BLEU (first --test-pairs pairs).
Decoding is models/beam_search's (beam 4, GNMT length penalty 0.6, at most --max-tokens new
tokens, batches of 32), detokenised by the same byte-level BPE (ill-formed UTF-8 -> U+FFFD, as
train_translate), scored by a re-implementation of loom's metrics::corpus_bleu (sacreBLEU's
BLEU: 13a tokens, exp smoothing) checked against the BLEU values loom wrote into the dump and the
corpora of tests/golden/metrics_golden.txt.

Checking the two sides against each other: with --loom-init --dropout 0 (and train_translate
--dropout 0) both take the same steps from the same weights, so their losses (log.csv and
--log-csv) agree to float rounding; --eval-checkpoint OUT/ckpt.safetensors evaluates loom's
trained weights with this evaluation, to compare with train_translate's last eval.
"""
import math
import os
import sys
from collections import Counter

import torch
import torch.nn as nn
import torch.nn.functional as F

import dump
from run import TrainingRun, set_lr

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from safetensors_io import load_with_metadata  # noqa: E402
from splitmix import mix_seeds, random_permutation  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "tests", "golden"))
from gen_metrics import tokenize_13a  # noqa: E402


def f32(x):  # a float option as loom holds it (float), back in double
    return torch.tensor(x, dtype=torch.float32).item()


# ----------------------------------------------------------------------------- loom's data rules
def epoch_order(n, seed, epoch):  # train_translate's epoch_order
    return random_permutation(n, mix_seeds(seed, epoch))


def make_batches(split, budget):
    """train_translate's make_batches: rows sorted (stably) by (target, source) length, cut into
    runs whose batch size x longest side stays within `budget`."""
    order = sorted(range(split.n), key=lambda i: (len(split.tgt[i]), len(split.src[i])))
    batches, longest = [[]], 0
    for i in order:
        n = max(len(split.tgt[i]), len(split.src[i]))
        if batches[-1] and (len(batches[-1]) + 1) * max(longest, n) > budget:
            batches.append([])
            longest = 0
        batches[-1].append(i)
        longest = max(longest, n)
    return batches


def ragged(flat, offsets):
    return [flat[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]


class Split:
    """One split of the dump: src (words + eos) and tgt (bos + words + eos) ids per kept pair,
    and the pair's English and German text (its line in the .tsv)."""

    def __init__(self, t, name, directory):
        self.src = ragged(t[name + ".src"].tolist(), t[name + ".src_offsets"].tolist())
        self.tgt = ragged(t[name + ".tgt"].tolist(), t[name + ".tgt_offsets"].tolist())
        self.n = len(self.src)
        with open(os.path.join(directory, name + ".tsv"), encoding="utf-8", newline="\n") as f:
            lines = f.read().split("\n")
        assert lines[-1] == "", f"{name}.tsv does not end with a newline"
        pairs = [line.split("\t") for line in lines[:-1]]
        bad = [i for i, p in enumerate(pairs) if len(p) != 2]
        assert not bad, f"{name}.tsv: line {bad[0] + 1} is not English TAB German"
        self.english, self.german = [], []
        for p in t[name + ".pair"].tolist():
            self.english.append(pairs[p][0])
            self.german.append(pairs[p][1])

    def collate(self, rows, pad):
        """train_translate's collate: src (B, S), tgt_in (B, T), tgt_out (B, T), T = longest
        tgt - 1, padded with pad; and the count of target tokens."""
        S = max(len(self.src[r]) for r in rows)
        T = max(len(self.tgt[r]) for r in rows) - 1
        src = torch.full((len(rows), S), pad, dtype=torch.long)
        tin, tout = (torch.full((len(rows), T), pad, dtype=torch.long) for _ in range(2))
        for i, r in enumerate(rows):
            s, t = self.src[r], self.tgt[r]
            src[i, :len(s)] = torch.tensor(s)
            tin[i, :len(t) - 1] = torch.tensor(t[:-1])
            tout[i, :len(t) - 1] = torch.tensor(t[1:])
        return src, tin, tout, sum(len(self.tgt[r]) - 1 for r in rows)


class BPE:
    """data::BPETokenizer's file (loom-bpe-tokenizer 1): bytes 0..255, then one token per
    merge (the concatenation of its pair), then the special tokens (their own text)."""

    def __init__(self, path):
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
        assert lines[0] == b"loom-bpe-tokenizer 1", f"{path}: not a loom BPE tokenizer"
        n = int(lines[1].split()[1])
        self.vocab = [bytes([b]) for b in range(256)]
        for line in lines[2:2 + n]:
            a, b = map(int, line.split())
            self.vocab.append(self.vocab[a] + self.vocab[b])
        k = int(lines[2 + n].split()[1])
        self.vocab += lines[3 + n:3 + n + k]
        self.invalid = 0

    def decode_bytes(self, ids):
        return b"".join(self.vocab[i] for i in ids)

    def decode(self, ids):
        """BPETokenizer::decode, then train_translate's replace_invalid_utf8: each maximal
        ill-formed subsequence becomes U+FFFD (counted here)."""
        raw = self.decode_bytes(ids)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.invalid += 1
            return raw.decode("utf-8", errors="replace")


# ----------------------------------------------------------------------------- BLEU
# metrics/text.cpp: sacreBLEU 2's corpus BLEU (13a tokens, exp smoothing); the 13a tokeniser is
# tests/golden/gen_metrics.py's (sacreBLEU's regexes), which loom's tests are checked against.
def ngrams(tokens):
    return Counter(tuple(tokens[i:i + n]) for n in range(1, 5) for i in range(len(tokens) - n + 1))


def corpus_bleu(hyps, ref_streams):
    """metrics::corpus_bleu_multi_ref (corpus_bleu with one stream) -> [0, 100]."""
    sys_len = ref_len = 0
    correct, total = [0] * 4, [0] * 4
    for s, hyp in enumerate(hyps):
        counts, lens = Counter(), []
        for stream in ref_streams:
            if not stream[s]:
                continue
            toks = tokenize_13a(stream[s]).split()
            lens.append(len(toks))
            for g, c in ngrams(toks).items():
                counts[g] = max(counts[g], c)
        assert lens, f"reference {s} is empty"
        toks = tokenize_13a(hyp).split()
        closest = min(lens, key=lambda n: (abs(len(toks) - n), n))
        sys_len, ref_len = sys_len + len(toks), ref_len + closest
        for g, c in ngrams(toks).items():
            total[len(g) - 1] += c
            correct[len(g) - 1] += min(c, counts.get(g, 0))
    bp = 1.0 if sys_len >= ref_len else (math.exp(1 - ref_len / sys_len) if sys_len else 0.0)
    if not any(correct):
        return 0.0
    precisions, smooth = [0.0] * 4, 1.0
    for n in range(4):
        if total[n] == 0:
            break
        if correct[n] == 0:
            smooth *= 2
            precisions[n] = 100.0 / (smooth * total[n])
        else:
            precisions[n] = 100.0 * correct[n] / total[n]
    return bp * math.exp(sum(math.log(p) if p else -9999999999.0 for p in precisions) / 4)


def check_bleu(test, meta):
    """This BLEU against loom's: on the dumped test sentences, sacreBLEU's README example and
    the golden corpora of loom's tests (NLTK's BLEU)."""
    n = int(meta["bleu_check_pairs"])
    german = test.german[:n]
    shortened = [g[g.find(" ") + 1:] if " " in g else g for g in german]
    for name, hyps in [("english", test.english[:n]), ("shortened", shortened)]:
        want, got = float(meta["bleu_check_" + name]), corpus_bleu(hyps, [german])
        assert abs(got - want) <= 1e-9 * max(1.0, want), f"BLEU ({name}) {got!r}, loom {want!r}"
    readme = corpus_bleu(["The dog bit the man.", "It wasn't surprising.",
                          "The man had just bitten him."],
                         [["The dog bit the man.", "It was not unexpected.",
                           "The man bit him first."],
                          ["The dog had bit the man.", "No one was surprised.",
                           "The man had bitten the dog."]])
    assert abs(readme - 48.530827) < 1e-8, readme
    cases = 0
    with open(os.path.join(ROOT, "tests", "golden", "metrics_golden.txt"),
              encoding="utf-8") as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        fields = line.split("\t")
        if fields[0] == "bleu":
            seg = lines[i + 1:i + 1 + 2 * int(fields[1])]
            got = corpus_bleu([h[4:] for h in seg[0::2]], [[r[4:] for r in seg[1::2]]])
            assert abs(got - float(fields[2])) <= 1e-12 * float(fields[2]), (line, got)
            cases += 1
    return cases


# ----------------------------------------------------------------------------- the model
class Attention(nn.Module):
    """models.py's MultiHeadAttention (q, k, v, o) with an additive key mask and dropout on
    the probabilities, as models/transformer.cpp's Seq2SeqAttention."""

    def __init__(self, d, h, p):
        super().__init__()
        self.h, self.p = h, p
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def heads(self, x, proj):                              # (B, T, D) -> (B, h, T, hd)
        B, T, D = x.shape
        return proj(x).view(B, T, self.h, D // self.h).transpose(1, 2)

    def attend(self, q, k, v, mask, causal=False):         # q (B,h,T,hd), k/v (B,h,S,hd)
        B, _, T, hd = q.shape
        att = (q * (1.0 / math.sqrt(hd))) @ k.transpose(-2, -1)   # (B, h, T, S)
        if mask is not None:
            att = att + mask                               # (B, 1, 1, S): -inf on padding
        if causal:
            S = k.shape[2]
            att = att.masked_fill(torch.ones(T, S, dtype=torch.bool).triu(1), float("-inf"))
        att = F.dropout(F.softmax(att, dim=-1), self.p, self.training)
        return self.o((att @ v).transpose(1, 2).reshape(B, T, -1))  # (B, T, D)

    def forward(self, x, mem, mask, causal=False):
        return self.attend(self.heads(x, self.q), self.heads(mem, self.k), self.heads(mem, self.v),
                           mask, causal)


def ffn(layer, x):  # ff.0 -> ReLU -> dropout -> ff.2 (the Annotated Transformer's)
    return layer.ff[2](F.dropout(layer.ff[1](layer.ff[0](x)), layer.p, layer.training))


def sublayer(layer, x, ln, sub):
    """Post-norm LN(x + Dropout(Sub(x))), or with norm_first (pre-norm) x + Dropout(Sub(LN(x))),
    as models/transformer.cpp's residual()."""
    if layer.norm_first:
        return x + F.dropout(sub(ln(x)), layer.p, layer.training)
    return ln(x + F.dropout(sub(x), layer.p, layer.training))


class EncoderLayer(nn.Module):
    def __init__(self, d, h, ff, p, norm_first=False):
        super().__init__()
        self.p, self.norm_first = p, norm_first
        self.attn, self.ln1 = Attention(d, h, p), nn.LayerNorm(d)
        self.ff, self.ln2 = nn.Sequential(nn.Linear(d, ff), nn.ReLU(), nn.Linear(ff, d)), \
            nn.LayerNorm(d)

    def forward(self, x, src_mask):
        x = sublayer(self, x, self.ln1, lambda h: self.attn(h, h, src_mask))
        return sublayer(self, x, self.ln2, lambda h: ffn(self, h))


class DecoderLayer(nn.Module):
    def __init__(self, d, h, ff, p, norm_first=False):
        super().__init__()
        self.p, self.norm_first = p, norm_first
        self.self_attn, self.ln1 = Attention(d, h, p), nn.LayerNorm(d)
        self.cross_attn, self.ln2 = Attention(d, h, p), nn.LayerNorm(d)
        self.ff, self.ln3 = nn.Sequential(nn.Linear(d, ff), nn.ReLU(), nn.Linear(ff, d)), \
            nn.LayerNorm(d)

    def forward(self, x, mem, tgt_mask, src_mask):
        x = sublayer(self, x, self.ln1, lambda h: self.self_attn(h, h, tgt_mask, causal=True))
        x = sublayer(self, x, self.ln2, lambda h: self.cross_attn(h, mem, src_mask))
        return sublayer(self, x, self.ln3, lambda h: ffn(self, h))


class Seq2Seq(nn.Module):
    """models.py's Seq2Seq (post-norm, shared embedding and output matrix, sinusoids) with
    padding masks and dropout, as models::Transformer with train_translate's config; with
    norm_first (--norm-first) pre-norm layers and a final LayerNorm after each stack
    (enc_norm, dec_norm), as models::Transformer."""

    def __init__(self, vocab, d, h, ff, n_enc, n_dec, max_len, pad, p, norm_first=False):
        super().__init__()
        self.d, self.pad, self.p = d, pad, p
        self.emb = nn.Embedding(vocab, d)
        self.enc = nn.ModuleList(EncoderLayer(d, h, ff, p, norm_first) for _ in range(n_enc))
        self.dec = nn.ModuleList(DecoderLayer(d, h, ff, p, norm_first) for _ in range(n_dec))
        # pre-norm leaves the stacks' outputs unnormalised
        self.enc_norm = nn.LayerNorm(d) if norm_first else nn.Identity()
        self.dec_norm = nn.LayerNorm(d) if norm_first else nn.Identity()
        pos = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        pe = torch.zeros(max_len, d)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.register_buffer("pe", pe, persistent=False)
        for q in self.parameters():                        # models.py's Seq2Seq initialisation
            nn.init.xavier_uniform_(q) if q.dim() > 1 else nn.init.zeros_(q)
        for m in self.modules():
            if isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)

    def mask(self, ids):                                   # (B, L) -> additive (B, 1, 1, L)
        return torch.zeros(ids.shape).masked_fill(ids == self.pad, float("-inf"))[:, None, None]

    def embed(self, ids, start=0):                         # emb * sqrt(D) + PE, dropped out
        x = self.emb(ids) * math.sqrt(self.d) + self.pe[start:start + ids.shape[1]]
        return F.dropout(x, self.p, self.training)

    def encode(self, src):
        mask, x = self.mask(src), self.embed(src)
        for layer in self.enc:
            x = layer(x, mask)
        return self.enc_norm(x), mask                      # memory (B, S, D)

    def forward(self, src, tgt_in):                        # -> logits (B, T, V)
        mem, src_mask = self.encode(src)
        x, tgt_mask = self.embed(tgt_in), self.mask(tgt_in)
        for layer in self.dec:
            x = layer(x, mem, tgt_mask, src_mask)
        return self.dec_norm(x) @ self.emb.weight.t()


class IncrementalDecoder:
    """Transformer::start_decoding / decode_step / DecoderCache::reorder: the encoder once, the
    cross-attention keys/values once, one position per step with cached self-attention keys
    and values; rows = sentences x `repeat` beams, sentence-major."""

    def __init__(self, model, src, capacity, repeat):
        self.m, self.n = model, 0
        mem, mask = model.encode(src)
        rep = lambda t: t.repeat_interleave(repeat, dim=0)  # noqa: E731
        self.src_mask = rep(mask)
        self.cross = [(rep(l.cross_attn.heads(mem, l.cross_attn.k)),
                       rep(l.cross_attn.heads(mem, l.cross_attn.v))) for l in model.dec]
        R, h = src.shape[0] * repeat, model.dec[0].self_attn.h
        self.kv = [(torch.zeros(R, h, capacity, model.d // h), torch.zeros(R, h, capacity,
                                                                          model.d // h))
                   for _ in model.dec]

    def step(self, tokens):                                # (R,) -> logits (R, V)
        m, t = self.m, self.n
        x = m.embed(tokens[:, None], t)                    # (R, 1, D)
        for layer, (kc, vc), (km, vm) in zip(m.dec, self.kv, self.cross):
            a, c = layer.self_attn, layer.cross_attn

            def self_attend(h):                            # caches this position's k, v
                kc[:, :, t:t + 1], vc[:, :, t:t + 1] = a.heads(h, a.k), a.heads(h, a.v)
                return a.attend(a.heads(h, a.q), kc[:, :, :t + 1], vc[:, :, :t + 1], None)

            x = sublayer(layer, x, layer.ln1, self_attend)
            x = sublayer(layer, x, layer.ln2,
                         lambda h: c.attend(c.heads(h, c.q), km, vm, self.src_mask))
            x = sublayer(layer, x, layer.ln3, lambda h: ffn(layer, h))
        self.n += 1
        return m.dec_norm(x[:, 0]) @ m.emb.weight.t()

    def reorder(self, rows):
        idx = torch.tensor(rows)
        for k, v in self.kv:
            k[:, :, :self.n] = k[:, :, :self.n].index_select(0, idx)
            v[:, :, :self.n] = v[:, :, :self.n].index_select(0, idx)


@torch.no_grad()
def beam_search(model, srcs, bos, eos, max_len, k, alpha):
    """models/beam_search.cpp, step for step: per sentence the best 2k continuations of its live
    beams (ties: lower beam, then lower token), an eos among the best k finishes a hypothesis
    scored log P / ((5 + |Y|) / 6)^alpha, the first k others live on; a sentence is done with
    k finished hypotheses, or at max_len (its live beams finished as they stand). k = 1 is
    greedy search. Returns the best hypothesis' tokens (no bos, no eos) per source."""
    was_training = model.training
    model.eval()
    B, R = len(srcs), len(srcs) * k
    S = max(len(s) for s in srcs)
    src = torch.full((B, S), model.pad, dtype=torch.long)
    for b, s in enumerate(srcs):
        src[b, :len(s)] = torch.tensor(s)
    dec = IncrementalDecoder(model, src, max_len, k)
    ninf = float("-inf")
    score = [0.0 if r % k == 0 else ninf for r in range(R)]
    history, tokens = [[] for _ in range(R)], [bos] * R
    finished, done = [[] for _ in range(B)], [False] * B
    lp = lambda n: 1.0 if alpha == 0 else ((5.0 + n) / 6.0) ** alpha  # noqa: E731

    def finish(b, toks, log_prob, ended):
        finished[b].append((log_prob / lp(len(toks) + (1 if ended else 0)), toks))

    for t in range(max_len):
        logp = F.log_softmax(dec.step(torch.tensor(tokens)), dim=-1)          # (R, V) float32
        top_v, top_i = torch.sort(logp, dim=1, descending=True, stable=True)
        top_v, top_i = top_v[:, :2 * k].tolist(), top_i[:, :2 * k].tolist()
        last = t + 1 == max_len
        source_row, new_score = [(r // k) * k for r in range(R)], [ninf] * R
        new_history = [[] for _ in range(R)]
        for b in range(B):
            if done[b]:
                continue
            first = b * k
            cands = [(score[first + j] + v, j, i) for j in range(k) if score[first + j] != ninf
                     for v, i in zip(top_v[first + j], top_i[first + j])]
            cands = sorted(cands, key=lambda c: -c[0])[:2 * k]                # stable
            live = 0
            for rank, (log_prob, j, tok) in enumerate(cands):
                if live == k:
                    break
                if tok == eos:                             # finished only among the k best
                    if rank < k:
                        finish(b, history[first + j], log_prob, True)
                    continue
                to = first + live
                live += 1
                source_row[to], new_score[to] = first + j, log_prob
                new_history[to] = history[first + j] + [tok]
            for j in range(live, k):
                new_history[first + j] = list(history[first])
            if last:
                for j in range(live):
                    finish(b, new_history[first + j], new_score[first + j], False)
            if last or len(finished[b]) >= k:
                done[b] = True
        score, history = new_score, new_history
        if all(done):
            break
        if k > 1:
            dec.reorder(source_row)
        tokens = [h[-1] if h else bos for h in history]
    model.train(was_training)
    return [max(f, key=lambda x: x[0])[1] for f in finished]      # the first of equal scores


# ----------------------------------------------------------------------------- evaluation
@torch.no_grad()
def validation_loss(model, split, count, pad):
    """Token-weighted cross-entropy (no smoothing) of the first `count` pairs, 64 at a time."""
    model.eval()
    nats = tokens = 0.0
    n = min(split.n, count)
    for s in range(0, n, 64):
        src, tin, tout, ntok = split.collate(list(range(s, min(n, s + 64))), pad)
        logits = model(src, tin)
        nats += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tout.reshape(-1),
                                ignore_index=pad).item() * ntok
        tokens += ntok
    model.train()
    return nats / tokens if tokens else float("nan")


def split_bleu(model, bpe, split, count, spec):
    """train_translate's split_bleu: the first `count` pairs (0 = all) translated 32 at a time,
    BLEU against their German sentences. -> (BLEU, hypotheses)."""
    n = min(split.n, count) if count > 0 else split.n
    hyps = []
    for s in range(0, n, 32):
        for ids in beam_search(model, split.src[s:min(n, s + 32)], spec["bos"], spec["eos"],
                               spec["max_tokens"], spec["beam"], spec["alpha"]):
            hyps.append(bpe.decode(ids))
    return (corpus_bleu(hyps, [split.german[:n]]) if n else 0.0), hyps


def evaluate_only(model, bpe, valid, test, o, spec, pad):
    """--eval-checkpoint: train_translate's final evaluation of given weights."""
    vl = validation_loss(model, valid, o.eval_pairs, pad)
    vb, hyps = split_bleu(model, bpe, valid, o.bleu_pairs, spec)
    print(f"val loss {vl:.6f} | BLEU {vb:.4f} ({len(hyps)} pairs, beam {o.beam})")
    print_samples(valid, hyps, o.samples)
    tb, hyps = split_bleu(model, bpe, test, o.test_pairs, spec)
    print(f"test BLEU {tb:.4f} ({len(hyps)} pairs of the test split, beam {o.beam})")
    return {"steps": 0, "val_loss": vl, "val_bleu": vb, "test_bleu": tb,
            "test_pairs": len(hyps), "beam": o.beam, "seed": o.seed}


def print_samples(split, hyps, count):
    for i in range(min(len(hyps), count)):
        print(f"  {split.english[i]}\n    -> {hyps[i]}   (reference: {split.german[i]})")


# ----------------------------------------------------------------------------- the run
POSITIVE = ("steps", "batch_tokens", "warmup", "log_every", "eval_every", "eval_pairs",
            "bleu_pairs", "beam")                          # as train_translate's flags


def run_options(args, meta):
    """The recipe flags, checked as train_translate checks them; the data flags given must be
    the dump's."""
    dump.check_flags(args, meta, dump.TRANSLATION, "translation")
    for k in POSITIVE:
        if getattr(args, k) <= 0:
            sys.exit(f"train.py translation: --{k.replace('_', '-')} must be positive, got "
                     f"{getattr(args, k)}")
    return args


def check_dump(t, meta, o, splits, bpe, batches):
    """The ids, batches, batch orders and BLEU of this file against what loom wrote."""
    V, max_tokens = int(meta["vocab_size"]), int(meta["--max-tokens"])
    pad, bos, eos = (int(meta[k]) for k in ("pad_id", "bos_id", "eos_id"))
    assert len(bpe.vocab) == V, f"tokenizer has {len(bpe.vocab)} tokens, the dump says {V}"
    assert [bpe.vocab[i] for i in (pad, bos, eos)] == [b"<pad>", b"<bos>", b"<eos>"]
    for split in splits:
        for i in range(min(split.n, 200)):
            s, g = split.src[i], split.tgt[i]
            assert s[-1] == eos and g[0] == bos and g[-1] == eos and max(len(s), len(g)) <= \
                max_tokens, f"pair {i}: ids do not have train_translate's layout"
            assert bpe.decode_bytes(s[:-1]).decode() == split.english[i] and \
                bpe.decode_bytes(g[1:-1]).decode() == split.german[i], \
                f"pair {i}: the ids do not decode to the pair's text"
    checked = "the batches of another --batch-tokens (not checked)"
    if o.batch_tokens == int(meta["--batch-tokens"]):
        assert batches == ragged(t["batch_rows"].tolist(), t["batch_offsets"].tolist()), \
            "make_batches differs from loom's"
        for e in (0, 1):
            assert epoch_order(len(batches), int(meta["--seed"]), e) == \
                t[f"epoch{e}_order"].tolist(), f"epoch {e}'s batch order differs from loom's"
        checked = f"the {len(batches)} batches and the batch orders of epochs 0 and 1"
    golden = check_bleu(splits[2], meta)
    print(f"checked against loom's dump: ids and text of the first pairs of each split, "
          f"{checked}, BLEU on test sentences and {golden} golden cases", flush=True)


def build_model(args, meta, o):
    """The dumped config's Seq2Seq, from torch's init (seeded) or loom's initial weights."""
    torch.manual_seed(o.seed)
    cfg = {k: int(meta[k]) for k in ("d_model", "n_head", "n_encoder_layers", "n_decoder_layers",
                                     "d_ff", "max_len")}
    assert meta["share_embeddings"] == "1", "only the shared-embedding Transformer is written here"
    model = Seq2Seq(int(meta["vocab_size"]), cfg["d_model"], cfg["n_head"], cfg["d_ff"],
                    cfg["n_encoder_layers"], cfg["n_decoder_layers"], cfg["max_len"],
                    int(meta["pad_id"]), f32(o.dropout), norm_first=meta["norm_first"] == "1")
    if args.loom_init or args.eval_checkpoint:
        path = args.eval_checkpoint or os.path.join(args.data_dir, "init.safetensors")
        weights, _ = load_with_metadata(path)
        if any(k.startswith("model.") for k in weights):  # a checkpoint: its model's tensors
            weights = {k[6:]: v for k, v in weights.items() if k.startswith("model.")}
        model.load_state_dict(weights, strict=True)
    print(f"model: seq2seq {cfg}, vocab {meta['vocab_size']}, dropout {o.dropout} | "
          f"{sum(p.numel() for p in model.parameters())} parameters | "
          f"{'loom' if args.loom_init else 'torch'} init | {torch.get_num_threads()} threads",
          flush=True)
    return model


def train(args):
    t, meta = load_with_metadata(os.path.join(args.data_dir, "data.safetensors"))
    o = run_options(args, meta)
    pad = int(meta["pad_id"])
    splits = [Split(t, s, args.data_dir) for s in ("train", "valid", "test")]
    train_split, valid, test = splits
    bpe = BPE(os.path.join(args.data_dir, "tokenizer.txt"))
    batches = make_batches(train_split, o.batch_tokens)
    check_dump(t, meta, o, splits, bpe, batches)
    model = build_model(args, meta, o)
    spec = {"bos": int(meta["bos_id"]), "eos": int(meta["eos_id"]),
            "max_tokens": int(meta["--max-tokens"]), "beam": o.beam,
            "alpha": f32(float(meta["length_penalty"]))}
    print(f"train {train_split.n} pairs in {len(batches)} batches | valid {valid.n} | test "
          f"{test.n}", flush=True)
    if args.eval_checkpoint:
        return evaluate_only(model, bpe, valid, test, o, spec, pad)
    result = train_loop(args, o, model, train_split, batches, valid, bpe, spec, pad)
    test_bleu, hyps = split_bleu(model, bpe, test, o.test_pairs, spec)
    print(f"test BLEU {test_bleu:.2f} ({len(hyps)} pairs of the test split, beam {o.beam})")
    print_samples(test, hyps, max(o.samples, 4))
    if bpe.invalid:
        print(f"{bpe.invalid} translations were not valid UTF-8 (scored with U+FFFD in their "
              "ill-formed bytes, as train_translate does)")
    result.update(test_bleu=test_bleu, test_pairs=len(hyps), beam=o.beam,
                  batch_tokens=o.batch_tokens, loom_init=args.loom_init, seed=o.seed)
    return result


def train_loop(args, o, model, train_split, batches, valid, bpe, spec, pad):
    """train_translate's loop: Noam lr, label-smoothed cross-entropy, clipping; validation
    loss and BLEU every --eval-every steps and at the last. -> the result's training part."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    log = open(args.log_csv, "w", newline="") if args.log_csv else None
    if log:
        log.write("step,lr,train_loss,val_loss,val_bleu\n")
    model.train()
    run = TrainingRun(o.steps, args.minutes, o.log_every, None, "target tok/s")
    epoch, index, tokens = 0, 0, 0
    order = epoch_order(len(batches), o.seed, 0)
    val_loss = val_bleu = float("nan")
    step = 0
    while step < run.total:
        if index == len(batches):
            epoch, index = epoch + 1, 0
            order = epoch_order(len(batches), o.seed, epoch)
        src, tin, tout, ntok = train_split.collate(batches[order[index]], pad)
        index += 1
        s = max(step + 1, 1)                               # optim::noam_lr, as a float
        lr = f32(f32(o.lr_factor) / math.sqrt(model.d) *
                 min(1 / math.sqrt(s), s * o.warmup ** -1.5))
        set_lr(opt, lr)
        logits = model(src, tin)
        loss = F.cross_entropy(logits.flatten(0, 1), tout.reshape(-1), ignore_index=pad,
                               label_smoothing=f32(o.label_smoothing))
        opt.zero_grad()
        loss.backward()
        if o.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), f32(o.grad_clip))
        opt.step()
        loss_value = loss.item()
        step += 1
        tokens += ntok
        run.step_done(step, loss_value, items=ntok)
        run.log(step, lr, f" | epoch {epoch}")
        vl = vb = float("nan")
        if step % o.eval_every == 0 or step == run.total:
            (vl, vb, hyps), seconds = run.untimed(
                lambda: (validation_loss(model, valid, o.eval_pairs, pad),
                         *split_bleu(model, bpe, valid, o.bleu_pairs, spec)))
            val_loss, val_bleu = vl, vb
            print(f"eval step {step} | val loss {vl:.4f} | perplexity {math.exp(vl):.2f} | "
                  f"BLEU {vb:.2f} ({len(hyps)} pairs, beam {o.beam}) ({seconds:.1f} s)",
                  flush=True)
            print_samples(valid, hyps, o.samples)
        if log:
            log.write(f"{step},{lr!r},{loss_value!r},{vl!r},{vb!r}\n")
            log.flush()
    train_s = run.training_seconds()
    return {"steps": step, "epochs": round(step / len(batches), 3),
            "train_seconds": round(train_s, 1), "target_tokens_per_s": round(tokens / train_s, 1),
            "val_loss": val_loss, "val_bleu": val_bleu}
