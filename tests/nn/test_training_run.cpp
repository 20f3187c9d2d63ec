// nn::TrainingRun, the plumbing every trainer shares, and examples/cli.h's add_train_options:
// the flags and their checks, the checkpoint schedule (--checkpoint-every, --stop-at), an exact
// resume of a toy model (weights, optimizer, RNG, plan), the --minutes plan and the log.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "examples/cli.h"
#include "optim/optim.h"
#include "test_util.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

// A run directory removed at the end of the test.
struct TempDir {
  explicit TempDir(const std::string& tag)
      : path((fs::temp_directory_path() / ("loom_run_" + tag + "_" + std::to_string(::getpid())))
                 .string()) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

nn::TrainOptions options_in(const std::string& dir, int64_t steps) {
  nn::TrainOptions o;
  o.out = dir;
  o.steps = steps;
  o.checkpoint_every = 0;
  return o;
}

// A linear model trained by AdamW on a fixed regression problem: one step of the toy trainer.
struct Toy {
  std::shared_ptr<nn::Linear> model;
  std::unique_ptr<optim::AdamW> opt;
  Toy() {
    model = std::make_shared<nn::Linear>(3, 2);
    opt = std::make_unique<optim::AdamW>(model->parameters(), 0.05f);
  }
  double step() {
    const Tensor x = randn({4, 3});  // drawn from the global generator: the RNG must resume too
    const Tensor d = model->forward(x) - 1.0f;  // (4, 2)
    const Tensor loss = mean(d * d);
    opt->zero_grad();
    loss.backward();
    opt->step();
    return loss.item();
  }
  void checkpoint_into(nn::TrainingRun& run) {
    run.set_checkpoint({{"model", model.get()}}, opt.get(), [](int64_t step) {
      return nn::CheckpointContent{{{"toy", "1"}}, 0, step, 4};
    });
  }
};

// A checkpoint in o.out to resume from.
void toy_checkpoint(const nn::TrainOptions& o) {
  nn::TrainOptions fresh = o;
  fresh.resume = false;
  nn::TrainingRun run("train_toy", fresh);
  Toy toy;
  toy.checkpoint_into(run);
  run.save(0);
}

int64_t saved_step(const nn::TrainingRun& run) {
  return nn::metadata_number<int64_t>(nn::read_metadata(run.checkpoint_path()), "step", "test");
}

// Parses `args` with the run flags; returns CLI11's error message, "" when accepted.
std::string parse_error(nn::TrainOptions& run, std::vector<std::string> args,
                        const cli::TrainFlags& flags = {}) {
  CLI::App app{"test"};
  cli::add_train_options(app, run, flags);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse order
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("add_train_options: the shared flags, their defaults and the exact error messages") {
  nn::TrainOptions run;
  run.out = "out-toy";
  run.steps = 100;
  run.log_every = 7;
  CHECK(parse_error(run, {}).empty());
  CHECK(run.out == "out-toy");  // the trainer's defaults stay
  CHECK(run.steps == 100);
  CHECK(run.log_every == 7);
  CHECK_FALSE(run.steps_given);
  CHECK(parse_error(run, {"--steps", "12", "--resume", "--stop-at", "6", "--seed", "3", "--threads",
                          "2", "--checkpoint-every", "0", "--minutes", "1.5"})
            .empty());
  CHECK(run.steps == 12);
  CHECK(run.steps_given);
  CHECK(run.resume);
  CHECK(run.stop_at == 6);
  CHECK(run.seed == 3);
  CHECK(run.threads == 2);
  CHECK(run.minutes == 1.5);
  CHECK_FALSE(run.detect_anomaly);
  CHECK(parse_error(run, {"--detect-anomaly"}).empty());
  CHECK(run.detect_anomaly);

  nn::TrainOptions bad;
  CHECK(parse_error(bad, {"--threads", "-4"}).find("--threads: must be an integer in [0, 4096]") !=
        std::string::npos);
  // Issue 40: wrapped around to 1 thread by the int OpenMP takes; clamped to 2^63 - 1 by CLI11.
  CHECK(parse_error(bad, {"--threads", "4294967297"}).find("--threads: must be an integer in") !=
        std::string::npos);
  CHECK(parse_error(bad, {"--steps", "99999999999999999999"})
            .find("--steps: must be an integer > 0, got '99999999999999999999'") !=
        std::string::npos);
  CHECK(parse_error(bad, {"--seed", "-1"}).find("--seed: must be an integer >= 0") !=
        std::string::npos);
  CHECK(parse_error(bad, {"--log-every", "0"})
            .find("--log-every: must be an integer > 0, got '0'") != std::string::npos);
  CHECK(parse_error(bad, {"--minutes", "nan"}).find("must be a finite number >= 0") !=
        std::string::npos);
  CHECK(parse_error(bad, {"--device", "tpu"}).find("--device") != std::string::npos);
  CHECK_FALSE(parse_error(bad, {"--steps", "0"}).empty());  // positive by default
  CHECK(parse_error(bad, {"--steps", "0"}, {.steps_may_be_zero = true}).empty());
  CHECK(parse_error(bad, {"--steps", "-1"}, {.steps_may_be_zero = true})
            .find("--steps: must be an integer >= 0, got '-1'") != std::string::npos);
  CHECK_FALSE(parse_error(bad, {"--log-every", "0"}).empty());
}

TEST_CASE("TrainingRun: --resume without a checkpoint is refused before any work") {
  TempDir dir("noresume");
  nn::TrainOptions o = options_in(dir.path, 10);
  o.resume = true;
  CHECK_THROWS_WITH_AS(nn::TrainingRun("train_toy", o),
                       doctest::Contains("train_toy: --resume but there is no"), Error);
  o.resume = false;
  o.log_every = 0;
  CHECK_THROWS_WITH_AS(nn::TrainingRun("train_toy", o), doctest::Contains("--log-every"), Error);
}

TEST_CASE("TrainingRun: checkpoints every N steps but the last, and at --stop-at, the end") {
  TempDir dir("schedule");
  nn::TrainOptions o = options_in(dir.path, 5);
  o.checkpoint_every = 2;
  o.stop_at = 3;
  nn::TrainingRun run("train_toy", o);
  Toy toy;
  toy.checkpoint_into(run);
  CHECK_FALSE(run.checkpoint(1));
  CHECK_FALSE(fs::exists(run.checkpoint_path()));
  CHECK_FALSE(run.checkpoint(2));
  CHECK(saved_step(run) == 2);
  CHECK(run.checkpoint(3));  // --stop-at: saved, and the caller stops
  CHECK(saved_step(run) == 3);
  CHECK_FALSE(run.checkpoint(4));
  CHECK(saved_step(run) == 4);
  fs::remove(run.checkpoint_path());
  // The last step is saved too, before the trainer's final evaluation can fail.
  CHECK_FALSE(run.checkpoint(5));
  CHECK(saved_step(run) == 5);
  const nn::Metadata meta = nn::read_metadata(run.checkpoint_path());
  CHECK(meta.at("step") == "5");
  CHECK(meta.at("steps") == "5");
  CHECK(meta.at("batch_index") == "5");  // the trainer's content, beside the TrainerState
  CHECK(meta.at("global_batch") == "4");
  CHECK(meta.at("toy") == "1");
  CHECK(meta.at("trainer") == "train_toy");

  // --stop-at at the last step is no interruption: nothing special.
  nn::TrainOptions last = options_in(dir.path, 3);
  last.stop_at = 3;
  nn::TrainingRun at_end("train_toy", last);
  CHECK_FALSE(at_end.stop_due(3));
}

TEST_CASE("TrainingRun: a run stopped and resumed computes what the uninterrupted run computes") {
  TempDir whole_dir("whole"), split_dir("split");
  const int64_t steps = 6;
  // The uninterrupted run.
  manual_seed(11);
  Toy whole;
  std::vector<double> whole_losses;
  for (int64_t s = 0; s < steps; ++s) whole_losses.push_back(whole.step());

  // Stopped after step 3...
  manual_seed(11);
  {
    nn::TrainOptions o = options_in(split_dir.path, steps);
    o.stop_at = 3;
    nn::TrainingRun run("train_toy", o);
    Toy first;
    first.checkpoint_into(run);
    run.begin(4, "ex/s");
    bool stopped = false;
    for (int64_t step = run.start(); step < run.total() && !stopped; ++step) {
      const double loss = first.step();
      CHECK(run.step_done(step + 1, loss) == doctest::Approx(loss));
      stopped = run.checkpoint(step + 1);
    }
    CHECK(stopped);
  }
  (void)randn({100});  // the RNG moves on: the resume must restore it

  // ... and resumed into a model with other weights.
  manual_seed(999);
  nn::TrainOptions o = options_in(split_dir.path, 1000);  // not given: the checkpoint's plan wins
  o.resume = true;
  nn::TrainingRun run("train_toy", o);
  Toy second;
  second.checkpoint_into(run);
  const nn::TrainerState state = run.resume({{"model", second.model.get()}}, second.opt.get());
  CHECK(run.start() == 3);
  CHECK(run.total() == steps);
  CHECK(state.batch_index == 3);
  for (int64_t step = run.start(); step < run.total(); ++step)
    CHECK(second.step() == whole_losses[static_cast<size_t>(step)]);  // bit for bit
  CHECK(second.model->weight.to_vector() == whole.model->weight.to_vector());

  // --steps given again overrides the plan; a check can refuse the checkpoint, leaving the
  // model untouched.
  o.steps = 8;
  o.steps_given = true;
  nn::TrainingRun longer("train_toy", o);
  Toy third;
  const std::vector<float> before = third.model->weight.to_vector();
  CHECK_THROWS_WITH_AS(longer.resume({{"model", third.model.get()}}, third.opt.get(),
                                     [](const nn::Metadata& meta, const nn::TrainerState&) {
                                       LOOM_CHECK(meta.at("toy") == "2", "train_toy: not my model");
                                     }),
                       doctest::Contains("not my model"), Error);
  CHECK(third.model->weight.to_vector() == before);
  longer.resume({{"model", third.model.get()}}, third.opt.get());
  CHECK(longer.total() == 8);
}

TEST_CASE("TrainingRun: --minutes plans at step 21 and revises, never on a resumed run") {
  TempDir dir("minutes");
  nn::TrainOptions o = options_in(dir.path, 1000000);
  o.minutes = 1e-6;  // a plan that is over at once: the minimum, one step beyond step 21
  nn::TrainingRun run("train_toy", o);
  run.plan_note = [](int64_t total) { return fmt::format(", note {}", total); };
  run.begin(1);
  for (int64_t done = 1; done <= 21; ++done) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // 4 ms: beyond the plan
    run.step_done(done, 1.0);
    CHECK(run.total() == (done < 21 ? 1000000 : 22));  // planned at step 21
  }
  for (int64_t done = 22; done <= 41; ++done) {  // a trainer stops at 22; the revision at 41
    run.step_done(done, 1.0);                    // would end the run there
    CHECK(run.total() == (done < 41 ? 22 : 41));
  }

  o.resume = true;  // a resumed run keeps its plan
  toy_checkpoint(o);
  nn::TrainingRun resumed("train_toy", o);
  resumed.begin(1);
  for (int64_t done = 1; done <= 21; ++done) resumed.step_done(done, 1.0);
  CHECK(resumed.total() == 1000000);
  o.resume = false;

  nn::TrainingRun off("train_toy", o);
  off.begin(1, "ex/s", /*plan_minutes=*/false);  // a trainer that plans itself
  for (int64_t done = 1; done <= 21; ++done) off.step_done(done, 1.0);
  CHECK(off.total() == 1000000);
  off.plan(40, 0.01);
  CHECK(off.total() == 40);
}

TEST_CASE("TrainingRun: --minutes counts training seconds, leaving untimed() work out") {
  TempDir dir("untimed");
  nn::TrainOptions o = options_in(dir.path, 1000000);
  o.minutes = 0.01;  // 0.6 s
  nn::TrainingRun run("train_toy", o);
  run.begin(1);
  for (int64_t done = 1; done <= 21; ++done) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (done == 10)  // an evaluation of 1 s: were it counted, the minutes would be spent
      CHECK(run.untimed([] { std::this_thread::sleep_for(std::chrono::seconds(1)); }) >= 1.0);
    run.step_done(done, 1.0);
  }
  CHECK(run.training_seconds() < run.elapsed() - 0.9);
  // ~0.59 s left: ~3,000 more steps at ~0.2 ms a step, still dozens at the 10-20 ms of a busy
  // machine under a sanitizer; had the untimed second counted, the minimum (22) at once.
  CHECK(run.total() > 22);
}

