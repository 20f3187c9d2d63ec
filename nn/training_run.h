// TrainingRun: the plumbing every trainer shares, so that a trainer keeps only its recipe (model,
// data, loss, evaluation). It owns the run directory's files, the resume, the checkpoint
// schedule, the --minutes plan, the progress line and the CSV log; the trainer owns the loop:
//
//   nn::TrainingRun run("train_gpt", o.run);              // threads; --resume finds its file
//   run.set_total(epochs * steps_per_epoch);               // when not --steps (its default)
//   run.keep_flags({{"--data", o.data}});                  // a resume must keep the data
//   run.set_checkpoint({{"model", &model}}, &opt, [&](int64_t step) {
//     return nn::CheckpointContent{config.to_metadata(), batches.epoch(), batches.index(),
//                                  global_batch};          // beside the TrainerState
//   });
//   if (o.run.resume) {  // model, optimizer, RNG, start() and total(); `check` may refuse it
//     const nn::TrainerState state = run.resume({{"model", &model}}, &opt, check);
//     batches.seek(state.epoch, state.batch_index_for(global_batch, n, run.source()));
//   }
//   data::CsvLog log = run.open_log({"step", "loss"});    // rank 0's; continues on resume
//   run.begin(global_batch * context, "tok/s");            // the clock starts here
//   for (int64_t step = run.start(); step < run.total(); ++step) {
//     ... forward, backward, optimizer step ...
//     const int64_t done = step + 1;
//     const float loss_value = run.step_done(done, loss.item());  // mean over the ranks
//     run.log(done, lr);                                   // every --log-every, and the last
//     const bool stop = run.checkpoint(done);              // every N, --stop-at and the last
//     if (eval_due) run.untimed([&] { evaluate(); });      // out of tokens/s and the ETA
//     log.row({double(done), loss_value});
//     if (stop) return 0;                                  // --stop-at
//   }
//   ... final evaluation (rank 0's: run.main_process()), the last step already saved ...
//
// The rules, the same in every trainer:
//   - Only rank 0 (distributed::is_main_process()) writes files; every rank computes the same
//     checkpoint content, so the collectives stay in step.
//   - A checkpoint is written every --checkpoint-every steps, at the last step, and at
//     --stop-at, after which the run ends as an interruption would; --resume then continues
//     exactly (nn::TrainerState).
//   - --minutes plans the total at step 21 from the speed of steps 2-21, then revises it every
//     20 steps from the speed of the latest 200 (optim::TimeBudget), so that training ends
//     near its minutes; the seconds are training's (untimed() work is left out); the total is
//     rank 0's on every rank, so all stop at the same step.
//   - checkpoint() comes before the step's evaluation, so that an evaluation that fails (on a
//     split whose bad bytes no check foresaw) never loses the trained model.
//   - A resumed run keeps the total of its checkpoint (the first run's plan at that step) unless
//     --steps N > 0 is given again, and does not plan --minutes anew. A checkpoint written
//     before --minutes made its plan holds none (kUnplanned) and needs --steps; one at the end
//     of its plan has nothing to do. Either is refused when the run is constructed, as is a
//     checkpoint of another trainer (its "trainer" and "model_type" named), before any work.
//   - keep_flags: the flags that choose the data (--data, --fortunes, --dict, --val-fraction,
//     --bpe-vocab, --epochs, ...) are recorded in every checkpoint; resume() refuses a change.
//   - A loss that is not finite ends the run (every rank: the loss is the global mean) with a
//     loom::Error naming the step; --detect-anomaly (autograd's anomaly mode) names the op whose
//     backward first gave a NaN or Inf.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "data/plot.h"
#include "nn/checkpoint.h"
#include "optim/progress.h"

namespace loom::nn {

// The options every trainer has (examples/cli.h's add_run_options makes them flags). A trainer
// sets its own defaults before parsing.
struct RunOptions {
  std::string out = "";          // directory of ckpt.safetensors, log.csv and the pictures
  bool resume = false;           // continue from <out>/ckpt.safetensors
  int64_t steps = 0;             // optimizer steps in total (the trainer may derive it)
  bool steps_given = false;      // --steps was on the command line: N > 0 overrides a resumed plan
  double minutes = 0;            // > 0: plan the steps to fill this much training time
  int64_t stop_at = 0;           // > 0: end after that step with a checkpoint
  int64_t checkpoint_every = 0;  // 0: only at the end (and at --stop-at)
  int64_t log_every = 20;        // steps between progress lines
  std::string device = "cpu";    // cpu | cuda
  int64_t threads = 0;           // 0: OpenMP's default
  uint64_t seed = 0;
  bool detect_anomaly = false;  // autograd::set_detect_anomaly(true): the NaN's op is named
};

// Throws loom::Error "<program>: the loss of step <step> is nan ..." unless `loss` is finite:
// a run whose loss diverged has no result to report (TrainingRun::step_done calls it; a
// trainer with a loop of its own calls it after each step).
void check_loss_finite(const std::string& program, double loss, int64_t step);

// What a checkpoint holds beside the modules, the optimizer and the step: the trainer's
// metadata (model config, tokenizer, ...) and where its data is (nn::TrainerState's fields).
struct CheckpointContent {
  Metadata metadata;
  int64_t epoch = 0, batch_index = 0, global_batch = 0;
};

class TrainingRun {
 public:
  // The total of a run whose --minutes are planned at step 21: a placeholder no checkpoint may
  // be resumed with (it would run for ever).
  static constexpr int64_t kUnplanned = std::numeric_limits<int32_t>::max();

