// TrainingRun: the plumbing every trainer shares, so that a trainer keeps only its recipe (model,
// data, loss, evaluation). It owns the run directory's files, the resume, the checkpoint
// schedule, the --minutes plan, the progress line, the evaluation schedule and the CSV log with
// its curves; the trainer owns the loop:
//
//   nn::TrainingRun run("train_gpt", o.train);            // threads; --resume finds its file
//   run.check_recorded("tokenizer", o.tokenizer, "--tokenizer");  // on --resume, before any work
//   manual_seed(o.train.seed);
//   const auto model = run.make_model<models::GPT>(config);  // on the device, a DDP replica
//   run.set_total(epochs * steps_per_epoch);               // when not --steps (its default)
//   run.keep_flags({{"--data", o.data}});                  // a resume must keep the data
//   run.keep_config(config.to_metadata(), {"dropout"});    // ... and the model (but dropout)
//   run.set_checkpoint({{"model", model.get()}}, &opt, {{"tokenizer", o.tokenizer}});  // + meta
//   run.follow(batches, global_batch, dataset->size());  // the data position in each checkpoint
//   if (o.train.resume)  // model, optimizer, RNG, data position, start() and total()
//     run.resume({{"model", model.get()}}, &opt);
//   data::CsvLog log = run.open_log({"step", "loss"});    // rank 0's; continues on resume
//   run.begin(global_batch * context, "tok/s");            // the clock starts here
//   for (int64_t step = run.start(); step < run.total(); ++step) {
//     ... forward: the loss ...
//     run.backward_and_step(loss, opt, model->parameters());  // zero_grad, backward, clip, step
//     const int64_t done = step + 1;
//     const float loss_value = run.step_done(done, loss.item());  // mean over the ranks
//     run.log(done, lr);                                   // every --log-every, and the last
//     const bool stop = run.checkpoint(done);              // every N, --stop-at and the last
//     if (run.eval_due(done)) run.untimed([&] { evaluate(); });  // rank 0, every --eval-every
//     log.row({double(done), loss_value});
//     if (stop) return 0;                                  // --stop-at
//   }
//   ... final evaluation (rank 0's: run.main_process()), the last step already saved ...
//   run.save_curves("curves.png", {{"loss", "loss", {{"loss", "train loss"}}}});
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
//     keep_config: so is the model's config, but for the fields a resumed run may change
//     (dropout); check_recorded compares a value the checkpoint records (the tokenizer, the
//     preset) as soon as it is called, before any data is read.
//   - Evaluations are rank 0's (the others would compute the same numbers): eval_due() is true
//     there every --eval-every steps but the last, whose evaluation is the final report.
//   - A loss that is not finite ends the run (every rank: the loss is the global mean) with a
//     loom::Error naming the step; --detect-anomaly (autograd's anomaly mode) names the op whose
//     backward first gave a NaN or Inf.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "data/dataloader.h"
#include "io/checkpoint.h"
#include "report/plot.h"
#include "report/progress.h"
#include "train/options.h"

namespace loom::nn {

// One curve of a picture of the CSV log: column `column` against "step", times `scale`, named
// `name` in the legend (default: the column's name).
struct Curve {
  std::string column, name;
  double scale = 1;
};
// One panel of the picture: its curves under a title, the y axis labelled.
struct CurvePanel {
  std::string title, y_label;
  std::vector<Curve> curves;
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
  TrainingRun(std::string program, TrainOptions options);

  const TrainOptions& options() const { return options_; }
  const std::string& program() const { return program_; }
  Device device() const { return device_; }
  std::string checkpoint_path() const { return options_.out + "/ckpt.safetensors"; }
  std::string log_path() const { return options_.out + "/log.csv"; }
  // "train_gpt: <out>/ckpt.safetensors": the source named by errors about the checkpoint.
  std::string source() const { return program_ + ": " + checkpoint_path(); }
  bool main_process() const;  // rank 0: the one that prints and writes files

  // ---- the model
  // Model(config) (its weights drawn from loom's RNG: seed it first) on the run's device, made a
  // data-parallel replica that the run keeps (nn::DistributedDataParallel: rank 0's weights on
  // every rank, the gradients averaged over the ranks in backward).
  template <class Model, class Config>
  std::shared_ptr<Model> make_model(const Config& config) {
    auto model = std::make_shared<Model>(config);
    model->to(device_);
    replicate(model);
    return model;
  }

  // ---- the data
  // Examples a step over every process (--batch x processes): every process walks the same
  // global batches and trains on its own rows of them. An epoch of `epoch_size` `examples`
  // ("training images") must hold one, or a loom::Error names --batch and the sizes.
  int64_t global_batch(int64_t epoch_size, const std::string& examples) const;

  // ---- the plan
  int64_t start() const { return start_; }
  int64_t total() const { return total_; }
  void set_total(int64_t total) { total_ = total; }

