// What every kernel family shares: the contract's checks (backends/contract.h), the contiguous
// copies Backend makes before a row-wise kernel, and the map from a Device to its kernel table.
// Each family's public methods, its checks and its implementations are in its own folder
// (backends/<family>/, listed in backend.h).
#include "backends/backend.h"

#include "backends/contract.h"
#include "core/error.h"

#ifdef LOOM_WITH_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

namespace loom {

// ---------------------------------------------------------------------------- the contract
void Contract::on_device(const Tensor& t, const char* name) const {
  LOOM_CHECK(t.defined(), "{}: {} is an undefined tensor", op, name);
  LOOM_CHECK(t.device() == device, "{}: {} is on {}, expected {}", op, name,
             device_name(t.device()), device_name(device));
  if (t.dtype() != DType::BFloat16) return;
  LOOM_CHECK(bfloat16,
             "{}: {} (shape {}) is bfloat16, which this kernel does not take (float32 or "
             "int64); bfloat16 ops compute in float32 (see autograd/ops.h)",
             op, name, shape_str(t.shape()));
}

void Contract::dtype(const Tensor& t, DType dtype, const char* name) const {
  on_device(t, name);
  LOOM_CHECK(t.dtype() == dtype, "{}: {} has dtype {}, expected {} (shape {})", op, name,
             dtype_name(t.dtype()), dtype_name(dtype), shape_str(t.shape()));
}

void Contract::floating(const Tensor& t, const char* name) const {
  on_device(t, name);
  LOOM_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::BFloat16,
             "{}: {} has dtype {}, expected float32 or bfloat16 (shape {})", op, name,
             dtype_name(t.dtype()), shape_str(t.shape()));
}

void Contract::numel(const Tensor& t, int64_t numel, const char* name) const {
  LOOM_CHECK(t.numel() == numel, "{}: {} has shape {} ({} elements), expected {} elements", op,
             name, shape_str(t.shape()), t.numel(), numel);
}

void Contract::input(const Tensor& t, DType type, int64_t count, const char* name) const {
  dtype(t, type, name);
  numel(t, count, name);
}

void Contract::output(const Tensor& t, DType type, int64_t count, const char* name) const {
  dtype(t, type, name);
  LOOM_CHECK(t.numel() == 0 || t.is_contiguous(), "{}: {} (shape {}) must be contiguous", op,
             name, shape_str(t.shape()));
  numel(t, count, name);
}

void Contract::same_shape(const Tensor& t, const Tensor& out, const char* name) const {
  LOOM_CHECK(t.shape() == out.shape(), "{}: {} has shape {}, expected {} (the output's)", op,
             name, shape_str(t.shape()), shape_str(out.shape()));
}

void Contract::extents(int64_t outer, int64_t n, int64_t inner) const {
  LOOM_CHECK(outer >= 0 && n >= 0 && inner >= 0, "{}: negative extent [{},{},{}]", op, outer, n,
             inner);
}

int64_t Contract::float32_block(int64_t outer, int64_t n, int64_t inner,
                                std::initializer_list<std::pair<const Tensor&, const char*>> inputs,
                                const Tensor& out) const {
  extents(outer, n, inner);
  const int64_t count = outer * n * inner;
  for (const auto& [t, name] : inputs) input(t, DType::Float32, count, name);
  output(out, DType::Float32, count, "out");
  return count;
}

int64_t Contract::row_length(const Tensor& x, int64_t rows, const char* name) const {
  LOOM_CHECK(rows > 0 ? x.numel() % rows == 0 : x.numel() == 0,
             "{}: {} (shape {}) does not split into {} rows", op, name, shape_str(x.shape()),
             rows);
  return rows > 0 ? x.numel() / rows : 0;
}

// ---------------------------------------------------------------------------- layouts
Tensor Backend::contiguous(const Tensor& t) {
  if (!t.defined() || t.numel() == 0 || t.is_contiguous()) return t;
  Tensor c = Tensor::empty(t.shape(), t.dtype(), device_);
  copy(t, c);
  return c;
}

Tensor Backend::unit_stride_rows(const Tensor& t) {
  if (t.dim() == 2 && t.size(0) > 1 && t.stride(1) == 1 && t.stride(0) >= t.size(1)) return t;
  return contiguous(t);
}

// ---------------------------------------------------------------------------- devices
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

void Backend::begin_capture() {
  LOOM_FAIL("graph capture: {} cannot record work for replay (CUDA graphs need a CUDA device)",
            device_name(device_));
}

std::unique_ptr<DeviceGraph> Backend::end_capture() {
  LOOM_FAIL("graph capture: {} has no capture in progress", device_name(device_));
}

}  // namespace loom
