// Maps a Device to its kernel table.
#include "backends/backend.h"
#include "core/error.h"

#ifdef LOOM_WITH_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

namespace loom {

bool cuda_available() {
#ifdef LOOM_WITH_CUDA
  static const bool available = cuda_device_available();
  return available;
#else
  return false;
#endif
}

Backend& backend(Device device) {
  if (device == Device::CPU) return cpu_backend();
#ifdef LOOM_WITH_CUDA
  LOOM_CHECK(cuda_available(), "cuda: no CUDA device is available (no GPU or no driver)");
  return cuda_backend();
#else
  LOOM_FAIL("cuda: loom was built without the CUDA backend (configure with -DLOOM_CUDA=ON)");
#endif
}

}  // namespace loom

// ---------------------------------------------------------------------------- CPU threads
#include <omp.h>

extern "C" void openblas_set_num_threads(int);

namespace loom {

// One OpenMP pool serves both our loops and OpenBLAS (Debian's OpenMP build of OpenBLAS), so
// setting the two together never oversubscribes the cores.
void set_num_threads(int n) {
  LOOM_CHECK(n >= 1, "set_num_threads: need at least 1 thread, got {}", n);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

}  // namespace loom