TEST_CASE("TrainingRun: plan_by_work plans --minutes from the time per unit of work") {
  TempDir dir("work");
  nn::TrainOptions o = options_in(dir.path, 1000000);
  o.minutes = 1;
  auto planned = [&](double mean_work) {  // 20 timed steps of 1 unit, ~0.2 ms each
    nn::TrainingRun run("train_toy", o);
    run.plan_by_work(mean_work, " expected");
    run.begin(1);
    for (int64_t done = 1; done <= 21; ++done) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      run.step_done(done, 1.0, 1.0);
    }
    return run.total();
  };
  CHECK(planned(1e6) == 22);       // an average step of 10^6 units: > 60 s, the minimum
  CHECK(planned(1e-3) > 1000000);  // of 10^-3 units: far more than 10^6 steps in a minute
  nn::TrainingRun run("train_toy", o);
  CHECK_THROWS_WITH_AS(run.plan_by_work(0), doctest::Contains("must be > 0"), Error);
}

TEST_CASE("TrainingRun: progress lines when due, and a non-finite loss naming its step") {
  TempDir dir("nan");
  nn::TrainOptions o = options_in(dir.path, 10);
  o.log_every = 4;
  nn::TrainingRun run("train_toy", o);
  run.begin(8);
  CHECK_FALSE(run.log_due(3));
  CHECK(run.log_due(4));
  CHECK(run.log_due(10));  // the last step always
  run.step_done(1, 2.0);
  CHECK(run.progress_line(1, 1e-3).find("loss 2.0000") != std::string::npos);
  double waited = run.untimed([] {});
  CHECK(waited >= 0);
  // The step named is the one whose loss is not finite, not the finite one before it.
  CHECK_THROWS_WITH_AS(run.step_done(2, std::nan("")),
                       doctest::Contains("train_toy: the loss of step 2 is nan"), Error);
  CHECK_THROWS_WITH_AS(nn::check_loss_finite("finetune_toy", INFINITY, 7),
                       doctest::Contains("finetune_toy: the loss of step 7 is inf"), Error);
  CHECK_NOTHROW(nn::check_loss_finite("finetune_toy", 1e30, 7));
}

