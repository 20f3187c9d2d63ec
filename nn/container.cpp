// Sequential: forward through a pipeline; bounds-checked indexing for it and ModuleList.
#include "nn/container.h"

namespace loom::nn {

int64_t checked_index(int64_t index, int64_t size, const char* container) {
  const int64_t i = index < 0 ? index + size : index;
  LOOM_CHECK(i >= 0 && i < size, "{}: index {} out of range for {} modules", container, index,
             size);
  return i;
}

Tensor Sequential::forward(const Tensor& x) const {
  Tensor out = x;
  for (const auto& step : steps_) out = step(out);
  return out;
}

std::shared_ptr<Module> Sequential::operator[](int64_t index) const {
  return modules_[checked_index(index, size(), "Sequential")];
}

}  // namespace loom::nn
