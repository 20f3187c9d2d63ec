// What this build of loom is: LibTorch's at::show_config() (Python: torch.__config__.show()),
// for a bug report or a benchmark's record, and the one line that decides the exact digits the
// CPU backend computes.
#pragma once

#include <string>

namespace loom {

// A few lines: loom's version; the compiler; the build type and the instruction set the
// library was compiled for; the BLAS with the kernels it runs now and its threads; loom's
// OpenMP threads; the process's malloc (jemalloc with its version, or the C library's);
// whether the CUDA backend and MPI were built in, and whether a GPU is there; and, last,
// numerics_config().
std::string show_config();

// One line, e.g. "GCC 12.2.0, Release, -march=native (znver3), AVX-512, OpenBLAS 0.3.21
// Haswell": the compiler, the build type (with sanitizers, if any), the CPU -march=native stood
// for (Release builds; "default -march" otherwise), the widest vectors the library's loops may
// use, and the BLAS's version and the kernels it runs (its choice for this CPU, or
// OPENBLAS_CORETYPE's). Two builds with the same line sum every float in the same order, so a
// program on one thread prints the same digits on both; the learning path's outputs were
// printed on the build docs/learn/README.md names by this line.
std::string numerics_config();

}  // namespace loom
