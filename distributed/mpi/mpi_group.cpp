// The MPI process group (OpenMPI from Debian, libopenmpi-dev): CPU tensors, non-blocking
// collectives (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather), so that nn::DistributedDataParallel
// can reduce one bucket of gradients while backward computes the next.
//
// Waiting is a polling loop (MPI_Test) rather than MPI_Wait, for one reason: a rank that has
// ended will never join the collective, and MPI alone would wait for it forever. Every rank
// that ends (finalize(), run at exit) first sends an "ending" notice to every peer on a
// communicator of its own; a rank waiting in a collective that sees such a notice, and whose
// collective still does not complete within a grace period, aborts the whole job.
//
// A rank killed by a signal sends no notice. A rank of the same machine waiting for it sees that
// its process (their ids are gathered at init) is gone, and aborts the job naming it. Or the
// launcher sees it die first and ends the job: mpirun (OpenMPI) sends the others SIGTERM, then
// SIGKILL, and a SIGTERM handler makes each of them say first where it was (step, collective)
// and which ranks of its machine are gone, then end as SIGTERM would have ended it.
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <limits>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "autograd/node.h"
#include "core/error.h"
#include "distributed/internal.h"

namespace loom::distributed::detail::mpi {

namespace {

constexpr int kEndingTag = 7;  // the "this rank is ending" notice on g_notices
// How long a legitimate collective may still take to complete after a peer has ended: the
// ended peer keeps driving MPI while it waits for the others' notices, so this is generous.
constexpr double kGraceSeconds = 2.0;

MPI_Comm g_world = MPI_COMM_NULL;    // collectives (a duplicate of MPI_COMM_WORLD)
MPI_Comm g_notices = MPI_COMM_NULL;  // the ending notices, apart from every collective
int g_rank = 0, g_size = 1;
bool g_owns_mpi = false;  // MPI_Init was ours (the program may have called it itself)

// The other ranks of this machine and their process ids (set at init, read by the handler).
struct LocalPeer {
  int rank;
  pid_t pid;
};
std::vector<LocalPeer> g_local_peers;
std::atomic<const char*> g_waiting_in{nullptr};  // the collective this rank waits in, if any

void check_mpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(fmt::format("distributed: {} failed on rank {}: {}", what, g_rank,
                          std::string(text, static_cast<size_t>(length))));
}

MPI_Datatype mpi_type(DType dtype) { return dtype == DType::Float32 ? MPI_FLOAT : MPI_INT64_T; }

int mpi_count(const Tensor& t, const char* op) {
  LOOM_CHECK(t.numel() <= std::numeric_limits<int>::max(),
             "{}: {} elements are more than MPI's int count allows", op, t.numel());
  return static_cast<int>(t.numel());
}

// Spins briefly (a collective of small tensors completes in microseconds), then sleeps between
// polls so that a waiting rank leaves the core to the computing ones.
class Backoff {
 public:
  void pause() {
    if (++polls_ > 200) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

 private:
  int polls_ = 0;
};

// Waits for `request`, watching for peers that end meanwhile.
void wait_request(MPI_Request& request, const char* op) {
  Backoff backoff;
  g_waiting_in = op;
  for (;;) {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), op);
    if (done) break;
    watch_peers(op);
    backoff.pause();
  }
  g_waiting_in = nullptr;
}

// " at step N" when the rank has one (distributed::set_step), else "".
std::string at_step() {
  const int64_t step = current_step();
  return step > 0 ? fmt::format(" at step {}", step) : "";
}

// Text for a signal handler, which may not allocate or use stdio: a fixed buffer and write(2).
class SignalText {
 public:
  SignalText& operator<<(const char* text) {
    while (*text != '\0' && size_ < sizeof(buffer_)) buffer_[size_++] = *text++;
    return *this;
  }
  SignalText& operator<<(long long value) {
    char digits[24];
    int count = 0;
    unsigned long long magnitude = value < 0 ? 0ULL - static_cast<unsigned long long>(value)
                                             : static_cast<unsigned long long>(value);
    do {
      digits[count++] = static_cast<char>('0' + magnitude % 10);
      magnitude /= 10;
    } while (magnitude > 0);
    if (value < 0) *this << "-";
    while (count > 0 && size_ < sizeof(buffer_)) buffer_[size_++] = digits[--count];
    return *this;
  }
  void write_to_stderr() const { (void)!::write(STDERR_FILENO, buffer_, size_); }

 private:
  char buffer_[1024];
  size_t size_ = 0;
};