TEST_CASE("TrainingRun: --detect-anomaly turns on autograd's anomaly mode") {
  TempDir dir("anomaly");
  nn::TrainOptions o = options_in(dir.path, 10);
  o.detect_anomaly = true;
  autograd::set_detect_anomaly(false);
  { nn::TrainingRun run("train_toy", o); }
  CHECK(autograd::is_anomaly_enabled());
  autograd::set_detect_anomaly(false);  // global: leave it as the other tests expect
}

TEST_CASE("TrainingRun: the log starts afresh, and a resumed run keeps the rows up to its step") {
  TempDir dir("log");
  nn::TrainOptions o = options_in(dir.path, 4);
  nn::TrainingRun run("train_toy", o);
  Toy toy;
  toy.checkpoint_into(run);
  {
    data::CsvLog log = run.open_log({"step", "loss"});
    for (int64_t s = 1; s <= 4; ++s)
      log.row({static_cast<double>(s), 1.0 / static_cast<double>(s)});
    run.save(2);
  }
  CHECK(data::read_csv(run.log_path()).rows.size() == 4);
  o.resume = true;
  nn::TrainingRun resumed("train_toy", o);
  resumed.resume({{"model", toy.model.get()}}, toy.opt.get(), {}, /*print_position=*/false);
  {
    data::CsvLog log = resumed.open_log({"step", "loss"});
    CHECK(data::read_csv(resumed.log_path()).column("step") == std::vector<double>{1, 2});
  }
  o.resume = false;
  nn::TrainingRun fresh("train_toy", o);
  { data::CsvLog log = fresh.open_log({"step", "other"}); }  // a new run: a new file
  CHECK(data::read_csv(fresh.log_path()).header == std::vector<std::string>{"step", "other"});
  CHECK(data::read_csv(fresh.log_path()).rows.empty());
}

