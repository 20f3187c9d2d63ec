// A job whose rank 1 fails while rank 0 waits for it in an all-reduce: the whole job must end
// with a non-zero status and a message naming the failure, instead of hanging.
//   throwing_rank uncaught   rank 1's exception reaches std::terminate (MPI_Abort at once)
//   throwing_rank caught     rank 1's main catches it and returns 1, as the trainers do (its
//                            peers notice it ended and abort the job)
//   throwing_rank killed     rank 1 is killed by SIGKILL at step 3 (kill -9, the OOM killer):
//                            it says nothing; mpirun ends the job and rank 0 says where it was
#include <signal.h>

#include <cstdio>
#include <string>

#include "loom.h"

using namespace loom;

namespace {
void work(bool fail, bool killed = false) {
  Tensor t = ones({1000});
  for (int step = 1; step < 1000000; ++step) {
    distributed::set_step(step);  // as nn::TrainingRun does: named in the failure messages
    if (fail && step == 3 && killed) ::raise(SIGKILL);
    if (fail && step == 3) throw Error("throwing_rank: rank 1 fails on purpose at step 3");
    distributed::all_reduce(t, distributed::ReduceOp::Mean);
  }
}
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "uncaught";
  distributed::init();
  const bool fail = distributed::rank() == 1;
  if (mode == "uncaught" || mode == "killed") {
    work(fail, mode == "killed");
    return 0;
  }
  try {
    work(fail);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
