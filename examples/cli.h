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

#include <CLI/CLI.hpp>
#include <sstream>
#include <string>

#include "loom.h"

namespace loom::cli {

// Every option added afterwards shows its default value in --help and in print_config().
inline void show_defaults(CLI::App& app) { app.option_defaults()->always_capture_default(); }

// --device cpu | cuda.
inline CLI::Option* add_device(CLI::App& app, std::string& device) {
  return app.add_option("--device", device, "cpu | cuda")->check(CLI::IsMember({"cpu", "cuda"}));
}
inline Device device_of(const std::string& name) {
  return name == "cuda" ? Device::CUDA : Device::CPU;
}

// Prints every option's value after parsing, given or default, one "  key=value" a line.
inline void print_config(const CLI::App& app) {
  std::istringstream lines(app.config_to_str(/*default_also=*/true, /*write_description=*/false));
  fmt::print("config:\n");
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) fmt::print("  {}\n", line);
}

}  // namespace loom::cli
