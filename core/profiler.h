// Where the time of a step goes: a per-op profiler, torch.autograd.profiler's counterpart.
//
//   {
//     profiler::Profile profile;          // on for its lifetime (torch.autograd.profiler.profile)
//     for (int i = 0; i < 10; ++i) step();
//     fmt::print(stderr, "{}", profile.table(10));   // op, pass, calls, ms and share per step
//   }
//
// What is timed: every kernel call (Backend::run, the one place each backend method hands its
// work to a device, names the scope after the method: "gemm", "softmax", "unary Gelu"), a
// PackedWeightsGuard's copy of a weight in panels ("pack_weight") and every RecordFunction a
// program opens. Time goes to the OUTERMOST scope open on the thread, so nothing is counted
// twice: a kernel inside a RecordFunction is part of the RecordFunction's row, and a kernel
// that calls another kernel is one row. The pass of a row is the thread's current one:
// Backward while the autograd engine runs backward (autograd/engine.cpp), Optimizer inside a
// PassGuard that says so (the benchmarks' optimizer steps), Forward otherwise. What no scope
// covers (shape logic, allocation, the graph's bookkeeping) is the profile's "other".
//
// Off, it costs one relaxed atomic load per kernel call (enabled()). On, a steady_clock read at
// each end of a scope and two locked updates. The time is the calling thread's: on the CPU
// the kernel's run, on CUDA only its launch (the device runs it later, asynchronously).
//
// A program that calls loom from several threads at once (beam search's groups of sentences,
// models/beam_search.cpp) has scopes open on several threads together: each row then sums its
// calls' times over the threads, so the rows can add up to more than the wall time. "other"
// is the wall time during which no scope was open on any thread, and the table says when the
// rows overlapped.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::profiler {

// The part of a training step a scope ran in.
enum class Pass { Forward, Backward, Optimizer };
const char* pass_name(Pass pass);  // "forward", "backward", "optimizer"

namespace detail {
inline std::atomic<bool> g_enabled{false};
// The thread's open scopes and its pass.
struct ThreadState {
  int depth = 0;
  Pass pass = Pass::Forward;
};
inline thread_local ThreadState t_state;
}  // namespace detail

// Whether a Profile is running: the one check a scope makes when profiling is off.
inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }

// A matrix product's shape, for the profile's products (Profile::products()): C (m x n) =
// op(A) op(B) over k, `batch` times; op(X) is X as stored or, with trans, transposed.
struct ProductShape {
  int64_t m = 0, n = 0, k = 0, batch = 0;
  bool trans_a = false, trans_b = false;
  auto operator<=>(const ProductShape&) const = default;
  // "6400x384x128 NT", or with a batch "512 x 50x50x32 NT" (N: as stored, T: transposed).
  std::string str() const;
};

// Times its lifetime as one call of `name` (a string with static storage: a literal, or the
// function name of a std::source_location) when the profiler is on and no scope is open on
// this thread. `detail` (static too) refines the name ("Gelu" of "unary"); `flops` is the
// call's floating-point work, when known (gemm's 2 m n k per product).
class Scope {
 public:
  explicit Scope(const char* name) : name_(name) {
    if (!enabled()) return;
    entered_ = true;
    active_ = detail::t_state.depth++ == 0;
    if (active_) start_ = opened();
  }
  ~Scope() {
    if (!entered_) return;
    --detail::t_state.depth;
    if (active_) finish();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  bool active() const { return active_; }
  void describe(const char* detail, double flops) {
    detail_ = detail;
    flops_ = flops;
  }
  // A product's call: its time is also tallied under its shape (Profile::products()).
  void describe_product(const ProductShape& shape) { shape_ = shape; }

 private:
  static std::chrono::steady_clock::time_point opened();  // now, counted as one more open
  void finish();
  const char* name_;
  const char* detail_ = nullptr;
  double flops_ = 0;
  ProductShape shape_;    // batch 0: not a product
  bool entered_ = false;  // counted in the thread's depth
  bool active_ = false;   // the outermost scope: timed
  std::chrono::steady_clock::time_point start_;
};

// A named region of a program, timed as one row (torch.autograd.profiler.record_function;
// LibTorch's RECORD_FUNCTION). The kernels inside are part of its time, not rows of their own.
class RecordFunction {
 public:
  explicit RecordFunction(std::string_view name);

 private:
  Scope scope_;
};

// Sets this thread's pass for its lifetime (the engine's Backward, a benchmark's Optimizer).
class PassGuard {
 public:
  explicit PassGuard(Pass pass) : previous_(detail::t_state.pass) { detail::t_state.pass = pass; }
  ~PassGuard() { detail::t_state.pass = previous_; }
  PassGuard(const PassGuard&) = delete;
  PassGuard& operator=(const PassGuard&) = delete;

