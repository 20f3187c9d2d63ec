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
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

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

inline const CLI::Validator finite =
    detail::number_check("a finite number", "FINITE", [](const detail::Number&) { return true; });

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

// ---------------------------------------------------------------------------- field lists
// A struct whose fields are a field list (core/fields.h) becomes flags in one call: each field
// is --kebab-name ("min_lr" -> --min-lr), checked by the validator of its fields::Check (above:
// positive, finite_non_negative, ...) and described by its help; a bool is a bare flag.

inline std::string flag_of(const std::string& field) {
  std::string flag = "--" + field;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

// The validator of a field's check for a value of type V; none for text, flags and `any`
// (CLI11's conversion alone).
template <class V>
std::optional<CLI::Validator> validator_of(fields::Check check) {
  if constexpr (std::is_arithmetic_v<V> && !std::is_same_v<V, bool>) {
    constexpr bool integer = std::is_integral_v<V>;
    switch (check) {
      case fields::Check::positive:
        return integer ? positive_integer : positive;
      case fields::Check::non_negative:
        return integer ? non_negative_integer : finite_non_negative;
      case fields::Check::probability:
        return range(0.0, 1.0, "[)");
      case fields::Check::finite:
        return finite;
      case fields::Check::any:
        break;
    }
  }
  return std::nullopt;
}

// Field `name` as its flag in `group`, with `validator` (when given) and `help`.
template <class V>
CLI::Option* add_field(CLI::App& group, const std::string& name, V& value,
                       const std::optional<CLI::Validator>& validator, const std::string& help) {
  if constexpr (std::is_same_v<V, bool>) {
    return group.add_flag(flag_of(name), value, help);
  } else {
    CLI::Option* option = group.add_option(flag_of(name), value, help);
    if (validator) option->check(*validator);
    return option;
  }
}

// Every field of `options` as a flag of `group`.
template <class Options>
void add_fields(CLI::App& group, Options& options) {
  options.visit_fields([&](const char* name, auto& value, fields::Check check, const char* help) {
    add_field(group, name, value, validator_of<std::decay_t<decltype(value)>>(check), help);
  });
}

// Every field of `options` as {--flag, its value as a checkpoint records it}: for
// nn::TrainingRun::keep_flags, when a field list holds the flags that choose the data.
template <class Options>
std::vector<std::pair<std::string, std::string>> flag_values(const Options& options) {
  std::vector<std::pair<std::string, std::string>> flags;
  options.visit_fields([&](const char* name, const auto& value, fields::Check, const char*) {
    flags.emplace_back(flag_of(name), fields::to_metadata_text(value));
  });
  return flags;
}

// ---------------------------------------------------------------------------- trainers
// The flags of nn::TrainOptions (train/options.h), the ones every trainer shares, with one name,
// one check and one help text each, in the groups of TrainOptions::kGroups, which are returned
// so that a trainer adds its own flags to them:
//
//   nn::TrainOptions train{.steps = 1600, .out = "out-gpt"};      // the trainer's defaults
//   const cli::TrainGroups g = cli::add_train_options(app, train, {.without = {"min_lr"}});
//   g.optimisation->add_option("--beta1", beta1, "AdamW beta1")->check(cli::range(0.0, 1.0));
//
// A trainer says which fields its recipe has no use for (`without`), and may add a note to a
// field's help, in parentheses: what its seed also seeds, a default that depends on the model.
// A field it gives another meaning (train_vision's --eval-every 0: every epoch) gets its own
// help, and one it bounds its own check:
//   {.checks = {{"batch", cli::range(int64_t{1}, kMaxScenes)}}}
struct TrainFlags {
  std::set<std::string> without = {};             // fields of TrainOptions that are no flags here
  std::map<std::string, std::string> notes = {};  // field -> the words added to its help
  std::map<std::string, std::string> help = {};   // field -> its help, where 0 means another thing
  std::map<std::string, CLI::Validator> checks = {};  // field -> its check, where it has a bound
  bool steps_may_be_zero = false;                     // --steps 0 = derived (--epochs, --minutes)
};
struct TrainGroups {
  CLI::App *optimisation, *progress, *machine;
};

// The check of shared flag `name` (a field of type V): the trainer's own, else the one of its
// field's Check but where that is not enough: --steps is > 0 unless the trainer derives it,
// --threads has an upper bound (OpenMP takes an int), --device names a backend and --out a
// directory.
template <class V>
std::optional<CLI::Validator> train_flag_check(const std::string& name, fields::Check check,
                                               const TrainFlags& flags) {
  if (const auto own = flags.checks.find(name); own != flags.checks.end()) return own->second;
  if (name == "steps") return flags.steps_may_be_zero ? non_negative_integer : positive_integer;
  if (name == "threads") return range(int64_t{0}, kMaxThreads);
  if (name == "device") return CLI::IsMember({"cpu", "cuda"});
  if (name == "out") return output_directory;
  return validator_of<V>(check);
}

inline TrainGroups add_train_options(CLI::App& app, nn::TrainOptions& options,
                                     const TrainFlags& flags = {}) {
  show_defaults(app);
  std::vector<CLI::App*> groups;
  options.visit_fields([&](const char* name, auto& value, fields::Check check, const char* help) {
    for (const nn::TrainOptions::Group& group : nn::TrainOptions::kGroups)
      if (std::string_view(name) == group.first_field)
        groups.push_back(app.add_option_group(group.title));
    if (flags.without.count(name) > 0) return;
    const auto own_help = flags.help.find(name);
    std::string text = own_help != flags.help.end() ? own_help->second : help;
    if (const auto note = flags.notes.find(name); note != flags.notes.end())
      text += " (" + note->second + ")";
    using V = std::decay_t<decltype(value)>;
    CLI::Option* option =
        add_field(*groups.back(), name, value, train_flag_check<V>(name, check, flags), text);
    if (std::string_view(name) == "steps")  // given: N > 0 overrides a resumed plan
      option->each([&options](const std::string&) { options.steps_given = true; });
    if (std::string_view(name) == "resume") option->expected(0, 1);  // a bare flag, or 1/0
  });
  return {groups.at(0), groups.at(1), groups.at(2)};
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

// The first lines of every trainer after parsing: joins the data-parallel job (rank 0 prints),
// prints the resolved flags, makes the run (nn::TrainingRun: the threads, and a --resume
// checked before any work), and checks --min-lr against --lr where the trainer has both.
inline nn::TrainingRun start_training(const CLI::App& app, const std::string& program,
                                      const nn::TrainOptions& options) {
  init_distributed();  // a job of one unless started by mpirun/srun
  print_config(app);
  nn::TrainingRun run(program, options);
  if (app.get_option_no_throw("--min-lr") != nullptr && app.get_option_no_throw("--lr") != nullptr)
    check_at_most(options.min_lr, "--min-lr", options.lr, "--lr");
  return run;
}

// The main of every trainer, around its recipe: idle OpenMP threads spin briefly
// (use_short_omp_spin), `add_options` gives the app its description and its flags (each showing
// its default: show_defaults), the command line is parsed (--help, or a bad flag, ends the
// program here, as CLI11_PARSE does), then `train` runs on the app and its options; an
// exception ends the program with "error: <message>" and exit status 1.
//
//   void add_options(CLI::App& app, Options& o) {
//     app.description("train_gpt: trains a GPT language model on the Debian fortune cookies");
//     ...
//   }
//   int main(int argc, char** argv) { return cli::trainer_main(argc, argv, add_options, train); }
template <class Options>
int trainer_main(int argc, char** argv, void (*add_options)(CLI::App&, Options&),
                 int (*train)(CLI::App&, Options&)) {
  try {
    use_short_omp_spin(argv);
    Options options;
    CLI::App app;
    show_defaults(app);
    add_options(app, options);
    CLI11_PARSE(app, argc, argv);
    return train(app, options);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace loom::cli
