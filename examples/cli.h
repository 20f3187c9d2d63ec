// The command line of every example and benchmark, parsed by CLI11 (Debian's libcli11-dev), so
// that --help looks the same everywhere. Not a flag framework: the few lines every program would
// otherwise repeat.
//
//   CLI::App app{"train_spirals: an MLP learns to separate two interleaved spirals"};
//   cli::show_defaults(app);                           // before adding options
//   app.add_option("--steps", steps, "optimizer steps")->check(cli::positive);
//   cli::add_device(app, device);
//   CLI11_PARSE(app, argc, argv);                      // --help, or an error, exits here
//   cli::print_config(app);                            // the resolved values, printed at start
//
// Installed with loom (<prefix>/include/loom/examples/cli.h) as the loom::cli target, which brings
// loom::loom and CLI11: an example copied out of the tree builds against the installed package.
#pragma once

#include <fmt/format.h>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "loom.h"

namespace loom::cli {

// How idle OpenMP workers wait: they spin for GOMP_SPINCOUNT=30000 rounds (tens of
// microseconds) and then sleep. loom runs its loops and OpenBLAS's GEMMs (the OpenMP build) in
// one libgomp pool, so a worker that spins briefly is there at once for the next of the many
// small parallel loops of a training step: on 2 cores this is 1.05-1.5x faster than sleeping
// at once (OMP_WAIT_POLICY=PASSIVE: DETR's step 122 -> 81 ms, seq2seq greedy decoding 140 ->
// 95 ms), and unlike libgomp's default (300,000 rounds, or spinning forever with ACTIVE) a
// worker soon yields its core when several programs share the machine (scripts/test.sh runs
// ctest in parallel with PASSIVE). PyTorch from Debian needs PASSIVE instead
// (bench/reference/bench.py sets it): its GEMMs run in OpenBLAS's own pthread pool, which
// spinning OpenMP workers starve. libgomp reads the variables once, when it loads, so the
// program runs itself again with GOMP_SPINCOUNT set. Call first thing in main. An
// OMP_WAIT_POLICY or GOMP_SPINCOUNT already set is kept.
inline void use_short_omp_spin(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr)
    return;
  setenv("GOMP_SPINCOUNT", "30000", 1);
  execv("/proc/self/exe", argv);  // returns only if it failed: go on with libgomp's default
}

// Joins the data-parallel job (distributed::init(): a job of one without mpirun or srun) and
// sends the stdout of every rank but 0 to /dev/null, so that a trainer runs unchanged under
// `mpirun -np N` and prints once. Errors still reach stderr from every rank.
inline void init_distributed() {
  distributed::init();
  if (!distributed::is_main_process() && std::freopen("/dev/null", "w", stdout) == nullptr)
    std::perror("init_distributed: stdout to /dev/null");  // it then prints on every rank
}

// Every option added afterwards shows its default value in --help and in print_config().
inline void show_defaults(CLI::App& app) { app.option_defaults()->always_capture_default(); }

// --device cpu | cuda.
inline CLI::Option* add_device(CLI::App& app, std::string& device) {
  return app.add_option("--device", device, "cpu | cuda")->check(CLI::IsMember({"cpu", "cuda"}));
}
inline Device device_of(const std::string& name) {
  return name == "cuda" ? Device::CUDA : Device::CPU;
}

// Checks for numeric flags, applied to the text before it is converted, so that every bad value
// is refused at startup (before any data is read or any step is taken) with the flag's name:
//   ->check(cli::positive)              a number > 0 (CLI::PositiveNumber, with a readable message)
//   ->check(cli::finite_non_negative)   a float: NaN, inf and negatives refused
//   ->check(cli::non_negative_integer)  an integer >= 0 (--threads, --seed, --top-k): "-1" is
//                                       refused rather than wrapped around to 2^64 - 1
//   ->check(CLI::Range(lo, hi))         a count with a sane upper bound (--eval-windows)
inline const CLI::Validator finite_non_negative(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !std::isfinite(v) || v < 0)
        return "must be a finite number >= 0, got '" + text + "'";
      return "";
    },
    "FINITE >= 0", "finite_non_negative");

// CLI::PositiveNumber's check with a readable message (CLI11's own names the range 0 to 1.8e308).
inline const CLI::Validator positive(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !std::isfinite(v) || v <= 0)
        return "must be a number > 0, got '" + text + "'";
      return "";
    },
    "POSITIVE", "positive");

