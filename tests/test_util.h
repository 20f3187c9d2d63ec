// Helpers shared by the test suites: closeness checks, finite-difference gradient checks and
// the PyTorch golden fixtures (safetensors files written by tests/golden/*.py).
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "loom.h"

// The first line of a CUDA test case: without a GPU there is nothing to compare, so it returns
// (test_cuda.cpp's first case reports the missing GPU once).
#define LOOM_REQUIRE_GPU() \
  if (!::loom::cuda_available()) return

namespace loom::testing {

// A folder of its own under the system's temporary directory, removed with its files at the end
// of the scope.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("loom_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// |a - b| <= atol + rtol * |b| elementwise, with a message naming the first bad element.
inline void check_close(const Tensor& actual, const Tensor& expected, float rtol = 1e-5f,
                        float atol = 1e-6f, const std::string& what = "") {
  REQUIRE_MESSAGE(actual.shape() == expected.shape(),
                  what << ": shape " << shape_str(actual.shape()) << " vs expected "
                       << shape_str(expected.shape()));
  const std::vector<float> a = actual.to_vector(), b = expected.to_vector();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool ok = std::fabs(a[i] - b[i]) <= atol + rtol * std::fabs(b[i]) ||
                    (std::isinf(a[i]) && a[i] == b[i]) || (std::isnan(a[i]) && std::isnan(b[i]));
    if (!ok) {
      FAIL_CHECK(what << ": element " << i << " is " << a[i] << ", expected " << b[i]);
      return;
    }
  }
  CHECK(true);
}

// The distance in bfloat16 steps (ulps) between two bfloat16 tensors, elementwise maximum.
inline int max_ulp_distance(const Tensor& a, const Tensor& b) {
  REQUIRE(a.dtype() == DType::BFloat16);
  REQUIRE(b.dtype() == DType::BFloat16);
  REQUIRE(a.shape() == b.shape());
  Tensor ca = a.contiguous(), cb = b.contiguous();
  std::vector<uint16_t> x(static_cast<size_t>(a.numel())), y(x.size());
  std::memcpy(x.data(), ca.raw_data(), x.size() * 2);
  std::memcpy(y.data(), cb.raw_data(), y.size() * 2);
  // Map sign-magnitude bits to a monotonic integer line, so neighbours differ by 1.
  auto line = [](uint16_t v) {
    return v & 0x8000 ? -static_cast<int>(v & 0x7FFF) : static_cast<int>(v);
  };
  int worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(line(x[i]) - line(y[i])));
  return worst;
}

// Compares the analytic gradients of f (a scalar function of `inputs`) with central finite
// differences, in double-checked float precision: each element is perturbed by +-eps.
inline void gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                      std::vector<Tensor> inputs, float eps = 1e-2f, float rtol = 2e-2f,
                      float atol = 2e-3f, const std::string& what = "") {
  for (auto& x : inputs) {
    if (x.dtype() != DType::Float32) continue;
    x.requires_grad_(true);
    x.set_grad(Tensor());  // inputs may be reused across checks: start from no gradient
  }
  Tensor out = f(inputs);
  REQUIRE(out.numel() == 1);
  out.backward();
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor& x = inputs[k];
    if (x.dtype() != DType::Float32) continue;
    REQUIRE_MESSAGE(x.grad().defined(), what << ": input " << k << " got no gradient");
    const std::vector<float> analytic = x.grad().to_vector();
    std::vector<float> numeric(analytic.size());
    NoGradGuard guard;
    Tensor flat = x.detach();   // shares storage: perturb in place through a contiguous copy
    std::vector<float> base = flat.to_vector();
    for (size_t i = 0; i < base.size(); ++i) {
      auto eval = [&](float delta) {
        std::vector<float> v = base;
        v[i] += delta;
        flat.copy_(tensor(v, flat.shape()));
        return static_cast<double>(f(inputs).item());
      };
      numeric[i] = static_cast<float>((eval(eps) - eval(-eps)) / (2.0 * eps));
    }
    flat.copy_(tensor(base, flat.shape()));
    check_close(tensor(analytic, x.shape()), tensor(numeric, x.shape()), rtol, atol,
                what + " d/d input " + std::to_string(k));
  }
}

// sum(f(inputs) * w) for a fixed random w (drawn after manual_seed(999)): the scalar whose
// gradient gradcheck(weighted(f), ...) checks for a tensor-valued f. Under a random w every
// output element weighs differently, so a backward that mixes elements up cannot pass as it
// could under all ones.
inline std::function<Tensor(const std::vector<Tensor>&)> weighted(
    const std::function<Tensor(const std::vector<Tensor>&)>& f) {
  return [f](const std::vector<Tensor>& in) {
    Tensor y = f(in);
    manual_seed(999);
    return sum(y * randn(y.shape()));
  };
}

// Runs f, expecting a loom::Error whose message contains every fragment (the op's name, the
// offending shapes or values).
inline void expect_error(const std::function<void()>& f,
                         std::initializer_list<std::string> fragments) {
  try {
    f();
    FAIL("expected a loom::Error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& frag : fragments)
      CHECK_MESSAGE(msg.find(frag) != std::string::npos,
                    "message '" << msg << "' lacks '" << frag << "'");
  }
}

// Deterministic values uniform in [-1, 1) from the Philox stream `seed` (core/rng.h), the same
// on every machine and device.
inline Tensor philox_tensor(const Shape& shape, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 2.0f * philox_uniform(i, seed) - 1.0f;
  return tensor(v, shape);
}

}  // namespace loom::testing
