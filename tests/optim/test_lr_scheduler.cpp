// The scheduler objects of optim/lr_scheduler.h give PyTorch's learning rate at every step
// (tests/golden/gen_optim_api.py, three groups of different lrs), resume mid-sequence from
// their state (in memory and in a training checkpoint), set initial_lr as PyTorch does, and
// refuse invalid arguments with loom::Errors naming them.
#include <cmath>

#include "optim_api_fixture.h"

using namespace loom;
using namespace loom::testing;

namespace {

// The optimizer of run_scheduler in gen_optim_api.py: three one-element parameters in three
// groups with lrs 0.5, 0.125 and 0.0625.
struct ThreeGroups {
  ThreeGroups()
      : params{zeros({1}).requires_grad_(), zeros({1}).requires_grad_(),
               zeros({1}).requires_grad_()},
        opt({{{params[0]}, 0.5f, 0.0f}, {{params[1]}, 0.125f, 0.0f}, {{params[2]}, 0.0625f, 0.0f}},
            /*momentum=*/0.9f) {}
  std::vector<Tensor> params;
  optim::SGD opt;
};

struct SchedulerCase {
  std::string name;
  std::function<std::unique_ptr<optim::LRScheduler>(optim::Optimizer&)> make;
  int64_t steps;
  bool plateau = false;  // step(metric) with sched.<name>.metrics
};

// The SCHEDULERS of gen_optim_api.py, case by case.
const std::vector<SchedulerCase>& scheduler_cases() {
  using namespace optim;
  using Ptr = std::unique_ptr<LRScheduler>;
  static const std::vector<SchedulerCase> cases = {
      {"step", [](Optimizer& o) -> Ptr { return std::make_unique<StepLR>(o, 3, 0.5); }, 12},
      {"step_default", [](Optimizer& o) -> Ptr { return std::make_unique<StepLR>(o, 2); }, 7},
      {"multistep",
       [](Optimizer& o) -> Ptr {
         return std::make_unique<MultiStepLR>(o, std::vector<int64_t>{2, 5, 9}, 0.3);
       },
       12},
      {"cosine",
       [](Optimizer& o) -> Ptr { return std::make_unique<CosineAnnealingLR>(o, 10, 0.001); }, 35},
      {"cosine_default",
       [](Optimizer& o) -> Ptr { return std::make_unique<CosineAnnealingLR>(o, 7); }, 10},
      {"lambda",
       [](Optimizer& o) -> Ptr {
         return std::make_unique<LambdaLR>(o, [](int64_t e) { return std::pow(0.95, e); });
       },
       10},
      {"lambda_groups",
       [](Optimizer& o) -> Ptr {
         return std::make_unique<LambdaLR>(
             o, std::vector<LambdaLR::Lambda>{
                    [](int64_t e) { return std::pow(0.95, e); },
                    [](int64_t e) { return 1.0 / static_cast<double>(e + 1); },
                    [](int64_t e) { return std::min(1.0, static_cast<double>(e + 1) / 4.0); }});
       },
       10},
      {"onecycle_cos", [](Optimizer& o) -> Ptr { return std::make_unique<OneCycleLR>(o, 0.8, 20); },
       20},
      {"onecycle_linear",
       [](Optimizer& o) -> Ptr {
         return std::make_unique<OneCycleLR>(o, std::vector<double>{1.0, 0.5, 0.25}, 16, 0.25,
                                             "linear", 10.0, 100.0, /*three_phase=*/true);
       },
       15},
      {"plateau_min",
       [](Optimizer& o) -> Ptr {
         return std::make_unique<ReduceLROnPlateau>(o, "min", 0.5, 2, 0.01, "rel", 1, 0.01);
       },
       16, true},
      {"plateau_max_abs",
       [](Optimizer& o) -> Ptr {
         return std::make_unique<ReduceLROnPlateau>(o, "max", 0.1, 1, 0.05, "abs");
       },
       10, true},
  };
  return cases;
}

// One step of the case: step(), or step(metric k) for ReduceLROnPlateau.
void advance(const SchedulerCase& c, optim::LRScheduler& sched, int64_t k) {
  if (!c.plateau) return sched.step();
  const double metric = api_golden_doubles("sched." + c.name + ".metrics").values[k];
  dynamic_cast<optim::ReduceLROnPlateau&>(sched).step(metric);
}

// get_last_lr() and the optimizer's group lrs against row `row` of PyTorch's sequence. The
// recurrences run in double as in Python, on the same libm: equal to rounding.
void check_row(const SchedulerCase& c, const optim::LRScheduler& sched, int64_t row) {
  const Doubles golden = api_golden_doubles("sched." + c.name + ".lrs");
  const std::vector<double> lrs = sched.get_last_lr();
  REQUIRE(lrs.size() == 3);
  for (int64_t g = 0; g < 3; ++g) {
    const double expected = golden.at(row, g);
    CHECK_MESSAGE(
        std::abs(lrs[g] - expected) <= 1e-13 * std::abs(expected),
        c.name << " group " << g << " at step " << row << ": " << lrs[g] << " vs " << expected);
    CHECK(sched.optimizer().param_groups()[g].lr == static_cast<float>(expected));
  }
  CHECK(sched.last_epoch() == row);
}

}  // namespace

