#!/usr/bin/env python3
"""Sums Nsight Compute's per-kernel gpu__time_duration over the last of N equal steps.

Usage: ncu_summary.py NCU_CSV STEPS   (the CSV of `ncu --csv --metrics gpu__time_duration.sum`
of a program that ran STEPS identical steps; the launches are split into STEPS equal parts
and only the last part is summed, so warm-up work does not count).
Prints the step's total kernel time and a table of kernels by time."""
import collections
import csv
import sys

rows = []
with open(sys.argv[1], newline="") as f:
    lines = [line for line in f if line.startswith('"')]
for r in csv.DictReader(lines):
    if r.get("Metric Name") == "gpu__time_duration.sum":
        unit = r.get("Metric Unit", "ns")
        scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0,
                 "msecond": 1.0}.get(unit, 1e-6)
        rows.append((int(r["ID"]), r["Kernel Name"], float(r["Metric Value"].replace(",", "")) * scale))
rows.sort()
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 1
per = len(rows) // steps
last = rows[-per:] if per else rows
total = sum(t for _, _, t in last)
by = collections.defaultdict(lambda: [0.0, 0])
for _, name, t in last:
    key = name[:110]
    by[key][0] += t
    by[key][1] += 1
print(f"{total:.2f} ms of kernels in {len(last)} launches per step ({len(rows)} launches in all)")
for name, (t, n) in sorted(by.items(), key=lambda kv: -kv[1][0]):
    print(f"{t:9.3f} ms {100 * t / total:5.1f}% {n:5d}x  {name}")
