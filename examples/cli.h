// The command line of every example and benchmark, parsed by CLI11 (Debian's libcli11-dev), so
// that --help looks the same everywhere. Not a flag framework: the few lines every program would
// otherwise repeat.
//
//   CLI::App app{"train_spirals: an MLP learns to separate two interleaved spirals"};
//   cli::show_defaults(app);                           // before adding options
//   app.add_option("--steps", steps, "optimizer steps")->check(cli::positive_integer);
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
#include <cctype>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>

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

// Checks for numeric flags, applied to the text before CLI11 converts it, so that every bad value
// is refused at startup (before any data is read or any step is taken) with the flag's name:
//   ->check(cli::positive)              a number > 0
//   ->check(cli::finite_non_negative)   a number >= 0
//   ->check(cli::positive_integer)      an integer >= 1 (--steps, --batch)
//   ->check(cli::non_negative_integer)  an integer >= 0 (--seed, --top-k): "-1" is refused rather
//                                       than wrapped around to 2^64 - 1
//   ->check(cli::range(0.0, 1.0))       a number in [lo, hi]; integer bounds
//                                       (cli::range(int64_t{1}, int64_t{10000})) take integers,
//                                       cli::range(0.0, 1.0, "(]") leaves 0 out
// They take plain decimal numbers and refuse NaN, infinities and numbers a float cannot hold (a
// float flag would hold inf or 0), and integers beyond int64 (CLI11 would clamp
// 99999999999999999999 to 2^63 - 1); CLI::Range and CLI::NonNegativeNumber let NaN through.
namespace detail {

struct Number {
  double value = 0;
  bool integer = false;  // written as one ("12", "-3"; not "12.0" or "1e3")
  int64_t integer_value = 0;
};

// The number `text` holds, or nullopt. An integer is rewritten as plain decimal ("+007" ->
// "7"): CLI11 reads integers with strtoll(text, 0), for which a leading 0 means octal.
inline std::optional<Number> parse_number(std::string& text) {
  const size_t digits = text.empty() || (text[0] != '+' && text[0] != '-') ? 0 : 1;
  if (digits < text.size() && text.find_first_not_of("0123456789", digits) == std::string::npos) {
    errno = 0;
    const long long v = std::strtoll(text.c_str(), nullptr, 10);
    if (errno == ERANGE) return std::nullopt;
    text = std::to_string(v);
    return Number{static_cast<double>(v), true, v};
  }
  char* end = nullptr;
  const double v = text.empty() || std::isspace(static_cast<unsigned char>(text[0]))
                       ? std::nan("")
                       : std::strtod(text.c_str(), &end);
  // A float flag must hold it: neither beyond FLT_MAX (inf) nor a nonzero value that rounds to 0.
  const bool fits_float = std::fabs(v) <= FLT_MAX && (v == 0 || std::fabs(v) >= FLT_TRUE_MIN);
  if (end == nullptr || *end != '\0' || !std::isfinite(v) || !fits_float) return std::nullopt;
  return Number{v, false, 0};
}

// A validator that parses the text as a Number and asks `accept` of it; `what` completes
// "must be ..." in the message, which also quotes the text as given.
template <class Accept>
CLI::Validator number_check(const std::string& what, const std::string& description,
                            Accept accept) {
  return CLI::Validator(
      [what, accept](std::string& text) -> std::string {
        const std::string given = text;
        const std::optional<Number> n = parse_number(text);
        return n && accept(*n) ? "" : "must be " + what + ", got '" + given + "'";
      },
      description, description);
}

}  // namespace detail

inline const CLI::Validator positive = detail::number_check(
    "a number > 0", "POSITIVE", [](const detail::Number& n) { return n.value > 0; });

inline const CLI::Validator finite_non_negative = detail::number_check(
    "a finite number >= 0", "FINITE >= 0", [](const detail::Number& n) { return n.value >= 0; });

inline const CLI::Validator positive_integer =
    detail::number_check("an integer > 0", "INT > 0",
                         [](const detail::Number& n) { return n.integer && n.integer_value > 0; });

inline const CLI::Validator non_negative_integer =
    detail::number_check("an integer >= 0", "INT >= 0",
                         [](const detail::Number& n) { return n.integer && n.integer_value >= 0; });