 private:
  Pass previous_;
};

// One row of a profile: every call of one op in one pass (PyTorch's key_averages()).
struct Row {
  std::string name;
  Pass pass = Pass::Forward;
  int64_t calls = 0;
  double seconds = 0;  // summed over the calls
  double flops = 0;    // summed over the calls; 0 when the op does not say
};

// Every call of one product shape in one pass (Profile::products()).
struct ProductRow {
  ProductShape shape;
  Pass pass = Pass::Forward;
  int64_t calls = 0;
  double seconds = 0, flops = 0;  // summed over the calls
};

// Where a step stands against the machine's limit, `peak_gflops` (its sgemm rate, measured
// beside the step: bench/flops.h's probe), split the way to read it: the products' kernels, and
// the rest (every other kernel, and the time outside kernels). A step's share of the peak is
// bounded twice: by its products' own rate, and, were they at the peak, by the rest, which does
// no counted FLOPs (layer norms, softmax, GELU, copies). best_share() is the second bound: the
// share the step would reach with every product at the peak and the rest as it is.
//
//   share        = gflop / step / peak                       (what the step reaches now)
//   best_share   = at_peak / (at_peak + rest),  at_peak = gflop / peak
//   rest_allowed(s) = at_peak / s - at_peak                  (the rest a share s leaves room for)
struct Bound {
  double step_ms = 0;      // the profile's wall time per step
  double products_ms = 0;  // the products' kernels per step
  double gflop = 0;        // the products' GFLOP per step
  double peak_gflops = 0;

  double rest_ms() const { return std::max(0.0, step_ms - products_ms); }
  double products_gflops() const { return products_ms > 0 ? gflop / products_ms * 1e3 : 0.0; }
  double products_at_peak_ms() const { return peak_gflops > 0 ? gflop / peak_gflops * 1e3 : 0.0; }
  double share() const { return step_ms > 0 ? products_at_peak_ms() / step_ms : 0.0; }
  double best_share() const;
  // The most time per step the rest may take for the step to reach `share` (in (0, 1]) of the
  // peak, its products at the peak.
  double rest_allowed_ms(double share) const;
  // The products' rate with which the step reaches `share` of the peak, the rest as it is:
  // above the peak when best_share() < share, infinite when the rest alone takes longer.
  double products_gflops_needed(double share) const;
};

// Turns the profiler on for its lifetime, from empty tallies; one at a time (a second while one
// runs throws loom::Error). Between a Profile's start and its stop() (or end), key_averages()
// and table() may be read at any time.
class Profile {
 public:
  Profile();
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  void stop();  // the profiler off; the tallies and the wall time stay readable
  // The rows, longest total time first.
  std::vector<Row> key_averages() const;
  double wall_seconds() const;  // from the start to stop() (or to now while running)
  // The wall time during which a scope was open on at least one thread: the rows' summed time
  // when one thread calls loom, less when several ran scopes at once.
  double covered_seconds() const;
  double other_seconds() const;  // wall_seconds() minus covered_seconds(), at least 0
  // The rows as a table, per step of `steps`: op, pass, calls, ms, share of the wall time and,
  // for ops that report FLOPs, GFLOP/s; then "other", the total and, when products ran, their
  // GFLOP per step with their own time and GFLOP/s (the step's rate if nothing else took time);
  // and, when scopes ran on several threads at once, how much the rows overlapped.
  std::string table(int64_t steps = 1) const;
  // The products (the gemm rows) by shape and pass, longest total time first, and as a table
  // of the `most` longest per step of `steps`: shape, pass, calls, ms, share of the wall time
  // and GFLOP/s, the way to see which products run below the machine's peak.
  std::vector<ProductRow> products() const;
  std::string products_table(int64_t steps = 1, size_t most = 15) const;
  // The step against the peak (Bound), per step of `steps`, and as a few lines of text: the
  // products' time now and at the peak, the rest, the share now and at best, and what `target`
  // (a share of the peak, such as 0.8) needs. Where scopes ran on several threads at once (beam
  // search's groups), products_ms sums the threads' times, and the text gives no bound.
  Bound bound(int64_t steps, double peak_gflops) const;
  std::string bound_text(int64_t steps, double peak_gflops, double target = 0.8) const;

 private:
  bool running_ = true;
  std::chrono::steady_clock::time_point start_, stop_;
};

}  // namespace loom::profiler

namespace loom::autograd {
// PyTorch spells it torch.autograd.profiler: loom::autograd::profiler::Profile is the same class.
namespace profiler = ::loom::profiler;
}  // namespace loom::autograd
