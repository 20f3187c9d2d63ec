#include "train/training_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "distributed/data_parallel.h"
#include "distributed/distributed_data_parallel.h"
#include "optim/clip_grad.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

namespace loom::nn {

namespace {
std::string value_or(const Metadata& meta, const std::string& key, const std::string& fallback) {
  const auto found = meta.find(key);
  return found == meta.end() ? fallback : found->second;
}
}  // namespace

void check_loss_finite(const std::string& program, double loss, int64_t step) {
  if (std::isfinite(loss)) return;
  const char* value = std::isnan(loss) ? "nan" : loss > 0 ? "inf" : "-inf";  // never "-nan"
  LOOM_FAIL(
      "{}: the loss of step {} is {}: training diverged (a smaller --lr or more --warmup "
      "may help; --detect-anomaly names the op whose backward first gives NaN or Inf)",
      program, step, value);
}

TrainingRun::TrainingRun(std::string program, TrainOptions options)
    : program_(std::move(program)),
      options_(std::move(options)),
      device_(options_.device == "cuda" ? Device::CUDA : Device::CPU),
      total_(options_.steps) {
  LOOM_CHECK(options_.device == "cpu" || options_.device == "cuda",
             "{}: --device must be cpu or cuda, got '{}'", program_, options_.device);
  LOOM_CHECK(options_.log_every > 0, "{}: --log-every must be positive, got {}", program_,
             options_.log_every);
  LOOM_CHECK(options_.checkpoint_every >= 0 && options_.stop_at >= 0 && options_.threads >= 0 &&
                 options_.steps >= 0 && std::isfinite(options_.minutes) && options_.minutes >= 0,
             "{}: --checkpoint-every {}, --stop-at {}, --threads {}, --steps {} and --minutes {} "
             "must not be negative",
             program_, options_.checkpoint_every, options_.stop_at, options_.threads,
             options_.steps, options_.minutes);
  if (options_.threads > 0) set_num_threads(static_cast<int>(options_.threads));
  if (options_.detect_anomaly) autograd::set_detect_anomaly(true);
  if (!options_.resume) return;
  LOOM_CHECK(std::filesystem::exists(checkpoint_path()), "{}: --resume but there is no '{}'",
             program_, checkpoint_path());
  const Metadata meta = read_metadata(checkpoint_path());  // the header only
  check_resumable(meta, TrainerState::from_metadata(meta, source()));
}

void TrainingRun::check_resumable(const Metadata& meta, const TrainerState& state) const {
  const std::string path = checkpoint_path();
  const std::string trainer = value_or(meta, "trainer", program_);  // older files: unrecorded
  LOOM_CHECK(trainer == program_,
             "{}: '{}' was written by {} and holds a {} model; {} resumes only its own "
             "checkpoints",
             program_, path, trainer, value_or(meta, "model_type", "(unnamed)"), program_);
  const bool steps_given = options_.steps_given && options_.steps > 0;
  const int64_t total = steps_given ? options_.steps : state.steps;
  LOOM_CHECK(total < kUnplanned,
             "{}: '{}' was written at step {}, before --minutes planned the run's length (at "
             "step {}): give --steps N to resume it",
             program_, path, state.step, optim::TimeBudget::kFirstPlan);
  LOOM_CHECK(state.step <= total,
             "{}: '{}' is at step {}, beyond {} {}; resuming would save an earlier step over it",
             program_, path, state.step, steps_given ? "--steps" : "its planned", total);
  LOOM_CHECK(state.step < total,
             "{}: '{}' is at step {} of its {} steps: nothing to do (--steps N > {} trains on)",
             program_, path, state.step, total, state.step);
}

void TrainingRun::keep_flags(std::vector<std::pair<std::string, std::string>> flags) {
  kept_flags_ = std::move(flags);
}

void TrainingRun::check_kept_flags(const Metadata& meta) const {
  for (const auto& [flag, value] : kept_flags_) {
    const auto saved = meta.find("flag " + flag);
    if (value.empty() || saved == meta.end()) continue;  // unset here, or unrecorded (older)
    LOOM_CHECK(saved->second == value,
               "{}: '{}' was trained with {} {}, this run has {} {}: resume with the same {} "
               "(or start a new --out)",
               program_, checkpoint_path(), flag, saved->second, flag, value, flag);
  }
}

void TrainingRun::keep_config(Metadata config, std::set<std::string> may_change) {
  kept_config_ = std::move(config);
  config_may_change_ = std::move(may_change);
}

void TrainingRun::check_kept_config(const Metadata& meta) const {
  std::string differences;
  for (const auto& [key, value] : kept_config_) {
    if (config_may_change_.count(key) > 0) continue;
    const std::string saved = value_or(meta, key, "(none)");
    if (saved != value)
      differences +=
          fmt::format("{}{} {} there, {} here", differences.empty() ? "" : "; ", key, saved, value);
  }
  LOOM_CHECK(differences.empty(),
             "{}: '{}' holds another model than the one configured ({}): resume with the same "
             "model flags (or start a new --out)",
             program_, checkpoint_path(), differences);
}

void TrainingRun::check_recorded(const std::string& key, const std::string& value,
                                 const std::string& flag) const {
  if (!options_.resume) return;
  const std::string saved = value_or(read_metadata(checkpoint_path()), key, "(none recorded)");
  LOOM_CHECK(saved == value, "{}: '{}' was trained with {} {}, not {}", program_, checkpoint_path(),
             flag, saved, value);
}

bool TrainingRun::main_process() const { return distributed::is_main_process(); }

int64_t TrainingRun::global_batch(int64_t epoch_size, const std::string& examples) const {
  const int64_t processes = distributed::world_size();
  const int64_t global = options_.batch * processes;
  LOOM_CHECK(global <= epoch_size,
             "{}: --batch {} is larger than the {} {} allow for {} process(es); use a smaller "
             "--batch, or more data",
             program_, options_.batch, epoch_size, examples, processes);
  return global;
}

// ---------------------------------------------------------------------------- checkpoints

void TrainingRun::set_checkpoint(SavedModules modules, const optim::Optimizer* optimizer,
                                 ContentFn content) {
  modules_ = std::move(modules);
  optimizer_ = optimizer;
  content_ = std::move(content);
}

void TrainingRun::set_checkpoint(SavedModules modules, const optim::Optimizer* optimizer,
                                 Metadata metadata) {
  set_checkpoint(std::move(modules), optimizer,
                 [metadata](int64_t) { return CheckpointContent{metadata}; });
}

void TrainingRun::follow(data::BatchStream& batches, int64_t global_batch, int64_t epoch_size) {
  batches_ = &batches;
  global_batch_ = global_batch;
  epoch_size_ = epoch_size;
}

void TrainingRun::save(int64_t step) const {
  LOOM_CHECK(content_ != nullptr, "{}: save() before set_checkpoint()", program_);
  CheckpointContent c = content_(step);  // on every rank: the content may be a collective's
  if (batches_ != nullptr) c = {c.metadata, batches_->epoch(), batches_->index(), global_batch_};
  c.metadata.merge(
      TrainerState::capture(step, total_, c.epoch, c.batch_index, c.global_batch).to_metadata());
  c.metadata.insert(kept_config_.begin(), kept_config_.end());
  c.metadata["trainer"] = program_;
  for (const auto& [flag, value] : kept_flags_)
    if (!value.empty()) c.metadata["flag " + flag] = value;
  if (main_process()) save_checkpoint(checkpoint_path(), modules_, optimizer_, c.metadata);
}

TrainerState TrainingRun::resume(const LoadedModules& modules, optim::Optimizer* optimizer,
                                 const CheckFn& check, bool print_position) {
  const std::string path = checkpoint_path();
  const Metadata meta = read_metadata(path);
  const TrainerState state = TrainerState::from_metadata(meta, source());
  check_resumable(meta, state);  // again: the file may have changed since the constructor
  check_kept_flags(meta);
  check_kept_config(meta);
  if (check) check(meta, state);
  // The data position, checked before anything is loaded.
  const int64_t batch_index =
      batches_ != nullptr ? state.batch_index_for(global_batch_, epoch_size_, source()) : 0;
  load_checkpoint(path, modules, optimizer);  // all or nothing
  if (batches_ != nullptr) batches_->seek(state.epoch, batch_index);
  start_ = state.step;
  // The first run's plan, unless --steps N > 0 is given again (check_resumable: a finite one).
  total_ = options_.steps_given && options_.steps > 0 ? options_.steps : state.steps;
  state.restore_rng();
  if (print_position)
    fmt::print("resumed from {} at step {} (epoch {}, batch {})\n", path, start_, state.epoch,
               state.batch_index);
  else
    fmt::print("resumed from {} at step {}\n", path, start_);
  return state;
}

data::CsvLog TrainingRun::open_log(std::vector<std::string> header) const {
  return data::CsvLog(main_process() ? log_path() : "", std::move(header),
                      options_.resume ? std::optional<int64_t>(start_) : std::nullopt);
}

std::string TrainingRun::save_curves(const std::string& png,
                                     const std::vector<CurvePanel>& panels) const {
  const std::string path = options_.out + "/" + png;
  if (!main_process()) return path;
  const data::CsvTable log = data::read_csv(log_path());
  std::vector<std::pair<std::vector<data::Series>, data::PlotOptions>> plots;
  for (const CurvePanel& panel : panels) {
    std::vector<data::Series> series;
    for (const Curve& c : panel.curves)
      series.push_back(log.series("step", c.column, c.name, c.scale));
    plots.push_back({series, {.title = panel.title, .x_label = "step", .y_label = panel.y_label}});
  }
  data::save_plots(path, plots);
  return path;
}

// ---------------------------------------------------------------------------- the loop

void TrainingRun::begin(int64_t items_per_step, std::string unit, bool plan_minutes) {
  progress_.emplace(items_per_step, std::move(unit));
  distributed::set_step(start_ + 1);  // named if the job fails (a peer ends or is killed)
  // A resumed run keeps the total its first run planned.
  budget_.emplace(plan_minutes && !options_.resume ? options_.minutes : 0.0);
}

void TrainingRun::plan_by_work(double mean_work_per_step, std::string note) {
  LOOM_CHECK(mean_work_per_step > 0,
             "{}: plan_by_work: the mean work of a step must be > 0, got {}", program_,
             mean_work_per_step);
  mean_work_ = mean_work_per_step;
  work_note_ = std::move(note);
}

void TrainingRun::replicate(std::shared_ptr<Module> model) {
  replica_ = std::make_shared<DistributedDataParallel>(std::move(model));
}

void TrainingRun::backward_and_step(const Tensor& loss, optim::Optimizer& optimizer,
                                    const std::vector<Tensor>& parameters) const {
  optimizer.zero_grad();
  loss.backward();
  if (options_.grad_clip > 0) optim::clip_grad_norm(parameters, options_.grad_clip);
  optimizer.step();
}

float TrainingRun::step_done(int64_t done, double local_loss, double work) {
  LOOM_CHECK(progress_.has_value(), "{}: step_done() before begin()", program_);
  const auto loss =  // the global batch's: the mean over the ranks
      static_cast<float>(distributed::all_reduce_value(local_loss, distributed::ReduceOp::Mean));
  check_loss_finite(program_, loss, done);  // on every rank: the mean is every rank's
  distributed::set_step(done + 1);          // the collectives from here on are the next step's
  progress_->add(loss);
  // The plan counts work in units of the average step: plan_by_work's mean, or 1 a step.
  const double units = mean_work_ > 0 ? work / mean_work_ : 1.0;
  const auto planned = budget_->observe(done, training_seconds(), units);
  if (!planned) return loss;
  const double per_step = budget_->seconds_per_step();
  if (done == optim::TimeBudget::kFirstPlan) {
    plan(*planned, per_step, mean_work_ > 0 ? work_note_ : plan_note ? plan_note(*planned) : "");
    return loss;
  }
  total_ = distributed::broadcast_value(*planned);  // every process stops at the same step
  // A revision is printed when it moves the plan by more than 10%, or ends the run.
  if (total_ != done && std::abs(static_cast<double>(total_ - printed_total_)) <=
                            0.1 * static_cast<double>(printed_total_))
    return loss;
  fmt::print("re-planned steps: {} ({:.1f} ms/step over the last {} steps{})\n", total_,
             per_step * 1e3, budget_->window_steps(),
             plan_note && mean_work_ == 0 ? plan_note(total_) : "");
  printed_total_ = total_;
  return loss;
}

void TrainingRun::plan(int64_t total, double seconds_per_step, const std::string& note) {
  total_ = distributed::broadcast_value(total);  // every process stops at the same step
  fmt::print("planned steps: {} ({:.1f} ms/step{})\n", total_, seconds_per_step * 1e3, note);
  printed_total_ = total_;
}

std::string TrainingRun::progress_line(int64_t done, double lr) {
  LOOM_CHECK(progress_.has_value(), "{}: progress_line() before begin()", program_);
  return progress_->line(done, total_ == kUnplanned ? 0 : total_, lr);  // unplanned: "?"
}

void TrainingRun::log(int64_t done, double lr, const std::string& suffix) {
  if (!log_due(done)) return;
  fmt::print("{}{}\n", progress_line(done, lr), suffix);
  std::fflush(stdout);
}

double TrainingRun::untimed(const std::function<void()>& work) {
  LOOM_CHECK(progress_.has_value(), "{}: untimed() before begin()", program_);
  const double t0 = progress_->elapsed();
  work();
  const double seconds = progress_->elapsed() - t0;
  progress_->exclude(seconds);
  untimed_seconds_ += seconds;
  return seconds;
}

double TrainingRun::elapsed() const { return progress_ ? progress_->elapsed() : 0.0; }

double TrainingRun::training_seconds() const { return elapsed() - untimed_seconds_; }

float TrainingRun::warmup_cosine_lr(int64_t step, float peak) const {
  const int64_t warmup = std::min(options_.warmup, total_);
  return optim::warmup_cosine_lr(step + 1, warmup, total_, peak, options_.min_lr);
}

bool TrainingRun::eval_due(int64_t done, bool at_last) const {
  if (!main_process()) return false;
  if (done == total_) return at_last;
  return options_.eval_every > 0 && done % options_.eval_every == 0;
}

bool TrainingRun::checkpoint(int64_t done) {
  const bool every = options_.checkpoint_every > 0 && done % options_.checkpoint_every == 0;
  if (every || done == total_ || stop_due(done)) save(done);
  if (!stop_due(done)) return false;
  fmt::print("stopped at step {} as asked (--stop-at); --resume continues from {}\n", done,
             checkpoint_path());
  return true;
}

}  // namespace loom::nn