// A number from lo to hi, an integer when the bounds are integers. `ends` says whether each end
// belongs to the range, as the message writes it: "[]" (the default), "[)" (--beta1: 0 <= beta1
// < 1) or "(]" (--top-p: 0 < p <= 1).
template <class T>
CLI::Validator range(T lo, T hi, const std::string& ends = "[]") {
  static_assert(std::is_arithmetic_v<T>, "cli::range takes numeric bounds");
  const bool with_lo = ends.at(0) == '[', with_hi = ends.at(1) == ']';
  const std::string bounds = fmt::format("{}{}, {}{}", ends[0], lo, hi, ends[1]);
  auto inside = [=](auto v, auto low, auto high) {
    return (with_lo ? v >= low : v > low) && (with_hi ? v <= high : v < high);
  };
  if constexpr (std::is_integral_v<T>) {
    return detail::number_check(
        "an integer in " + bounds, "INT in " + bounds, [=](const detail::Number& n) {
          return n.integer && inside(n.integer_value, int64_t{lo}, int64_t{hi});
        });
  } else {
    return detail::number_check("a number in " + bounds, bounds, [=](const detail::Number& n) {
      return inside(n.value, double{lo}, double{hi});
    });
  }
}

// CPU threads a flag may ask for: more than any machine has cores, and few enough that
// --threads 4294967297 is refused rather than wrapped around to 1 by the int OpenMP takes.
inline constexpr int64_t kMaxThreads = 4096;

// --out and the like: a directory, or a path where one can be created. A path that names a file,
// or goes through one, is refused at startup (creating it would fail after the data was read).
inline const CLI::Validator output_directory(
    [](std::string& text) -> std::string {
      namespace fs = std::filesystem;
      if (text.empty()) return "must name a directory, got ''";
      std::error_code ec;
      for (fs::path p(text); !p.empty(); p = p.parent_path()) {
        const fs::file_status status = fs::status(p, ec);
        if (fs::exists(status))
          return fs::is_directory(status) ? "" : "'" + p.string() + "' is not a directory";
        if (p == p.parent_path()) break;  // the root
      }
      return "";
    },
    "DIR", "output_directory");

// Two flags whose values must be in order (--min-lr <= --lr), checked after parsing, before any
// work (a schedule would refuse them only at the first step).
template <class T>
void check_at_most(T value, const std::string& flag, T bound, const std::string& bound_flag) {
  LOOM_CHECK(value <= bound, "{} {} is above {} {}", flag, value, bound_flag, bound);
}

// Creates the directory `path` that flag `flag` names (with its parents); a loom::Error naming
// both when it cannot (std::filesystem's error would name neither the flag nor the program).
inline void create_directory(const std::string& path, const std::string& flag) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  LOOM_CHECK(!ec, "{} '{}': cannot create the directory: {}", flag, path, ec.message());
}

// A model config built from the flags of option group `group`, checked (Config::validate, with
// the parameter budget of models/model_size.h) before any work: the error names the flags given.
template <class Config>
void check_model_flags(const CLI::App& app, const std::string& group, const Config& config) {
  try {
    config.validate();
  } catch (const Error& e) {
    std::string given;
    for (const CLI::Option* option : app.get_option_group(group)->get_options())
      if (option->count() > 0) given += " " + option->get_name() + " " + option->as<std::string>();
    LOOM_FAIL("model flags{}: {}", given.empty() ? " (the defaults)" : given, e.what());
  }
}

// --detect-anomaly: autograd's anomaly mode (autograd::set_detect_anomaly), which checks every
// gradient backward produces and names the first op that gives a NaN or Inf, for a run whose
// loss diverges. Off by default: the check copies each gradient to the host.
inline CLI::Option* add_detect_anomaly(CLI::App& app, bool& enabled) {
  return app.add_flag("--detect-anomaly", enabled,
                      "check every gradient and name the op whose backward first gives NaN or "
                      "Inf (slower)");
}

// The flags of nn::RunOptions, the ones every trainer shares, with the same names, checks and
// messages everywhere; defaults are the values `run` holds. The groups are created here, in this
// order, and returned so that a trainer adds its own flags to them:
//   Optimisation                        --steps [--minutes]
//   Progress, evaluation, checkpoints   --log-every --checkpoint-every --out --resume --stop-at
//   Machine                             --device --threads --seed --detect-anomaly
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
      ->check(help.steps_may_be_zero ? non_negative_integer : positive_integer)
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
      ->check(positive_integer);
  g.progress->add_option("--checkpoint-every", run.checkpoint_every, help.checkpoint_every)
      ->check(non_negative_integer);
  g.progress->add_option("--out", run.out, help.out)->check(output_directory);
  g.progress->add_flag("--resume", run.resume,
                       "continue from <out>/ckpt.safetensors (bare flag, or 1/0)")
      ->expected(0, 1);
  g.progress->add_option("--stop-at", run.stop_at, help.stop_at)->check(non_negative_integer);
  add_device(*g.machine, run.device);
  g.machine->add_option("--threads", run.threads, "CPU threads (0 = OpenMP's default)")
      ->check(range(int64_t{0}, kMaxThreads));
  g.machine->add_option("--seed", run.seed, help.seed)->check(non_negative_integer);
  add_detect_anomaly(*g.machine, run.detect_anomaly);
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