// SIGTERM: the launcher ends the job (a rank died or failed, or the job was cancelled). Says
// so, then ends as SIGTERM would have (SA_RESETHAND restored the default action).
void on_sigterm(int signal_number) {
  const int saved_errno = errno;
  SignalText text;
  text << "loom.distributed: rank " << g_rank << " of " << g_size
       << ": ended by SIGTERM (the launcher ends the job: a rank failed or the job was cancelled)";
  if (const int64_t step = current_step(); step > 0) text << " at step " << step;
  if (const char* op = g_waiting_in.load()) text << ", waiting in " << op;
  bool gone = false;
  for (const LocalPeer& peer : g_local_peers) {
    if (::kill(peer.pid, 0) == 0 || errno != ESRCH) continue;  // still there
    text << (gone ? ", " : "; already gone from this machine: ") << "rank " << peer.rank << " (pid "
         << static_cast<long long>(peer.pid) << ")";
    gone = true;
  }
  if (!gone) text << "; no other rank of this machine is gone";
  text << "\n";
  text.write_to_stderr();
  errno = saved_errno;
  ::raise(signal_number);
}

// The process ids of the other ranks of this machine (`node`: its ranks' communicator), so that
// the SIGTERM message can say which of them are gone; then the handler.
void watch_for_sigterm(MPI_Comm node) {
  int leader = g_rank;  // the lowest rank of a machine names it
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, node), "MPI_Allreduce");
  const long long mine[2] = {leader, static_cast<long long>(::getpid())};
  std::vector<long long> all(2 * static_cast<size_t>(g_size));
  check_mpi(MPI_Allgather(mine, 2, MPI_LONG_LONG, all.data(), 2, MPI_LONG_LONG, g_world),
            "MPI_Allgather");
  for (int r = 0; r < g_size; ++r)
    if (r != g_rank && all[2 * static_cast<size_t>(r)] == leader)
      g_local_peers.push_back({r, static_cast<pid_t>(all[2 * static_cast<size_t>(r) + 1])});
  struct sigaction action {};
  action.sa_handler = on_sigterm;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;  // the re-raised signal takes the default action
  sigaction(SIGTERM, &action, nullptr);
}

// A rank of this machine whose process is gone sent no notice (a rank that ends normally stays
// until every peer has sent its own, finalize()): it was killed by a signal or crashed, and it
// will never join `op`. Aborts at once, naming it; checked every 100 ms of waiting. (Under
// mpirun its launcher may be first: then the SIGTERM message above names it.)
void watch_local_peers(const char* op) {
  static std::chrono::steady_clock::time_point checked{};
  const auto now = std::chrono::steady_clock::now();
  if (now - checked < std::chrono::milliseconds(100)) return;
  checked = now;
  for (const LocalPeer& peer : g_local_peers)
    if (::kill(peer.pid, 0) != 0 && errno == ESRCH)
      abort(fmt::format("rank {} (pid {}, on this machine) is gone without a word (killed by a "
                        "signal?) while rank {} waits for it in {}{}; aborting the job",
                        peer.rank, peer.pid, g_rank, op, at_step()),
            1);
}

// A collective in flight. It keeps its tensors alive and, for a mean, divides by the number
// of ranks once the sum has arrived.
class MpiWork final : public Work {
 public:
  MpiWork(const char* op, Tensor result, Tensor input, bool mean)
      : op_(op), result_(std::move(result)), input_(std::move(input)), mean_(mean) {}
  MPI_Request* request() { return &request_; }

  bool is_completed() override {
    if (!done_) {
      int flag = 0;
      check_mpi(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), op_);
      if (flag) finish();
    }
    return done_;
  }
  void wait() override {
    if (done_) return;
    wait_request(request_, op_);
    finish();
  }

 private:
  void finish() {
    done_ = true;
    NoGradGuard no_grad;
    if (mean_) result_.mul_(1.0f / static_cast<float>(g_size));  // bumps the version
    else result_.impl()->bump_version();  // MPI changed the data behind autograd's back
    input_ = Tensor();
  }
  const char* op_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  Tensor result_, input_;
  bool mean_;
  bool done_ = false;
};

class MpiGroup final : public ProcessGroup {
 public:
  std::string backend_name() const override { return "mpi"; }
  int rank() const override { return g_rank; }
  int size() const override { return g_size; }
  Device device() const override { return Device::CPU; }

  void barrier() override {
    MPI_Request request;
    check_mpi(MPI_Ibarrier(g_world, &request), "barrier");
    wait_request(request, "barrier");
  }