namespace {
// A checkpoint of `program` at `step` of a plan of `total` steps, in o.out.
void checkpoint_at(const nn::TrainOptions& o, int64_t step, int64_t total,
                   const std::string& program = "train_toy") {
  nn::TrainOptions fresh = o;
  fresh.resume = false;
  nn::TrainingRun run(program, fresh);
  Toy toy;
  toy.checkpoint_into(run);
  run.set_total(total);
  run.save(step);
}
}  // namespace

// Issue 40: train_detr --steps 0 --resume ran for ever (total INT32_MAX) over a finished model.
TEST_CASE("TrainingRun: --resume keeps the checkpoint's plan, never an unbounded total") {
  TempDir dir("plan");
  nn::TrainOptions o = options_in(dir.path, 0);
  o.steps_given = true;  // "--steps 0" on the command line: no override
  o.minutes = 0.3;
  o.resume = true;
  checkpoint_at(o, 570, 570);  // a finished --minutes run
  CHECK_THROWS_WITH_AS(nn::TrainingRun("train_toy", o),
                       doctest::Contains("is at step 570 of its 570 steps: nothing to do"), Error);

  checkpoint_at(o, 10, 40);  // stopped within its plan: resumed to the plan's end
  {
    nn::TrainingRun run("train_toy", o);
    run.set_total(nn::TrainingRun::kUnplanned);  // as a --minutes trainer does
    Toy toy;
    run.resume({{"model", toy.model.get()}}, toy.opt.get());
    CHECK(run.start() == 10);
    CHECK(run.total() == 40);
  }

  // Written before --minutes planned the run (step 21): no plan to keep, --steps N needed.
  checkpoint_at(o, 10, nn::TrainingRun::kUnplanned);
  CHECK_THROWS_WITH_AS(nn::TrainingRun("train_toy", o),
                       doctest::Contains("before --minutes planned the run's length"), Error);
  o.steps = 30;
  {
    nn::TrainingRun run("train_toy", o);
    Toy toy;
    run.resume({{"model", toy.model.get()}}, toy.opt.get());
    CHECK(run.total() == 30);
  }
  o.steps = 5;  // an earlier step than the checkpoint's would be saved over it
  CHECK_THROWS_WITH_AS(nn::TrainingRun("train_toy", o),
                       doctest::Contains("is at step 10, beyond --steps 5"), Error);

  // Another trainer's checkpoint is refused before any work, naming its trainer.
  o.steps = 30;
  checkpoint_at(o, 10, 40, "train_other");
  const std::string by_other = "'" + o.out + "/ckpt.safetensors' was written by train_other";
  CHECK_THROWS_WITH_AS(nn::TrainingRun("train_toy", o), doctest::Contains(by_other.c_str()), Error);
}

