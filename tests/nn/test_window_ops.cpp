// The sliding-window ops (loom::im2col, col2im, max_pool2d_with_indices: backends/window) and
// the fused batch_norm (backends/batch_norm) on their own, beyond the PyTorch goldens of the
// layers built on them (test_conv.cpp, test_modules.cpp): im2col against its definition for
// strides, padding and dilation; col2im as its adjoint; max pooling's ties and NaN as PyTorch
// treats them; batch_norm against the formula of its paper written out in ops; gradient checks
// and error paths.
#include <cmath>
#include <vector>

#include "nn_golden.h"

using namespace loom;
using namespace loom::testing;
namespace F = loom::nn::functional;

namespace {

// Windows the tests walk: plain, strided, padded, dilated, and all at once, non-square.
const std::vector<WindowGeometry> kWindows = {
    {{3, 3}, {1, 1}, {1, 1}, {1, 1}}, {{2, 2}, {2, 2}, {0, 0}, {1, 1}},
    {{3, 2}, {2, 1}, {1, 0}, {1, 2}}, {{2, 3}, {1, 3}, {1, 1}, {2, 1}},
    {{1, 1}, {1, 1}, {0, 0}, {1, 1}}};

// cols[n, c, i*kw + j, oh*out_w + ow] straight from the definition (window.h).
std::vector<float> im2col_by_definition(const Tensor& x, const WindowGeometry& w, float pad) {
  const int64_t planes = x.size(0) * x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t out_h = w.output_size(0, h), out_w = w.output_size(1, wd);
  const std::vector<float> xv = x.to_vector();
  std::vector<float> cols;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < w.kernel[0]; ++i)
      for (int64_t j = 0; j < w.kernel[1]; ++j)
        for (int64_t oh = 0; oh < out_h; ++oh)
          for (int64_t ow = 0; ow < out_w; ++ow) {
            const int64_t r = oh * w.stride[0] + i * w.dilation[0] - w.padding[0];
            const int64_t c = ow * w.stride[1] + j * w.dilation[1] - w.padding[1];
            const bool in = r >= 0 && r < h && c >= 0 && c < wd;
            cols.push_back(in ? xv[static_cast<size_t>((p * h + r) * wd + c)] : pad);
          }
  return cols;
}

// Ioffe & Szegedy 2015, Algorithm 1, in ops: the reference the fused kernel must equal.
Tensor batch_norm_in_ops(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  const Shape channel{1, x.size(1), 1, 1}, dims{0, 2, 3};
  const Tensor mu = mean(x, dims, true);
  const Tensor var = mean((x - mu) * (x - mu), dims, true);  // biased, as the paper
  return (x - mu) * rsqrt(var + eps) * weight.reshape(channel) + bias.reshape(channel);
}

}  // namespace

TEST_CASE("im2col is its definition for strides, padding and dilation; col2im its adjoint") {
  manual_seed(71);
  for (const WindowGeometry& w : kWindows) {
    INFO("kernel " << w.kernel[0] << "x" << w.kernel[1] << " stride " << w.stride[0] << ","
                   << w.stride[1] << " padding " << w.padding[0] << "," << w.padding[1]
                   << " dilation " << w.dilation[0] << "," << w.dilation[1]);
    const Tensor x = randn({2, 3, 6, 7});
    const Tensor cols = im2col(x, w, -2.5f);
    CHECK(cols.shape() == Shape({2, 3, w.kernel[0] * w.kernel[1],
                                 w.output_size(0, 6) * w.output_size(1, 7)}));
    CHECK(cols.to_vector() == im2col_by_definition(x, w, -2.5f));
    // <col2im(c), x> == <c, im2col(x)> for any c and x (padding reading 0).
    const Tensor c = randn(cols.shape());
    const double lhs = sum(col2im(c, 6, 7, w) * x).item();
    const double rhs = sum(c * im2col(x, w)).item();
    CHECK(std::fabs(lhs - rhs) < 1e-3 * (1.0 + std::fabs(rhs)));
    // With the batch last, the same columns as [C, kh*kw, N, L], and col2im reads them so.
    const Tensor last = im2col(x, w, -2.5f, /*batch_last=*/true);
    CHECK(last.to_vector() == cols.permute({1, 2, 0, 3}).contiguous().to_vector());
    CHECK(col2im(c.permute({1, 2, 0, 3}).contiguous(), 6, 7, w, true).to_vector() ==
          col2im(c, 6, 7, w).to_vector());
  }
}

TEST_CASE("max_pool2d: a NaN wins its window, the first of equal maxima gives the index") {
  // One plane 3x4: 2x2 windows at stride 2 give two outputs from the top two rows.
  const float nan = std::nanf("");
  const Tensor x = tensor({1, 5, 5, 2,   //
                           5, 0, 3, nan,  //
                           9, 9, 9, 9},
                          {1, 1, 3, 4});
  const auto [y, indices] = max_pool2d_with_indices(x, {{2, 2}, {2, 2}, {0, 0}, {1, 1}});
  const std::vector<float> yv = y.to_vector();
  REQUIRE(yv.size() == 2);
  CHECK(yv[0] == 5.0f);
  CHECK(std::isnan(yv[1]));
  CHECK(indices.to_vector_i64() == std::vector<int64_t>{1, 7});  // first 5 (row-major); the NaN
  const auto [y2, i2] = max_pool2d_with_indices(x, {{3, 3}, {2, 2}, {1, 1}, {1, 1}});
  CHECK(y2.shape() == Shape({1, 1, 2, 2}));
  CHECK(i2.to_vector_i64()[2] == 8);  // the bottom-left window: the first 9 of the last row
  // The gradient goes to the index only, summed where windows share it.
  Tensor xs = tensor({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}).requires_grad_();
  sum(F::max_pool2d(xs, 2, 1)).backward();
  CHECK(xs.grad().to_vector() == std::vector<float>{0, 0, 0, 0, 1, 1, 0, 1, 1});
  Tensor xo = tensor({9, 0, 0, 0, 0, 0, 0, 0, 0}, {1, 1, 3, 3}).requires_grad_();
  sum(F::max_pool2d(xo, 2, 1, 1)).backward();  // 9 is the max of four padded windows
  CHECK(xo.grad().to_vector()[0] == 4.0f);
}

