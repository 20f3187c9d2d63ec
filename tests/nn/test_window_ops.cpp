// The sliding-window ops (loom::im2col, col2im, max_pool2d_with_indices: backends/window) and
// the fused batch_norm (backends/batch_norm) on their own, beyond the PyTorch goldens of the
// layers built on them (test_conv.cpp, test_modules.cpp): im2col against its definition for
// strides, padding and dilation; col2im as its adjoint; max pooling's ties and NaN as PyTorch
// treats them; batch_norm against the formula of its paper written out in ops; gradient checks
// and error paths.
#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "nn_golden.h"
#include "window_cases.h"

using namespace loom;
using namespace loom::testing;
namespace F = loom::nn::functional;

namespace {

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

// col2im by its definition: each pixel of x[n, c] the float sum, from 0, of the columns' values
// that read it, tap after tap (i, then j), as the kernels add them.
std::vector<float> col2im_by_definition(const Tensor& cols, int64_t h, int64_t wd,
                                        const WindowGeometry& w) {
  const int64_t planes = cols.size(0) * cols.size(1);
  const int64_t out_h = w.output_size(0, h), out_w = w.output_size(1, wd);
  const std::vector<float> cv = cols.to_vector();
  std::vector<float> x(static_cast<size_t>(planes * h * wd), 0.0f);
  size_t next = 0;  // cols in order: plane, tap, position
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < w.kernel[0]; ++i)
      for (int64_t j = 0; j < w.kernel[1]; ++j)
        for (int64_t oh = 0; oh < out_h; ++oh)
          for (int64_t ow = 0; ow < out_w; ++ow, ++next) {
            const int64_t r = oh * w.stride[0] + i * w.dilation[0] - w.padding[0];
            const int64_t c = ow * w.stride[1] + j * w.dilation[1] - w.padding[1];
            if (r >= 0 && r < h && c >= 0 && c < wd)
              x[static_cast<size_t>((p * h + r) * wd + c)] += cv[next];
          }
  return x;
}

// Ioffe & Szegedy 2015, Algorithm 1, in ops: the reference the fused kernel must equal.
Tensor batch_norm_in_ops(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  const Shape channel{1, x.size(1), 1, 1}, dims{0, 2, 3};
  const Tensor mu = mean(x, dims, true);
  const Tensor var = mean((x - mu) * (x - mu), dims, true);  // biased, as the paper
  return (x - mu) * rsqrt(var + eps) * weight.reshape(channel) + bias.reshape(channel);
}

// im2col against its definition on images [2, 3, height, width]; col2im as its adjoint, and to
// the bit as its definition adds; both with the batch last.
void check_columns(const WindowGeometry& w, int64_t height, int64_t width) {
  INFO("image " << height << "x" << width << ", kernel " << w.kernel[0] << "x" << w.kernel[1]
                << " stride " << w.stride[0] << "," << w.stride[1] << " padding "
                << w.padding[0] << "," << w.padding[1] << " dilation " << w.dilation[0] << ","
                << w.dilation[1]);
  const Tensor x = randn({2, 3, height, width});
  const Tensor cols = im2col(x, w, -2.5f);
  CHECK(cols.shape() == Shape({2, 3, w.kernel[0] * w.kernel[1],
                               w.output_size(0, height) * w.output_size(1, width)}));
  CHECK(cols.to_vector() == im2col_by_definition(x, w, -2.5f));
  // <col2im(c), x> == <c, im2col(x)> for any c and x (padding reading 0); and col2im adds
  // each pixel's values tap after tap, to the bit.
  const Tensor c = randn(cols.shape());
  CHECK(col2im(c, height, width, w).to_vector() == col2im_by_definition(c, height, width, w));
  const double lhs = sum(col2im(c, height, width, w) * x).item();
  const double rhs = sum(c * im2col(x, w)).item();
  CHECK(std::fabs(lhs - rhs) < 1e-3 * (1.0 + std::fabs(rhs)));
  // With the batch last, the same columns as [C, kh*kw, N, L], and col2im reads them so.
  const Tensor last = im2col(x, w, -2.5f, /*batch_last=*/true);
  CHECK(last.to_vector() == cols.permute({1, 2, 0, 3}).contiguous().to_vector());
  CHECK(col2im(c.permute({1, 2, 0, 3}).contiguous(), height, width, w, true).to_vector() ==
        col2im(c, height, width, w).to_vector());
}

}  // namespace

