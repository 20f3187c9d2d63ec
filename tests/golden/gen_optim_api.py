#!/usr/bin/python3
"""Golden optimizer steps and learning-rate schedules from PyTorch for tests/optim
(writes optim_api.safetensors): the torch.optim names of loom's optimizers and schedulers.

Optimizers: every case starts from the same three parameters p (shapes [3, 4], [5], [2, 3, 2])
and takes STEPS steps, the gradient of each step being
    p.grad = p * w.<p> + u.<p>        (the gradient of sum(w p^2 / 2 + u p); float32 elementwise,
                                       so loom computes the same bits)
Stored: init.<p>, w.<p>, u.<p>, and <case>.step<k>.<p>, the parameters after step k (1..STEPS).

Schedulers: an SGD over three one-element parameters in three groups with lrs 0.5, 0.125 and
0.0625 (exact in float32, so loom's float group lrs start from PyTorch's doubles), and a
scheduler; sched.<case>.lrs holds get_last_lr() after construction (row 0) and after each
step() (row k), as float64 bits stored as int64 (loom's reader widens F64 to float32; the bits
keep every digit). ReduceLROnPlateau cases get the metric of row k from sched.<case>.metrics.
OneCycleLR runs with cycle_momentum=False: loom schedules the learning rate only.

Run: /usr/bin/python3 tests/golden/gen_optim_api.py   (from anywhere)
"""

import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from safetensors_io import save  # noqa: E402

STEPS = 5
SHAPES = {"a": (3, 4), "b": (5,), "c": (2, 3, 2)}
NAMES = list(SHAPES)

O = torch.optim


def groups(p, lr_a, wd_a, lr_bc, wd_bc):
    return [{"params": [p["a"]], "lr": lr_a, "weight_decay": wd_a},
            {"params": [p["b"], p["c"]], "lr": lr_bc, "weight_decay": wd_bc}]


# name -> optimizer factory. Keep in sync with tests/optim/test_optim_api.cpp.
OPTIMIZERS = {
    "sgd_nesterov": lambda p: O.SGD(p.values(), lr=0.1, momentum=0.9, weight_decay=0.01,
                                    nesterov=True),
    "sgd_dampening": lambda p: O.SGD(p.values(), lr=0.05, momentum=0.8, dampening=0.3,
                                     weight_decay=0.1),
    "rmsprop": lambda p: O.RMSprop(p.values()),
    "rmsprop_momentum": lambda p: O.RMSprop(p.values(), lr=0.005, alpha=0.9, eps=1e-6,
                                            weight_decay=0.05, momentum=0.7),
    "rmsprop_centered": lambda p: O.RMSprop(p.values(), lr=0.01, momentum=0.5, centered=True),
    "rmsprop_groups": lambda p: O.RMSprop(groups(p, 0.02, 0.1, 0.01, 0.0), alpha=0.95,
                                          centered=True),
    "adagrad": lambda p: O.Adagrad(p.values()),
    "adagrad_decay": lambda p: O.Adagrad(p.values(), lr=0.1, lr_decay=0.05, weight_decay=0.1,
                                         eps=1e-8, initial_accumulator_value=0.1),
    "adagrad_groups": lambda p: O.Adagrad(groups(p, 0.05, 0.0, 0.2, 0.01), lr_decay=0.01),
}