TEST_CASE("TrainingRun: keep_flags records the data's flags; a resume changing one is refused") {
  TempDir dir("flags");
  nn::TrainOptions o = options_in(dir.path, 8);
  {
    nn::TrainingRun run("train_toy", o);
    Toy toy;
    toy.checkpoint_into(run);
    run.keep_flags({{"--data", "/data/a"}, {"--epochs", ""}});  // "": unset in this run
    run.save(4);
  }
  const nn::Metadata meta = nn::read_metadata(o.out + "/ckpt.safetensors");
  CHECK(meta.at("flag --data") == "/data/a");
  CHECK(meta.count("flag --epochs") == 0);

  o.resume = true;
  nn::TrainingRun other("train_toy", o);
  other.keep_flags({{"--data", "/data/b"}, {"--epochs", "3"}});
  Toy toy;
  const std::vector<float> before = toy.model->weight.to_vector();
  CHECK_THROWS_WITH_AS(other.resume({{"model", toy.model.get()}}, toy.opt.get()),
                       doctest::Contains("was trained with --data /data/a, this run has --data "
                                         "/data/b"),
                       Error);
  CHECK(toy.model->weight.to_vector() == before);  // refused before anything was loaded

  nn::TrainingRun same("train_toy", o);
  same.keep_flags({{"--data", "/data/a"}, {"--epochs", "3"}});  // unrecorded: not compared
  same.resume({{"model", toy.model.get()}}, toy.opt.get());
  CHECK(same.start() == 4);
}