TEST_CASE("im2col is its definition for strides, padding and dilation; col2im its adjoint") {
  manual_seed(71);
  for (const WindowGeometry& w : kWindowCases) check_columns(w, 6, 7);
}

TEST_CASE("im2col and col2im through the image's phases: strided windows over long rows") {
  // Windows whose positions per row are the row's pixels over the stride, 16 or more: the CPU
  // reads and adds them through the image's phases (window.cpp). DETR's 3 x 3 convolution of
  // stride 2 over even and odd sizes (an odd size leaves a phase a column or row past the
  // image), dilated, strided along one dim only, and a stride of 3; the last one's rows are too
  // short for the phases and go through the maps.
  manual_seed(72);
  const WindowGeometry detr{{3, 3}, {2, 2}, {1, 1}, {1, 1}};
  check_columns(detr, 32, 32);
  check_columns(detr, 9, 33);
  check_columns({{3, 3}, {2, 2}, {2, 2}, {2, 2}}, 7, 33);
  check_columns({{2, 3}, {1, 3}, {1, 1}, {2, 1}}, 5, 47);
  check_columns({{3, 1}, {3, 1}, {1, 0}, {1, 1}}, 10, 20);
  check_columns(detr, 16, 16);
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

namespace {

// Max pooling by its definition, for one plane: each window's taps in row-major order, a tap
// winning when it is larger or NaN (the first of equal maxima, the last NaN).
std::pair<std::vector<float>, std::vector<int64_t>> max_pool_by_definition(
    const std::vector<float>& x, int64_t height, int64_t width, int64_t k, int64_t s) {
  std::vector<float> y;
  std::vector<int64_t> at;
  for (int64_t oh = 0; oh + k <= height; oh += s)
    for (int64_t ow = 0; ow + k <= width; ow += s) {
      float best = 0;
      int64_t best_at = -1;
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < k; ++j) {
          const int64_t pixel = (oh + i) * width + ow + j;
          const float v = x[static_cast<size_t>(pixel)];
          if (best_at < 0 || v > best || std::isnan(v)) best = v, best_at = pixel;
        }
      y.push_back(best);
      at.push_back(best_at);
    }
  return {y, at};
}

}  // namespace

TEST_CASE("max_pool2d: the unpadded kernels (2 and 3, stride 1 and 2) follow the definition") {
  // Widths that give rows of 1 to 20 windows (the kernel's groups of 8 and 4 lanes and their
  // shifted last group), on values with many ties and a few NaNs.
  manual_seed(73);
  for (const auto& [k, s] : {std::pair<int64_t, int64_t>{2, 2}, {3, 2}, {3, 1}, {2, 1}})
    for (int64_t width = k; width <= 2 * k + 20 * s; width += 3) {
      const int64_t height = k + s + 1;
      std::vector<float> x = floor(rand({2, 1, height, width}) * 4.0f).to_vector();
      for (size_t i = 5; i < x.size(); i += 23) x[i] = std::nanf("");
      const Tensor input = tensor(x, {2, 1, height, width});
      const auto [y, indices] = max_pool2d_with_indices(input, {{k, k}, {s, s}, {0, 0}, {1, 1}});
      const std::vector<float> yv = y.to_vector();
      const std::vector<int64_t> iv = indices.to_vector_i64();
      const auto plane = static_cast<size_t>(height * width);
      for (size_t p = 0; p < 2; ++p) {
        const auto [want, want_at] = max_pool_by_definition(
            std::vector<float>(x.begin() + p * plane, x.begin() + (p + 1) * plane), height,
            width, k, s);
        const size_t n = want.size();
        REQUIRE(yv.size() == 2 * n);
        for (size_t o = 0; o < n; ++o) {
          INFO("kernel " << k << ", stride " << s << ", width " << width << ", window " << o);
          CHECK(iv[p * n + o] == want_at[o]);
          CHECK((std::isnan(yv[p * n + o]) ? std::isnan(want[o]) : yv[p * n + o] == want[o]));
        }
      }
    }
}