TEST_CASE("every scheduler gives PyTorch's learning rates at every step, in every group") {
  for (const SchedulerCase& c : scheduler_cases()) {
    CAPTURE(c.name);
    ThreeGroups setup;
    auto sched = c.make(setup.opt);
    check_row(c, *sched, 0);
    for (int64_t k = 0; k < c.steps; ++k) {
      setup.opt.step();
      advance(c, *sched, k);
      check_row(c, *sched, k + 1);
    }
  }
}

TEST_CASE("a scheduler resumed mid-sequence from its state continues PyTorch's sequence") {
  for (const SchedulerCase& c : scheduler_cases()) {
    CAPTURE(c.name);
    ThreeGroups setup;
    auto sched = c.make(setup.opt);
    const int64_t half = c.steps / 2;
    for (int64_t k = 0; k < half; ++k) advance(c, *sched, k);
    const optim::SchedulerState state = sched->state_dict();
    const optim::StateDict opt_state = setup.opt.state_dict();

    ThreeGroups fresh;
    auto resumed = c.make(fresh.opt);
    fresh.opt.load_state_dict(opt_state);
    resumed->load_state_dict(state);
    check_row(c, *resumed, half);
    for (int64_t k = half; k < c.steps; ++k) {
      advance(c, *resumed, k);
      check_row(c, *resumed, k + 1);
    }
  }
}

