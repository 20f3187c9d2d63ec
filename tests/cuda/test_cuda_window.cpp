// The sliding-window kernels (backends/window) and batch normalisation (backends/batch_norm) on
// CUDA against the CPU: im2col and col2im in both column layouts for strided, padded and dilated
// windows; max pooling with ties, NaN and overlapping padded windows (values, indices and the
// gradient); the convolutions built on them; batch_norm in training (statistics, values and
// gradients, over more channels than one block's worth of values) and in evaluation. Without a
// GPU the cases return at once (test_cuda.cpp's first case reports that once).
#include <cmath>
#include <tuple>
#include <vector>

#include "cuda_parity.h"
#include "test_util.h"
#include "window_cases.h"

using namespace loom;
using namespace loom::testing;
namespace F = loom::nn::functional;

namespace {

// Values from a small set (ties in every window), with a NaN now and then.
Tensor tied_image(const Shape& shape, uint64_t seed) {
  std::vector<float> v = philox_tensor(shape, seed).to_vector();
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::round(v[i] * 3.0f);
    if (i % 53 == 11) v[i] = NAN;
  }
  return tensor(v, shape);
}

}  // namespace

TEST_CASE("im2col and col2im match the CPU on CUDA, in both column layouts") {
  if (!cuda_available()) return;
  for (const WindowGeometry& w : kWindowCases)
    for (bool batch_last : {false, true}) {
      const Tensor x = philox_tensor({2, 3, 7, 6}, 81);
      compare_op("im2col", [&](const auto& t) { return im2col(t[0], w, 0.5f, batch_last); }, {x});
      const Shape cols = im2col(x, w, 0.0f, batch_last).shape();
      compare_op("col2im",
                 [&](const auto& t) { return col2im(t[0], 7, 6, w, batch_last); },
                 {philox_tensor(cols, 82)});
    }
}

TEST_CASE("max pooling matches the CPU on CUDA: ties, NaN, indices and the gradient") {
  if (!cuda_available()) return;
  for (const WindowGeometry& w : kWindowCases) {
    const Tensor x = tied_image({2, 3, 9, 8}, 83);
    const auto [y_cpu, i_cpu] = max_pool2d_with_indices(x, w);
    const auto [y_gpu, i_gpu] = max_pool2d_with_indices(x.to(Device::CUDA), w);
    check_close(y_gpu, y_cpu, 0.0f, 0.0f, "max_pool2d values");
    CHECK(i_gpu.to_vector_i64() == i_cpu.to_vector_i64());
    const Tensor distinct = philox_tensor({2, 3, 9, 8}, 84);  // no ties: a gradient to compare
    compare_op("max_pool2d",
               [&](const auto& t) { return std::get<0>(max_pool2d_with_indices(t[0], w)); },
               {distinct});
  }
}

TEST_CASE("conv2d with groups and conv_transpose2d match the CPU on CUDA") {
  if (!cuda_available()) return;
  compare_op("conv2d", [](const auto& t) { return F::conv2d(t[0], t[1], t[2], 2, 1, 1, 2); },
             {philox_tensor({2, 4, 7, 6}, 85), philox_tensor({6, 2, 3, 3}, 86),
              philox_tensor({6}, 87)},
             1e-4f, 1e-4f);
  compare_op("conv_transpose2d",
             [](const auto& t) { return F::conv_transpose2d(t[0], t[1], t[2], 2, 1, 1); },
             {philox_tensor({2, 3, 4, 5}, 88), philox_tensor({3, 2, 3, 3}, 89),
              philox_tensor({2}, 90)},
             1e-4f, 1e-4f);
}

TEST_CASE("batch_norm matches the CPU on CUDA: training, evaluation, BatchNorm1d's [N, C]") {
  if (!cuda_available()) return;
  const Tensor running_mean = philox_tensor({5}, 91), running_var = philox_tensor({5}, 92) + 1.5f;
  for (const Shape& shape : {Shape{4, 5, 30, 20}, Shape{64, 5}}) {
    const Tensor x = philox_tensor(shape, 93) * 2.0f + 0.5f;
    compare_op("batch_norm (training)",
               [](const auto& t) {
                 return batch_norm(t[0], t[1], t[2], Tensor(), Tensor(), true);
               },
               {x, philox_tensor({5}, 94), philox_tensor({5}, 95)}, 1e-4f, 1e-4f);
    compare_op("batch_norm (evaluation)",
               [&](const auto& t) {
                 return batch_norm(t[0], t[1], t[2], running_mean.to(t[0].device()),
                                   running_var.to(t[0].device()), false);
               },
               {x, philox_tensor({5}, 96), philox_tensor({5}, 97)}, 1e-4f, 1e-4f);
  }
  // The running statistics move alike on both devices.
  Tensor mean_cpu = zeros({5}), var_cpu = ones({5});
  Tensor mean_gpu = mean_cpu.to(Device::CUDA), var_gpu = var_cpu.to(Device::CUDA);
  const Tensor x = philox_tensor({8, 5, 6, 6}, 98);
  batch_norm(x, Tensor(), Tensor(), mean_cpu, var_cpu, true, 0.1f);
  batch_norm(x.to(Device::CUDA), Tensor(), Tensor(), mean_gpu, var_gpu, true, 0.1f);
  check_close(mean_gpu, mean_cpu, 1e-5f, 1e-6f, "running_mean");
  check_close(var_gpu, var_cpu, 1e-5f, 1e-6f, "running_var");
}
