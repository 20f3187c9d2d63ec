// The train layer: what every training program repeats, written once. TrainOptions are the
// settings every trainer shares; TrainingRun owns a run's plan, its checkpoints and exact
// resume, its evaluation schedule, its CSV log and curves, and the rank-0 gate of a job of
// several processes (await_minutes_plan: a run whose length --minutes plans); EvalGuard
// (nn/eval_guard.h) is an evaluation's scope, and weight_decay_groups the one rule of which
// parameters AdamW decays (included by loom.h).
#pragma once

#include "nn/eval_guard.h"
#include "train/minutes_plan.h"
#include "train/options.h"
#include "train/training_run.h"
#include "train/weight_decay.h"
