// The reporting of the tours (examples/tensor_tour.cpp, examples/nn_tour.cpp): each result is
// printed as `name [shape] values...`, the format of their PyTorch twins
// (bench/reference/tensor_tour.py, nn_tour.py), or, given the twin's output, compared with it.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "examples/cli.h"
#include "loom.h"

namespace loom::tour {

// Prints each result, or compares it with the line of the same name in a file of PyTorch's.
class Tour {
 public:
  explicit Tour(const std::string& golden_path) {
    if (golden_path.empty()) return;
    std::ifstream in(golden_path);
    LOOM_CHECK(in.good(), "tour: cannot read {}", golden_path);
    for (std::string line; std::getline(in, line);) {
      std::istringstream fields(line);
      std::string name, shape;
      fields >> name >> shape;
      std::vector<double> values;
      for (double v; fields >> v;) values.push_back(v);
      golden_[name] = {shape, values};
    }
    checking_ = true;
  }

  void show(const std::string& name, const Tensor& t) {
    std::vector<float> values = t.to(DType::Float32).to_vector();
    std::string shape = "[";
    for (size_t d = 0; d < t.shape().size(); ++d)
      shape += (d ? "," : "") + std::to_string(t.shape()[d]);
    shape += "]";
    if (!checking_) {
      fmt::print("{} {} {:.6g}\n", name, shape, fmt::join(values, " "));
      return;
    }
    auto found = golden_.find(name);
    bool ok = found != golden_.end() && found->second.first == shape &&
              found->second.second.size() == values.size();
    for (size_t i = 0; ok && i < values.size(); ++i) {
      const double want = found->second.second[i];
      ok = std::abs(values[i] - want) <= 1e-4 + 1e-4 * std::abs(want);
    }
    if (!ok) {
      fmt::print("MISMATCH {} {} {:.6g}\n", name, shape, fmt::join(values, " "));
      ++failed_;
    }
    ++checked_;
  }
  void show(const std::string& name, double value) { show(name, full({}, float(value))); }

  int finish() const {
    if (checking_) {
      fmt::print("{} of {} results match PyTorch's\n", checked_ - failed_, checked_);
      if (checked_ != static_cast<int>(golden_.size()))
        fmt::print("but PyTorch's file has {} results\n", golden_.size());
    }
    return failed_ == 0 && (!checking_ || checked_ == static_cast<int>(golden_.size())) ? 0 : 1;
  }

 private:
  std::map<std::string, std::pair<std::string, std::vector<double>>> golden_;
  bool checking_ = false;
  int checked_ = 0, failed_ = 0;
};

// The command line both tours take: --check <PyTorch's results> (tests/golden/<program>.txt)
// compares, no flag prints. --help, or a file that is not there, ends the program here with
// CLI11's message and status, as CLI11_PARSE would in main.
inline Tour from_command_line(int argc, char** argv, const std::string& program,
                              const std::string& description) {
  std::string golden;
  CLI::App app{program + ": " + description};
  app.add_option("--check", golden,
                 fmt::format("compare with PyTorch's results (tests/golden/{}.txt)", program))
      ->check(CLI::ExistingFile);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
  return Tour(golden);
}

}  // namespace loom::tour