// ---------------------------------------------------------------------------- TrainOptions

TEST_CASE("add_train_options: --kebab-name flags of TrainOptions, in groups, with notes") {
  nn::TrainOptions o{.steps = 10, .lr = 0.5f, .out = "out-toy"};
  CLI::App app{"test"};
  const cli::TrainGroups g = cli::add_train_options(
      app, o,
      {.without = {"min_lr"},
       .notes = {{"seed", "and of the toy"}},
       .help = {{"eval_every", "steps between toy evaluations (0 = never)"}}});
  CHECK(app.get_option_no_throw("--min-lr") == nullptr);  // left out
  CHECK(g.optimisation->get_option("--weight-decay") != nullptr);
  CHECK(g.progress->get_option("--eval-every")->get_description() ==
        "steps between toy evaluations (0 = never)");
  CHECK(g.machine->get_option("--seed")->get_description() ==
        "seed of the weights, the batch order and dropout (and of the toy)");
  app.parse(std::vector<std::string>{"0.25", "--weight-decay", "3", "--grad-clip", "2",
                                     "--eval-every"});  // reversed, as CLI11 takes them
  CHECK(o.eval_every == 2);
  CHECK(o.grad_clip == 3);
  CHECK(o.weight_decay == 0.25f);
  CHECK(o.lr == 0.5f);  // the trainer's default stays
  CHECK_FALSE(o.steps_given);

  // A bound of the trainer's own replaces the shared check, with its own message.
  nn::TrainOptions b;
  CLI::App bounded{"test"};
  cli::add_train_options(bounded, b, {.checks = {{"batch", cli::range(int64_t{1}, int64_t{64})}}});
  const auto error = [&](std::vector<std::string> args) -> std::string {
    try {
      bounded.parse(args);
    } catch (const CLI::ParseError& e) {
      return e.what();
    }
    return "";
  };
  CHECK(error({"0", "--batch"}).find("--batch: must be an integer in [1, 64], got '0'") !=
        std::string::npos);
  CHECK(error({"65", "--batch"}).find("--batch: must be an integer in [1, 64], got '65'") !=
        std::string::npos);
  CHECK(error({"nan", "--min-lr"}).find("--min-lr: must be a finite number >= 0") !=
        std::string::npos);
}

TEST_CASE("flag_values: the fields of a list as the flags keep_flags records") {
  const nn::TrainOptions o{.batch = 4, .min_lr = 0.01f, .out = "a b"};
  const auto flags = cli::flag_values(o);
  CHECK(flags.front() == std::pair<std::string, std::string>{"--steps", "0"});
  CHECK(std::count(flags.begin(), flags.end(),
                   std::pair<std::string, std::string>{"--min-lr", "0.01"}) == 1);
  CHECK(std::count(flags.begin(), flags.end(),
                   std::pair<std::string, std::string>{"--out", "a b"}) == 1);
  CHECK(std::count(flags.begin(), flags.end(),
                   std::pair<std::string, std::string>{"--resume", "0"}) == 1);
}

// ---------------------------------------------------------------------------- the recipe's parts

