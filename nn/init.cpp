// Weight initialisation (torch.nn.init), written with loom's ops so it runs on any device.
#include "nn/init.h"

#include <cmath>
#include <initializer_list>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"

namespace loom::nn::init {

namespace {

void check_float(const Tensor& t, const char* op) {
  LOOM_CHECK(t.defined(), "{}: undefined tensor", op);
  LOOM_CHECK(t.dtype() == DType::Float32, "{}: needs a float32 tensor, got {}", op,
             dtype_name(t.dtype()));
}

// Inverse error function, elementwise on x in (-1, 1): Giles 2010, "Approximating the erfinv
// function", single-precision branch pair (relative error ~ 1e-7, the float32 resolution).
Tensor erfinv(const Tensor& x) {
  const Tensor w = -log((1.0f - x) * (1.0f + x));
  auto horner = [](const Tensor& t, std::initializer_list<float> coefficients) {
    Tensor p = full(t.shape(), *coefficients.begin(), t.device());
    for (auto c = coefficients.begin() + 1; c != coefficients.end(); ++c) p = p * t + *c;
    return p;
  };
  const Tensor central = horner(
      w - 2.5f, {2.81022636e-08f, 3.43273939e-07f, -3.5233877e-06f, -4.39150654e-06f,
                 0.00021858087f, -0.00125372503f, -0.00417768164f, 0.246640727f, 1.50140941f});
  const Tensor tail = horner(
      sqrt(w) - 3.0f, {-0.000200214257f, 0.000100950558f, 0.00134934322f, -0.00367342844f,
                       0.00573950773f, -0.0076224613f, 0.00943887047f, 1.00167406f, 2.83297682f});
  return where(lt(w, 5.0f), central, tail) * x;
}

}  // namespace

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor) {
  LOOM_CHECK(tensor.defined() && tensor.dim() >= 2,
             "init: fan in and fan out need a tensor with at least 2 dims, got shape {}",
             tensor.defined() ? shape_str(tensor.shape()) : "undefined");
  const int64_t receptive = tensor.numel() / (tensor.size(0) * tensor.size(1));
  return {tensor.size(1) * receptive, tensor.size(0) * receptive};
}

Tensor uniform_(Tensor tensor, double a, double b) {
  check_float(tensor, "uniform_");
  LOOM_CHECK(a <= b, "uniform_: lower bound {} exceeds upper bound {}", a, b);
  NoGradGuard guard;
  tensor.copy_(rand(tensor.shape(), tensor.device()) * static_cast<float>(b - a) +
               static_cast<float>(a));
  return tensor;
}

Tensor normal_(Tensor tensor, double mean, double std) {
  check_float(tensor, "normal_");
  LOOM_CHECK(std >= 0.0, "normal_: std {} is negative", std);
  NoGradGuard guard;
  tensor.copy_(randn(tensor.shape(), tensor.device()) * static_cast<float>(std) +
               static_cast<float>(mean));
  return tensor;
}

Tensor trunc_normal_(Tensor tensor, double mean, double std, double a, double b) {
  check_float(tensor, "trunc_normal_");
  LOOM_CHECK(std > 0.0 && a < b, "trunc_normal_: needs std > 0 and a < b, got std {}, [{}, {}]",
             std, a, b);
  // As PyTorch: draw u uniformly between the normal CDF values of the bounds, map it through
  // the inverse CDF, Phi^-1(u) = sqrt(2) erfinv(2u - 1), then clamp away rounding at the ends.
  auto cdf = [](double x) { return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))); };
  const double lo = 2.0 * cdf((a - mean) / std) - 1.0, hi = 2.0 * cdf((b - mean) / std) - 1.0;
  LOOM_CHECK(hi - lo > 1e-6, "trunc_normal_: [{}, {}] holds almost no mass of N({}, {}^2)", a, b,
             mean, std);
  NoGradGuard guard;
  // Keep the uniform strictly inside (-1, 1), where erfinv is finite.
  const float eps = 1e-7f;
  Tensor u =
      rand(tensor.shape(), tensor.device()) * static_cast<float>(hi - lo) + static_cast<float>(lo);
  u = clamp(u, -1.0f + eps, 1.0f - eps);
  Tensor z = erfinv(u) * static_cast<float>(std * std::sqrt(2.0)) + static_cast<float>(mean);
  tensor.copy_(clamp(z, static_cast<float>(a), static_cast<float>(b)));
  return tensor;
}

Tensor constant_(Tensor tensor, double value) {
  check_float(tensor, "constant_");
  NoGradGuard guard;
  tensor.fill_(static_cast<float>(value));
  return tensor;
}

Tensor zeros_(Tensor tensor) { return constant_(std::move(tensor), 0.0); }
Tensor ones_(Tensor tensor) { return constant_(std::move(tensor), 1.0); }

Tensor xavier_uniform_(Tensor tensor, double gain) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return uniform_(std::move(tensor), -bound, bound);
}

Tensor xavier_normal_(Tensor tensor, double gain) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  return normal_(std::move(tensor), 0.0,
                 gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)));
}

Tensor kaiming_uniform_(Tensor tensor, double a, FanMode mode) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  const int64_t fan = mode == FanMode::FanIn ? fan_in : fan_out;
  LOOM_CHECK(fan > 0, "kaiming_uniform_: zero fan for shape {}", shape_str(tensor.shape()));
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = std::sqrt(3.0) * gain / std::sqrt(static_cast<double>(fan));
  return uniform_(std::move(tensor), -bound, bound);
}

}  // namespace loom::nn::init
