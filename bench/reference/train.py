#!/usr/bin/python3
"""loom's example trainers in PyTorch, for time-to-quality runs side by side.

    /usr/bin/python3 bench/reference/train.py TASK --minutes M [--threads T] [--seed S] [flags]
    /usr/bin/python3 bench/reference/train.py TASK --help      every flag with its default

Each task is one of loom's trainers; its recipe flags have the trainer's names, meanings and
defaults, so `train.py vit-fmnist --minutes 10` and `build/examples/train_vision --minutes 10` run
the same recipe, and a flag given to both runs another recipe on both sides. --minutes plans the
steps as loom does (run.py, time_budget.py: at step 21, revised every 20 steps) and counts
training only: evaluations are timed apart. Progress lines while training; the last line printed
is one JSON object: "framework": "pytorch", "task", "minutes", "steps", "epochs" (where an epoch
means something), "threads", "seed", "train_seconds" and the task's metrics under the names of
the trainer's log.csv or final report.

TASK gpt-fortunes (examples/train_gpt --tokenizer byte): byte-level gpt-mini on the Debian
    fortunes, split 95/5 as loom splits them (data.py). Batch 16 windows of 129 bytes, each
    epoch a fresh permutation of every window; AdamW (lr 1e-3, betas .9/.95, weight decay 0.1 on
    matrices), warm-up 200 steps then cosine to 1e-4, gradient norm clipped to 1; 1600 steps
    unless --minutes. Validation on 200 windows evenly spaced over the validation bytes every
    200 steps and at the end. Metrics: val_loss (nats per byte), bits_per_byte; greedy and
    sampled continuations of --prompt.
TASK vit-fmnist / swin-fmnist (examples/train_vision --model vit-tiny-fmnist / vit-fmnist /
    swin-fmnist): Fashion-MNIST, normalised. Batch 64; AdamW (weight decay 0.05 on matrices and
    kernels, not on biases, norms, positions, the class token or Swin's relative position bias
    table), warm-up 200 steps then cosine to 1e-5; random horizontal flips. ViT (--config
    vit-tiny = loom's vit-tiny-fmnist, or vit-fmnist): lr 2e-3, label smoothing 0.1, random crops
    after padding by 1 black pixel, no clipping, 40 epochs. Swin: lr 1e-3, no smoothing or crops,
    gradient norm clipped to 5, 10 epochs. Test accuracy on the 10,000 test images every epoch
    and at the end. Metric: test_accuracy.
TASK cnn-fmnist (examples/train_cnn): a small CNN on Fashion-MNIST pixels in [0, 1], augmented by
    crops after padding by 2 black pixels and flips, then normalised; batch 128, AdamW (weight
    decay 5e-4) under OneCycleLR (max lr 4e-3, the lr only), 4 epochs unless --minutes (planned
    once, at step 20). Test accuracy after every epoch. Metric: test_accuracy (task_cnn.py).
TASK detr-fmnist (examples/train_detr): DETR on 64x64 scenes of up to 4 Fashion-MNIST items
    (scenes.py). Batch 32; AdamW (betas .9/.999, weight decay 1e-4 on every parameter), lr 5e-4
    for the transformer and heads and --backbone-lr 5e-4 for the CNN, warm-up 200 steps then
    cosine to 1e-6; gradient norm clipped to 0.1; DETR's set loss on every decoder layer, summed;
    10 minutes unless --steps. COCO AP (coco_ap.py) on the first 200 of the 1000 held-out scenes
    every 200 steps, on all 1000 at the end. Metrics: ap, ap50, ap75. --overfit-one: batch = one
    fixed 4-item scene, constant lr 1e-4 (unless --lr), evaluated on that scene.
TASK translation (examples/train_translate): English -> German on the data loom writes with
    `build/bench/dump_data translation --out DIR` (splits, BPE, batches, initial weights), read
    with --data-dir DIR; task_translation.py checks itself against the dump. The model is the
    dump's (seq2seq-mini unless it was made with other model flags): Adam (.9, .98, 1e-9) on the
    Noam schedule (warm-up 400), label smoothing 0.1, gradient norm clipped to 1, batches of
    about 2500 target tokens, 1200 steps unless --minutes. Metrics: val_loss, val_bleu (beam 4)
    every 200 steps and at the end, test_bleu at the end.
TASK bert (examples/train_bert): BERT pre-training (MLM + NSP) on the pairs loom writes with
    `build/bench/dump_data bert --out DIR`, read with --data-dir DIR (made with the twin's
    --seed: it draws the split, the pairs and the masking). bert-mini, batch 32 length-grouped
    pairs, AdamW (lr 5e-4, eps 1e-6, weight decay 0.01 except LayerNorms and biases), warm-up 300
    steps then linear decay to 0, gradient norm clipped to 1, dropout 0.1, masking redrawn every
    epoch exactly as loom draws it; 3000 steps unless --minutes (planned per padded token, as
    loom). Metrics on the first 512 held-out pairs every 250 steps and at the end: val_loss,
    val_mlm_accuracy, val_nsp_accuracy.
The flags of dump_data that shaped the dump (translation: --dict, --pairs, --max-words,
--bpe-vocab, --max-tokens, the fractions and the model flags; bert: --fortunes, --vocab-size,
--max-seq-len, --val-fraction) are taken here too, and refused when they differ from the
dump's, so that scripts/reproduce.sh hands one list of flags to loom's trainer, dump_data and
the twin.

--threads T (0 = every core, as loom's default) sizes ATen's and OpenBLAS's thread pools and sets
OMP_WAIT_POLICY=PASSIVE before torch loads (threads.py: Debian's PyTorch runs its GEMMs in
OpenBLAS's own pool, which spinning OpenMP workers would starve). --seed sets
the weights, the batch order, augmentation, dropout and sampling; the data splits and the held-out
sets never change with it.
"""
import argparse
import importlib
import json
import os
import sys

