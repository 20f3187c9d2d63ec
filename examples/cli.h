// The command line of every example and benchmark, parsed by CLI11 (Debian's libcli11-dev), so
// that --help looks the same everywhere. Not a flag framework: the few lines every program would
// otherwise repeat.
//
//   CLI::App app{"train_spirals: an MLP learns to separate two interleaved spirals"};
//   cli::show_defaults(app);                           // before adding options
//   app.add_option("--steps", steps, "optimizer steps")->check(CLI::PositiveNumber);
//   cli::add_device(app, device);
//   CLI11_PARSE(app, argc, argv);                      // --help, or an error, exits here
//   cli::print_config(app);                            // the resolved values (STYLE.md habit 6)
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

// OMP_WAIT_POLICY=PASSIVE, as ../shared/bench/torch_ref.py runs PyTorch: idle libgomp threads
// then sleep instead of spinning, which on 2 shared cores is worth 2-5x (a spinning worker
// steals the core that BLAS or the next loop needs). libgomp reads the variable once, when it
// loads, so the program runs itself again with it set. Call first thing in main. An
// OMP_WAIT_POLICY already set (e.g. ACTIVE, to see libgomp's default) is kept.
inline void use_passive_omp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);  // returns only if it failed: go on with libgomp's default
}

// Joins the data-parallel job (distributed::init(): a job of one without mpirun or srun) and
// sends the stdout of every rank but 0 to /dev/null, so that a trainer runs unchanged under
// `mpirun -np N` and prints once. Errors still reach stderr from every rank.
inline void init_distributed() {
  distributed::init();
  if (!distributed::is_main_process()) std::freopen("/dev/null", "w", stdout);
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

// Prints every option's value after parsing, given or default, one "  key=value" a line.
inline void print_config(const CLI::App& app) {
  std::istringstream lines(app.config_to_str(/*default_also=*/true, /*write_description=*/false));
  fmt::print("config:\n");
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) fmt::print("  {}\n", line);
}

}  // namespace loom::cli