TEST_CASE("fused batch_norm equals the paper's formula in ops, values and gradients") {
  manual_seed(72);
  const Tensor x0 = randn({4, 3, 5, 6}) * 3.0f + 1.5f;
  const Tensor w0 = randn({3}), b0 = randn({3}), g = randn({4, 3, 5, 6});
  Tensor x1 = x0.clone().requires_grad_(), w1 = w0.clone().requires_grad_(),
         b1 = b0.clone().requires_grad_();
  Tensor x2 = x0.clone().requires_grad_(), w2 = w0.clone().requires_grad_(),
         b2 = b0.clone().requires_grad_();
  Tensor running_mean = zeros({3}), running_var = ones({3});
  const Tensor fused = batch_norm(x1, w1, b1, running_mean, running_var, true, 0.1f, 1e-5f);
  const Tensor in_ops = batch_norm_in_ops(x2, w2, b2, 1e-5f);
  check_close(fused, in_ops, 1e-4f, 1e-5f, "values");
  sum(fused * g).backward();
  sum(in_ops * g).backward();
  check_close(x1.grad(), x2.grad(), 1e-3f, 1e-5f, "d/dx");
  check_close(w1.grad(), w2.grad(), 1e-4f, 1e-4f, "d/dweight");
  check_close(b1.grad(), b2.grad(), 1e-4f, 1e-4f, "d/dbias");
  // PyTorch's running update: momentum 0.1 of the batch mean and of the unbiased variance.
  const float m = 4 * 5 * 6;
  const Tensor centered = x0 - mean(x0, {0, 2, 3}, true);
  const Tensor batch_var = mean(centered * centered, {0, 2, 3});
  check_close(running_mean, mean(x0, {0, 2, 3}) * 0.1f, 1e-4f, 1e-6f, "running_mean");
  check_close(running_var, batch_var * (0.1f * m / (m - 1)) + 0.9f, 1e-4f, 1e-6f, "running_var");
}

TEST_CASE("gradcheck: im2col, col2im, max_pool2d_with_indices, batch_norm without affine") {
  manual_seed(73);
  const WindowGeometry w{{3, 2}, {2, 1}, {1, 1}, {1, 2}};
  gradcheck(weighted([&](const std::vector<Tensor>& t) { return im2col(t[0], w, 0.5f); }),
            {randn({1, 2, 5, 4})}, 1e-2f, 2e-2f, 2e-3f, "im2col");
  const Tensor cols = im2col(randn({1, 2, 5, 4}), w);
  gradcheck(weighted([&](const std::vector<Tensor>& t) { return col2im(t[0], 5, 4, w); }),
            {randn(cols.shape())}, 1e-2f, 2e-2f, 2e-3f, "col2im");
  gradcheck(weighted([&](const std::vector<Tensor>& t) { return im2col(t[0], w, 0.0f, true); }),
            {randn({2, 2, 5, 4})}, 1e-2f, 2e-2f, 2e-3f, "im2col, batch last");
  // Distinct values 0.1 apart, so a +-0.01 perturbation never changes a window's maximum.
  const Tensor distinct = randperm(40).to(DType::Float32).reshape({1, 2, 4, 5}) * 0.1f;
  gradcheck(weighted([&](const std::vector<Tensor>& t) {
              return std::get<0>(max_pool2d_with_indices(t[0], w));
            }),
            {distinct}, 1e-2f, 2e-2f, 2e-3f, "max_pool2d_with_indices");
  gradcheck(weighted([](const std::vector<Tensor>& t) {
              return batch_norm(t[0], Tensor(), Tensor(), Tensor(), Tensor(), true);
            }),
            {randn({3, 2, 3})}, 1e-2f, 2e-2f, 2e-3f, "batch_norm (BatchNorm1d's [N, C, L])");
}

TEST_CASE("the window ops and batch_norm reject bad inputs, naming the op and the shapes") {
  const WindowGeometry w{{3, 3}, {1, 1}, {0, 0}, {1, 1}};
  check_error([&] { im2col(zeros({2, 5, 5}), w); }, {"im2col", "[2,5,5]"});
  check_error([&] { im2col(zeros({1, 1, 2, 5}), w); }, {"im2col", "smaller than the window"});
  check_error([&] { im2col(zeros({1, 1, 5, 5}), {{3, 3}, {0, 1}, {0, 0}, {1, 1}}); },
              {"im2col", "invalid window"});
  check_error([&] { col2im(zeros({1, 1, 9, 10}), 5, 5, w); }, {"col2im", "[1,1,9,10]", "5x5"});
  check_error([&] { max_pool2d_with_indices(zeros({1, 1, 2, 2}), w); },
              {"max_pool2d", "[1,1,2,2]"});
  check_error([] { batch_norm(zeros({2, 3, 4}), ones({4}), Tensor(), Tensor(), Tensor(), true); },
              {"batch_norm", "weight", "[4]", "[2,3,4]"});
  check_error([] { batch_norm(zeros({2, 3}), Tensor(), Tensor(), Tensor(), Tensor(), false); },
              {"batch_norm", "evaluation mode needs running statistics"});
  check_error([] { batch_norm(zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true); },
              {"batch_norm", "more than 1 value", "[1,3]"});
}
