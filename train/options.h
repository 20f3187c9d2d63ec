// TrainOptions: the settings every trainer shares, declared once as a field list
// (core/fields.h): the optimisation (steps, --minutes, batch, learning rate, warm-up, weight
// decay, clipping), the schedule of progress lines, evaluations and checkpoints, the run
// directory and the machine. examples/cli.h's add_train_options makes each field a --flag
// ("min_lr" -> --min-lr) with its check and help, in the --help groups below; a trainer sets its
// own defaults before parsing and adds only its own flags:
//
//   nn::TrainOptions train{.steps = 1600, .batch = 16, .lr = 1e-3f, .out = "out-gpt"};
//   cli::add_train_options(app, train);              // --steps ... --detect-anomaly
//   nn::TrainingRun run("train_gpt", train);         // threads; --resume checked before any work
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/fields.h"

namespace loom::nn {

// (type, name, default, check, help), in the order --help shows them. A trainer whose recipe
// has no use for a field (a Noam schedule has no --lr) leaves it out of its flags.
#define LOOM_TRAIN_OPTIONS_FIELDS(F)                                                           \
  /* ---- Optimisation */                                                                      \
  F(int64_t, steps, 0, non_negative, "optimizer steps in total")                               \
  F(double, minutes, 0.0, non_negative,                                                        \
    "plan the steps so that training (evaluations aside) takes this long: planned at step 21 " \
    "as bench/reference/train.py does, then revised every 20 steps (0 = use --steps)")         \
  F(int64_t, batch, 32, positive, "examples per batch")                                        \
  F(float, lr, 1e-3f, positive, "peak learning rate")                                          \
  F(float, min_lr, 0.0f, non_negative, "learning rate at the end of the cosine decay")         \
  F(int64_t, warmup, 200, non_negative, "linear warm-up steps")                                \
  F(float, weight_decay, 0.0f, non_negative, "AdamW weight decay")                             \
  F(float, grad_clip, 1.0f, non_negative, "clip the global gradient norm to this (0 = off)")   \
  /* ---- Progress, evaluation, checkpoints */                                                 \
  F(int64_t, log_every, 20, positive, "steps between progress lines")                          \
  F(int64_t, eval_every, 200, non_negative, "steps between evaluations (0 = only at the end)") \
  F(int64_t, checkpoint_every, 200, non_negative,                                              \
    "steps between checkpoints (0 = only at the end)")                                         \
  F(std::string, out, "", any, "directory for the run's files")                                \
  F(bool, resume, false, any, "continue from <out>/ckpt.safetensors (bare flag, or 1/0)")      \
  F(int64_t, stop_at, 0, non_negative,                                                         \
    "end this run after that step with a checkpoint, as if interrupted (0 = off); --resume "   \
    "then continues exactly")                                                                  \
  /* ---- Machine */                                                                           \
  F(std::string, device, "cpu", any, "cpu | cuda")                                             \
  F(int64_t, threads, 0, non_negative, "CPU threads (0 = OpenMP's default)")                   \
  F(uint64_t, seed, 0, non_negative, "seed of the weights, the batch order and dropout")       \
  F(bool, detect_anomaly, false, any,                                                          \
    "check every gradient and name the op whose backward first gives NaN or Inf (slower)")

struct TrainOptions {
  LOOM_FIELDS_DECLARE(LOOM_TRAIN_OPTIONS_FIELDS)
  // --steps was on the command line (set by the flag, not a flag itself): N > 0 then overrides
  // the plan a resumed checkpoint holds.
  bool steps_given = false;

  LOOM_FIELDS_VISIT(LOOM_TRAIN_OPTIONS_FIELDS)
  bool operator==(const TrainOptions&) const = default;

  // The --help groups: each starts at its first field and runs to the next one's.
  struct Group {
    const char* first_field;
    const char* title;
  };
  static constexpr Group kGroups[] = {{"steps", "Optimisation"},
                                      {"log_every", "Progress, evaluation, checkpoints"},
                                      {"device", "Machine"}};
};

}  // namespace loom::nn
