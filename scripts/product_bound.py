#!/usr/bin/env python3
"""How close a benchmark's CPU step can come to the sgemm probe with its own products.

    python3 scripts/product_bound.py PROGRAM CASE [--steps N] [--reps R] [--build DIR]
    python3 scripts/product_bound.py vision swin-fmnist

Runs build/bench/PROGRAM CASE --profile --profile-shapes 0 (every product shape of the step,
with its calls and time a step), then times each shape alone with scripts/gemm_ab.sh: the
working tree's kernel, as the build has it, its operands in the cache, alpha 1, no bias or
activation, the fastest of its calls (as fast as the product gets on this machine). The 1024^3
product of the sgemm probe is timed between the shapes in the same process, and its fastest
call is the peak the shares are taken of: the VM's speed moves within minutes, so the bench
run's own probe, printed too, is not compared with them. It prints the step's products at
their rate in the step and alone, and what a step at 80% and 70% of that peak (issue 38's
targets) would leave for all the other work (the layer norms, softmax, GELU, copies, the
optimizer) with every product as fast as alone. Where that is little or nothing, the target
needs the products faster in the step than on their own.

Build first (cmake --build build); set OPENBLAS_CORETYPE as the sittings do (scripts/bench.sh).
"""
import argparse
import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# A row of the profile's products table: "3136x512x128 NT  forward  4.0  8.302  5.7%  198.1",
# or a batched one: "512 x 50x32x50 TN  backward  12.0  9.748  2.8%  100.8".
PRODUCT_ROW = re.compile(r"^(?:(\d+) x )?(\d+x\d+x\d+) (NN|NT|TN|TT)\s+(\w+)\s+([\d.]+)\s+([\d.]+)")
# The sgemm probe's product, timed among the shapes, before every PEAK_EVERY of them.
PEAK_SHAPE, PEAK_EVERY = "1024x1024x1024:NN", 6
# A row of gemm_ab's table: "SHAPE  before-median (fastest)  after-median (fastest) ...".
AB_ROW = re.compile(r"^(\S+)\s+([\d.]+) \(\s*([\d.]+)\)\s+([\d.]+) \(\s*([\d.]+)\)")


def profile(program, case, steps, build):
    """The step's JSON line and its product rows (shape, GFLOP a step, ms a step)."""
    command = [str(build / "bench" / program), case, "--steps", str(steps), "--profile",
               "--profile-shapes", "0"]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        sys.exit(f"product_bound: {' '.join(command)} failed:\n{run.stderr}")
    line = json.loads(run.stdout.strip().splitlines()[-1])
    rows = []
    for text in run.stderr.splitlines():
        match = PRODUCT_ROW.match(text)
        if not match:
            continue
        batch, mnk, op, _, calls, ms = match.groups()
        m, n, k = (int(x) for x in mnk.split("x"))
        shape = (f"{batch}*" if batch else "") + f"{mnk}:{op}"
        gflop = 2.0 * int(batch or 1) * m * n * k * float(calls) / 1e9
        rows.append((shape, gflop, float(ms)))
    if not rows:
        sys.exit(f"product_bound: no products in the profile of {program} {case}")
    return line, rows


def alone_rates(shapes, reps):
    """Each shape's GFLOP/s alone, the fastest of its calls by scripts/gemm_ab.sh (the working
    tree's column), and the 1024^3 product's between every PEAK_EVERY of them (the fastest of
    those): the fastest call is what the machine can do, as the probe's fastest of twenty is,
    while a median moves with the VM's minutes."""
    listed = []
    for i in range(0, len(shapes), PEAK_EVERY):
        listed += [PEAK_SHAPE, *shapes[i:i + PEAK_EVERY]]
    command = ["bash", str(ROOT / "scripts" / "gemm_ab.sh"), "--reps", str(reps), *listed,
               PEAK_SHAPE]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        sys.exit(f"product_bound: scripts/gemm_ab.sh failed:\n{run.stderr}")
    rates = {}
    for text in run.stdout.splitlines():
        match = AB_ROW.match(text)
        if match:
            shape = match.group(1)
            rates[shape] = max(rates.get(shape, 0.0), float(match.group(5)))
    missing = [s for s in shapes if s not in rates]
    if missing:
        sys.exit(f"product_bound: gemm_ab timed no {', '.join(missing)}")
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("program", help="a bench program: vision, gpt, bert, seq2seq, detr")
    parser.add_argument("case", help="its case, e.g. swin-fmnist")
    parser.add_argument("--steps", type=int, default=6, help="profiled steps (default 6)")
    parser.add_argument("--reps", type=int, default=200, help="gemm_ab's calls a shape")
    parser.add_argument("--build", default=str(ROOT / "build"), help="the build directory")
    args = parser.parse_args()

    line, rows = profile(args.program, args.case, args.steps, pathlib.Path(args.build))
    probe, step_ms, gflop = line["sgemm_gflops"], line["ms_per_step"], line["flops_per_step"]
    shapes = sorted({shape for shape, _, _ in rows})
    rates = alone_rates([s for s in shapes if s != PEAK_SHAPE], args.reps)
    peak = rates[PEAK_SHAPE]
    in_step = sum(ms for _, _, ms in rows)
    alone = sum(g / rates[shape] * 1e3 for shape, g, _ in rows)
    counted = sum(g for _, g, _ in rows)
    print(f"{args.case}: {gflop:.2f} GFLOP a step ({counted:.2f} in the profiled products); the "
          f"step {step_ms:.1f} ms, {gflop / step_ms * 1e3 / probe:.0%} of the run's own sgemm "
          f"probe ({probe:.1f} GFLOP/s)")
    print(f"the products: {in_step:.1f} ms a step in the step; each shape alone, in one process "
          f"with the 1024^3 product ({peak:.1f} GFLOP/s): {alone:.1f} ms, "
          f"{counted / alone * 1e3 / peak:.0%} of its rate on average")
    print(f"everything else in the step: {step_ms - in_step:.1f} ms")
    for share in (0.8, 0.7):
        allowed = gflop / (share * peak) * 1e3
        print(f"{share:.0%} of {peak:.1f} GFLOP/s: a step of {allowed:.1f} ms, leaving "
              f"{allowed - alone:.1f} ms for everything else beside the products alone")
    print("\nshape (the longest ten)          ms in the step   GFLOP/s there  fastest alone")
    for shape, g, ms in sorted(rows, key=lambda r: -r[2])[:10]:
        print(f"{shape:<32} {ms:>14.3f} {g / ms * 1e3:>15.1f} {rates[shape]:>15.1f}")


if __name__ == "__main__":
    main()
