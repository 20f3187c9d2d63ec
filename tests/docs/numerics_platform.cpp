// Prints, on one line, what decides the exact digits loom's CPU programs print: the compiler, the
// build type, the instruction set the library is compiled for, and the BLAS with the kernels it
// runs now. Two builds that print the same line round every sum the same way, so a learn
// program prints the same numbers on both, to the last digit; on another line the numbers after
// a few hundred training steps differ (each chapter's claims still hold: its learn test checks
// them). docs/learn/README.md names the line the chapters' outputs and pictures were printed on;
// check_docs and pictures_identical.sh compare those exactly only on a build that prints it.
//
// Built with the library's own flags (loom_flags), so the macros below describe the library's
// code. The build type and the CPU that -march=native resolved to come from CMake
// (tests/CMakeLists.txt).
#include <cblas.h>

#include <cstdio>
#include <sstream>
#include <string>

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

// The widest vectors the library's loops may use.
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

std::string instruction_set() {
  const std::string arch = LOOM_NATIVE_ARCH;  // "" without -march=native
  return (arch.empty() ? std::string("default -march") : "-march=native (" + arch + ")") + ", " +
         vectors();
}

// "OpenBLAS 0.3.21 Haswell": its version and the kernels it runs (its own choice for this CPU,
// or OPENBLAS_CORETYPE's).
std::string blas() {
  std::istringstream config(openblas_get_config());  // "OpenBLAS 0.3.21 NO_LAPACKE ..."
  std::string name, version;
  config >> name >> version;
  return name + " " + version + " " + openblas_get_corename();
}

}  // namespace

int main() {
  std::string build = LOOM_BUILD_TYPE;
#if defined(__SANITIZE_ADDRESS__)
  build += " with sanitizers";
#endif
  std::printf("%s, %s, %s, %s\n", compiler().c_str(), build.c_str(), instruction_set().c_str(),
              blas().c_str());
}
