// The process-wide CPU kernel table.
#include "backends/cpu/cpu_backend.h"

namespace loom {

Backend& cpu_backend() {
  static CpuBackend instance;
  return instance;
}

}  // namespace loom
