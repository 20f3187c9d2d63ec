// What distributed.cpp needs from the backends it was built with (not a public header).
// distributed/mpi/ is compiled when MPI is found (LOOM_WITH_MPI), distributed/nccl/ when CUDA
// and NCCL are (LOOM_WITH_NCCL).
#pragma once

#include <memory>
#include <string>

#include "distributed/distributed.h"

namespace loom::distributed::detail {

namespace mpi {
// MPI_Init, the exit notices' communicator and the terminate handler; rank, size and local
// rank as MPI numbers them.
LaunchInfo init();
std::shared_ptr<ProcessGroup> world_group();
// Tells every peer this rank is ending, waits for theirs, then MPI_Finalize.
void finalize();
[[noreturn]] void abort(const std::string& message, int exit_code);
// Called while waiting for a collective: aborts the job when a peer has ended meanwhile (it
// will never join), naming the peer and `op`.
void watch_peers(const char* op);
}  // namespace mpi

// The NCCL group of this job's ranks, its unique id broadcast from rank 0 through `bootstrap`.
std::shared_ptr<ProcessGroup> make_nccl_group(ProcessGroup& bootstrap);

// mpi::watch_peers when loom has MPI and the job uses it, else nothing.
void watch_peers(const char* op);

}  // namespace loom::distributed::detail
