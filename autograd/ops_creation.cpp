// Creation functions and the global random generator.
#include <cmath>
#include <cstring>

#include "autograd/internal.h"
#include "core/rng.h"

namespace loom {

Generator& default_generator() {
  static Generator generator;
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

static void check_shape(const Shape& shape, const char* op) {
  for (int64_t s : shape)
    LOOM_CHECK(s >= 0, "{}: negative dimension in shape {}", op, shape_str(shape));
}

namespace {

// A tensor of `dtype` holding a copy of values (tensor, tensor_i64).
template <class T>
Tensor from_values(const std::vector<T>& values, const Shape& shape, DType dtype, const char* op) {
  check_shape(shape, op);
  LOOM_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
             "{}: {} values do not fill shape {} ({} elements)", op, values.size(),
             shape_str(shape), shape_numel(shape));
  Tensor out = Tensor::empty(shape, dtype);
  if (!values.empty()) std::memcpy(out.raw_data(), values.data(), values.size() * sizeof(T));
  return out;
}

// A float32 tensor of numbers drawn by `draw` (Backend::rand_normal or rand_uniform) from the
// global generator's stream.
Tensor random_tensor(Shape shape, Device device, const char* op,
                     void (Backend::*draw)(Tensor&, uint64_t, uint64_t)) {
  check_shape(shape, op);
  Tensor out = Tensor::empty(shape, DType::Float32, device);
  Generator& g = default_generator();
  (backend(device).*draw)(out, g.seed(), g.reserve(out.numel()));
  return out;
}

}  // namespace

Tensor tensor(std::vector<float> values, Shape shape) {
  return from_values(values, shape, DType::Float32, "tensor");
}

Tensor tensor_i64(std::vector<int64_t> values, Shape shape) {
  return from_values(values, shape, DType::Int64, "tensor_i64");
}

Tensor full(Shape shape, float value, DType dtype, Device device) {
  check_shape(shape, "full");
  Tensor out = Tensor::empty(shape, dtype, device);
  backend(device).fill(out, value);
  return out;
}

Tensor full(Shape shape, float value, Device device) {
  return full(std::move(shape), value, DType::Float32, device);
}
Tensor zeros(Shape shape, DType dtype, Device device) {
  return full(std::move(shape), 0.0f, dtype, device);
}
Tensor ones(Shape shape, DType dtype, Device device) {
  return full(std::move(shape), 1.0f, dtype, device);
}

Tensor scalar_tensor(float value, Device device) { return full({}, value, device); }
Tensor zeros(Shape shape, Device device) { return full(std::move(shape), 0.0f, device); }
Tensor ones(Shape shape, Device device) { return full(std::move(shape), 1.0f, device); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.device()); }

Tensor randn(Shape shape, Device device) {
  return random_tensor(std::move(shape), device, "randn", &Backend::rand_normal);
}

Tensor rand(Shape shape, Device device) {
  return random_tensor(std::move(shape), device, "rand", &Backend::rand_uniform);
}

Tensor randint(int64_t low, int64_t high, Shape shape, Device device) {
  LOOM_CHECK(low < high, "randint: empty range [{}, {})", low, high);
  NoGradGuard guard;
  // floor(low + u * (high - low)), u in [0, 1) with 24 random bits: fine for ranges < 2^24.
  LOOM_CHECK(high - low <= (int64_t{1} << 24), "randint: range [{}, {}) wider than 2^24", low,
             high);
  Tensor u = rand(std::move(shape), device) * static_cast<float>(high - low);
  Tensor out = Tensor::empty(u.shape(), DType::Float32, device);
  backend(device).unary(UnaryOp::Clamp, u, out, 0.0f, static_cast<float>(high - low - 1));
  Tensor floored = Tensor::empty(u.shape(), DType::Int64, device);
  backend(device).copy(out, floored);  // float -> int64 truncates toward zero (values >= 0)
  if (low == 0) return floored;
  Tensor shifted = Tensor::empty(u.shape(), DType::Float32, device);
  backend(device).unary(UnaryOp::Affine, floored.to(DType::Float32), shifted, 1.0f,
                        static_cast<float>(low));
  return shifted.to(DType::Int64);
}

// Both are written on `device` by Backend::arange: nothing is copied from the host.
Tensor arange_f(float start, float end, float step, Device device) {
  LOOM_CHECK(step != 0.0f && (end - start) / step >= 0.0f,
             "arange_f: bad range start={} end={} step={}", start, end, step);
  const int64_t n = static_cast<int64_t>(std::ceil((end - start) / step));
  Tensor out = Tensor::empty({n}, DType::Float32, device);
  backend(device).arange(out, start, step);
  return out;
}

Tensor arange(int64_t n, Device device) {
  LOOM_CHECK(n >= 0, "arange: negative length {}", n);
  Tensor out = Tensor::empty({n}, DType::Int64, device);
  backend(device).arange(out, 0.0, 1.0);
  return out;
}

}  // namespace loom
