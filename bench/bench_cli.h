// The command line every model benchmark shares (bench/vision, seq2seq, bert, detr):
//
//   NAME CASE [--steps N] [--threads T] [--device cpu|cuda]
//
// run_cases() parses it with CLI11 (examples/cli.h), sets the thread count, runs the case CASE
// names and turns an error into "NAME: message" and exit status 1. Each case prints one JSON
// line with the keys of bench/reference/bench.py CASE (bench_util.h's JsonLine). Idle OpenMP
// workers spin briefly, then sleep (cli::use_short_omp_spin; bench/reference/bench.py runs
// PyTorch with OMP_WAIT_POLICY=PASSIVE, its best setting).
#pragma once

#include <fmt/format.h>

#include <functional>
#include <string>
#include <vector>

#include "examples/cli.h"
#include "loom.h"

namespace loom::bench {

struct Args {
  std::string case_name;
  int steps = 10, threads = 2;
  Device device = Device::CPU;
};

// One case of a benchmark: its name, its --help line and the function that runs it.
struct Case {
  std::string name, help;
  std::function<void(const Args&)> run;
};

inline int run_cases(int argc, char** argv, const std::string& name, const std::string& description,
                     const std::vector<Case>& cases) {
  cli::use_short_omp_spin(argv);
  Args args;
  std::string device = "cpu", case_help;
  std::vector<std::string> names;
  for (const Case& c : cases) {
    names.push_back(c.name);
    case_help += (case_help.empty() ? "" : "\n") + c.name + ": " + c.help;
  }
  CLI::App app{name + ": " + description +
               "; prints one JSON line comparable with bench/reference/bench.py CASE"};
  cli::show_defaults(app);
  app.add_option("case", args.case_name, case_help)->required()->check(CLI::IsMember(names));
  app.add_option("--steps", args.steps, "timed steps (after 3 warm-ups)")
      ->check(cli::range(1, 1000000));
  app.add_option("--threads", args.threads, "CPU threads")
      ->check(cli::range(int64_t{1}, cli::kMaxThreads));
  cli::add_device(app, device);
  CLI11_PARSE(app, argc, argv);
  args.device = cli::device_of(device);
  try {
    set_num_threads(args.threads);
    for (const Case& c : cases)
      if (c.name == args.case_name) c.run(args);
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: {}\n", name, e.what());
    return 1;
  }
  return 0;
}

}  // namespace loom::bench