import dump  # no torch: the flags of loom's data dumps

HERE = os.path.dirname(os.path.abspath(__file__))


# ----------------------------------------------------------------------------- flags
def run_flags(p, steps, log_every, minutes=0.0, seed=0):
    """nn::TrainOptions' flags (examples/cli.h's add_train_options) with the trainer's defaults."""
    p.add_argument("--minutes", type=float, default=minutes,
                   help="plan the steps so that training (evaluations aside) takes this long "
                        "(0 = use --steps)")
    p.add_argument("--steps", type=int, default=steps, help="optimizer steps in total")
    p.add_argument("--log-every", type=int, default=log_every, help="steps between progress lines")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0 = every core)")
    p.add_argument("--seed", type=int, default=seed, help="seed of the weights, batches, dropout")


def gpt_flags(p):                                          # examples/train_gpt.cpp
    run_flags(p, steps=1600, log_every=20)
    p.add_argument("--tokenizer", choices=["byte"], default="byte",
                   help="byte (loom's default BPE is not written here: pass --tokenizer byte "
                        "to train_gpt)")
    p.add_argument("--fortunes", default="/usr/share/games/fortunes")
    p.add_argument("--batch", type=int, default=16, help="sequences per batch")
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    p.add_argument("--min-lr", type=float, default=1e-4, help="lr at the end of the cosine decay")
    p.add_argument("--warmup", type=int, default=200, help="linear warm-up steps")
    p.add_argument("--weight-decay", type=float, default=0.1, help="AdamW weight decay of matrices")
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.95)
    p.add_argument("--grad-clip", type=float, default=1.0, help="gradient norm clip (0 = off)")
    p.add_argument("--eval-every", type=int, default=200, help="steps between evaluations")
    p.add_argument("--eval-windows", type=int, default=200, help="validation windows")
    p.add_argument("--prompt", default="The meaning of life is")
    p.add_argument("--sample-tokens", type=int, default=200)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=0, help="top-k of the sample (0 = off)")


