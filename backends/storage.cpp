// Memory for tensors: a Storage is one allocation on one device's backend, freed by it when the
// last tensor viewing it goes away; Tensor::empty makes a contiguous tensor over a fresh one.
#include "backends/backend.h"
#include "core/error.h"
#include "core/tensor.h"

namespace loom {

Storage::Storage(size_t nbytes, Device dev) : bytes(nbytes), device(dev) {
  data = backend(dev).allocate(nbytes);
}

Storage::~Storage() {
  if (data) backend(device).deallocate(data, bytes);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t s : shape)
    LOOM_CHECK(s >= 0, "empty: negative dimension in shape {}", shape_str(shape));
  // shape_numel throws past the numel cap, so the byte count cannot wrap around.
  auto storage = std::make_shared<Storage>(shape_numel(shape) * element_size(dtype), device);
  return Tensor(
      std::make_shared<TensorImpl>(std::move(storage), shape, contiguous_strides(shape), 0, dtype));
}

}  // namespace loom
