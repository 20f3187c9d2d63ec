// Timing helpers shared by the benchmarks: the same protocol as ../shared/bench/torch_ref.py
// (3 untimed warm-up calls, then N timed calls, median reported).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
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

// torch_ref.py runs PyTorch with OMP_WAIT_POLICY=PASSIVE unless told otherwise (--omp-wait):
// idle libgomp threads then sleep instead of spinning, which on 2 shared cores is worth 2-5x
// (a spinning worker steals the core that BLAS or the next loop needs). libgomp reads the
// variable once, when it loads, so a benchmark that wants the same setting runs itself again
// with it set. Call first thing in main. An OMP_WAIT_POLICY already set (e.g. ACTIVE, to see
// libgomp's default) is kept.
inline void use_passive_omp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);  // returns only if it failed: go on with libgomp's default
}

}  // namespace loom::bench
