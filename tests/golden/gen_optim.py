#!/usr/bin/python3
"""Golden optimizer trajectories from PyTorch for tests/optim (writes optim.safetensors).

Every case trains the same tiny MLP for STEPS steps,
    loss = mean((tanh(x @ w1.T + b1) @ w2.T + b2 - y)^2),   x [6,3], y [6,2], w1 [4,3], w2 [2,4],
from the same initial parameters, with one optimizer configuration. The C++ tests rebuild the
loss with loom's autograd, run loom's optimizer with the configuration written out in the test,
and compare against:
    x, y, init.<p>                     the data and initial parameters (p in w1, b1, w2, b2)
    <case>.loss<k>                     the loss computed in iteration k (k = 1..STEPS)
    <case>.step<k>.<p>                 the parameters after the k-th optimizer step
    <case>.norm<k>                     (clipping cases) the norm clip_grad_norm_ returned
Learning-rate schedules are the formulas of optim/schedule.h written out below; the lr for
iteration k (counted from 0) is set before that iteration's step.

Run: /usr/bin/python3 tests/golden/gen_optim.py   (from anywhere)
"""

import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from safetensors_io import save  # noqa: E402

STEPS = 10
NAMES = ["w1", "b1", "w2", "b2"]


def loss_fn(p, x, y):
    hidden = torch.tanh(x @ p["w1"].T + p["b1"])   # [6, 4]
    out = hidden @ p["w2"].T + p["b2"]             # [6, 2]
    return ((out - y) ** 2).mean()


def noam(step, d_model, warmup, factor):
    step = max(step, 1)   # as the Annotated Transformer: step 0 is taken as 1
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def warmup_cosine(step, warmup, total, peak, floor):
    if step < warmup:
        return peak * step / warmup
    if step >= total:
        return floor
    progress = (step - warmup) / (total - warmup)
    return floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def weights(p):
    return [p["w1"], p["w2"]]


def biases(p):
    return [p["b1"], p["b2"]]


def every(p):
    return [p[n] for n in NAMES]


# name -> (optimizer factory, lr schedule or None, clip max_norm or None). Keep in sync with
# the configurations in tests/optim/test_sgd.cpp and test_adam.cpp.
CASES = {
    "sgd_plain": (lambda p: torch.optim.SGD(every(p), lr=0.1), None, None),
    "sgd_momentum": (lambda p: torch.optim.SGD(every(p), lr=0.1, momentum=0.9), None, None),
    "sgd_nesterov": (lambda p: torch.optim.SGD(every(p), lr=0.05, momentum=0.9, nesterov=True),
                     None, None),
    "sgd_weight_decay": (lambda p: torch.optim.SGD(every(p), lr=0.1, momentum=0.5,
                                                   dampening=0.25, weight_decay=0.05),
                         None, None),
    "sgd_groups": (lambda p: torch.optim.SGD([
        {"params": weights(p), "lr": 0.1, "weight_decay": 0.01},
        {"params": biases(p), "lr": 0.05, "weight_decay": 0.0}], lr=1.0, momentum=0.9),
        None, None),
    "sgd_clip": (lambda p: torch.optim.SGD(every(p), lr=0.1, momentum=0.9), None, 0.3),
    "adam": (lambda p: torch.optim.Adam(every(p), lr=0.01, weight_decay=0.1), None, None),
    "adam_groups": (lambda p: torch.optim.Adam([
        {"params": weights(p), "lr": 0.02, "weight_decay": 0.05},
        {"params": biases(p), "lr": 0.01, "weight_decay": 0.0}], lr=1.0, betas=(0.8, 0.99)),
        None, None),
    "adamw_groups": (lambda p: torch.optim.AdamW([
        {"params": weights(p), "lr": 0.01, "weight_decay": 0.1},
        {"params": biases(p), "lr": 0.02, "weight_decay": 0.0}], lr=1.0), None, None),
    "adamw_cosine": (lambda p: torch.optim.AdamW(every(p), lr=0.02, weight_decay=0.01),
                     lambda k: warmup_cosine(k, warmup=3, total=8, peak=0.02, floor=0.002), None),
    "adam_noam": (lambda p: torch.optim.Adam(every(p), lr=1.0, betas=(0.9, 0.98), eps=1e-9),
                  lambda k: noam(k, d_model=16, warmup=4, factor=0.5), None),
    "adamw_clip": (lambda p: torch.optim.AdamW(every(p), lr=0.01, weight_decay=0.1), None, 0.1),
}


def run_case(name, factory, schedule, max_norm, init, x, y, out):
    p = {n: init[n].clone().requires_grad_(True) for n in NAMES}
    opt = factory(p)
    for k in range(STEPS):
        if schedule is not None:
            for group in opt.param_groups:
                group["lr"] = schedule(k)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(p, x, y)
        loss.backward()
        out[f"{name}.loss{k + 1}"] = loss.detach().clone()
        if max_norm is not None:
            norm = torch.nn.utils.clip_grad_norm_(every(p), max_norm)
            out[f"{name}.norm{k + 1}"] = norm.detach().clone()
        opt.step()
        for n in NAMES:
            out[f"{name}.step{k + 1}.{n}"] = p[n].detach().clone()


def main():
    torch.manual_seed(0)
    x = torch.randn(6, 3)
    y = torch.randn(6, 2)
    init = {"w1": 0.5 * torch.randn(4, 3), "b1": 0.1 * torch.randn(4),
            "w2": 0.5 * torch.randn(2, 4), "b2": 0.1 * torch.randn(2)}
    out = {"x": x, "y": y}
    out.update({f"init.{n}": t for n, t in init.items()})
    for name, (factory, schedule, max_norm) in CASES.items():
        run_case(name, factory, schedule, max_norm, init, x, y, out)
    path = os.path.join(HERE, "optim.safetensors")
    save(path, out, metadata={"generator": "tests/golden/gen_optim.py",
                              "torch": torch.__version__, "steps": str(STEPS)})
    print(f"wrote {len(out)} tensors to {path}")


if __name__ == "__main__":
    main()
