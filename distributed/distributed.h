// loom::distributed: data-parallel jobs of several processes, as torch.distributed.
//
//   mpirun -np 4 build/examples/train_gpt ...          (one machine, or several with --hostfile)
//   srun -n 16 build/examples/train_gpt ...            (Slurm)
//
//   distributed::init();                               // reads the launcher's environment
//   if (distributed::rank() == 0) print(...);
//   distributed::all_reduce(grad, ReduceOp::Mean);     // in place, on every rank
//
// init() reads what the launcher set (OpenMPI's OMPI_COMM_WORLD_*, PMI_*/PMIX_RANK, Slurm's
// SLURM_*, or RANK/WORLD_SIZE/LOCAL_RANK). A process started without a launcher is a job of one
// and never touches MPI: every collective is then the identity, so a trainer written for N
// processes runs unchanged as one.
//
// The collectives choose their process group by the tensor's device: CPU tensors go through
// MPI, CUDA tensors through NCCL (one GPU per process; the NCCL communicator is created on the
// first CUDA collective, its unique id broadcast over MPI). Each call blocks until the result is
// in place; ProcessGroup (process_group.h) has the asynchronous forms.
//
// Failure: a rank that ends while the others wait in a collective (an exception caught by
// main, an exit) is noticed by them and the job is aborted with a message naming the rank and
// the step (set_step); an exception nobody catches aborts the job at once (MPI_Abort) with its
// message. A rank killed by a signal (kill -9, the OOM killer) can say nothing: a rank of its
// machine waiting for it sees its process gone and aborts the job, naming it and the step; or
// its launcher is first (mpirun: "process rank 1 ... exited on signal 9") and terminates the
// others with SIGTERM, and each of them says why first, naming its step, its collective and the
// ranks of its machine that are gone. Either way the job ends with a non-zero status instead of
// hanging (docs/failure_contract.md, "Training runs").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "distributed/process_group.h"

namespace loom::distributed {

// What the launcher told this process (read from the environment; no MPI call).
struct LaunchInfo {
  int rank = 0, world_size = 1, local_rank = 0;
  std::string source = "none";  // which variables said so: "OMPI", "PMI", "SLURM", "RANK"
};
LaunchInfo launch_info_from_env();

// Joins the job (MPI_Init when the launcher started more than one process); idempotent. Throws
// loom::Error if more than one process was launched and loom was built without MPI.
void init();
bool is_initialized();
// Leaves the job (MPI_Finalize after every rank has come here). Called at exit by itself.
void finalize();

int rank();        // 0 .. world_size() - 1 (0 before init())
int world_size();  // 1 before init()
int local_rank();  // rank among the processes of this machine
bool is_main_process();  // rank() == 0: the one that prints, evaluates and writes checkpoints

// Whether loom was built with each backend (torch.distributed.is_mpi_available()).
bool is_mpi_available();
bool is_nccl_available();

// The group that collectives on tensors of `device` go through.
ProcessGroup& group(Device device = Device::CPU);

// A new NCCL group of the job's ranks, its unique id broadcast over the CPU group. group(CUDA)
// makes one itself when the job has several processes; this is for a second communicator, and
// for testing NCCL in a job of one. Throws if loom was built without NCCL.
std::shared_ptr<ProcessGroup> new_nccl_group();

void barrier();
// In place on every rank. A non-contiguous tensor is reduced through a contiguous copy.
void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum);
void broadcast(Tensor& tensor, int root = 0);
// Every rank's `tensor`, in rank order (torch.distributed.all_gather's list).
std::vector<Tensor> all_gather(const Tensor& tensor);

// Ends the whole job now with `message` on stderr (MPI_Abort); a job of one just exits.
[[noreturn]] void abort(const std::string& message, int exit_code = 1);

// The training step this rank is on (1-based; 0 = none), named by the messages of a failing
// job (set by nn::TrainingRun at every step).
void set_step(int64_t step);
int64_t current_step();

}  // namespace loom::distributed
