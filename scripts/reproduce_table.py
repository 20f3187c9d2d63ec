#!/usr/bin/python3
"""The table of scripts/reproduce.sh: loom's and PyTorch's results of one task, from their logs.

    reproduce_table.py TASK LOOM_LOG LOOM_EXIT PYTORCH_LOG PYTORCH_EXIT

loom's trainers end on a line `final (step N, TIME training...): RESULT` (train_bert's result is
its last `eval step` line, train_translate adds a `test BLEU` line); the PyTorch twin
(bench/reference/train.py) ends on one JSON object with "steps", "epochs", "train_seconds" and
its metrics (METRICS).
"""
import json
import re
import sys

# The twin's quality keys, in the order they are shown (the others describe the run).
METRICS = ["test_accuracy", "val_loss", "bits_per_byte", "ap", "ap50", "ap75", "val_bleu",
           "test_bleu", "val_mlm_accuracy", "val_nsp_accuracy"]
# The words of those keys that loom's trainers print in capitals (train_detr's "AP50").
ACRONYMS = {"ap", "ap50", "ap75", "bleu", "mlm", "nsp"}


def loom_row(log, code):
    lines = open(log, encoding="utf-8", errors="replace").read().splitlines()
    final = next((l for l in reversed(lines) if l.startswith("final (step ")), None)
    if code != 0 or final is None:
        return ["failed (exit %d): %s" % (code, lines[-1] if lines else "no output"), "", "", ""]
    m = re.match(r"final \(step (\d+), (?:([\d.]+) epochs, )?([^)]*?)(?: training)?\)[^:]*: (.*)",
                 final)
    steps, epochs, time, result = m.groups() if m else ("?", None, "?", final)
    evals = [l for l in lines if l.startswith("eval step ")]
    if result.startswith("see the last eval line") and evals:  # train_bert
        result = evals[-1].split(" | ", 1)[1]
    bleu = next((l for l in reversed(lines) if l.startswith("test BLEU ")), None)
    if bleu:  # train_translate: the last evaluation and the test set
        result = (evals[-1].split(" | ", 1)[1] + "; " if evals else "") + bleu
    return [steps, epochs or "", time, result]


def show(key, value):
    """A metric as loom's trainers print it: accuracies in percent, the rest to 4 decimals."""
    name = " ".join(w.upper() if w in ACRONYMS else w for w in key.split("_"))
    return f"{name} {100 * value:.2f}%" if key.endswith("accuracy") else f"{name} {value:.4f}"


def duration(seconds):
    """Seconds as loom's optim::format_duration writes them: 42s, 9m41s."""
    s = int(seconds + 0.5)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def twin_row(log, code):
    lines = open(log, encoding="utf-8", errors="replace").read().splitlines()
    result = None
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                result = json.loads(line)
            except json.JSONDecodeError:
                pass
            break
    if code != 0 or result is None:
        return ["failed (exit %d): %s" % (code, lines[-1] if lines else "no output"), "", "", ""]
    metrics = ", ".join(show(k, result[k]) for k in METRICS if k in result)
    epochs = result.get("epochs")
    time = result.get("train_seconds")
    return [str(result.get("steps", "?")), f"{epochs:.2f}" if isinstance(epochs, float) else "",
            duration(time) if isinstance(time, (int, float)) else "", metrics]


def main():
    task, loom_log, loom_code, twin_log, twin_code = sys.argv[1:6]
    rows = [["loom"] + loom_row(loom_log, int(loom_code)),
            ["PyTorch"] + twin_row(twin_log, int(twin_code))]
    print(f"\n| {task} | steps | epochs | training | result |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:  # a result's own separators (train_detr's "AP .. | AP50 ..") as commas
        print("| " + " | ".join(cell.replace(" | ", ", ") for cell in r) + " |")
    sys.exit(0 if int(loom_code) == 0 and int(twin_code) == 0 else 1)


if __name__ == "__main__":
    main()