TEST_CASE("a training checkpoint carries the scheduler beside the optimizer") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  const SchedulerCase& c = scheduler_cases()[9];  // plateau_min: counters and a best metric
  REQUIRE(c.name == "plateau_min");
  ThreeGroups setup;
  auto sched = c.make(setup.opt);
  for (int64_t k = 0; k < 7; ++k) advance(c, *sched, k);
  nn::save_checkpoint(path, {}, &setup.opt, sched.get(), {{"step", "7"}});
  const nn::Metadata meta = nn::read_metadata(path);
  CHECK(meta.at("scheduler") == "ReduceLROnPlateau");
  CHECK(meta.at("scheduler.last_epoch") == "7");
  CHECK(meta.at("step") == "7");

  ThreeGroups fresh;
  auto resumed = c.make(fresh.opt);
  nn::load_checkpoint(path, {}, &fresh.opt, resumed.get());
  auto& plateau = dynamic_cast<optim::ReduceLROnPlateau&>(*resumed);
  CHECK(plateau.best() == dynamic_cast<optim::ReduceLROnPlateau&>(*sched).best());
  for (int64_t k = 7; k < c.steps; ++k) {
    advance(c, *resumed, k);
    check_row(c, *resumed, k + 1);
  }

  // The metadata read back may be saved again: the scheduler's entries are replaced, and one
  // of another kind is refused.
  nn::save_checkpoint(path, {}, &fresh.opt, resumed.get(), meta);
  CHECK(nn::read_metadata(path).at("scheduler.last_epoch") == std::to_string(c.steps));
  ThreeGroups other;
  optim::StepLR step_lr(other.opt, 2);
  expect_error([&] { nn::save_checkpoint(path, {}, &other.opt, &step_lr, meta); },
               {"metadata \"scheduler\" is 'ReduceLROnPlateau' but the scheduler is StepLR"});
  nn::save_checkpoint(path, {}, &setup.opt, sched.get(), meta);

  // Another kind of scheduler, or a file without one, is refused before anything changes.
  expect_error([&] { nn::load_checkpoint(path, {}, &other.opt, &step_lr); },
               {"load_checkpoint", "a ReduceLROnPlateau scheduler, not StepLR"});
  CHECK(step_lr.last_epoch() == 0);
  const std::string plain = dir.file("plain.safetensors");
  nn::save_checkpoint(plain, {}, &setup.opt, {{"step", "7"}});
  CHECK(nn::read_metadata(plain).count("scheduler") == 0);
  expect_error([&] { nn::load_checkpoint(plain, {}, &other.opt, &step_lr); },
               {"plain.safetensors' holds no learning-rate scheduler state"});
  nn::load_checkpoint(plain, {}, &other.opt);  // the old layout still loads

  // A damaged state: the optimizer loaded before it goes back as it was.
  nn::Metadata bad = meta;
  bad["scheduler.base_lrs"] = "0.5,0.125";
  nn::save_checkpoint(dir.file("tmp.safetensors"), {}, &setup.opt, bad);
  ThreeGroups victim;
  victim.opt.set_lr(0.25f);
  auto victim_sched = c.make(victim.opt);
  expect_error(
      [&] {
        nn::load_checkpoint(dir.file("tmp.safetensors"), {}, &victim.opt, victim_sched.get());
      },
      {"ReduceLROnPlateau: load_state_dict: entry \"base_lrs\" holds 2 numbers, "
       "expected 3"});
  CHECK(victim.opt.step_count() == 0);
  CHECK(victim.opt.lr() == 0.25f);
}

TEST_CASE("construction sets initial_lr as PyTorch: once, except OneCycleLR's own") {
  ThreeGroups setup;
  CHECK(!setup.opt.initial_lr(0).has_value());
  optim::StepLR first(setup.opt, 1, 0.5);
  CHECK(*setup.opt.initial_lr(1) == 0.125);
  first.step();
  CHECK(setup.opt.param_groups()[0].lr == 0.25f);
  // A second scheduler starts from the initial lrs, not from the lrs the first one has set.
  optim::LambdaLR second(setup.opt, [](int64_t) { return 1.0; });
  CHECK(second.base_lrs() == std::vector<double>{0.5, 0.125, 0.0625});
  CHECK(setup.opt.param_groups()[0].lr == 0.5f);
  optim::OneCycleLR cycle(setup.opt, 1.0, 10);
  CHECK(*setup.opt.initial_lr(0) == 1.0 / 25.0);
  CHECK(cycle.get_last_lr()[2] == doctest::Approx(1.0 / 25.0));
}

TEST_CASE("a recursive scheduler continues from an lr the user set in between, as PyTorch") {
  ThreeGroups setup;
  optim::StepLR sched(setup.opt, 2, 0.5);
  sched.step();
  setup.opt.set_lr(0, 0.3f);
  sched.step();  // step 2: the group's current lr times gamma
  CHECK(sched.get_last_lr()[0] == static_cast<double>(0.3f) * 0.5);
  CHECK(sched.get_last_lr()[1] == 0.0625);
}