def vision_flags(p, swin):                                 # examples/train_vision.cpp
    run_flags(p, steps=0, log_every=50)
    if not swin:
        p.add_argument("--config", choices=["vit-tiny", "vit-fmnist"], default="vit-tiny",
                       help="ViT size (loom's --model vit-tiny-fmnist / vit-fmnist)")
    else:
        p.add_argument("--drop-path", type=float, default=0.1, help="stochastic depth rate")
    p.add_argument("--crop-padding", type=int, default=0 if swin else 1,
                   help="pad by N black pixels, then crop 28x28 at random (0 = no crop)")
    p.add_argument("--flip", type=int, choices=[0, 1], default=1, help="random horizontal flips")
    p.add_argument("--test-images", type=int, default=0, help="first N test images (0 = all)")
    p.add_argument("--epochs", type=int, default=10 if swin else 40,
                   help="epochs of 60,000 images (when neither --steps nor --minutes)")
    p.add_argument("--batch", type=int, default=64, help="images per batch")
    p.add_argument("--lr", type=float, default=1e-3 if swin else 2e-3, help="peak learning rate")
    p.add_argument("--min-lr", type=float, default=1e-5, help="lr at the end of the cosine decay")
    p.add_argument("--warmup", type=int, default=200, help="linear warm-up steps")
    p.add_argument("--weight-decay", type=float, default=0.05, help="AdamW weight decay")
    p.add_argument("--label-smoothing", type=float, default=0.0 if swin else 0.1)
    p.add_argument("--grad-clip", type=float, default=5.0 if swin else 0.0,
                   help="gradient norm clip (0 = off)")
    p.add_argument("--eval-every", type=int, default=0,
                   help="steps between test evaluations (0 = every epoch)")


def cnn_flags(p):                                          # examples/train_cnn.cpp
    run_flags(p, steps=0, log_every=100)
    p.add_argument("--epochs", type=int, default=4, help="epochs (when not --minutes)")
    p.add_argument("--batch", type=int, default=128, help="images per step")
    p.add_argument("--lr", type=float, default=4e-3, help="peak lr of the one-cycle schedule")


def detr_flags(p):                                         # examples/train_detr.cpp
    run_flags(p, steps=0, log_every=20)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--eval-scenes", type=int, default=1000, help="held-out scenes at the end")
    p.add_argument("--curve-scenes", type=int, default=200,
                   help="the first N of them evaluated every --eval-every steps")
    p.add_argument("--batch", type=int, default=32, help="scenes per batch")
    p.add_argument("--lr", type=float, default=None,
                   help="peak lr of the transformer and heads (default 5e-4; 1e-4 with "
                        "--overfit-one)")
    p.add_argument("--backbone-lr", type=float, default=5e-4, help="lr of the CNN backbone")
    p.add_argument("--warmup", type=int, default=200, help="linear warm-up steps (0 = none)")
    p.add_argument("--min-lr", type=float, default=1e-6, help="lr at the end of the cosine decay")
    p.add_argument("--weight-decay", type=float, default=1e-4, help="AdamW weight decay")
    p.add_argument("--grad-clip", type=float, default=0.1, help="gradient norm clip (0 = off)")
    p.add_argument("--overfit-one", action="store_true",
                   help="train on one fixed 4-item scene (batch 1, constant lr)")
    p.add_argument("--eval-every", type=int, default=200,
                   help="steps between AP evaluations (0 = only at the end)")


