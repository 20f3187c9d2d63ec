// The profiler's tallies: one map from (name, detail, pass) to calls, seconds and FLOPs, shared
// by every thread under a mutex (only touched while a Profile runs), and its reading as rows
// and as a table.
#include "core/profiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "core/error.h"

namespace loom::profiler {

namespace {

struct Tally {
  int64_t calls = 0;
  double seconds = 0, flops = 0;
  void add(int64_t more_calls, double more_seconds, double more_flops) {
    calls += more_calls;
    seconds += more_seconds;
    flops += more_flops;
  }
};

// A row's key as scopes record it: the static strings' addresses, compared as pointers (their
// text is read only when the rows are made).
using Key = std::tuple<const char*, const char*, Pass>;

struct Tallies {
  std::mutex mutex;
  std::map<Key, Tally> rows;
  std::map<std::pair<ProductShape, Pass>, Tally> products;  // the products again, by shape
  std::set<std::string, std::less<>> names;  // RecordFunction's names, kept for the rows' keys
  bool profiling = false;                    // a Profile exists
  // The union of the timed scopes' intervals over all threads: how many are open now, since
  // when at least one has been, and the seconds covered before that.
  int open = 0;
  std::chrono::steady_clock::time_point open_since;
  double covered = 0;
};

Tallies& tallies() {
  static Tallies t;
  return t;
}

// The op a scope's name stands for: a std::source_location function name such as
// "void loom::Backend::softmax(const loom::Tensor&, ...)" gives "softmax"; a plain name is
// itself.
std::string op_name(const char* name, const char* detail) {
  std::string_view s(name);
  if (const size_t paren = s.find('('); paren != std::string_view::npos) {
    size_t begin = paren;
    while (begin > 0 && (std::isalnum(static_cast<unsigned char>(s[begin - 1])) ||
                         s[begin - 1] == '_'))
      --begin;
    s = s.substr(begin, paren - begin);
  }
  return detail ? fmt::format("{} {}", s, detail) : std::string(s);
}

// Rows (Row or ProductRow) sorted longest total time first.
template <class R>
std::vector<R> longest_first(std::vector<R> rows) {
  std::stable_sort(rows.begin(), rows.end(),
                   [](const R& a, const R& b) { return a.seconds > b.seconds; });
  return rows;
}

// The columns every profile table shares: the header, and one row per step of `steps` with its
// share of the wall time and, when it did any, its GFLOP/s.
std::string table_header(std::string_view first) {
  return fmt::format("{:<28} {:<9} {:>10} {:>10} {:>7} {:>9}\n", first, "pass", "calls/step",
                     "ms/step", "share", "GFLOP/s");
}
template <class R>
std::string table_line(const std::string& name, const R& row, double steps, double wall) {
  const std::string rate = row.flops > 0 && row.seconds > 0
                               ? fmt::format("{:.1f}", row.flops / row.seconds / 1e9)
                               : std::string();
  return fmt::format("{:<28} {:<9} {:>10.1f} {:>10.3f} {:>6.1f}% {:>9}\n", name,
                     pass_name(row.pass), static_cast<double>(row.calls) / steps,
                     row.seconds * 1e3 / steps, wall > 0 ? 100.0 * row.seconds / wall : 0.0,
                     rate);
}

}  // namespace

const char* pass_name(Pass pass) {
  switch (pass) {
    case Pass::Forward: return "forward";
    case Pass::Backward: return "backward";
    case Pass::Optimizer: return "optimizer";
  }
  return "?";
}

std::chrono::steady_clock::time_point Scope::opened() {
  Tallies& t = tallies();
  std::lock_guard lock(t.mutex);
  const auto now = std::chrono::steady_clock::now();
  if (t.open++ == 0) t.open_since = now;
  return now;
}

void Scope::finish() {
  const auto end = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(end - start_).count();
  Tallies& t = tallies();
  std::lock_guard lock(t.mutex);
  t.rows[{name_, detail_, detail::t_state.pass}].add(1, seconds, flops_);
  if (shape_.batch > 0) t.products[{shape_, detail::t_state.pass}].add(1, seconds, flops_);
  if (t.open > 0 && --t.open == 0)
    t.covered += std::chrono::duration<double>(end - t.open_since).count();
}

std::string ProductShape::str() const {
  const std::string mnk = fmt::format("{}x{}x{} {}{}", m, n, k, trans_a ? 'T' : 'N',
                                      trans_b ? 'T' : 'N');
  return batch > 1 ? fmt::format("{} x {}", batch, mnk) : mnk;
}

namespace {
// A RecordFunction's name as a string that lives as long as the tallies (their keys are
// pointers); "" while the profiler is off, when the scope records nothing.
const char* kept_name(std::string_view name) {
  if (!enabled()) return "";
  Tallies& t = tallies();
  std::lock_guard lock(t.mutex);
  return t.names.emplace(name).first->c_str();
}
}  // namespace

RecordFunction::RecordFunction(std::string_view name) : scope_(kept_name(name)) {}

Profile::Profile() : start_(std::chrono::steady_clock::now()) {
  Tallies& t = tallies();
  std::lock_guard lock(t.mutex);
  LOOM_CHECK(!t.profiling, "profiler::Profile: a profile is already running (one at a time)");
  t.profiling = true;
  t.rows.clear();
  t.products.clear();
  t.covered = 0;
  t.open_since = start_;  // a scope still open from before counts from here
  detail::g_enabled.store(true, std::memory_order_relaxed);
}

Profile::~Profile() {
  stop();
  Tallies& t = tallies();
  std::lock_guard lock(t.mutex);
  t.profiling = false;
}

void Profile::stop() {
  if (!running_) return;
  detail::g_enabled.store(false, std::memory_order_relaxed);
  stop_ = std::chrono::steady_clock::now();
  running_ = false;
}

std::vector<Row> Profile::key_averages() const {
  // Rows with the same op name and pass (two call sites of one method) are merged.
  std::map<std::pair<std::string, Pass>, Row> merged;
  {
    Tallies& t = tallies();
    std::lock_guard lock(t.mutex);
    for (const auto& [key, tally] : t.rows) {
      const auto& [name, detail, pass] = key;
      Row& row = merged[{op_name(name, detail), pass}];
      row.calls += tally.calls;
      row.seconds += tally.seconds;
      row.flops += tally.flops;
    }
  }
  std::vector<Row> rows;
  for (auto& [key, row] : merged) {
    row.name = key.first;
    row.pass = key.second;
    rows.push_back(std::move(row));
  }
  return longest_first(std::move(rows));
}

double Profile::wall_seconds() const {
  const auto end = running_ ? std::chrono::steady_clock::now() : stop_;
  return std::chrono::duration<double>(end - start_).count();
}

double Profile::covered_seconds() const {
  const auto end = running_ ? std::chrono::steady_clock::now() : stop_;
  Tallies& t = tallies();
  std::lock_guard lock(t.mutex);
  double covered = t.covered;  // and the part of an interval still open
  if (t.open > 0 && end > t.open_since)
    covered += std::chrono::duration<double>(end - t.open_since).count();
  return covered;
}

double Profile::other_seconds() const { return std::max(0.0, wall_seconds() - covered_seconds()); }

namespace {

// Whether scopes were open on several threads at once: the rows' times, summed over the threads,
// exceed the time some scope was open. (A percent of slack: one thread's rows and its covered
// time differ only by rounding.)
bool overlapping(double in_rows, double covered) { return in_rows > 1.01 * covered; }

}  // namespace

std::string Profile::table(int64_t steps) const {
  LOOM_CHECK(steps > 0, "profiler::Profile::table: steps must be positive, got {}", steps);
  const auto per_step = static_cast<double>(steps);
  const double wall = wall_seconds();
  const auto share = [&](double seconds) { return wall > 0 ? 100.0 * seconds / wall : 0.0; };
  std::string out = table_header("op");
  double flops = 0, product_seconds = 0;  // the products' (the rows that count FLOPs)
  double in_rows = 0;
  for (const Row& row : key_averages()) {
    in_rows += row.seconds;
    flops += row.flops;
    if (row.flops > 0) product_seconds += row.seconds;
    out += table_line(row.name, row, per_step, wall);
  }
  const double covered = covered_seconds(), other = std::max(0.0, wall - covered);
  out += fmt::format("{:<28} {:<9} {:>10} {:>10.3f} {:>6.1f}%\n", "other (outside kernels)", "",
                     "", other * 1e3 / per_step, share(other));
  out += fmt::format("{:<28} {:<9} {:>10} {:>10.3f} {:>6.1f}%\n", "total", "", "",
                     wall * 1e3 / per_step, wall > 0 ? 100.0 : 0.0);
  // The products' own rate is what the step's rate would be if nothing else took time: the
  // bound on the step's share of the machine's sgemm rate that faster non-product kernels
  // could reach, with the products as they are.
  if (flops > 0)
    out += fmt::format(
        "the products' kernels did {:.4f} GFLOP per step in {:.3f} ms: {:.1f} GFLOP/s alone\n",
        flops / 1e9 / per_step, product_seconds * 1e3 / per_step,
        product_seconds > 0 ? flops / 1e9 / product_seconds : 0.0);
  if (overlapping(in_rows, covered))
    out += fmt::format(
        "the rows overlap: kernels ran on several threads at once ({:.3f} ms per step in all, "
        "{:.1f}\nthreads busy on average while any was): each row sums its threads' times, and a "
        "rate is\none thread's\n",
        in_rows * 1e3 / per_step, covered > 0 ? in_rows / covered : 0.0);
  return out;
}

std::vector<ProductRow> Profile::products() const {
  std::vector<ProductRow> rows;
  {
    Tallies& t = tallies();
    std::lock_guard lock(t.mutex);
    for (const auto& [key, tally] : t.products)
      rows.push_back({key.first, key.second, tally.calls, tally.seconds, tally.flops});
  }
  return longest_first(std::move(rows));
}

std::string Profile::products_table(int64_t steps, size_t most) const {
  LOOM_CHECK(steps > 0, "profiler::Profile::products_table: steps must be positive, got {}",
             steps);
  const double wall = wall_seconds();
  const std::vector<ProductRow> rows = products();
  std::string out = table_header("product (m x n x k, op A B)");
  for (size_t i = 0; i < std::min(most, rows.size()); ++i)
    out += table_line(rows[i].shape.str(), rows[i], static_cast<double>(steps), wall);
  if (rows.size() > most)
    out += fmt::format("({} more shapes)\n", rows.size() - most);
  return out;
}

double Bound::best_share() const {
  const double at_peak = products_at_peak_ms();
  return at_peak + rest_ms() > 0 ? at_peak / (at_peak + rest_ms()) : 0.0;
}

double Bound::rest_allowed_ms(double share) const {
  LOOM_CHECK(share > 0 && share <= 1, "profiler::Bound::rest_allowed_ms: share {} outside (0, 1]",
             share);
  return products_at_peak_ms() / share - products_at_peak_ms();
}

double Bound::products_gflops_needed(double share) const {
  const double room = rest_allowed_ms(share) - rest_ms();  // what the products may add to at_peak
  const double allowed = products_at_peak_ms() + room;  // the products' time per step
  return allowed > 0 ? gflop / allowed * 1e3 : std::numeric_limits<double>::infinity();
}

Bound Profile::bound(int64_t steps, double peak_gflops) const {
  LOOM_CHECK(steps > 0, "profiler::Profile::bound: steps must be positive, got {}", steps);
  LOOM_CHECK(peak_gflops > 0, "profiler::Profile::bound: the peak must be positive, got {} GFLOP/s",
             peak_gflops);
  const auto per_step = static_cast<double>(steps);
  Bound b{.step_ms = wall_seconds() * 1e3 / per_step, .peak_gflops = peak_gflops};
  for (const ProductRow& row : products()) {
    b.products_ms += row.seconds * 1e3 / per_step;
    b.gflop += row.flops / 1e9 / per_step;
  }
  return b;
}

std::string Profile::bound_text(int64_t steps, double peak_gflops, double target) const {
  LOOM_CHECK(target > 0 && target <= 1,
             "profiler::Profile::bound_text: target share {} outside (0, 1]", target);
  const Bound b = bound(steps, peak_gflops);
  if (b.gflop <= 0) return "no products ran: no bound against the peak\n";
  double in_rows = 0;
  for (const Row& row : key_averages()) in_rows += row.seconds;
  if (overlapping(in_rows, covered_seconds()))  // the products' time is not the step's
    return "kernels ran on several threads at once, and the products' time sums the threads': "
           "no bound\nagainst the peak\n";
  std::string out = fmt::format(
      "against the peak of {:.1f} GFLOP/s: the products take {:.3f} ms per step at {:.1f} "
      "GFLOP/s,\n{:.3f} ms at the peak; the rest takes {:.3f} ms (the other kernels and the "
      "time outside them)\nthe step reaches {:.0f}% of the peak; with every product at the "
      "peak and the rest as it is, {:.0f}% at best\n",
      b.peak_gflops, b.products_ms, b.products_gflops(), b.products_at_peak_ms(), b.rest_ms(),
      100 * b.share(), 100 * b.best_share());
  if (b.best_share() < target)
    return out + fmt::format("{:.0f}% needs the rest within {:.3f} ms as well\n", 100 * target,
                             b.rest_allowed_ms(target));
  const double rate = b.products_gflops_needed(target);
  return out + fmt::format("{:.0f}% needs the products at {:.1f} GFLOP/s ({:.0f}% of the peak) "
                           "with the rest as it is\n",
                           100 * target, rate, 100 * rate / b.peak_gflops);
}

}  // namespace loom::profiler