TEST_CASE("schedulers reject invalid arguments and states, naming them") {
  ThreeGroups setup;
  optim::SGD& opt = setup.opt;
  using namespace optim;
  expect_error([&] { StepLR(opt, 0); }, {"StepLR: step_size 0 must be positive"});
  expect_error([&] { StepLR(opt, 2, -0.5); }, {"StepLR: gamma -0.5 must be non-negative"});
  expect_error(
      [&] {
        MultiStepLR(opt, {3, 3});
      },
      {"MultiStepLR: milestones must be positive and strictly increasing, got 3 at "
       "position 1"});
  expect_error([&] { MultiStepLR(opt, {5, 2}); }, {"got 2 at position 1"});
  expect_error([&] { MultiStepLR(opt, {0}); }, {"got 0 at position 0"});
  expect_error([&] { CosineAnnealingLR(opt, 0); }, {"CosineAnnealingLR: T_max 0 must be positive"});
  expect_error([&] { CosineAnnealingLR(opt, 5, -1.0); },
               {"CosineAnnealingLR: eta_min -1 must be non-negative"});
  expect_error([&] { LambdaLR(opt, std::vector<LambdaLR::Lambda>{[](int64_t) { return 1.0; }}); },
               {"LambdaLR: got 1 lr_lambdas for an optimizer with 3 param groups"});
  expect_error(
      [&] {
        LambdaLR falling(opt, [](int64_t e) { return 1.0 - static_cast<double>(e); });
        falling.step();  // 0: allowed
        falling.step();
      },
      {"LambdaLR: the learning rate -0.5 of param group 0 at step 2"});
  expect_error([&] { OneCycleLR(opt, 0.1, 0); }, {"OneCycleLR: total_steps 0 must be positive"});
  expect_error([&] { OneCycleLR(opt, 0.1, 10, 1.5); },
               {"OneCycleLR: pct_start 1.5 must be in [0, 1]"});
  expect_error([&] { OneCycleLR(opt, 0.1, 10, 0.3, "cosine"); },
               {"OneCycleLR: anneal_strategy \"cosine\" is unknown (expected \"cos\" or "
                "\"linear\")"});
  expect_error(
      [&] {
        OneCycleLR(opt, std::vector<double>{0.1, 0.2}, 10);
      },
      {"OneCycleLR: got 2 max_lr values for an optimizer with 3 param groups"});
  expect_error([&] { OneCycleLR(opt, 0.1, 10, 0.1); },
               {"OneCycleLR: phase 0 of the cycle has no steps"});
  {
    OneCycleLR cycle(opt, 0.1, 3);
    for (int k = 0; k < 3; ++k) cycle.step();
    expect_error([&] { cycle.step(); },
                 {"OneCycleLR: tried to step 4 times; the schedule has total_steps = 3"});
  }
  expect_error([&] { ReduceLROnPlateau(opt, "minimum"); },
               {"ReduceLROnPlateau: mode \"minimum\" is unknown (expected \"min\" or \"max\")"});
  expect_error([&] { ReduceLROnPlateau(opt, "min", 0.1, 10, 1e-4, "relative"); },
               {"ReduceLROnPlateau: threshold_mode \"relative\" is unknown"});
  expect_error([&] { ReduceLROnPlateau(opt, "min", 1.0); },
               {"ReduceLROnPlateau: factor 1 must be in [0, 1)"});
  expect_error([&] { ReduceLROnPlateau(opt, "min", 0.1, -1); },
               {"ReduceLROnPlateau: patience -1 and cooldown 0 must be non-negative"});
  ReduceLROnPlateau plateau(opt);
  expect_error([&] { plateau.step(); },
               {"ReduceLROnPlateau: step() needs the metric", "call step(metric)"});

  StepLR step_lr(opt, 2);
  SchedulerState state = step_lr.state_dict();
  state.erase("last_epoch");
  expect_error([&] { step_lr.load_state_dict(state); },
               {"StepLR: load_state_dict: the state has no entry \"last_epoch\""});
  state = step_lr.state_dict();
  state["last_epoch"] = {1.5};
  expect_error([&] { step_lr.load_state_dict(state); },
               {"StepLR: load_state_dict: last_epoch 1.5 is not a count"});
  state = step_lr.state_dict();
  state["momentum"] = {0.9};
  expect_error([&] { step_lr.load_state_dict(state); },
               {"StepLR: load_state_dict: unexpected entry \"momentum\""});
}