def translation_flags(p):                                  # examples/train_translate.cpp
    run_flags(p, steps=1200, log_every=20)
    p.add_argument("--data-dir", required=True,
                   help="written by build/bench/dump_data translation --out DIR")
    dump.add_flags(p, dump.TRANSLATION)
    p.add_argument("--batch-tokens", type=int, default=2500,
                   help="target tokens (padding included) per batch")
    p.add_argument("--warmup", type=int, default=400, help="Noam warm-up steps")
    p.add_argument("--lr-factor", type=float, default=1.0, help="Noam factor")
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0, help="gradient norm clip (0 = off)")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--eval-every", type=int, default=200, help="steps between validations")
    p.add_argument("--eval-pairs", type=int, default=400, help="validation pairs per evaluation")
    p.add_argument("--bleu-pairs", type=int, default=200,
                   help="validation pairs translated for BLEU per evaluation")
    p.add_argument("--test-pairs", type=int, default=1000,
                   help="test pairs translated for the final BLEU (0 = all)")
    p.add_argument("--beam", type=int, default=4, help="beam width of the translations")
    p.add_argument("--samples", type=int, default=4, help="sample translations per evaluation")
    p.add_argument("--loom-init", action="store_true",
                   help="start from loom's initial weights (DIR/init.safetensors)")
    p.add_argument("--log-csv", default="", help="write step,lr,train_loss,val_loss,val_bleu")
    p.add_argument("--eval-checkpoint", default="", metavar="CKPT",
                   help="no training: evaluate these weights (train_translate's "
                        "ckpt.safetensors) as train_translate's last evaluation does")


def bert_flags(p):                                         # examples/train_bert.cpp
    run_flags(p, steps=3000, log_every=20)
    p.add_argument("--data-dir", required=True,
                   help="written by build/bench/dump_data bert --out DIR")
    dump.add_flags(p, dump.BERT)
    p.add_argument("--model", choices=["bert-mini"], default="bert-mini",
                   help="train_bert's preset: bert-mini (other sizes: --hidden, --layers, ...)")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=1024)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--batch", type=int, default=32, help="sentence pairs per batch")
    p.add_argument("--lr", type=float, default=5e-4, help="peak learning rate")
    p.add_argument("--warmup", type=int, default=300, help="linear warm-up steps")
    p.add_argument("--weight-decay", type=float, default=0.01,
                   help="AdamW weight decay (not on LayerNorm, biases)")
    p.add_argument("--grad-clip", type=float, default=1.0, help="gradient norm clip (0 = off)")
    p.add_argument("--eval-every", type=int, default=250,
                   help="steps between held-out evaluations (0 = end)")
    p.add_argument("--eval-pairs", type=int, default=512, help="held-out pairs evaluated")
    p.add_argument("--all-positions", action="store_true",
                   help="MLM logits at every position (Hugging Face) instead of the predicted ones")


TASKS = {  # task -> (its flags, the module that trains it)
    "gpt-fortunes": (gpt_flags, "task_gpt"),
    "vit-fmnist": (lambda p: vision_flags(p, swin=False), "task_vision"),
    "swin-fmnist": (lambda p: vision_flags(p, swin=True), "task_vision"),
    "cnn-fmnist": (cnn_flags, "task_cnn"),
    "detr-fmnist": (detr_flags, "task_detr"),
    "translation": (translation_flags, "task_translation"),
    "bert": (bert_flags, "task_bert"),
}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    tasks = ap.add_subparsers(dest="task", required=True, metavar="TASK")
    for name, (add_flags, _) in TASKS.items():
        add_flags(tasks.add_parser(name, formatter_class=argparse.ArgumentDefaultsHelpFormatter))
    return ap.parse_args()


# ----------------------------------------------------------------------------- main
def main():
    args = parse_args()
    sys.path.insert(0, HERE)
    import threads                                         # before torch: see its docstring
    n_threads = args.threads or os.cpu_count()             # 0: every core, as loom's default
    threads.before_torch(n_threads)
    import torch
    threads.after_torch(torch, n_threads)
    sys.path.insert(0, HERE)
    task = importlib.import_module(TASKS[args.task][1])
    result = task.train(args)                              # steps, epochs?, metrics, ...
    report = {"framework": "pytorch", "task": args.task, "minutes": args.minutes,
              "threads": torch.get_num_threads(), "seed": args.seed, "torch": torch.__version__}
    report.update(result)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