 protected:
  std::shared_ptr<Work> all_reduce_impl(Tensor& tensor, ReduceOp op) override {
    auto work = std::make_shared<MpiWork>("all_reduce", tensor, Tensor(), op == ReduceOp::Mean);
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, tensor.raw_data(), mpi_count(tensor, "all_reduce"),
                             mpi_type(tensor.dtype()), MPI_SUM, g_world, work->request()),
              "MPI_Iallreduce");
    return work;
  }
  std::shared_ptr<Work> broadcast_impl(Tensor& tensor, int root) override {
    auto work = std::make_shared<MpiWork>("broadcast", tensor, Tensor(), false);
    check_mpi(MPI_Ibcast(tensor.raw_data(), mpi_count(tensor, "broadcast"),
                         mpi_type(tensor.dtype()), root, g_world, work->request()),
              "MPI_Ibcast");
    return work;
  }
  std::shared_ptr<Work> all_gather_impl(Tensor& out, const Tensor& input) override {
    auto work = std::make_shared<MpiWork>("all_gather", out, input, false);
    const int count = mpi_count(input, "all_gather");
    mpi_count(out, "all_gather");
    check_mpi(MPI_Iallgather(input.raw_data(), count, mpi_type(input.dtype()), out.raw_data(),
                             count, mpi_type(out.dtype()), g_world, work->request()),
              "MPI_Iallgather");
    return work;
  }
};

// An exception nobody caught: say which rank and what, then end every rank (the default
// handler would end this process only, and the others would wait for it forever).
[[noreturn]] void on_terminate() {
  std::string what = "unknown exception";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
  } else {
    what = "std::terminate called without an exception";
  }
  abort(fmt::format("uncaught exception: {}", what), 1);
}

}  // namespace

LaunchInfo init() {
  int provided = 0, already = 0;
  MPI_Initialized(&already);
  // FUNNELED: only the main thread calls MPI (OpenMP's workers never do).
  if (!already)
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init");
  g_owns_mpi = !already;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &g_world), "MPI_Comm_dup");
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &g_notices), "MPI_Comm_dup");
  MPI_Comm_rank(g_world, &g_rank);
  MPI_Comm_size(g_world, &g_size);
  // The local rank: this process's rank among those sharing its memory (its machine).
  MPI_Comm node;
  check_mpi(MPI_Comm_split_type(g_world, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
  int local = 0;
  MPI_Comm_rank(node, &local);
  watch_for_sigterm(node);
  MPI_Comm_free(&node);
  std::set_terminate(on_terminate);
  return {g_rank, g_size, local, "MPI"};
}

std::shared_ptr<ProcessGroup> world_group() { return std::make_shared<MpiGroup>(); }

void watch_peers(const char* op) {
  watch_local_peers(op);
  static std::chrono::steady_clock::time_point noticed{};
  static int ended = -1;
  if (ended < 0) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kEndingTag, g_notices, &flag, &status);
    if (!flag) return;
    ended = status.MPI_SOURCE;
    noticed = std::chrono::steady_clock::now();
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - noticed).count();
  if (waited > kGraceSeconds)
    abort(fmt::format("rank {} has ended while rank {} waits for it in {}{}; aborting the job",
                      ended, g_rank, op, at_step()),
          1);
}

void finalize() {
  if (g_world == MPI_COMM_NULL) return;
  // Tell every peer, then wait until every peer has said the same.
  int none = 0;
  std::vector<int> inbox(static_cast<size_t>(g_size));
  std::vector<MPI_Request> requests;
  for (int peer = 0; peer < g_size; ++peer) {
    if (peer == g_rank) continue;
    requests.emplace_back();
    MPI_Isend(&none, 1, MPI_INT, peer, kEndingTag, g_notices, &requests.back());
    requests.emplace_back();
    MPI_Irecv(&inbox[static_cast<size_t>(peer)], 1, MPI_INT, peer, kEndingTag, g_notices,
              &requests.back());
  }
  Backoff backoff;
  for (int done = 0; !done; backoff.pause())
    MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
  MPI_Comm_free(&g_world);
  MPI_Comm_free(&g_notices);
  if (g_owns_mpi) MPI_Finalize();
}

[[noreturn]] void abort(const std::string& message, int exit_code) {
  std::signal(SIGTERM, SIG_DFL);  // the SIGTERM that follows needs no message: this is it
  std::fprintf(stderr, "loom.distributed: rank %d of %d: %s\n", g_rank, g_size, message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this is for the compiler
}

}  // namespace loom::distributed::detail::mpi
