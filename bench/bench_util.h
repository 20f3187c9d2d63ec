// Timing helpers shared by the benchmarks: the same protocol as bench/reference/bench.py
// (3 untimed warm-up calls, then N timed calls, median reported).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace loom::bench {

struct Timing {
  double median_s = 0, min_s = 0, max_s = 0;
};

inline Timing time_steps(const std::function<void()>& step, int steps, int warmup = 3) {
  for (int i = 0; i < warmup; ++i) step();
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  return {median, sorted.front(), sorted.back()};
}


}  // namespace loom::bench
