"""loom's optim::TimeBudget (report/progress.h) in Python, so that both sides of a --minutes run
plan alike (bench/reference/train.py): at step 21 the speed of steps 2-21 extrapolated to the time
left, then a revision every 20 steps from the speed of the latest 200 steps; a revision that finds
the minutes spent ends the run at that step. Steps of unequal cost pass their cost in units of the
average step's (`work`); seconds are training's.
"""
from collections import deque

FIRST_PLAN, REVISE_EVERY, WINDOW = 21, 20, 200


class TimeBudget:
    def __init__(self, minutes):
        self.budget_s, self.work, self.seconds_per_step, self.window_steps = minutes * 60, 0.0, 0, 0
        self.marks = deque(maxlen=WINDOW // REVISE_EVERY + 1)  # (step, seconds, work so far)
        self.printed = 0

    def plan(self, done, seconds, work=1.0, unit="ms/step"):
        """observe(), printing the plan as nn::TrainingRun prints it: the first, a revision
        that moves it by more than 10%, and one that ends the run."""
        total = self.observe(done, seconds, work)
        if total is not None and (done == FIRST_PLAN or total == done or
                                  abs(total - self.printed) > 0.1 * self.printed):
            print(f"{'planned' if done == FIRST_PLAN else 're-planned'} steps: {total} "
                  f"({self.seconds_per_step * 1e3:.1f} {unit})", flush=True)
            self.printed = total
        return total

    def observe(self, done, seconds, work=1.0):
        """After step `done` (1-based), `seconds` of training: the planned total, or None."""
        if done > 1:
            self.work += work                              # step 1's one-off costs left out
        if done != 1 and (done < FIRST_PLAN or (done - FIRST_PLAN) % REVISE_EVERY):
            return None
        self.marks.append((done, seconds, self.work))
        if done == 1:
            return None
        step0, seconds0, work0 = self.marks[0]
        self.seconds_per_step = (seconds - seconds0) / max(self.work - work0, 1e-9)
        self.window_steps = done - step0
        left = self.budget_s - seconds
        more = int(min(left / max(self.seconds_per_step, 1e-9), 1e12)) if left > 0 else 0
        return max(done + 1, done + more) if done == FIRST_PLAN else done + more
