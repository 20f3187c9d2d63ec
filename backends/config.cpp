#include "backends/config.h"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <sstream>

#include "backends/backend.h"
#include "backends/gemm/tiled_gemm.h"

// From CMake (CMakeLists.txt, this file's properties): LOOM_VERSION, LOOM_BUILD_TYPE,
// LOOM_NATIVE_ARCH ("" without -march=native), LOOM_WITH_MPI.

// jemalloc's control interface, declared weak: its address is null in a process without
// jemalloc.
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen)
    __attribute__((weak));

namespace loom {
namespace {

std::string compiler() {
#if defined(__clang__)
  return "Clang " __clang_version__;
#elif defined(__GNUC__)
  return "GCC " __VERSION__;
#else
  return "an unknown compiler";
#endif
}

std::string build_type() {
  std::string type = LOOM_BUILD_TYPE;
#if defined(__SANITIZE_ADDRESS__)
  type += " with sanitizers";
#endif
  return type;
}

std::string instruction_set() {
  const std::string arch = LOOM_NATIVE_ARCH;
  return arch.empty() ? "default -march" : "-march=native (" + arch + ")";
}

// The widest vectors this file, compiled with the library's flags, may use.
std::string vectors() {
#if defined(__AVX512F__)
  return "AVX-512";
#elif defined(__AVX2__) && defined(__FMA__)
  return "AVX2+FMA";
#elif defined(__AVX__)
  return "AVX";
#elif defined(__x86_64__)
  return "SSE2";
#elif defined(__aarch64__)
  return "NEON";
#else
  return "scalar";
#endif
}

// The process's malloc: jemalloc where the program links it (CMakeLists.txt, LOOM_JEMALLOC) or
// preloads it, which then also answers mallctl, else the C library's.
std::string malloc_name() {
  const char* version = nullptr;
  size_t size = sizeof version;
  if (mallctl != nullptr && mallctl("version", &version, &size, nullptr, 0) == 0)
    return std::string("jemalloc ") + version;
  return "the C library's";
}

// "OpenBLAS 0.3.21": the first two words of its configuration line.
std::string blas_version() {
  std::istringstream config(openblas_get_config());
  std::string name, version;
  config >> name >> version;
  return name + " " + version;
}

// Which kernel multiplies float32 matrices on the CPU: backends/gemm/gemm.cpp's choice for a
// product of at least two rows and two columns.
std::string products() {
  if (cpu::use_tiled_gemm(2, 2))
    return fmt::format("loom's register tiles, {}-float vectors (backends/gemm/tiled_gemm.h); "
                       "one-row and one-column products by BLAS",
                       cpu::kTileLanes);
  return "BLAS (loom's register tiles take them only with 16-float vectors)";
}

}  // namespace

std::string numerics_config() {
  return fmt::format("{}, {}, {}, {}, {} {}", compiler(), build_type(), instruction_set(),
                     vectors(), blas_version(), openblas_get_corename());
}

std::string show_config() {
#if defined(LOOM_WITH_CUDA)
  const std::string cuda =
      std::string("built in; ") + (cuda_available() ? "a device is available" : "no device");
#else
  const std::string cuda = "not built in";
#endif
  return fmt::format(
      "loom {}\n"
      "  - C++ compiler: {}\n"
      "  - build: {}, {}, {} vectors\n"
      "  - BLAS: {} ({} kernels, {} threads)\n"
      "  - float32 products: {}\n"
      "  - OpenMP: {} threads\n"
      "  - malloc: {}\n"
      "  - CUDA: {}\n"
      "  - MPI: {}\n"
      "  - numerics: {}\n",
      LOOM_VERSION, compiler(), build_type(), instruction_set(), vectors(), openblas_get_config(),
      openblas_get_corename(), openblas_get_num_threads(), products(), omp_get_max_threads(),
      malloc_name(), cuda,
      LOOM_WITH_MPI ? "built in" : "not built in", numerics_config());
}

}  // namespace loom
