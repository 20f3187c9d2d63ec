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

// ---------------------------------------------------------------------------- sampling
// randperm sorts n random 63-bit keys (Backend::rand_bits): a uniform permutation, since ties,
// which the stable sort would break by index, have probability about n^2 / 2^64.
Tensor randperm(int64_t n, Device device) {
  LOOM_CHECK(n >= 0, "randperm: n must be non-negative, got {}", n);
  Tensor keys = Tensor::empty({n}, DType::Int64, device);
  Generator& g = default_generator();
  backend(device).rand_bits(keys, g.seed(), g.reserve(static_cast<uint64_t>(n)));
  return argsort(keys);
}

namespace {

// p's smallest and largest value (NaN propagates to the largest), read back to the host.
std::pair<float, float> value_range(const Tensor& p) {
  NoGradGuard no_grad;
  return {amin(p).item(), amax(p).item()};
}

}  // namespace

// A draw is 1 where a uniform u in [0, 1) falls below p: probability p.
Tensor bernoulli(const Tensor& p) {
  detail::check_defined(p, "bernoulli");
  LOOM_CHECK(is_floating_point(p.dtype()),
             "bernoulli: expected float32 or bfloat16 probabilities, got {} of shape {}",
             dtype_name(p.dtype()), shape_str(p.shape()));
  if (p.numel() > 0) {
    const auto [lo, hi] = value_range(p);
    LOOM_CHECK(lo >= 0.0f && hi <= 1.0f,
               "bernoulli: probabilities must lie in [0, 1], got values in [{}, {}] (shape {})",
               lo, hi, shape_str(p.shape()));
  }
  NoGradGuard no_grad;
  return lt(rand(p.shape(), p.device()), p.detach().to(DType::Float32)).to(p.dtype());
}

Tensor bernoulli(const Tensor& x, float p) {
  detail::check_defined(x, "bernoulli");
  LOOM_CHECK(p >= 0.0f && p <= 1.0f, "bernoulli: p must lie in [0, 1], got {}", p);
  NoGradGuard no_grad;
  return lt(rand(x.shape(), x.device()), p).to(x.dtype());
}

// With replacement: the backend's inverse-CDF draws. Without: the Efraimidis-Spirakis keys
// (2006), w / E with E ~ Exp(1) per category, of which the num_samples largest are a draw of
// that many categories one after another, each in proportion to the weights of those left (as
// PyTorch does it); a zero weight has key 0 and is never among them.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  detail::check_defined(probs, "multinomial");
  LOOM_CHECK(is_floating_point(probs.dtype()) && (probs.dim() == 1 || probs.dim() == 2),
             "multinomial: expected 1-D or 2-D float probabilities, got {} of shape {}",
             dtype_name(probs.dtype()), shape_str(probs.shape()));
  const int64_t k = probs.size(-1);
  LOOM_CHECK(k > 0, "multinomial: cannot sample from an empty distribution (shape {})",
             shape_str(probs.shape()));
  LOOM_CHECK(num_samples > 0, "multinomial: cannot sample num_samples = {} <= 0 samples",
             num_samples);
  LOOM_CHECK(replacement || num_samples <= k,
             "multinomial: cannot sample num_samples = {} > {} categories without replacement",
             num_samples, k);
  NoGradGuard no_grad;
  const Tensor w = probs.detach().to(DType::Float32).reshape({-1, k});  // [rows, k]
  const int64_t rows = w.size(0);
  if (rows == 0) return Tensor::empty(probs.dim() == 1 ? Shape{num_samples} : Shape{0, num_samples},
                                      DType::Int64, probs.device());
  const auto [lo, hi] = value_range(w);
  LOOM_CHECK(lo >= 0.0f && std::isfinite(hi),
             "multinomial: the weights must be finite and non-negative, got values in [{}, {}]",
             lo, hi);
  LOOM_CHECK(amin(sum(w, 1)).item() > 0.0f,
             "multinomial: a row of weights sums to 0 (shape {})", shape_str(probs.shape()));
  Tensor out;
  if (replacement) {
    out = Tensor::empty({rows, num_samples}, DType::Int64, probs.device());
    Generator& g = default_generator();
    backend(probs.device()).multinomial(w.contiguous(), g.seed(),
                                        g.reserve(static_cast<uint64_t>(rows * num_samples)), out);
  } else {
    const float fewest = amin(sum(gt(w, 0.0f).to(DType::Float32), 1)).item();
    LOOM_CHECK(fewest >= static_cast<float>(num_samples),
               "multinomial: a row has {} nonzero weights, too few for num_samples = {} without "
               "replacement",
               fewest, num_samples);
    const Tensor exponential = -log(1.0f - rand(w.shape(), w.device()));  // in [0, inf)
    out = topk(w / exponential, num_samples, 1).indices;
  }
  return probs.dim() == 1 ? out.reshape({num_samples}) : out;
}

// ---------------------------------------------------------------------------- in place
namespace {

// t's elements replaced by transform(draw(t's shape)), after the check of every in-place write
// (Tensor::fill_'s: a leaf that requires grad only under a NoGradGuard); copy_ bumps the version.
template <class Transform>
Tensor& fill_random(Tensor& t, const char* op, Tensor (*draw)(Shape, Device),
                    const Transform& transform) {
  LOOM_CHECK(t.defined(), "{}: called on an undefined tensor", op);
  LOOM_CHECK(is_floating_point(t.dtype()),
             "{}: expected a float32 or bfloat16 tensor, got {} of shape {}", op,
             dtype_name(t.dtype()), shape_str(t.shape()));
  LOOM_CHECK(!(autograd::grad_mode_enabled() && t.requires_grad() && t.is_leaf()),
             "{}: a leaf tensor that requires grad is being modified in place; wrap the update "
             "in a NoGradGuard",
             op);
  NoGradGuard no_grad;
  t.copy_(transform(draw(t.shape(), t.device())));
  return t;
}

}  // namespace

Tensor& Tensor::normal_(float mean, float std) {
  LOOM_CHECK(std >= 0.0f, "normal_: std must be non-negative, got {}", std);
  return fill_random(*this, "normal_", &randn, [&](const Tensor& z) { return z * std + mean; });
}

Tensor& Tensor::uniform_(float from, float to) {
  LOOM_CHECK(from <= to, "uniform_: from = {} exceeds to = {}", from, to);
  return fill_random(*this, "uniform_", &rand,
                     [&](const Tensor& u) { return u * (to - from) + from; });
}

Tensor normal_(const Tensor& t, float mean, float std) {
  Tensor handle = t;
  return handle.normal_(mean, std);
}

Tensor uniform_(const Tensor& t, float from, float to) {
  Tensor handle = t;
  return handle.uniform_(from, to);
}

}  // namespace loom