namespace {

struct Tolerance {
  float rtol, atol;
};

// A fused op against the formula it stands for, on copies of the same (x, weight, bias): the
// values, and the gradient of sum(out * g) with respect to each of the three.
void check_against_reference(
    const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& fused,
    const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& reference,
    const std::vector<Tensor>& inputs, const Tensor& g, Tolerance values,
    const std::vector<Tolerance>& grads) {
  std::vector<Tensor> a, b;
  for (const Tensor& t : inputs) {
    a.push_back(t.clone().requires_grad_());
    b.push_back(t.clone().requires_grad_());
  }
  const Tensor out = fused(a[0], a[1], a[2]), want = reference(b[0], b[1], b[2]);
  check_close(out, want, values.rtol, values.atol, "values");
  sum(out * g).backward();
  sum(want * g).backward();
  const char* names[] = {"d/dx", "d/dweight", "d/dbias"};
  for (size_t i = 0; i < 3; ++i)
    check_close(a[i].grad(), b[i].grad(), grads[i].rtol, grads[i].atol, names[i]);
}

}  // namespace

TEST_CASE("conv2d_im2col: a chunk of images at a time equals one GEMM over the batch") {
  // 16 channels of 48x48 under 3x3 give about 1.3 MB of columns an image, so the CPU takes one
  // image a chunk: three chunks. The reference is the whole batch's columns times the weight.
  manual_seed(74);
  for (const int64_t groups : {1, 2}) {
    const Tensor x0 = randn({3, 16, 48, 48}), w0 = randn({8, 16 / groups, 3, 3}) * 0.1f;
    const WindowGeometry w{{3, 3}, {1, 1}, {1, 1}, {1, 1}};
    const auto whole_batch = [&](const Tensor& x, const Tensor& weight, const Tensor& bias) {
      const Tensor cols = im2col(x, w, 0.0f, true).reshape({groups, 16 / groups * 9, 3 * 2304});
      const Tensor y = matmul(weight.reshape({groups, 8 / groups, -1}), cols);
      return (y.reshape({8, 3, 2304}).transpose(0, 1) + bias.reshape({1, 8, 1}))
          .reshape({3, 8, 48, 48});
    };
    INFO("groups " << groups);
    check_against_reference(
        [&](const Tensor& x, const Tensor& weight, const Tensor& bias) {
          return conv2d_im2col(x, weight, bias, w, groups);
        },
        whole_batch, {x0, w0, randn({8})}, randn({3, 8, 48, 48}), {1e-4f, 1e-4f},
        {{1e-4f, 1e-4f}, {1e-3f, 1e-3f}, {1e-3f, 1e-3f}});
  }
}

TEST_CASE("fused batch_norm equals the paper's formula in ops, values and gradients") {
  manual_seed(72);
  const Tensor x0 = randn({4, 3, 5, 6}) * 3.0f + 1.5f;
  Tensor running_mean = zeros({3}), running_var = ones({3});
  check_against_reference(
      [&](const Tensor& x, const Tensor& weight, const Tensor& bias) {
        return batch_norm(x, weight, bias, running_mean, running_var, true, 0.1f, 1e-5f);
      },
      [](const Tensor& x, const Tensor& weight, const Tensor& bias) {
        return batch_norm_in_ops(x, weight, bias, 1e-5f);
      },
      {x0, randn({3}), randn({3})}, randn({4, 3, 5, 6}), {1e-4f, 1e-5f},
      {{1e-3f, 1e-5f}, {1e-4f, 1e-4f}, {1e-4f, 1e-4f}});
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
