// The process-wide CPU kernel table.
#include "backends/cpu/cpu_backend.h"

namespace loom {

Backend& cpu_backend() {
  // Never destroyed: tensors freed during static destruction still find their allocator.
  static CpuBackend* const instance = new CpuBackend();
  return *instance;
}

}  // namespace loom
