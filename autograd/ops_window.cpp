// The sliding-window ops (backends/window) and batch normalisation (backends/batch_norm):
// im2col and col2im, each the other's adjoint, so each one's backward is the other; max pooling
// with the positions of its maxima; and batch_norm with its statistics and backward fused per
// channel. nn::functional's conv2d, pooling and batch_norm are built on these.
#include "autograd/internal.h"

namespace loom {

namespace {

// x [N, C, H, W] under window w: the stack the kernels see, planes = N * C images of H x W, and
// the window positions each way. Names `op` when x is not a float32 image batch, the window is
// not valid or the image is smaller than the window.
struct ImageStack {
  int64_t planes, height, width, out_h, out_w;
};

ImageStack image_stack(const Tensor& x, const WindowGeometry& w, const char* op) {
  check_window_geometry(w, op);
  detail::check_float(x, op);
  LOOM_CHECK(x.dim() == 4, "{}: expected input [N, C, H, W], got {}", op, shape_str(x.shape()));
  const ImageStack s{x.size(0) * x.size(1), x.size(2), x.size(3), w.output_size(0, x.size(2)),
                     w.output_size(1, x.size(3))};
  LOOM_CHECK(s.out_h > 0 && s.out_w > 0, "{}: input {} is smaller than the window", op,
             shape_str(x.shape()));
  return s;
}

}  // namespace

Tensor im2col(const Tensor& x, const WindowGeometry& w, float pad_value, bool batch_last) {
  const ImageStack s = image_stack(x, w, "im2col");
  const int64_t n = x.size(0), c = x.size(1), taps = w.kernel[0] * w.kernel[1];
  const int64_t positions = s.out_h * s.out_w;
  const Shape shape = batch_last ? Shape{c, taps, n, positions} : Shape{n, c, taps, positions};
  Tensor cols = Tensor::empty(shape, DType::Float32, x.device());
  if (s.planes > 0)
    backend(x.device())
        .im2col(x.detach(), {n, c, batch_last}, s.height, s.width, w, pad_value, cols);
  const int64_t height = s.height, width = s.width;
  return autograd::record("im2col", {x}, cols, [height, width, w, batch_last](const Tensor& g) {
    return std::vector<Tensor>{col2im(g, height, width, w, batch_last)};  // recorded if need be
  });
}

Tensor col2im(const Tensor& cols, int64_t height, int64_t width, const WindowGeometry& w,
              bool batch_last) {
  check_window_geometry(w, "col2im");
  detail::check_float(cols, "col2im");
  const int64_t taps = w.kernel[0] * w.kernel[1];
  const int64_t positions = w.output_size(0, height) * w.output_size(1, width);
  const int64_t images = cols.dim() == 4 ? cols.size(batch_last ? 2 : 0) : 0;
  const int64_t channels = cols.dim() == 4 ? cols.size(batch_last ? 0 : 1) : 0;
  const Shape expected = batch_last ? Shape{channels, taps, images, positions}
                                    : Shape{images, channels, taps, positions};
  LOOM_CHECK(cols.dim() == 4 && cols.shape() == expected && height > 0 && width > 0,
             "col2im: columns {} do not match a {}x{} image under a {}x{} kernel",
             shape_str(cols.shape()), height, width, w.kernel[0], w.kernel[1]);
  Tensor x = Tensor::empty({images, channels, height, width}, DType::Float32, cols.device());
  if (x.numel() > 0)
    backend(cols.device())
        .col2im(cols.detach(), {images, channels, batch_last}, height, width, w, x);
  return autograd::record("col2im", {cols}, x, [w, batch_last](const Tensor& g) {
    return std::vector<Tensor>{im2col(g, w, 0.0f, batch_last)};
  });
}

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const WindowGeometry& w) {
  const ImageStack s = image_stack(x, w, "max_pool2d");
  const int64_t planes = s.planes, height = s.height, width = s.width;
  const Shape out_shape{x.size(0), x.size(1), s.out_h, s.out_w};
  Tensor y = Tensor::empty(out_shape, DType::Float32, x.device());
  Tensor indices = Tensor::empty(out_shape, DType::Int64, x.device());
  if (planes > 0)
    backend(x.device()).max_pool2d(x.detach(), planes, height, width, w, y, indices);
  const Shape x_shape = x.shape();
  y = autograd::record("max_pool2d", {x}, y,
                       [indices, x_shape, planes, height, width, w](const Tensor& g) {
    if (autograd::building_graph({g})) {  // create_graph: the same sums as a recorded scatter_add
      const Shape flat{x_shape[0], x_shape[1], -1};
      const Tensor dx = scatter_add(zeros({x_shape[0], x_shape[1], height * width}, g.device()),
                                    2, indices.reshape(flat), g.reshape(flat));
      return std::vector<Tensor>{dx.reshape(x_shape)};
    }
    Tensor dx = Tensor::empty(x_shape, DType::Float32, g.device());
    if (planes > 0)
      backend(g.device()).max_pool2d_backward(g.contiguous(), indices, planes, height, width, w,
                                              dx);
    return std::vector<Tensor>{dx};
  });
  return {y, indices};
}

