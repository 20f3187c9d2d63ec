// Prints this build's numerics_config() (backends/config.h): the compiler, the build type, the
// instruction set and the BLAS kernels, which decide the exact digits loom's CPU programs print.
// docs/learn/README.md names the line the chapters' outputs and pictures were printed on;
// check_docs and pictures_identical.sh compare those exactly only on a build that prints it.
#include <cstdio>

#include "loom.h"

int main() { std::printf("%s\n", loom::numerics_config().c_str()); }
