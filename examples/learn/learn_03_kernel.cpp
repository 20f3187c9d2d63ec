// Chapter 03 (docs/learn/03-kernels.md): one kernel on the CPU and on CUDA.
// Calls the GELU (tanh form) entry of backends/unary_math.h through the device's kernel table
// (Backend::unary and Backend::unary_backward), on a contiguous and on a transposed input (the
// strided loop), checks its derivative against finite differences of its forward, and, when a
// GPU is present, runs the same table entry on CUDA and compares.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "examples/learn/learn.h"
#include "loom.h"
using namespace loom;

namespace {

// out = gelu_tanh(x) by the kernel of x's device.
Tensor forward(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), DType::Float32, x.device());
  backend(x.device()).unary(UnaryOp::GeluTanh, x, out, 0.0f, 0.0f);
  return out;
}

// grad * d gelu_tanh / dx, by the backward kernel (GeluTanh reads x, not y).
Tensor derivative(const Tensor& x, const Tensor& grad) {
  Tensor out = Tensor::empty(x.shape(), DType::Float32, x.device());
  backend(x.device()).unary_backward(UnaryOp::GeluTanh, grad, x, Tensor(), out, 0.0f, 0.0f);
  return out;
}

float max_difference(const Tensor& a, const Tensor& b) {
  const std::vector<float> u = a.to_vector(), v = b.to_vector();
  float worst = 0.0f;
  for (size_t i = 0; i < u.size(); ++i) worst = std::max(worst, std::fabs(u[i] - v[i]));
  return worst;
}

}  // namespace

int main(int argc, char** argv) try {
  learn::parse_args(
      argc, argv,
      "Chapter 03 (docs/learn/03-kernels.md): one unary kernel on the CPU (and CUDA, if present).");
  const Tensor x = arange_f(-3.0f, 3.01f, 0.75f);  // 9 points
  const Tensor y = forward(x), dy = derivative(x, ones_like(x));
  const float eps = 1e-3f;
  const Tensor numeric = (forward(x + eps) - forward(x - eps)) / (2 * eps);
  std::printf("    x    gelu_tanh(x)   d/dx (kernel)   d/dx (finite differences)\n");
  const auto xs = x.to_vector(), ys = y.to_vector(), ds = dy.to_vector(), ns = numeric.to_vector();
  for (size_t i = 0; i < xs.size(); ++i)
    std::printf("%6.2f   %10.5f   %12.5f   %12.5f\n", xs[i], ys[i], ds[i], ns[i]);
  const float fd_error = max_difference(dy, numeric);

  // The same entry over a transposed view: the loop takes its strided path, same numbers.
  manual_seed(0);
  const Tensor m = randn({64, 48});
  const Tensor strided = forward(m.t()), contiguous = forward(m.t().contiguous());
  const float layout_error = max_difference(strided, contiguous);
  std::printf("\nfinite differences vs kernel: max |diff| %.1e\n", fd_error);
  std::printf("transposed [48,64] input (strides %s) vs its contiguous copy: max |diff| %.1e\n",
              shape_str(m.t().strides()).c_str(), layout_error);

  float device_error = 0.0f;
  if (cuda_available()) {
    const Tensor on_gpu = forward(m.t().cuda()).cpu();  // unary_kernel<GeluTanh<CudaMath>>
    device_error = max_difference(on_gpu, strided);
    std::printf("CUDA vs CPU on the same input: max |diff| %.1e\n", device_error);
  } else {
    std::printf("no GPU here: the CUDA half of the chapter is read, not run\n");
  }
  return fd_error < 1e-2f && layout_error < 1e-6f && device_error < 1e-5f ? 0 : 1;
} catch (const std::exception& e) {
  return learn::fail(e);
}
