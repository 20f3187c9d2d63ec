"""loom's nn::TrainingRun (train/training_run.h), the part a reference trainer needs, so that both
sides of a side-by-side run count alike:

  the total    --steps, or with --minutes planned by TimeBudget (time_budget.py) at step 21 and
               revised every 20 steps; until the first plan it is 2^31 - 1, as loom's
  the clock    training seconds: untimed() work (evaluations) is left out of the plan and of
               the throughput, as loom leaves it out
  progress     "step 20/1600 | loss 5.5411 | lr 5.00e-04 | 3721 tok/s" every --log-every steps
               and at the last, the loss the mean since the previous line

    run = TrainingRun(args.steps, args.minutes, args.log_every, batch * context, "tok/s")
    step = 0
    while step < run.total:
        ... lr from (step + 1, run.total), forward, backward, optimizer step ...
        step += 1
        run.step_done(step, loss.item())
        run.log(step, lr)
        if eval_due: value = run.untimed(evaluate)
"""
import math
import time

import torch

from time_budget import TimeBudget

UNPLANNED = 2 ** 31 - 1                 # loom's total before --minutes is planned (int32 max)


class TrainingRun:
    def __init__(self, steps, minutes, log_every, items_per_step, unit):
        self.budget = TimeBudget(minutes) if minutes > 0 else None
        self.total = UNPLANNED if self.budget else steps
        self.log_every, self.items_per_step, self.unit = log_every, items_per_step, unit
        self.start = time.perf_counter()
        self.paused = 0.0                                  # untimed() seconds
        self.window, self.window_items, self.window_start = [], 0, 0.0  # since the last line

    def training_seconds(self):
        return time.perf_counter() - self.start - self.paused

    def step_done(self, done, loss, work=1.0, items=None):
        """After optimizer step `done` (1-based) with this loss; `work`: the step's cost in
        average steps (TimeBudget's); `items`: what it processed, when not items_per_step. May
        change the total (to `done`: the minutes are spent)."""
        if not math.isfinite(loss):
            raise FloatingPointError(f"loss {loss} at step {done}")
        self.window.append(loss)
        self.window_items += self.items_per_step if items is None else items
        if self.budget:
            planned = self.budget.plan(done, self.training_seconds(), work)
            self.total = self.total if planned is None else planned

    def log(self, done, lr, suffix=""):
        """The progress line, every --log-every steps and at the last."""
        if done % self.log_every and done != self.total:
            return
        now = self.training_seconds()
        rate = self.window_items / max(now - self.window_start, 1e-9)
        print(f"step {done}/{self.total} | loss {sum(self.window) / len(self.window):.4f} | "
              f"lr {lr:.2e} | {rate:.0f} {self.unit}{suffix}", flush=True)
        self.window, self.window_items, self.window_start = [], 0, now

    def untimed(self, work):
        """work() (an evaluation), its seconds left out of the clock -> (its value, seconds)."""
        t = time.perf_counter()
        value = work()
        seconds = time.perf_counter() - t
        self.paused += seconds
        return value, seconds


def warmup_cosine_lr(step, warmup, total, peak, floor):
    """optim::warmup_cosine_lr: linear warm-up to `peak` over `warmup` steps (step counts from 1
    in loom's trainers), then cosine to `floor` at `total`, then `floor`."""
    if step < warmup:
        return peak * step / warmup
    if step >= total:
        return floor
    progress = (step - warmup) / (total - warmup)          # in [0, 1)
    return floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def warmup_linear_lr(step, warmup, total, peak):
    """optim::warmup_linear_lr: linear warm-up, then linear decay to 0 at `total`."""
    if step < warmup:
        return peak * step / warmup
    if step >= total:
        return 0.0
    return peak * (total - step) / (total - warmup)


def set_lr(opt, lr):
    """Every parameter group's learning rate, as loom's Optimizer::set_lr sets it."""
    for g in opt.param_groups:
        g["lr"] = lr


def update(opt, loss, parameters, grad_clip):
    """One optimizer step of a training loop, as loom's trainers take it: gradients from `loss`,
    their global norm clipped to `grad_clip` (0 = off), then the update."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(parameters, grad_clip)
    opt.step()
