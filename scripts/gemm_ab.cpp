// The driver of scripts/gemm_ab.sh: times two builds of loom's CPU product kernel,
// backends/gemm/tiled_gemm.cpp, in one process. The script compiles one build into namespace
// loom_before (a git revision's file) and one into loom_after (the working tree's), and this
// file calls cpu::gemm_tiled of each on the same operands, in alternating order, many times:
// on a shared 2-core machine whose speed moves 30% within minutes, two builds timed minutes
// apart compare the minutes, not the builds; timed in turns within one process they meet the
// same minutes. The same object file on both sides gave medians 1-3% apart; the same source
// compiled from two copies, up to 6% on some shapes (where the code lands): a smaller
// difference decides nothing.
//
//   gemm_ab [--threads N] [--reps R] [--rotate W] [--cold] SHAPE...
//   SHAPE: [BATCH*]MxNxK[:AB], AB one of NN (default), NT, TN, TT (op(A), op(B) transposed)
//   --rotate W: W copies of B, a different one each call (a weight that comes from the L3
//               cache or memory, as a decoding step's do), else one B the cache keeps
//   --cold: before each call the threads write 64 MiB elsewhere, so that both operands come
//           from memory (the caches keep them across calls otherwise); a training step's
//           operands lie between the two, partly in the L3 cache, so a gain here alone is
//           checked in the step (docs/guide/performance.md, 2026-12-06)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/gemm/gemm.h"

// The two builds' entry points: the same GemmArgs (the script checks gemm.h is the same file in
// both), each in its own namespace.
namespace loom_before {
struct GemmArgs;
namespace cpu {
void gemm_tiled(const GemmArgs& g);
}
}  // namespace loom_before
namespace loom_after {
struct GemmArgs;
namespace cpu {
void gemm_tiled(const GemmArgs& g);
}
}  // namespace loom_after

namespace {

struct Shape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  std::string text;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "gemm_ab: %s\nusage: gemm_ab [--threads N] [--reps R] [--rotate W] [--cold] "
               "[BATCH*]MxNxK[:NN|NT|TN|TT]...\n",
               why);
  std::exit(2);
}

Shape parse_shape(const std::string& text) {
  Shape s;
  s.text = text;
  std::string dims = text, ops = "NN";
  if (const auto colon = text.find(':'); colon != std::string::npos) {
    dims = text.substr(0, colon);
    ops = text.substr(colon + 1);
  }
  if (ops.size() != 2 || (ops[0] != 'N' && ops[0] != 'T') || (ops[1] != 'N' && ops[1] != 'T'))
    usage(("bad transposes in " + text).c_str());
  s.trans_a = ops[0] == 'T', s.trans_b = ops[1] == 'T';
  long long b = 1, m = 0, n = 0, k = 0;
  char end = 0;
  const bool batched = dims.find('*') != std::string::npos;
  const char* d = dims.c_str();
  const int read = batched ? std::sscanf(d, "%lld*%lldx%lldx%lld%c", &b, &m, &n, &k, &end)
                           : std::sscanf(d, "%lldx%lldx%lld%c", &m, &n, &k, &end);
  if (read != (batched ? 4 : 3) || b < 1 || m < 1 || n < 1 || k < 1)
    usage(("bad shape " + text).c_str());
  s.batch = b, s.m = m, s.n = n, s.k = k;
  return s;
}

// Seconds of one call of `run`.
template <class Run>
double seconds(const Run& run) {
  const auto start = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// GFLOP/s at the median and at the fastest of the times (sorted here).
struct Rates {
  double median, fastest;
};
Rates rates(std::vector<double> times, double gflop) {
  std::sort(times.begin(), times.end());
  return {gflop / times[times.size() / 2], gflop / times.front()};
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 200, rotate = 1;
  bool cold = false;
  std::vector<Shape> shapes;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&] {
      if (i + 1 >= argc) usage((arg + " needs a value").c_str());
      const int v = std::atoi(argv[++i]);
      if (v < 1) usage((arg + " must be at least 1").c_str());
      return v;
    };
    if (arg == "--threads")
      threads = value();
    else if (arg == "--reps")
      reps = value();
    else if (arg == "--rotate")
      rotate = value();
    else if (arg == "--cold")
      cold = true;
    else
      shapes.push_back(parse_shape(arg));
  }
  if (shapes.empty()) usage("no shapes");
  omp_set_num_threads(threads);
  std::printf("%d threads, %d calls each, median (fastest) GFLOP/s; B %s%s\n", threads, reps,
              rotate > 1 ? "rotated among copies" : "one copy",
              cold ? "; operands from memory (--cold)" : "");
  // --cold's buffer, written by every thread before each call (not timed).
  std::vector<float> evict(cold ? 16 * 1024 * 1024 : 0);
  const auto evict_caches = [&] {
    if (!cold) return;
    const auto size = static_cast<int64_t>(evict.size());
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < size; ++i) evict[i] += 1.0f;
  };
  std::printf("%-26s %18s %18s %8s  %s\n", "shape", "before", "after", "after/", "same bits");
  std::mt19937 random(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const Shape& s : shapes) {
    const int64_t a_size = s.batch * s.m * s.k, b_size = s.batch * s.k * s.n;
    std::vector<float> a(a_size), b(b_size * rotate), c_before(s.batch * s.m * s.n),
        c_after(c_before.size());
    for (float& x : a) x = uniform(random);
    for (float& x : b) x = uniform(random);
    loom::GemmArgs g;
    g.trans_a = s.trans_a, g.trans_b = s.trans_b;
    g.m = s.m, g.n = s.n, g.k = s.k, g.batch = s.batch;
    g.a = a.data(), g.lda = s.trans_a ? s.m : s.k, g.stride_a = s.m * s.k;
    g.ldb = s.trans_b ? s.k : s.n, g.stride_b = s.k * s.n;
    g.ldc = s.n, g.stride_c = s.m * s.n;
    loom::GemmArgs g_before = g, g_after = g;
    g_before.c = c_before.data(), g_after.c = c_after.data();
    const auto run_before = [&] {
      loom_before::cpu::gemm_tiled(reinterpret_cast<const loom_before::GemmArgs&>(g_before));
    };
    const auto run_after = [&] {
      loom_after::cpu::gemm_tiled(reinterpret_cast<const loom_after::GemmArgs&>(g_after));
    };
    std::vector<double> before, after;
    for (int rep = 0; rep < reps; ++rep) {
      g_before.b = g_after.b = b.data() + rep % rotate * b_size;
      // Each build goes first every other time: the second of two runs finds the operands in
      // the cache.
      const auto timed = [&](const auto& run, std::vector<double>& times) {
        evict_caches();
        times.push_back(seconds(run));
      };
      if (rep % 2 == 0) {
        timed(run_before, before);
        timed(run_after, after);
      } else {
        timed(run_after, after);
        timed(run_before, before);
      }
    }
    const double gflop = 2.0 * s.batch * s.m * s.n * s.k / 1e9;
    const Rates was = rates(before, gflop), is = rates(after, gflop);
    const bool same = std::memcmp(c_before.data(), c_after.data(), c_before.size() * 4) == 0;
    std::printf("%-26s %8.1f (%7.1f) %8.1f (%7.1f) %8.3f  %s\n", s.text.c_str(), was.median,
                was.fastest, is.median, is.fastest, is.median / was.median, same ? "yes" : "NO");
  }
}
