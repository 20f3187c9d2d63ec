// A run whose length --minutes plans: TrainingRun plans it at step 21 (optim::TimeBudget's
// kFirstPlan) from the speed of the steps before. Until then the run has no total, only
// TrainingRun::kUnplanned, which a checkpoint cannot be resumed with (it would run for ever), so
// a --stop-at before that step is refused at once, before any work, rather than leave a
// checkpoint that no run can continue.
//
//   if (o.train.minutes > 0) nn::await_minutes_plan(run);   // train_bert: --minutes overrides
//   if (o.train.steps == 0) nn::await_minutes_plan(run);    // train_detr: --steps 0 plans
#pragma once

#include <cstdint>

#include "core/error.h"
#include "report/progress.h"
#include "train/training_run.h"

namespace loom::nn {

inline void await_minutes_plan(TrainingRun& run) {
  const TrainOptions& o = run.options();
  const int64_t first_plan = optim::TimeBudget::kFirstPlan;
  LOOM_CHECK(o.resume || o.stop_at == 0 || o.stop_at > first_plan,
             "{}: --stop-at {} comes before --minutes has planned the run (at step {}); stop "
             "later or give --steps",
             run.program(), o.stop_at, first_plan);
  run.set_total(TrainingRun::kUnplanned);
}

}  // namespace loom::nn
