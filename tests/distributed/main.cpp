// The distributed suite's main: joins the job first (ctest runs it under
// `mpirun -np 2` and as a single process), then runs the same test cases on every rank, in the
// same order, so that their collectives meet. Test cases use CHECK, never REQUIRE, around
// collectives: a rank leaving a case early would leave its peers waiting.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "distributed/distributed.h"

int main(int argc, char** argv) {
  loom::distributed::init();
  doctest::Context context(argc, argv);
  const int failures = context.run();
  loom::distributed::barrier();
  return failures == 0 ? 0 : 1;
}
