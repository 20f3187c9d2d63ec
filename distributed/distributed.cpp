// init() from the launcher's environment, the world's process groups and the blocking
// collectives on top of them.
#include "distributed/distributed.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "autograd/node.h"
#include "core/error.h"
#include "distributed/internal.h"

namespace loom::distributed {

namespace {

struct World {
  bool initialized = false, uses_mpi = false;
  LaunchInfo info;
  std::shared_ptr<ProcessGroup> cpu, cuda;  // the CUDA group is created on first use
};
World& world() {
  static World w;
  return w;
}

std::optional<int> env_int(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  LOOM_CHECK(*end == '\0' && parsed >= 0 && parsed < (1L << 30),
             "distributed::init: the environment variable {}='{}' is not a rank or a size", name,
             value);
  return static_cast<int>(parsed);
}

// The first launcher whose rank and size variables are both set.
std::optional<LaunchInfo> read_launcher(const char* source, const char* rank, const char* size,
                                        const char* local_rank) {
  const auto r = env_int(rank), s = env_int(size);
  if (!r || !s) return std::nullopt;
  const auto l = local_rank ? env_int(local_rank) : std::nullopt;
  LOOM_CHECK(*s >= 1 && *r < *s, "distributed::init: {}={} is not a rank of {}={}", rank, *r,
             size, *s);
  return LaunchInfo{*r, *s, l.value_or(0), source};
}

void end_at_exit() { finalize(); }

// Read by a signal handler (mpi_group.cpp's SIGTERM message): a lock-free atomic.
std::atomic<int64_t> g_step{0};
static_assert(std::atomic<int64_t>::is_always_lock_free);

}  // namespace

LaunchInfo launch_info_from_env() {
  for (auto found : {read_launcher("OMPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                   "OMPI_COMM_WORLD_LOCAL_RANK"),
                     read_launcher("PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
                     read_launcher("SLURM", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
                     read_launcher("RANK", "RANK", "WORLD_SIZE", "LOCAL_RANK")})
    if (found) return *found;
  return LaunchInfo{};
}

bool is_mpi_available() { return LOOM_WITH_MPI != 0; }
bool is_nccl_available() { return LOOM_WITH_NCCL != 0; }

void init() {
  World& w = world();
  if (w.initialized) return;
  w.info = launch_info_from_env();
  if (w.info.world_size > 1) {
#if LOOM_WITH_MPI
    const LaunchInfo launched = w.info;
    w.info = detail::mpi::init();
    w.cpu = detail::mpi::world_group();
    w.uses_mpi = true;
    LOOM_CHECK(w.info.world_size == launched.world_size,
               "distributed::init: the environment ({}) says {} processes, but MPI sees {}: "
               "start the job with mpirun or srun",
               launched.source, launched.world_size, w.info.world_size);
#else
    throw Error(fmt::format(
        "distributed::init: the launcher ({}) started {} processes, but loom was built without "
        "MPI (install libopenmpi-dev and rebuild)",
        w.info.source, w.info.world_size));
#endif
  } else {
    w.cpu = make_local_group(Device::CPU);
  }
#if LOOM_WITH_NCCL
  // One GPU per process: the CUDA backend uses device 0, so each process of a machine sees
  // only the GPU of its local rank (unless the launcher chose already). Before any CUDA call.
  if (w.info.world_size > 1 && std::getenv("CUDA_VISIBLE_DEVICES") == nullptr)
    setenv("CUDA_VISIBLE_DEVICES", std::to_string(w.info.local_rank).c_str(), 0);
#endif
  w.initialized = true;
  std::atexit(end_at_exit);
}

bool is_initialized() { return world().initialized; }

void finalize() {
  World& w = world();
  if (!w.initialized) return;
  w.cuda.reset();  // NCCL's communicator goes before MPI
  w.cpu.reset();
#if LOOM_WITH_MPI
  if (w.uses_mpi) detail::mpi::finalize();
#endif
  w = World{};
}

int rank() { return world().info.rank; }
int world_size() { return world().info.world_size; }
int local_rank() { return world().info.local_rank; }
bool is_main_process() { return rank() == 0; }

ProcessGroup& group(Device device) {
  World& w = world();
  LOOM_CHECK(w.initialized, "distributed: call distributed::init() before any collective");
  if (device == Device::CPU) return *w.cpu;
  if (!w.cuda) {
    if (w.info.world_size == 1) {
      w.cuda = make_local_group(Device::CUDA);
    } else {
#if LOOM_WITH_NCCL
      w.cuda = detail::make_nccl_group(*w.cpu);
#else
      throw Error(fmt::format(
          "distributed: a collective on a CUDA tensor among {} processes needs NCCL, and loom "
          "was built without it",
          w.info.world_size));
#endif
    }
  }
  return *w.cuda;
}

std::shared_ptr<ProcessGroup> new_nccl_group() {
#if LOOM_WITH_NCCL
  return detail::make_nccl_group(group(Device::CPU));
#else
  throw Error("distributed::new_nccl_group: loom was built without NCCL");
#endif
}

void barrier() { group(Device::CPU).barrier(); }

namespace {
// Runs an in-place collective on `tensor`, through a contiguous copy when it is a strided view.
template <typename Collective>
void in_place(const char* op, Tensor& tensor, Collective collective) {
  LOOM_CHECK(tensor.defined(), "{}: the tensor is undefined", op);
  if (tensor.is_contiguous()) {
    collective(group(tensor.device()), tensor)->wait();
    return;
  }
  Tensor staged = tensor.contiguous();
  collective(group(tensor.device()), staged)->wait();
  NoGradGuard no_grad;
  tensor.copy_(staged);
}
}  // namespace

void all_reduce(Tensor& tensor, ReduceOp op) {
  in_place("all_reduce", tensor, [op](ProcessGroup& g, Tensor& t) { return g.all_reduce(t, op); });
}

void broadcast(Tensor& tensor, int root) {
  in_place("broadcast", tensor,
           [root](ProcessGroup& g, Tensor& t) { return g.broadcast(t, root); });
}

std::vector<Tensor> all_gather(const Tensor& tensor) {
  LOOM_CHECK(tensor.defined(), "all_gather: the tensor is undefined");
  ProcessGroup& g = group(tensor.device());
  Shape shape{g.size()};
  shape.insert(shape.end(), tensor.shape().begin(), tensor.shape().end());
  Tensor out = Tensor::empty(shape, tensor.dtype(), tensor.device());
  g.all_gather(out, tensor.contiguous())->wait();
  std::vector<Tensor> parts;
  for (int r = 0; r < g.size(); ++r) parts.push_back(out.select(0, r));
  return parts;
}

void set_step(int64_t step) { g_step.store(step, std::memory_order_relaxed); }
int64_t current_step() { return g_step.load(std::memory_order_relaxed); }

void abort(const std::string& message, int exit_code) {
#if LOOM_WITH_MPI
  if (world().uses_mpi) detail::mpi::abort(message, exit_code);
#endif
  std::fprintf(stderr, "loom.distributed: %s\n", message.c_str());
  std::exit(exit_code);
}

void detail::watch_peers(const char* op) {
#if LOOM_WITH_MPI
  if (world().uses_mpi) mpi::watch_peers(op);
#endif
  (void)op;
}

}  // namespace loom::distributed