  // Sets the threads (options.threads > 0) and anomaly mode (options.detect_anomaly); on
  // --resume, checks that the checkpoint is there, was written by `program`, and has steps left
  // to run (see the rules above), before any work. `program` starts every message
  // ("train_gpt: ...") and is recorded in every checkpoint.
  TrainingRun(std::string program, RunOptions options);

  const RunOptions& options() const { return options_; }
  const std::string& program() const { return program_; }
  Device device() const { return device_; }
  std::string checkpoint_path() const { return options_.out + "/ckpt.safetensors"; }
  std::string log_path() const { return options_.out + "/log.csv"; }
  // "train_gpt: <out>/ckpt.safetensors": the source named by errors about the checkpoint.
  std::string source() const { return program_ + ": " + checkpoint_path(); }
  bool main_process() const;  // rank 0: the one that prints and writes files

  // ---- the plan
  int64_t start() const { return start_; }
  int64_t total() const { return total_; }
  void set_total(int64_t total) { total_ = total; }

  // ---- checkpoints
  using ContentFn = std::function<CheckpointContent(int64_t step)>;
  // What save() writes: the modules, the optimizer and content(step).
  void set_checkpoint(SavedModules modules, const optim::Optimizer* optimizer, ContentFn content);
  // Writes the checkpoint of `step` on rank 0 (atomically: nn::save_checkpoint).
  void save(int64_t step) const;
  // The flags a resumed run must keep, with this run's values ("" = unset here: not compared).
  // Recorded in every checkpoint under "flag <name>"; resume() refuses a checkpoint that
  // records another value, naming the flag and both values. Call before resume() and save().
  void keep_flags(std::vector<std::pair<std::string, std::string>> flags);
  // Restores the modules, the optimizer and loom's RNG from the checkpoint and returns its
  // state (for the caller's data position): start() becomes its step, total() its planned total
  // unless --steps N > 0 was given. The kept flags and then `check` see the metadata first
  // (e.g. "is this the configured model?") and throw to refuse it; nothing is changed before
  // they and the whole file are checked. Prints "resumed from <path> at step S" (with the data
  // position when `print_position`).
  using CheckFn = std::function<void(const Metadata& metadata, const TrainerState& state)>;
  TrainerState resume(const LoadedModules& modules, optim::Optimizer* optimizer,
                      const CheckFn& check = {}, bool print_position = true);

  // ---- the log: rank 0 writes <out>/log.csv, the others nothing; a resumed run keeps the rows
  // up to its start step.
  data::CsvLog open_log(std::vector<std::string> header) const;

  // ---- the loop
  // Starts the clock: the progress line counts `items_per_step` `unit` a step ("tok/s",
  // "img/s"); with `plan_minutes`, --minutes (unless resumed) plans the total from step 21 on.
  void begin(int64_t items_per_step, std::string unit = "tok/s", bool plan_minutes = true);
  // For steps of unequal cost (batches of short and of long sequences): --minutes plans from the
  // time per unit of `work` (step_done's) times `mean_work_per_step`, the cost of the average
  // step, instead of from the time per step; `note` ends the first "planned" line.
  void plan_by_work(double mean_work_per_step, std::string note = "");
  // After the optimizer step `done` (1-based): the global loss (the mean of `local_loss` over
  // the ranks, which it returns) is checked finite and added to the progress line; the plan of
  // --minutes is made or revised when its time comes (total() may change, to `done` when the
  // minutes are spent). `work`: what this step cost (see plan_by_work).
  float step_done(int64_t done, double local_loss, double work = 1);
  // Fixes the total (every rank takes rank 0's) and prints "planned steps: N (x ms/step...)";
  // for a trainer that plans --minutes itself.
  void plan(int64_t total, double seconds_per_step, const std::string& note = "");
  // Appended to the "planned steps" line of the built-in plan (e.g. ", 3.2 epochs").
  std::function<std::string(int64_t total)> plan_note;
  // A progress line is due every --log-every steps and at the last.
  bool log_due(int64_t done) const { return done % options_.log_every == 0 || done == total_; }
  // The progress line of step `done` ("step 20/1600 | loss ... | ETA ..."); the next averages
  // anew.
  std::string progress_line(int64_t done, double lr);
  // Prints progress_line + suffix when due.
  void log(int64_t done, double lr, const std::string& suffix = "");
  // Runs `work` (an evaluation), keeping its time out of the throughput and the ETA; returns
  // its seconds.
  double untimed(const std::function<void()>& work);
  double elapsed() const;           // seconds since begin()
  double training_seconds() const;  // elapsed() less untimed()'s seconds: what --minutes counts
  // After step `done` and before its evaluation: saves every --checkpoint-every steps, at
  // --stop-at and at the last step (so that an evaluation that fails loses no training);
  // returns true at --stop-at (before the last step), after printing so: the run ends there
  // once the step's evaluation and log row are done.
  bool checkpoint(int64_t done);
  bool stop_due(int64_t done) const { return done == options_.stop_at && done != total_; }

 private:
  std::string program_;
  RunOptions options_;
  Device device_;
  int64_t start_ = 0, total_ = 0;
  SavedModules modules_;
  const optim::Optimizer* optimizer_ = nullptr;
  ContentFn content_;
  std::optional<optim::ProgressMeter> progress_;
  std::optional<optim::TimeBudget> budget_;
  double mean_work_ = 0;  // plan_by_work's
  std::string work_note_;
  double untimed_seconds_ = 0;  // untimed()'s, left out of the plan
  int64_t printed_total_ = 0;   // the plan last printed
  std::vector<std::pair<std::string, std::string>> kept_flags_;  // keep_flags'
  // The checks of --resume that need no model: the trainer and the plan.
  void check_resumable(const Metadata& meta, const TrainerState& state) const;
  void check_kept_flags(const Metadata& meta) const;
};

}  // namespace loom::nn