TEST_CASE("TrainingRun: evaluations are due every --eval-every steps but the last") {
  TempDir dir("eval");
  nn::TrainOptions o = options_in(dir.path, 10);
  o.eval_every = 4;
  nn::TrainingRun run("train_toy", o);
  std::vector<int64_t> due, due_at_last;
  for (int64_t done = 1; done <= 10; ++done) {
    if (run.eval_due(done)) due.push_back(done);
    if (run.eval_due(done, /*at_last=*/true)) due_at_last.push_back(done);
  }
  CHECK(due == std::vector<int64_t>{4, 8});
  CHECK(due_at_last == std::vector<int64_t>{4, 8, 10});
  run.set_eval_every(0);  // none but the last
  CHECK_FALSE(run.eval_due(8));
  CHECK(run.eval_due(10, true));
  run.set_eval_every(3);
  CHECK(run.eval_due(9));
}

TEST_CASE("TrainingRun: the warm-up and cosine schedule of the run's options and plan") {
  TempDir dir("lr");
  nn::TrainOptions o = options_in(dir.path, 100);
  o.lr = 0.1f;
  o.min_lr = 0.01f;
  o.warmup = 500;  // longer than the run: cut to it, so that the run still decays
  nn::TrainingRun run("train_toy", o);
  for (int64_t step : {0, 10, 99}) {
    CHECK(run.warmup_cosine_lr(step) == optim::warmup_cosine_lr(step + 1, 100, 100, 0.1f, 0.01f));
    CHECK(run.warmup_cosine_lr(step, 0.5f) ==
          optim::warmup_cosine_lr(step + 1, 100, 100, 0.5f, 0.01f));
  }
}

TEST_CASE("TrainingRun: the global batch is --batch x processes, and must fit in an epoch") {
  TempDir dir("batch");
  nn::TrainOptions o = options_in(dir.path, 10);
  o.batch = 8;
  nn::TrainingRun run("train_toy", o);
  CHECK(run.global_batch(8, "toys") == 8);  // a job of one process
  CHECK_THROWS_WITH_AS(run.global_batch(7, "training toys"),
                       doctest::Contains("train_toy: --batch 8 is larger than the 7 training toys "
                                         "allow for 1 process(es)"),
                       Error);
}

TEST_CASE("TrainingRun: keep_config saves the model's config and refuses another one at resume") {
  TempDir dir("config");
  nn::TrainOptions o = options_in(dir.path, 8);
  {
    nn::TrainingRun run("train_toy", o);
    Toy toy;
    toy.checkpoint_into(run);
    run.keep_config({{"d_model", "32"}, {"dropout", "0.1"}}, {"dropout"});
    run.save(4);
  }
  const nn::Metadata meta = nn::read_metadata(o.out + "/ckpt.safetensors");
  CHECK(meta.at("d_model") == "32");  // recorded beside the trainer's own metadata
  CHECK(meta.at("toy") == "1");

  o.resume = true;
  Toy toy;
  const std::vector<float> before = toy.model->weight.to_vector();
  nn::TrainingRun other("train_toy", o);
  other.keep_config({{"d_model", "64"}, {"dropout", "0.1"}, {"n_head", "2"}});
  CHECK_THROWS_WITH_AS(other.resume({{"model", toy.model.get()}}, toy.opt.get()),
                       doctest::Contains("holds another model than the one configured (d_model "
                                         "32 there, 64 here; n_head (none) there, 2 here)"),
                       Error);
  CHECK(toy.model->weight.to_vector() == before);  // refused before anything was loaded

  nn::TrainingRun same("train_toy", o);
  same.keep_config({{"d_model", "32"}, {"dropout", "0.3"}}, {"dropout"});  // dropout may change
  same.resume({{"model", toy.model.get()}}, toy.opt.get());
  CHECK(same.start() == 4);
}

TEST_CASE("TrainingRun: check_recorded refuses a checkpoint of another kind at once") {
  TempDir dir("recorded");
  nn::TrainOptions o = options_in(dir.path, 8);
  {
    nn::TrainingRun run("train_toy", o);
    Toy toy;
    run.set_checkpoint({{"model", toy.model.get()}}, toy.opt.get(), {{"tokenizer", "byte"}});
    run.save(2);
    run.check_recorded("tokenizer", "bpe", "--tokenizer");  // not resuming: nothing to check
  }
  o.resume = true;
  nn::TrainingRun run("train_toy", o);
  run.check_recorded("tokenizer", "byte", "--tokenizer");
  const std::string refused =
      "train_toy: '" + o.out + "/ckpt.safetensors' was trained with --tokenizer byte, not bpe";
  CHECK_THROWS_WITH_AS(run.check_recorded("tokenizer", "bpe", "--tokenizer"),
                       doctest::Contains(refused.c_str()), Error);
  CHECK_THROWS_WITH_AS(run.check_recorded("model_preset", "toy-mini", "--model"),
                       doctest::Contains("was trained with --model (none recorded), not toy-mini"),
                       Error);
}

