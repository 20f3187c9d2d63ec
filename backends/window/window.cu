// Sliding windows (window.h) on the GPU, one thread per output element. col2im and the pooling
// backward gather rather than scatter: each image pixel sums, over the windows that contain it,
// the column entries (or the gradients of the maxima) that came from it, so no two threads
// write one place and the sums come out in the same order on every run (Caffe's col2im).
#include <cstdint>

#include "backends/cuda/device.h"
#include "backends/cuda/device_utils.cuh"
#include "backends/window/window.h"

namespace loom::cuda {
namespace {

// The window geometry by value in kernel arguments.
struct Geometry {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw, out_h, out_w;
};

Geometry geometry(const WindowGeometry& w, int64_t height, int64_t width) {
  return {w.kernel[0],   w.kernel[1],   w.stride[0],   w.stride[1],
          w.padding[0],  w.padding[1],  w.dilation[0], w.dilation[1],
          w.output_size(0, height), w.output_size(1, width)};
}

// cols[row(p, i * kw + j), oh * out_w + ow] = x[p, oh * sh + i * dh - ph, ow * sw + j * dw - pw].
__global__ void im2col_kernel(const float* x, ColumnLayout layout, int64_t height, int64_t width,
                              Geometry g, float pad_value, float* cols) {
  const int64_t positions = g.out_h * g.out_w, kk = g.kh * g.kw;
  LOOM_GRID_STRIDE_LOOP(t, layout.planes() * kk * positions) {
    const int64_t l = t % positions, k = (t / positions) % kk, p = t / (positions * kk);
    const int64_t r = (l / g.out_w) * g.sh + (k / g.kw) * g.dh - g.ph;
    const int64_t c = (l % g.out_w) * g.sw + (k % g.kw) * g.dw - g.pw;
    const bool in = r >= 0 && r < height && c >= 0 && c < width;
    cols[layout.row(p, k, kk) * positions + l] = in ? x[(p * height + r) * width + c] : pad_value;
  }
}

// For pixel (r, c), the window positions (oh, ow) and kernel offsets (i, j) that read it:
// oh * sh + i * dh - ph == r. Calls fn(i, j, oh, ow) for each.
template <class Fn>
__device__ void for_each_window_of(const Geometry& g, int64_t r, int64_t c, const Fn& fn) {
  for (int64_t i = 0; i < g.kh; ++i) {
    const int64_t rr = r + g.ph - i * g.dh;
    if (rr < 0 || rr % g.sh != 0 || rr / g.sh >= g.out_h) continue;
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t cc = c + g.pw - j * g.dw;
      if (cc < 0 || cc % g.sw != 0 || cc / g.sw >= g.out_w) continue;
      fn(i, j, rr / g.sh, cc / g.sw);
    }
  }
}

__global__ void col2im_kernel(const float* cols, ColumnLayout layout, int64_t height,
                              int64_t width, Geometry g, float* x) {
  const int64_t positions = g.out_h * g.out_w, kk = g.kh * g.kw;
  LOOM_GRID_STRIDE_LOOP(t, layout.planes() * height * width) {
    const int64_t c = t % width, r = (t / width) % height, p = t / (height * width);
    float sum = 0.0f;
    for_each_window_of(g, r, c, [&](int64_t i, int64_t j, int64_t oh, int64_t ow) {
      sum += cols[layout.row(p, i * g.kw + j, kk) * positions + oh * g.out_w + ow];
    });
    x[t] = sum;
  }
}

// As the CPU's max_pool2d (PyTorch's loop): a value wins when it is larger or NaN.
__global__ void max_pool2d_kernel(const float* x, int64_t planes, int64_t height, int64_t width,
                                  Geometry g, float* y, int64_t* argmax) {
  LOOM_GRID_STRIDE_LOOP(t, planes * g.out_h * g.out_w) {
    const int64_t ow = t % g.out_w, oh = (t / g.out_w) % g.out_h, p = t / (g.out_h * g.out_w);
    const float* image = x + p * height * width;
    float best = -INFINITY;
    int64_t best_at = -1;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t r = oh * g.sh + i * g.dh - g.ph;
      if (r < 0 || r >= height) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t c = ow * g.sw + j * g.dw - g.pw;
        if (c < 0 || c >= width) continue;
        const float v = image[r * width + c];
        if (best_at < 0) best_at = r * width + c;  // the first pixel inside, for -inf windows
        if (v > best || v != v) best = v, best_at = r * width + c;  // v != v: NaN
      }
    }
    y[t] = best;
    argmax[t] = best_at;
  }
}

__global__ void max_pool2d_backward_kernel(const float* dy, const int64_t* argmax, int64_t planes,
                                           int64_t height, int64_t width, Geometry g, float* dx) {
  const int64_t positions = g.out_h * g.out_w;
  LOOM_GRID_STRIDE_LOOP(t, planes * height * width) {
    const int64_t c = t % width, r = (t / width) % height, p = t / (height * width);
    const int64_t at = r * width + c, base = p * positions;
    float sum = 0.0f;
    for_each_window_of(g, r, c, [&](int64_t, int64_t, int64_t oh, int64_t ow) {
      const int64_t o = base + oh * g.out_w + ow;
      if (argmax[o] == at) sum += dy[o];
    });
    dx[t] = sum;
  }
}

}  // namespace

// ---------------------------------------------------------------------------- the kernels
void im2col(const Tensor& x, const ColumnLayout& layout, int64_t height, int64_t width,
            const WindowGeometry& w, float pad_value, Tensor& cols) {
  im2col_kernel<<<grid_for(cols.numel()), kBlock, 0, stream()>>>(
      x.data_ptr<float>(), layout, height, width, geometry(w, height, width), pad_value,
      cols.data_ptr<float>());
  LOOM_CUDA_CHECK_LAUNCH();
}

void col2im(const Tensor& cols, const ColumnLayout& layout, int64_t height, int64_t width,
            const WindowGeometry& w, Tensor& x) {
  col2im_kernel<<<grid_for(x.numel()), kBlock, 0, stream()>>>(
      cols.data_ptr<float>(), layout, height, width, geometry(w, height, width),
      x.data_ptr<float>());
  LOOM_CUDA_CHECK_LAUNCH();
}

void max_pool2d(const Tensor& x, int64_t planes, int64_t height, int64_t width,
                const WindowGeometry& w, Tensor& y, Tensor& argmax) {
  max_pool2d_kernel<<<grid_for(y.numel()), kBlock, 0, stream()>>>(
      x.data_ptr<float>(), planes, height, width, geometry(w, height, width), y.data_ptr<float>(),
      argmax.data_ptr<int64_t>());
  LOOM_CUDA_CHECK_LAUNCH();
}

void max_pool2d_backward(const Tensor& dy, const Tensor& argmax, int64_t planes, int64_t height,
                         int64_t width, const WindowGeometry& w, Tensor& dx) {
  max_pool2d_backward_kernel<<<grid_for(dx.numel()), kBlock, 0, stream()>>>(
      dy.data_ptr<float>(), argmax.data_ptr<int64_t>(), planes, height, width,
      geometry(w, height, width), dx.data_ptr<float>());
  LOOM_CUDA_CHECK_LAUNCH();
}

}  // namespace loom::cuda
