#!/usr/bin/python3
"""One sitting of loom's CPU benchmarks, each beside its PyTorch twin, written as one table.

    /usr/bin/python3 scripts/bench_sitting.py [--quick] [--threads T] [--steps N] [--readme]
    (scripts/bench.sh installs, builds and then runs this)

In one process, one after the other on the machine it runs on:
  1. the machine's limit: `build/bench/ops sgemm` (1024^3 float32 products by loom's matmul and
     by OpenBLAS's cblas_sgemm: the faster of the two), in GFLOP/s, probed again after the last
     case: the peak is the faster of the two probes;
  2. for every case, loom's benchmark (`build/bench/PROGRAM CASE`) and then the PyTorch twin
     (`bench/reference/bench.py CASE`), each the median of N timed steps after 3 warm-ups, at T
     threads (PyTorch at its best setting for T: bench/reference/bench.py sets its thread pools);
  3. the FLOPs of one step of the case (matrix products and convolutions, forward + backward,
     2 per multiply-add), counted by `bench/reference/bench.py CASE --flops` at PyTorch's
     dispatcher.

Writes bench/results/<date>-<host>.json (every JSON line both sides printed, plus the machine)
and bench/results/<date>-<host>.md, the Markdown table (a sitting of fewer than 10 steps a case
adds "-quick" to the names; a later sitting of the same day adds its time, -HHMM, and keeps the
earlier one): loom and PyTorch ms per step, the ratio (PyTorch's time over loom's: above 1, loom
is faster), the step's GFLOP, loom's GFLOP/s and its share of the sitting's sgemm peak. Where
OpenBLAS does not know the CPU and fell back to its oldest kernels, the sitting names the family
the CPU can run in OPENBLAS_CORETYPE first (scripts/openblas_core.py), for both sides, and the
table says so. --readme also puts that table into README.md
between the lines `<!-- bench:begin -->` and `<!-- bench:end -->`. A case that fails on one
side is reported as failed in the table (and the script exits 1 at the end).
"""
import argparse
import datetime
import json
import os
import platform
import socket
import subprocess
import sys
import time

from openblas_core import narrower_than_cpu, suggested_coretype

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (case, loom's benchmark program and its extra flags, what one "step" is, whether the PyTorch
# twin runs it). gpt-mini-generate is timed as the benchmark was first written, without a KV
# cache on either side (every token re-runs the window), so both do the same work; the row after
# it is loom's default decoding, with its KV cache, which has no twin. seq2seq-mini-translate
# times greedy and beam-4 decoding on both sides; its beam search gets a row of its own (BEAM).
# A row without a count from PyTorch (`--flops`: no twin, or beam search, which it does not
# count) takes loom's own count of the same products (bench/flops.h).
CASES = [
    ("gpt-mini", "gpt", [], "training step, 16 x 128 bytes", True),
    ("gpt-mini-generate", "gpt", ["--no-cache"], "16 + 128 tokens, no KV cache", True),
    ("gpt-mini-generate", "gpt", [], "the same with loom's KV cache", False),
    ("vit-fmnist", "vision", [], "training step, 128 images", True),
    ("swin-fmnist", "vision", [], "training step, 64 images", True),
    ("seq2seq-mini", "seq2seq", [], "training step, 32 x 32 tokens", True),
    ("seq2seq-mini-translate", "seq2seq", [], "greedy decoding, 32 x 24 tokens", True),
    ("bert-mini", "bert", [], "pre-training step, 32 x 128", True),
    ("detr-fmnist", "detr", [], "training step, 32 scenes", True),
]
BEAM = ("seq2seq-mini-translate", "beam-4 decoding, 32 x 24 tokens")


def run_json(cmd, log):
    """Runs `cmd`, returns its last JSON line (a dict) or None; stdout and stderr go to `log`."""
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    start = time.time()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    log.write(p.stdout + p.stderr + f"[{time.time() - start:.1f} s, exit {p.returncode}]\n")
    for line in reversed(p.stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line) if p.returncode == 0 else None
            except json.JSONDecodeError:
                return None
    return None


def machine():
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    return {"host": socket.gethostname(), "cpu": cpu, "cores": os.cpu_count(),
            "os": platform.platform(), "loom_commit": commit,
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "")}


def fmt_ms(x, ran=True):
    return "—" if not ran else "failed" if x is None else f"{x:,.1f}"