inline const CLI::Validator non_negative_integer(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || errno == ERANGE || v < 0)
        return "must be an integer >= 0, got '" + text + "'";
      return "";
    },
    "INT >= 0", "non_negative_integer");

// The flags of nn::RunOptions, the ones every trainer shares, with the same names, checks and
// messages everywhere; defaults are the values `run` holds. The groups are created here, in this
// order, and returned so that a trainer adds its own flags to them:
//   Optimisation                        --steps [--minutes]
//   Progress, evaluation, checkpoints   --log-every --checkpoint-every --out --resume --stop-at
//   Machine                             --device --threads --seed
// Help texts that differ between trainers (what --out holds, what --seed seeds, what --steps 0
// and --minutes mean) come from `help`; --minutes goes to its own group when help.minutes_group
// is set (the trainers whose --minutes is for runs beside the PyTorch reference).
struct RunHelp {
  std::string out = "directory for checkpoint, log and pictures";
  std::string seed = "seed of the weights, the batch order and dropout";
  std::string steps = "optimizer steps in total";
  bool steps_may_be_zero = false;  // 0 = derived (from --epochs, or planned by --minutes)
  std::string minutes_note = "0 = use --steps";  // ends --minutes' help, which is shared
  std::string minutes_group = "";  // "" = Optimisation
  std::string stop_at =
      "end this run after that step with a checkpoint, as if interrupted (0 = off)";
  std::string checkpoint_every = "steps between checkpoints (0 = only at the end)";
};
struct RunGroups {
  CLI::App *optimisation, *progress, *machine;
  CLI::App* reference = nullptr;  // help.minutes_group's, when set
};
inline RunGroups add_run_options(CLI::App& app, nn::RunOptions& run, const RunHelp& help = {}) {
  show_defaults(app);
  RunGroups g{app.add_option_group("Optimisation"),
              app.add_option_group("Progress, evaluation, checkpoints"),
              app.add_option_group("Machine")};
  g.optimisation->add_option("--steps", run.steps, help.steps)
      ->check(help.steps_may_be_zero ? non_negative_integer : positive)
      ->each([&run](const std::string&) { run.steps_given = true; });
  if (!help.minutes_group.empty())
    g.reference = app.add_option_group(
        help.minutes_group, "for runs side by side with bench/reference/train.py");
  (g.reference ? g.reference : g.optimisation)
      ->add_option("--minutes", run.minutes,
                   "plan the steps so that training (evaluations aside) takes this long: planned "
                   "at step 21 as bench/reference/train.py does, then revised every 20 steps (" +
                       help.minutes_note + ")")
      ->check(finite_non_negative);
  g.progress->add_option("--log-every", run.log_every, "steps between progress lines")
      ->check(positive);
  g.progress->add_option("--checkpoint-every", run.checkpoint_every, help.checkpoint_every)
      ->check(non_negative_integer);
  g.progress->add_option("--out", run.out, help.out);
  g.progress->add_flag("--resume", run.resume,
                       "continue from <out>/ckpt.safetensors (bare flag, or 1/0)")
      ->expected(0, 1);
  g.progress->add_option("--stop-at", run.stop_at, help.stop_at)->check(non_negative_integer);
  add_device(*g.machine, run.device);
  g.machine->add_option("--threads", run.threads, "CPU threads (0 = OpenMP's default)")
      ->check(non_negative_integer);
  g.machine->add_option("--seed", run.seed, help.seed)->check(non_negative_integer);
  return g;
}

// Prints every option's value after parsing, given or default, one "  key=value" a line.
// For defaults a program resolves after parsing (0 or -1 meaning "the model's"): shows each
// flag's resolved value in print_config() instead of the placeholder.
inline void show_resolved(CLI::App& app,
                          std::initializer_list<std::pair<std::string, float>> values) {
  for (const auto& [flag, value] : values)
    app.get_option(flag)->default_str(fmt::format("{}", value));
}

inline void print_config(const CLI::App& app) {
  std::istringstream lines(app.config_to_str(/*default_also=*/true, /*write_description=*/false));
  fmt::print("config:\n");
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) fmt::print("  {}\n", line);
}

}  // namespace loom::cli