TEST_CASE("TrainingRun: follow() saves a BatchStream's position and a resume seeks it") {
  TempDir dir("follow");
  auto dataset =
      std::make_shared<data::TensorDataset>(std::vector<Tensor>{arange(20).reshape({20, 1})});
  auto stream = [&] {
    return data::BatchStream(data::DataLoader(dataset, 4, /*shuffle=*/true, 7, true));
  };
  // The batches an uninterrupted run reads, 8 of them (two epochs of 5 batches).
  data::BatchStream whole = stream();
  std::vector<std::vector<int64_t>> expected;
  for (int i = 0; i < 8; ++i) expected.push_back(whole.next()[0].to_vector_i64());

  nn::TrainOptions o = options_in(dir.path, 8);
  {
    nn::TrainingRun run("train_toy", o);
    Toy toy;
    data::BatchStream batches = stream();
    run.set_checkpoint({{"model", toy.model.get()}}, toy.opt.get(), nn::Metadata{});
    run.follow(batches, 4, dataset->size());
    for (int i = 0; i < 6; ++i) batches.next();
    run.save(6);
  }
  const nn::Metadata meta = nn::read_metadata(o.out + "/ckpt.safetensors");
  CHECK(meta.at("epoch") == "1");
  CHECK(meta.at("batch_index") == "1");
  CHECK(meta.at("global_batch") == "4");

  o.resume = true;
  nn::TrainingRun run("train_toy", o);
  Toy toy;
  data::BatchStream batches = stream();
  run.set_checkpoint({{"model", toy.model.get()}}, toy.opt.get(), nn::Metadata{});
  run.follow(batches, 4, dataset->size());
  run.resume({{"model", toy.model.get()}}, toy.opt.get());
  CHECK(batches.next()[0].to_vector_i64() == expected[6]);
  CHECK(batches.next()[0].to_vector_i64() == expected[7]);
}

TEST_CASE("TrainingRun: save_curves draws columns of the log against the step") {
  TempDir dir("curves");
  nn::TrainingRun run("train_toy", options_in(dir.path, 4));
  {
    data::CsvLog log = run.open_log({"step", "loss", "accuracy"});
    for (int64_t s = 1; s <= 4; ++s)
      log.row({static_cast<double>(s), 1.0 / static_cast<double>(s), s % 2 ? std::nan("") : 0.5});
  }
  const std::string png = run.save_curves(
      "curves.png", {{"loss", "loss", {{"loss", "train loss"}}},
                     {"accuracy", "%", {{"accuracy", "accuracy", 100}}}});
  CHECK(png == dir.path + "/curves.png");
  const data::Image image = data::read_image(png);
  CHECK(image.width == 1600);  // two panels of 800 side by side
  CHECK_THROWS_WITH_AS(run.save_curves("x.png", {{"t", "y", {{"no_such_column", ""}}}}),
                       doctest::Contains("no_such_column"), Error);
}

TEST_CASE("EvalGuard: no graph and evaluation mode in its scope, the mode before after it") {
  nn::Linear layer(2, 2);
  layer.train();
  {
    nn::EvalGuard eval(layer);
    CHECK_FALSE(layer.is_training());
    CHECK_FALSE(layer.forward(ones({1, 2})).requires_grad());
  }
  CHECK(layer.is_training());
  CHECK(layer.forward(ones({1, 2})).requires_grad());
  layer.eval();
  { nn::EvalGuard eval(layer); }
  CHECK_FALSE(layer.is_training());  // it was evaluating before: it still is
}
