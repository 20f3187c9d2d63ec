// The command line every model benchmark shares (bench/vision, seq2seq, bert, detr):
//
//   NAME CASE [--steps N] [--threads T] [--device cpu|cuda] [--profile [--profile-shapes S]]
//             [--fused-attention | --no-fused-attention]
//
// run_cases() parses it with CLI11 (examples/cli.h), sets the thread count, on the CPU measures
// the machine's sgemm GFLOP/s (bench/flops.h's probe, for "sgemm_share"), runs the case CASE
// names and turns an error into "NAME: message" and exit status 1. Each case prints one JSON
// line with the keys of bench/reference/bench.py CASE (bench_util.h's JsonLine). Idle OpenMP
// workers spin briefly, then sleep (cli::use_short_omp_spin; bench/reference/bench.py runs
// PyTorch with OMP_WAIT_POLICY=PASSIVE, its best setting).
#pragma once

#include <fmt/format.h>

#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "examples/cli.h"
#include "flops.h"
#include "loom.h"

namespace loom::bench {

struct Args {
  std::string case_name;
  int steps = 10, threads = 2;
  Device device = Device::CPU;
  bool profile = false;       // --profile: a per-op table of the timed steps on stderr
  int profile_shapes = kProfileShapes;  // --profile-shapes: the shapes it lists (0: all)
  double sgemm_gflops = 0;    // the probe's GFLOP/s on the CPU; 0 on CUDA (not measured)
};

// What every model benchmark's --help says of the line's achievement fields and of --profile.
inline const char* kAchievedHelp =
    "; flops_per_step: GFLOP of the step's matrix products and convolutions (forward + "
    "backward, 2 per multiply-add, counted from the config as bench.py --flops counts them), "
    "gflops_per_s at the median step, and on the CPU sgemm_gflops (a 1024^3 sgemm probe run "
    "first, loom's matmul or cblas_sgemm, whichever is faster) and sgemm_share = "
    "gflops_per_s / sgemm_gflops";
inline const char* kProfileHelp =
    "print on stderr where the timed steps' time went: per op (kernel) and pass (forward, "
    "backward, optimizer), calls, ms per step, share of the step, GFLOP/s of the products, "
    "and the time outside kernels; then the longest products by shape (m x n x k, each "
    "operand as stored or transposed; --profile-shapes of them) with their GFLOP/s; and, on "
    "the CPU, the step against the sgemm probe: the share it would reach with every product at "
    "the probe's rate and the rest as it is, and what 80% would need (the profiler's clock "
    "reads slow the steps a little)";

// --profile and --profile-shapes, into a benchmark's Args (bench_cli's or its own).
inline void add_profile_flags(CLI::App& app, bool& profile, int& shapes) {
  CLI::Option* profile_flag = app.add_flag("--profile", profile, kProfileHelp);
  app.add_option("--profile-shapes", shapes,
                 "with --profile: how many product shapes it lists, the longest first (0: all "
                 "of them; scripts/product_bound.py reads them all)")
      ->check(cli::range(0, 1000000))
      ->needs(profile_flag);
}

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
               "; prints one JSON line comparable with bench/reference/bench.py CASE" +
               kAchievedHelp};
  cli::show_defaults(app);
  app.add_option("case", args.case_name, case_help)->required()->check(CLI::IsMember(names));
  app.add_option("--steps", args.steps, "timed steps (after 3 warm-ups)")
      ->check(cli::range(1, 1000000));
  app.add_option("--threads", args.threads, "CPU threads")
      ->check(cli::range(int64_t{1}, cli::kMaxThreads));
  cli::add_device(app, device);
  add_profile_flags(app, args.profile, args.profile_shapes);
  bool fused = false, unfused = false;
  auto* fused_flag = app.add_flag(
      "--fused-attention", fused,
      "attention by the fused kernel wherever it applies (by default only on CUDA, for "
      "bfloat16 attention and decoding)");
  app.add_flag("--no-fused-attention", unfused,
               "attention by the unfused products and softmax everywhere")
      ->excludes(fused_flag);
  CLI11_PARSE(app, argc, argv);
  args.device = cli::device_of(device);
  try {
    if (fused || unfused) nn::functional::set_fused_attention(args.device, fused);
    set_num_threads(args.threads);
    if (args.device == Device::CPU) args.sgemm_gflops = sgemm_gflops();
    for (const Case& c : cases)
      if (c.name == args.case_name) c.run(args);
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: {}\n", name, e.what());
    return 1;
  }
  return 0;
}

}  // namespace loom::bench
