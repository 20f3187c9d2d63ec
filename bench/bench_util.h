// Timing helpers shared by the benchmarks: the same protocol as bench/reference/bench.py
// (3 untimed warm-up calls, then N timed calls, median reported), and the JSON line each
// benchmark prints with bench.py's keys.
#pragma once

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <concepts>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "loom.h"

namespace loom::bench {

// Untimed calls before the timed ones (bench.py's "warmup").
inline constexpr int kWarmup = 3;
// The product shapes --profile lists unless --profile-shapes says otherwise.
inline constexpr int kProfileShapes = 15;

struct Timing {
  double median_s = 0, min_s = 0, max_s = 0;
};

// The middle value of `values` (the mean of the two middle ones when their count is even).
inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

inline Timing time_steps(const std::function<void()>& step, int steps, int warmup = kWarmup) {
  for (int i = 0; i < warmup; ++i) step();
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const auto [min, max] = std::minmax_element(times.begin(), times.end());
  return {median(times), *min, *max};
}

// c = a @ b by OpenBLAS's cblas_sgemm directly (float32, contiguous 2-D a [m, k], b [k, n] and
// c [m, n]): what the machine's BLAS reaches, beside loom's matmul.
inline void blas_matmul(const Tensor& a, const Tensor& b, Tensor& c) {
  const auto m = static_cast<int>(a.size(0)), k = static_cast<int>(a.size(1));
  const auto n = static_cast<int>(b.size(1));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data_ptr<float>(), k,
              b.data_ptr<float>(), n, 0.0f, c.data_ptr<float>(), n);
}

// time_steps(step, steps), and with `profile` (a benchmark's --profile) the timed steps under
// the profiler (core/profiler.h): a table of where their time went, per op and pass, printed on
// stderr under the title `what` (stdout keeps its one JSON line), with its `shapes` longest
// product shapes (0: all); given the machine's peak (`sgemm_gflops` > 0, the probe's), then
// where the step stands against it (Profile::bound_text: the share it would reach with every
// product at the peak). The profiler's clock reads add a little to every kernel call, so a
// profiled step is slightly slower.
inline Timing time_steps(const std::function<void()>& step, int steps, bool profile,
                         const std::string& what, double sgemm_gflops = 0,
                         int shapes = kProfileShapes) {
  if (!profile) return time_steps(step, steps);
  for (int i = 0; i < kWarmup; ++i) step();
  profiler::Profile timed;
  const Timing t = time_steps(step, steps, 0);
  timed.stop();
  const size_t listed =
      shapes > 0 ? static_cast<size_t>(shapes) : std::numeric_limits<size_t>::max();
  fmt::print(stderr, "profile of {}: {} timed steps, median {:.3f} ms\n{}\n{}\n", what, steps,
             t.median_s * 1e3, timed.table(steps), timed.products_table(steps, listed));
  if (sgemm_gflops > 0) fmt::print(stderr, "{}\n", timed.bound_text(steps, sgemm_gflops));
  return t;
}

// time_steps for a case of a benchmark: its --steps, --profile and --profile-shapes, the
// profile titled `what` and set against the case's sgemm probe (CaseArgs: a benchmark's Args,
// with steps, profile, profile_shapes and sgemm_gflops).
template <class CaseArgs>
Timing time_case(const std::function<void()>& step, const CaseArgs& args, const std::string& what) {
  return time_steps(step, args.steps, args.profile, what, args.sgemm_gflops, args.profile_shapes);
}

// The end of a timed training step, as bench.py's: backward, the optimizer's step, the
// gradients zeroed in place (PyTorch 1.13's default), the loss kept for "loss_first" and
// "loss_last".
inline void update(const Tensor& loss, optim::Optimizer& opt, std::vector<float>& losses) {
  loss.backward();
  {
    profiler::PassGuard optimizer(profiler::Pass::Optimizer);  // --profile's optimizer rows
    opt.step();
    opt.zero_grad(false);
  }
  losses.push_back(loss.item());
}