  // ---- checkpoints
  using ContentFn = std::function<CheckpointContent(int64_t step)>;
  // What save() writes: the modules, the optimizer and content(step).
  void set_checkpoint(SavedModules modules, const optim::Optimizer* optimizer, ContentFn content);
  // The same with metadata that does not change during the run (the tokenizer's kind, the
  // seed), for a trainer whose data position follow() records.
  void set_checkpoint(SavedModules modules, const optim::Optimizer* optimizer, Metadata metadata);
  // For a trainer that reads its data through a data::BatchStream of `global_batch` examples a
  // step, of `epoch_size` an epoch (a DataLoader's shuffle): every checkpoint records where the
  // stream is, and resume() moves it there, counted in examples, so that a job of another
  // number of processes resumes too (TrainerState::batch_index_for). Call before resume().
  void follow(data::BatchStream& batches, int64_t global_batch, int64_t epoch_size);
  // Writes the checkpoint of `step` on rank 0 (atomically: nn::save_checkpoint).
  void save(int64_t step) const;
  // The flags a resumed run must keep, with this run's values ("" = unset here: not compared).
  // Recorded in every checkpoint under "flag <name>"; resume() refuses a checkpoint that
  // records another value, naming the flag and both values. Call before resume() and save().
  void keep_flags(std::vector<std::pair<std::string, std::string>> flags);
  // The model's config (Config::to_metadata()), recorded in every checkpoint; resume() refuses
  // a checkpoint whose config differs in a field other than those in `may_change` (a resumed
  // run may change its dropout), naming each field that differs. Call before resume().
  void keep_config(Metadata config, std::set<std::string> may_change = {});
  // On --resume (nothing otherwise), at once: the checkpoint records `value` under `key`, the
  // value of `flag` in this run (check_recorded("tokenizer", "bpe", "--tokenizer")), or a
  // loom::Error "<program>: '<path>' was trained with --tokenizer byte, not bpe". Called right
  // after the constructor, it refuses a misfit checkpoint before any data is read.
  void check_recorded(const std::string& key, const std::string& value,
                      const std::string& flag) const;
  // Restores the modules, the optimizer and loom's RNG from the checkpoint and returns its
  // state (for the caller's data position): start() becomes its step, total() its planned total
  // unless --steps N > 0 was given. The kept flags and config, then `check` see the metadata
  // first and throw to refuse it; nothing is changed before
  // they and the whole file are checked. Prints "resumed from <path> at step S" (with the data
  // position when `print_position`).
  using CheckFn = std::function<void(const Metadata& metadata, const TrainerState& state)>;
  TrainerState resume(const LoadedModules& modules, optim::Optimizer* optimizer,
                      const CheckFn& check = {}, bool print_position = true);

  // ---- the log: rank 0 writes <out>/log.csv, the others nothing; a resumed run keeps the rows
  // up to its start step.
  data::CsvLog open_log(std::vector<std::string> header) const;
  // Draws the log's curves against the step (a column logged at some steps only, such as an
  // evaluation's, as a line through those steps) into <out>/<png>, the panels side by side;
  // rank 0's, the others do nothing. Returns the PNG's path.
  std::string save_curves(const std::string& png, const std::vector<CurvePanel>& panels) const;

  // ---- the loop
  // Starts the clock: the progress line counts `items_per_step` `unit` a step ("tok/s",
  // "img/s"); with `plan_minutes`, --minutes (unless resumed) plans the total from step 21 on.
  void begin(int64_t items_per_step, std::string unit = "tok/s", bool plan_minutes = true);
  // For steps of unequal cost (batches of short and of long sequences): --minutes plans from the
  // time per unit of `work` (step_done's) times `mean_work_per_step`, the cost of the average
  // step, instead of from the time per step; `note` ends the first "planned" line.
  void plan_by_work(double mean_work_per_step, std::string note = "");
  // The update every trainer makes from its step's loss: the gradients zeroed, `loss` backward
  // (DDP averages the gradients over the ranks), their global norm over `parameters` clipped to
  // --grad-clip (0 = off), and the optimizer's step.
  void backward_and_step(const Tensor& loss, optim::Optimizer& optimizer,
                         const std::vector<Tensor>& parameters) const;
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

  // ---- the learning rate
  // optim::warmup_cosine_lr of step `step` + 1: a linear warm-up of --warmup steps (cut to the
  // run's length, so that a short run decays too) up to `peak`, then a cosine decay to
  // --min-lr at total().
  float warmup_cosine_lr(int64_t step, float peak) const;
  float warmup_cosine_lr(int64_t step) const { return warmup_cosine_lr(step, options_.lr); }

  // ---- evaluations
  // Whether an evaluation is due after step `done`: on rank 0 only, every --eval-every steps
  // (0: none), not at the last step, whose evaluation is the trainer's final report, unless
  // `at_last` (a trainer that evaluates the last step in its loop, as the others).
  bool eval_due(int64_t done, bool at_last = false) const;
  // The steps between evaluations when the trainer derives them (an epoch's steps).
  void set_eval_every(int64_t steps) { options_.eval_every = steps; }

 private:
  std::string program_;
  TrainOptions options_;
  Device device_;
  std::shared_ptr<Module> replica_;  // make_model's nn::DistributedDataParallel
  int64_t start_ = 0, total_ = 0;
  SavedModules modules_;
  const optim::Optimizer* optimizer_ = nullptr;
  ContentFn content_;
  data::BatchStream* batches_ = nullptr;  // follow()'s
  int64_t global_batch_ = 0, epoch_size_ = 0;
  std::optional<optim::ProgressMeter> progress_;
  std::optional<optim::TimeBudget> budget_;
  double mean_work_ = 0;  // plan_by_work's
  std::string work_note_;
  double untimed_seconds_ = 0;  // untimed()'s, left out of the plan
  int64_t printed_total_ = 0;   // the plan last printed
  std::vector<std::pair<std::string, std::string>> kept_flags_;  // keep_flags'
  Metadata kept_config_;                                         // keep_config's
  std::set<std::string> config_may_change_;
  void replicate(std::shared_ptr<Module> model);
  // The checks of --resume that need no model: the trainer and the plan.
  void check_resumable(const Metadata& meta, const TrainerState& state) const;
  void check_kept_flags(const Metadata& meta) const;
  void check_kept_config(const Metadata& meta) const;
};

}  // namespace loom::nn
