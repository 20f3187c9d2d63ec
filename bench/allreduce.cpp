// All-reduce bandwidth of loom's process group, as nccl-tests' all_reduce_perf and the OSU
// micro-benchmarks' osu_allreduce report it:
//
//   mpirun -np 2 build/bench/allreduce                   float32 sum, 1 to 100 MB, CPU (MPI)
//   mpirun -np 2 build/bench/allreduce --device cuda     the same through NCCL, one GPU a process
//
// For each buffer size, in place, median of --steps calls after 3 warm-ups (ReduceOp::Mean of a
// buffer of ones, so the result stays ones, which is checked):
//   blocking      distributed::all_reduce (ProcessGroup::all_reduce(...)->wait());
//   polled        the call DDP makes: launched asynchronously, then driven with is_completed()
//                 until done (MPI's non-blocking collectives progress only inside MPI calls);
//   algbw         bytes / time;
//   busbw         algbw x 2(p-1)/p, the bytes each process's link carries in a ring all-reduce,
//                 comparable across process counts (nccl-tests' definition).
// Rank 0 prints one JSON line per size. Without mpirun it is a job of one, where every
// collective is the identity, and says so.
#include <fmt/format.h>

#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "examples/cli.h"
#include "loom.h"

using namespace loom;

int main(int argc, char** argv) {
  cli::use_short_omp_spin(argv);
  std::string sizes_text = "1,4,16,25,64,100", device = "cpu";
  int steps = 10;
  CLI::App app{"allreduce: all-reduce bandwidth of loom's process group, 1 to 100 MB"};
  cli::show_defaults(app);
  app.add_option("--sizes", sizes_text, "buffer sizes in MB (10^6 bytes), comma-separated");
  app.add_option("--steps", steps, "timed calls per size (after 3 warm-ups)")
      ->check(cli::positive);
  cli::add_device(app, device);
  CLI11_PARSE(app, argc, argv);
  try {
    std::vector<double> sizes_mb;
    std::stringstream list(sizes_text);
    for (std::string item; std::getline(list, item, ',');) {
      char* end = nullptr;
      const double mb = std::strtod(item.c_str(), &end);
      LOOM_CHECK(!item.empty() && *end == '\0' && mb > 0 && mb <= 4096,
                 "--sizes needs MB values in (0, 4096], got '{}'", item);
      sizes_mb.push_back(mb);
    }
    distributed::init();
    const int p = distributed::world_size();
    const Device dev = cli::device_of(device);
    distributed::ProcessGroup& group = distributed::group(dev);
    if (p == 1)
      fmt::print(stderr,
                 "allreduce: a job of one process (every collective is the identity); run it "
                 "under mpirun -np 2 or more\n");
    for (const double mb : sizes_mb) {
      const auto n = static_cast<int64_t>(mb * 1e6 / 4);
      Tensor buffer = ones({n}).to(dev);
      const bench::Timing blocking = bench::time_steps(
          [&] { group.all_reduce(buffer, distributed::ReduceOp::Mean)->wait(); }, steps);
      const bench::Timing polled = bench::time_steps(
          [&] {
            const auto work = group.all_reduce(buffer, distributed::ReduceOp::Mean);
            while (!work->is_completed()) {
            }
          },
          steps);
      const Tensor wrong = ne(buffer.cpu(), ones({n})).sum();
      LOOM_CHECK(wrong.item() == 0, "the mean of ones came back with {} elements not 1 ({} MB)",
                 wrong.item(), mb);
      const double bytes = static_cast<double>(n) * 4, bus = p > 1 ? 2.0 * (p - 1) / p : 1.0;
      if (!distributed::is_main_process()) continue;
      bench::JsonLine("allreduce")
          .add("backend", group.backend_name())
          .add("processes", p)
          .add("mb", mb)
          .add("ms_blocking", blocking.median_s * 1e3, 3)
          .add("ms_blocking_min", blocking.min_s * 1e3, 3)
          .add("algbw_gbs", bytes / blocking.median_s / 1e9, 3)
          .add("busbw_gbs", bytes / blocking.median_s / 1e9 * bus, 3)
          .add("ms_polled", polled.median_s * 1e3, 3)
          .add("polled_busbw_gbs", bytes / polled.median_s / 1e9 * bus, 3)
          .add("steps", steps)
          .print();
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "allreduce: {}\n", e.what());
    return 1;
  }
  return 0;
}