// One line of JSON on stdout: "case" first, then the fields in the order they are added, each
// value written as bench.py writes the same key; print() ends it with "framework": "loom". The
// fields most benchmarks share have a call each:
//
//   bench::JsonLine(args.case_name)
//       .add("batch", batch)
//       .add("images_per_s", static_cast<double>(batch) / t.median_s, 2)
//       .common(t, args.steps, model.num_parameters(), args.device)
//       .losses(losses)
//       .print();
class JsonLine {
 public:
  explicit JsonLine(const std::string& case_name) { add("case", case_name); }

  JsonLine& add(const std::string& key, const std::string& text) {
    return field(key, fmt::format("\"{}\"", text));
  }
  template <std::integral Integer>
  JsonLine& add(const std::string& key, Integer value) {
    static_assert(!std::is_same_v<Integer, bool>, "flag() writes a bool, as true or false");
    return field(key, fmt::format("{}", value));
  }
  // With `decimals` digits after the point; without, the shortest text that reads back exactly.
  JsonLine& add(const std::string& key, double value, int decimals) {
    return field(key, fmt::format("{:.{}f}", value, decimals));
  }
  JsonLine& add(const std::string& key, double value) {
    return field(key, fmt::format("{}", value));
  }
  JsonLine& flag(const std::string& key, bool value) {
    return field(key, value ? "true" : "false");
  }

  // "<prefix>ms_per_step", "<prefix>ms_min" and "<prefix>ms_max" of `t`.
  JsonLine& times(const Timing& t, const std::string& prefix = "") {
    return add(prefix + "ms_per_step", t.median_s * 1e3, 3)
        .add(prefix + "ms_min", t.min_s * 1e3, 3)
        .add(prefix + "ms_max", t.max_s * 1e3, 3);
  }
  // times(t), then the protocol: "steps" timed after "warmup" untimed.
  JsonLine& timing(const Timing& t, int steps) {
    return times(t).add("steps", steps).add("warmup", kWarmup);
  }
  // "loss_first" and "loss_last" of the timed steps' losses (5 decimals).
  JsonLine& losses(const std::vector<float>& losses) {
    return add("loss_first", losses.front(), 5).add("loss_last", losses.back(), 5);
  }
  // "threads" (loom's OpenMP threads), "blas_threads" (OpenBLAS's) and "blas_core", the kernel
  // family OpenBLAS chose for this CPU (or OPENBLAS_CORETYPE forced): on an AVX-512 machine
  // "Haswell" kernels reach about half the sgemm rate of "SkylakeX" or "Cooperlake" ones.
  JsonLine& threads() {
    return add("threads", get_num_threads())
        .add("blas_threads", openblas_get_num_threads())
        .add("blas_core", std::string(openblas_get_corename()));
  }
  // What every model benchmark reports of its timed run: timing(t, steps), "params", threads()
  // and "device".
  JsonLine& common(const Timing& t, int steps, int64_t params, Device device) {
    return timing(t, steps).add("params", params).threads().add("device", device_name(device));
  }
  // What the step achieves: "flops_per_step" (GFLOP of its matrix products and convolutions,
  // bench/flops.h's count, as bench.py --flops counts them) and "gflops_per_s" at the median
  // step time; and, when the sgemm probe ran (`sgemm_gflops` > 0: the CPU), the machine's limit
  // "sgemm_gflops" and "sgemm_share" = gflops_per_s / sgemm_gflops.
  JsonLine& achieved(double flops, const Timing& t, double sgemm_gflops) {
    const double gflops_per_s = flops / 1e9 / t.median_s;
    add("flops_per_step", flops / 1e9, 4).add("gflops_per_s", gflops_per_s, 2);
    if (sgemm_gflops <= 0) return *this;
    return add("sgemm_gflops", sgemm_gflops, 2).add("sgemm_share", gflops_per_s / sgemm_gflops, 3);
  }

  void print() const { fmt::print("{{{}, \"framework\": \"loom\"}}\n", fields_); }

 private:
  JsonLine& field(const std::string& key, const std::string& value) {
    fields_ += fmt::format("{}\"{}\": {}", fields_.empty() ? "" : ", ", key, value);
    return *this;
  }
  std::string fields_;
};

}  // namespace loom::bench