def table(sitting):
    m, peak = sitting["machine"], sitting["sgemm_gflops"]
    lines = [
        f"One sitting of `scripts/bench.sh{' --quick' if sitting['quick'] else ''}`, "
        f"{sitting['date']}, on {m['cpu']} ({m['cores']} cores, {sitting['threads']} threads; "
        f"loom {m['loom_commit']}, PyTorch {sitting.get('torch', '?')}), median of "
        f"{sitting['steps']} steps after 3 warm-ups. sgemm peak (`bench/ops sgemm`, 1024³, the "
        f"fastest of loom's matmul and OpenBLAS's cblas_sgemm at the sitting's start and end): "
        f"**{peak:.1f} GFLOP/s**" + (f" (PyTorch's: {sitting['torch_sgemm_gflops']:.1f})"
                                     if sitting.get("torch_sgemm_gflops") else "") + "."
        + (f" OpenBLAS ran its {m['openblas_coretype']} kernels (`OPENBLAS_CORETYPE`; "
           f"{sitting['coretype_why']})." if m.get("openblas_coretype") else ""),
        "",
        "| case | step | loom ms | PyTorch ms | PyTorch / loom | GFLOP per step "
        "| loom GFLOP/s | share of sgemm peak |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in sitting["cases"]:
        lm, tm, gf = r.get("loom_ms"), r.get("torch_ms"), r.get("gflop")
        ratio = f"{tm / lm:.2f}×" if lm and tm else "—"
        rate = f"{gf / (lm / 1e3):.1f}" if lm and gf else "—"
        share = f"{100 * gf / (lm / 1e3) / peak:.0f}%" if lm and gf and peak else "—"
        lines.append(f"| `{r['case']}` | {r['step']} | {fmt_ms(lm)} | "
                     f"{fmt_ms(tm, r['twin'])} | {ratio} | "
                     f"{f'{gf:.2f}' if gf else '—'} | {rate} | {share} |")
    return "\n".join(lines) + "\n"


def put_in_readme(text):
    path = os.path.join(ROOT, "README.md")
    with open(path, encoding="utf-8") as f:
        readme = f.read()
    begin, end = "<!-- bench:begin -->\n", "<!-- bench:end -->"
    if readme.count(begin) != 1 or readme.count(end) != 1:
        sys.exit("bench_sitting: README.md needs one '<!-- bench:begin -->' line and one "
                 "'<!-- bench:end -->' line around the table")
    head, rest = readme.split(begin)
    tail = rest.split(end)[1]
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(head + begin + text + end + tail)
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 timed steps a case (default 10)")
    ap.add_argument("--steps", type=int, default=0, help="timed steps a case (overrides --quick)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads of both sides")
    names = list(dict.fromkeys(c[0] for c in CASES))
    ap.add_argument("--cases", nargs="+", default=names, choices=names, metavar="CASE",
                    help="a subset of the cases")
    ap.add_argument("--readme", action="store_true", help="put the table into README.md")
    args = ap.parse_args()
    steps = args.steps or (3 if args.quick else 10)
    if steps < 1 or args.threads < 1:
        ap.error("--steps and --threads must be at least 1")
    bench = os.path.join(ROOT, "build", "bench")
    if not os.path.isfile(os.path.join(bench, "ops")):
        sys.exit("bench_sitting: build/bench/ops not found: run scripts/bench.sh (it builds)")

    coretype = suggested_coretype()
    if coretype:  # OpenBLAS fell back to SSE3 kernels on a CPU it does not know
        os.environ["OPENBLAS_CORETYPE"] = coretype
    now = datetime.datetime.now()
    name = f"{now:%Y-%m-%d}-{socket.gethostname()}" + ("-quick" if steps < 10 else "")
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    out = os.path.join(ROOT, "bench", "results", name)
    if os.path.exists(out + ".json"):  # a later sitting the same day keeps the earlier one
        out += f"-{now:%H%M}"
    log = open(out + ".log", "w", encoding="utf-8")
    t = ["--threads", str(args.threads)]
    py = [sys.executable, os.path.join("bench", "reference", "bench.py")]
    started = time.time()

    def say(msg):
        print(f"[{time.time() - started:6.0f} s] {msg}", flush=True)

    # An environment's choice stands, but a table measured under narrower kernels than the CPU
    # runs says so: PyTorch's side is then slower than the machine allows.
    wider = narrower_than_cpu(os.environ.get("OPENBLAS_CORETYPE", ""))
    why = "set in the environment" + (
        f"; this CPU runs OpenBLAS's {wider} kernels, under which PyTorch's products are faster "
        f"(OPENBLAS_CORETYPE={wider} bash scripts/bench.sh)" if wider else "")
    sitting = {"date": f"{now:%Y-%m-%d %H:%M}", "quick": args.quick, "steps": steps,
               "threads": args.threads, "machine": machine(), "cases": [],
               "coretype_why": "set by the sitting: OpenBLAS does not know this CPU"
               if coretype else why}
    if coretype:
        say(f"OpenBLAS does not know this CPU: OPENBLAS_CORETYPE={coretype} for both sides")
    if wider:
        say(f"OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']} holds OpenBLAS (and PyTorch's "
            f"products) to AVX2 on a CPU that runs its {wider} kernels; the table says so")
    def probe(when, key):
        """The faster of loom's and OpenBLAS's 1024^3 product (bench/flops.h's probe takes the
        same), in GFLOP/s; the probe's JSON line is kept in sitting[key]."""
        sgemm = run_json([os.path.join(bench, "ops"), "sgemm"] + t, log)
        if not sgemm:
            sys.exit(f"bench_sitting: build/bench/ops sgemm failed (see {out}.log)")
        sitting[key] = sgemm
        rate = max(sgemm["gflops"], sgemm.get("cblas_gflops", 0))
        say(f"sgemm at the {when}: {rate:.1f} GFLOP/s (loom {sgemm['gflops']:.1f}, "
            f"cblas_sgemm {sgemm.get('cblas_gflops', 0):.1f})")
        return rate

    # The machine's limit is probed at the start and again at the end, and the peak is the
    # faster of the two: on a shared VM one probe can fall into a neighbour's burst (one read
    # 175 GFLOP/s between two of 360), which would overstate every share in the table.
    start_rate = probe("start", "sgemm")
    torch_sgemm = run_json(py + ["sgemm"] + t, log)
    if torch_sgemm:
        sitting["torch_sgemm_gflops"] = torch_sgemm["gflops"]
        sitting["torch"] = torch_sgemm["torch"]

    failed = False
    for case, program, flags, step, twin in CASES:
        if case not in args.cases:
            continue
        s = ["--steps", str(steps)]
        loom = run_json([os.path.join(bench, program), case] + flags + s + t, log)
        torch = run_json(py + [case] + s + t, log) if twin else None
        flops = run_json(py + [case, "--steps", "1", "--flops"] + t, log) if twin else None
        counted = flops if twin else loom  # whose count of the step's products
        rows = [{"case": case, "step": step, "twin": twin, "loom": loom, "torch": torch,
                 "loom_ms": loom and loom.get("ms_per_step"),
                 "torch_ms": torch and torch.get("ms_per_step"),
                 "gflop": counted and counted.get("flops_per_step")}]
        if case == BEAM[0]:
            rows.append({"case": case, "step": BEAM[1], "twin": twin, "loom": loom,
                         "torch": torch, "loom_ms": loom and loom.get("beam_ms_per_step"),
                         "torch_ms": torch and torch.get("beam_ms_per_step"),
                         "gflop": loom and loom.get("beam_flops_per_step")})
        failed |= not loom or (twin and not torch)
        for row in rows:
            sitting["cases"].append(row)
            say(f"{case} ({row['step']}): loom {fmt_ms(row['loom_ms'])} ms, PyTorch "
                f"{fmt_ms(row['torch_ms'], row['twin'])} ms, {row['gflop'] or '?'} GFLOP")
    sitting["sgemm_gflops"] = max(start_rate, probe("end", "sgemm_end"))
    sitting["seconds"] = round(time.time() - started, 1)

    text = table(sitting)
    with open(out + ".json", "w", encoding="utf-8") as f:
        json.dump(sitting, f, indent=1)
    with open(out + ".md", "w", encoding="utf-8") as f:
        f.write(text)
    print("\n" + text)
    print(f"bench_sitting: {sitting['seconds']:.0f} s; wrote {os.path.relpath(out, ROOT)}"
          ".{json,md,log}")
    if args.readme:
        put_in_readme(text)
        print("bench_sitting: README.md's table replaced")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