LR = torch.optim.lr_scheduler
# name -> (scheduler factory, steps, metrics or None). Keep in sync with test_lr_scheduler.cpp.
SCHEDULERS = {
    "step": (lambda o: LR.StepLR(o, step_size=3, gamma=0.5), 12, None),
    "step_default": (lambda o: LR.StepLR(o, step_size=2), 7, None),
    "multistep": (lambda o: LR.MultiStepLR(o, milestones=[2, 5, 9], gamma=0.3), 12, None),
    "cosine": (lambda o: LR.CosineAnnealingLR(o, T_max=10, eta_min=0.001), 35, None),
    "cosine_default": (lambda o: LR.CosineAnnealingLR(o, T_max=7), 10, None),
    "lambda": (lambda o: LR.LambdaLR(o, lambda e: 0.95 ** e), 10, None),
    "lambda_groups": (lambda o: LR.LambdaLR(o, [lambda e: 0.95 ** e, lambda e: 1.0 / (e + 1),
                                                lambda e: min(1.0, (e + 1) / 4.0)]), 10, None),
    "onecycle_cos": (lambda o: LR.OneCycleLR(o, max_lr=0.8, total_steps=20,
                                             cycle_momentum=False), 20, None),
    "onecycle_linear": (lambda o: LR.OneCycleLR(o, max_lr=[1.0, 0.5, 0.25], total_steps=16,
                                                pct_start=0.25, anneal_strategy="linear",
                                                div_factor=10.0, final_div_factor=100.0,
                                                three_phase=True, cycle_momentum=False),
                        15, None),   # step 16 would extrapolate the line below 0
    "plateau_min": (lambda o: LR.ReduceLROnPlateau(o, mode="min", factor=0.5, patience=2,
                                                   threshold=0.01, cooldown=1, min_lr=0.01),
                    16, [1.0, 0.9, 0.895, 0.9, 0.91, 0.7, 0.71, 0.72, 0.73, 0.74, 0.75, 0.6,
                         0.61, 0.62, 0.63, 0.64]),
    "plateau_max_abs": (lambda o: LR.ReduceLROnPlateau(o, mode="max", factor=0.1, patience=1,
                                                       threshold=0.05, threshold_mode="abs"),
                        10, [0.1, 0.2, 0.22, 0.24, 0.3, 0.3, 0.31, 0.4, 0.41, 0.42]),
}


def run_optimizer(name, factory, init, w, u, out):
    p = {n: init[n].clone().requires_grad_(True) for n in NAMES}
    opt = factory(p)
    for k in range(STEPS):
        with torch.no_grad():
            for n in NAMES:
                p[n].grad = p[n] * w[n] + u[n]
        opt.step()
        for n in NAMES:
            out[f"{name}.step{k + 1}.{n}"] = p[n].detach().clone()


def run_scheduler(name, factory, steps, metrics, out):
    params = [torch.zeros(1, requires_grad=True) for _ in range(3)]
    opt = O.SGD([{"params": [params[0]], "lr": 0.5}, {"params": [params[1]], "lr": 0.125},
                 {"params": [params[2]], "lr": 0.0625}], lr=1.0, momentum=0.9)
    sched = factory(opt)
    # ReduceLROnPlateau (PyTorch 1.13) sets no last lr before its first step: the groups' lrs.
    rows = [[g["lr"] for g in opt.param_groups] if metrics else sched.get_last_lr()]
    for k in range(steps):
        opt.step()   # no gradients: moves nothing, but keeps the call order PyTorch expects
        if metrics:
            sched.step(metrics[k])
        else:
            sched.step()
        rows.append(sched._last_lr if metrics else sched.get_last_lr())  # 1.13: no getter
    out[f"sched.{name}.lrs"] = torch.tensor(rows, dtype=torch.float64).view(torch.int64)
    if metrics:
        out[f"sched.{name}.metrics"] = torch.tensor(metrics, dtype=torch.float64).view(
            torch.int64)


def main():
    torch.manual_seed(0)
    init = {n: torch.randn(s) for n, s in SHAPES.items()}
    w = {n: torch.rand(s) + 0.5 for n, s in SHAPES.items()}
    u = {n: 0.5 * torch.randn(s) for n, s in SHAPES.items()}
    out = {}
    for n in NAMES:
        out[f"init.{n}"], out[f"w.{n}"], out[f"u.{n}"] = init[n], w[n], u[n]
    for name, factory in OPTIMIZERS.items():
        run_optimizer(name, factory, init, w, u, out)
    for name, (factory, steps, metrics) in SCHEDULERS.items():
        run_scheduler(name, factory, steps, metrics, out)
    path = os.path.join(HERE, "optim_api.safetensors")
    save(path, out, metadata={"generator": "tests/golden/gen_optim_api.py",
                              "torch": torch.__version__, "steps": str(STEPS)})
    print(f"wrote {len(out)} tensors to {path}")


if __name__ == "__main__":
    main()