namespace {

// batch_norm's backward as recorded ops, for a backward that builds a graph (create_graph): the
// formulas of backends/batch_norm/batch_norm.h with the statistics recomputed from x [N, C, S]
// in ops (training), or the fixed rstd [1, C, 1] (evaluation). Means and sums over dims 0, 2.
std::vector<Tensor> batch_norm_grad_graph(const Tensor& g, const Tensor& x, const Tensor& w,
                                          const Tensor& fixed_mean, const Tensor& fixed_rstd,
                                          bool training, float eps) {
  const Shape channel{1, x.size(1), 1}, dims{0, 2};
  const Tensor mu = training ? mean(x, dims, true) : fixed_mean.reshape(channel);
  const Tensor xc = x - mu;
  const Tensor rstd =
      training ? rsqrt(mean(xc * xc, dims, true) + eps) : fixed_rstd.reshape(channel);
  const Tensor xhat = xc * rstd;
  const Tensor dxhat = w.defined() ? g * w.reshape(channel) : g;
  const Tensor dx = training ? (dxhat - mean(dxhat, dims, true) -
                                xhat * mean(dxhat * xhat, dims, true)) * rstd
                             : dxhat * rstd;
  return {dx, sum(g * xhat, dims), sum(g, dims)};
}

void check_channel_vector(const Tensor& t, int64_t channels, const char* what, const Tensor& x) {
  LOOM_CHECK(!t.defined() || (t.shape() == Shape{channels} && t.dtype() == DType::Float32),
             "batch_norm: {} ({} of shape {}) is not a float32 vector of the {} channels of "
             "input {}",
             what, t.defined() ? dtype_name(t.dtype()) : "undefined",
             t.defined() ? shape_str(t.shape()) : "-", channels, shape_str(x.shape()));
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  float momentum, float eps) {
  detail::check_float(input, "batch_norm");
  LOOM_CHECK(input.dim() >= 2, "batch_norm: expected input [N, C, ...], got {}",
             shape_str(input.shape()));
  const int64_t n = input.size(0), channels = input.size(1);
  const int64_t spatial = input.numel() / std::max<int64_t>(n * channels, 1);
  for (const auto& [t, what] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"},
                                std::pair{&running_mean, "running_mean"},
                                std::pair{&running_var, "running_var"}})
    check_channel_vector(*t, channels, what, input);
  LOOM_CHECK(running_mean.defined() == running_var.defined(),
             "batch_norm: running_mean and running_var must be given together");
  LOOM_CHECK(training || running_mean.defined(),
             "batch_norm: evaluation mode needs running statistics (input {})",
             shape_str(input.shape()));
  LOOM_CHECK(!training || n * spatial > 1,
             "batch_norm: expected more than 1 value per channel when training, got input {}",
             shape_str(input.shape()));
  const Tensor xc = input.detach().contiguous();
  Tensor y = Tensor::empty(input.shape(), DType::Float32, input.device());
  if (input.numel() == 0) return y;
  Tensor mean_c, rstd_c;  // [C]: the batch's statistics, or the running ones
  {
    NoGradGuard no_grad;
    if (training) {
      mean_c = Tensor::empty({channels}, DType::Float32, input.device());
      rstd_c = Tensor::empty({channels}, DType::Float32, input.device());
    } else {
      mean_c = running_mean.contiguous();
      rstd_c = rsqrt(running_var + eps).contiguous();
    }
  }
  const Tensor w = weight.defined() ? weight.detach().contiguous() : Tensor();
  const Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();
  backend(input.device())
      .batch_norm(xc, n, channels, spatial, w, b, eps, training, mean_c, rstd_c, y);
  if (training && running_mean.defined()) {
    // PyTorch's update: the running variance takes the unbiased estimate of the batch's.
    NoGradGuard no_grad;
    const float m = static_cast<float>(n * spatial);
    const Tensor var = 1.0f / (rstd_c * rstd_c) - eps;  // the biased variance the kernel used
    Tensor mean_stat = running_mean, var_stat = running_var;  // handles to the same storage
    mean_stat.copy_(mean_stat * (1.0f - momentum) + mean_c * momentum);
    var_stat.copy_(var_stat * (1.0f - momentum) + var * (m / (m - 1.0f) * momentum));
  }
  const bool need_w = weight.defined() && weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  const Tensor xs = detail::saved(input), ws = detail::saved(weight);
  return autograd::record("batch_norm", {input, weight, bias}, y,
                          [=](const Tensor& g) {
    if (autograd::building_graph({g, xs, ws})) {  // create_graph: the backward in ops
      const Shape flat{n, channels, spatial};
      std::vector<Tensor> grads = batch_norm_grad_graph(g.reshape(flat), xs.reshape(flat), ws,
                                                        mean_c, rstd_c, training, eps);
      grads[0] = grads[0].reshape(xs.shape());
      return grads;
    }
    Tensor dx = Tensor::empty(xc.shape(), DType::Float32, xc.device());
    Tensor dw = need_w ? Tensor::empty({channels}, DType::Float32, xc.device()) : Tensor();
    Tensor db = need_b ? Tensor::empty({channels}, DType::Float32, xc.device()) : Tensor();
    backend(xc.device()).batch_norm_backward(g.contiguous(), xc, n, channels, spatial, w, mean_c,
                                             rstd_c, training, dx, dw, db);
    return std::vector<Tensor>{dx, dw, db};
  }, {xc, w});
}

// ---------------------------------------------------------------------------- conv2d
namespace {

// How many images a chunk of conv2d_im2col holds: on the CPU about 2 MB of columns, which stay
// in the cache between im2col and the GEMM (and, backward, between the GEMM and col2im); on a
// GPU the whole batch, one GEMM per group.
int64_t images_per_chunk(const Tensor& x, int64_t column_floats_per_image) {
  if (x.device() != Device::CPU) return std::max<int64_t>(x.size(0), 1);
  constexpr int64_t kChunkFloats = (2 << 20) / sizeof(float);
  return std::clamp<int64_t>(kChunkFloats / std::max<int64_t>(column_floats_per_image, 1), 1,
                             std::max<int64_t>(x.size(0), 1));
}

// The most bytes of columns a convolution keeps from its forward for its weight's gradient.
// PyTorch's CPU convolution (slow_conv2d) keeps its columns (finput) the same way; a larger
// convolution (a ResNet-50's on full-size images) computes them again in its backward instead.
// DETR-fmnist's backbone keeps 18 MB, and its step spent 2.5 ms of 52 recomputing them.
constexpr int64_t kKeptColumnsBytes = int64_t{64} << 20;

}  // namespace

Tensor conv2d_im2col(const Tensor& x, const Tensor& weight, const Tensor& bias,
                     const WindowGeometry& w, int64_t groups) {
  const ImageStack s = image_stack(x, w, "conv2d");
  detail::check_float(weight, "conv2d");
  const int64_t n = x.size(0), c_in = x.size(1), c_out = weight.size(0), g = groups;
  const int64_t taps = w.kernel[0] * w.kernel[1], positions = s.out_h * s.out_w;  // kk, L
  const int64_t k_group = c_in / g * taps;  // K: a group's rows of columns
  const int64_t chunk = images_per_chunk(x, c_in * taps * positions);
  // Columns of images [n0, n0 + count) with the batch last, as [G, K, count * L].
  const auto columns = [=](const Tensor& images, int64_t n0, int64_t count) {
    return im2col(images.narrow(0, n0, count), w, 0.0f, /*batch_last=*/true)
        .reshape({g, k_group, count * positions});
  };
  const Tensor xd = x.detach(), wd = weight.detach().reshape({g, c_out / g, k_group});
  const Tensor bias_row = bias.defined() ? bias.detach().reshape({1, c_out, 1}) : Tensor();
  Tensor y = Tensor::empty({n, c_out, positions}, DType::Float32, x.device());
  // Each chunk's columns, when the weight's gradient will want them and they fit
  // kKeptColumnsBytes (else the backward computes them again).
  const bool keep_columns = autograd::grad_mode_enabled() && weight.requires_grad() &&
                            n * c_in * taps * positions * int64_t{sizeof(float)} <=
                                kKeptColumnsBytes;
  std::vector<Tensor> kept;
  {
    NoGradGuard no_grad;
    for (int64_t n0 = 0; n0 < n; n0 += chunk) {
      const int64_t count = std::min(chunk, n - n0);
      const Tensor cols = columns(xd, n0, count);  // [G, K, count * L]
      if (keep_columns) kept.push_back(cols);
      // [G, C_out/G, K] @ [G, K, count * L] -> [C_out, count, L], then batch first into y.
      const Tensor product = matmul(wd, cols);
      Tensor out = y.narrow(0, n0, count);
      out.copy_(product.reshape({c_out, count, positions}).transpose(0, 1));
      if (bias_row.defined()) out.add_(bias_row);
    }
  }
  y = y.reshape({n, c_out, s.out_h, s.out_w});
  const int64_t height = s.height, width = s.width;
  const Tensor xs = detail::saved(x), ws = detail::saved(weight);
  const bool need_x = x.requires_grad(), need_w = weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  return autograd::record("conv2d", {x, weight, bias}, y, [=](const Tensor& grad) {
    // The output's gradient as the GEMM's [G, C_out/G, count * L], images [n0, n0 + count).
    const auto grad_rows = [=](const Tensor& gr, int64_t n0, int64_t count) {
      return gr.narrow(0, n0, count).reshape({count, c_out, positions}).transpose(0, 1)
          .reshape({g, c_out / g, count * positions});
    };
    if (autograd::building_graph({grad, xs, ws})) {  // create_graph: the whole batch in ops
      const Tensor gy = grad_rows(grad, 0, n), wg = ws.reshape({g, c_out / g, k_group});
      const Tensor dw = matmul(gy, columns(xs, 0, n).transpose(1, 2)).reshape(ws.shape());
      const Tensor dcols = matmul(wg.transpose(1, 2), gy).reshape({c_in, taps, n, positions});
      const Tensor db = need_b ? sum(grad, {0, 2, 3}) : Tensor();
      return std::vector<Tensor>{col2im(dcols, height, width, w, true), dw, db};
    }
    // dweight = sum over chunks of grad @ columns^T; dx = col2im(weight^T @ grad) per chunk;
    // dbias = the sum of grad's rows, chunk by chunk.
    const auto zero = [&](const Shape& shape) {
      return zeros(shape, DType::Float32, xs.device());
    };
    Tensor dw = need_w ? zero({g, c_out / g, k_group}) : Tensor();
    Tensor db = need_b ? zero({g, c_out / g}) : Tensor();
    Tensor dx = need_x ? Tensor::empty(xs.shape(), DType::Float32, xs.device()) : Tensor();
    const Tensor wt = wd.transpose(1, 2);  // [G, K, C_out/G]
    for (int64_t n0 = 0; n0 < n; n0 += chunk) {
      const int64_t count = std::min(chunk, n - n0);
      const Tensor gy = grad_rows(grad, n0, count);
      if (need_b) db.add_(sum(gy, {2}));
      if (need_w) {
        const Tensor cols = kept.empty() ? columns(xd, n0, count) : kept[n0 / chunk];
        dw.add_(matmul(gy, cols.transpose(1, 2)));
      }
      if (!need_x) continue;
      const Tensor dcols = matmul(wt, gy);  // [G, K, count * L] = [C_in, kk, count, L]
      Tensor dx_chunk = dx.narrow(0, n0, count);
      backend(xs.device()).col2im(dcols, {count, c_in, true}, height, width, w, dx_chunk);
    }
    return std::vector<Tensor>{dx, need_w ? dw.reshape(ws.shape()) : Tensor(),
                               need_b ? db.reshape({c_out}) : Tensor()};
  }, {x, weight});
}

}  // namespace loom
