// Swin's window partition / reverse and the tables of its window attention (see
// models/swin_window.h).
#include "models/swin_window.h"

#include <vector>

#include "autograd/ops.h"
#include "core/error.h"

namespace loom::models {

namespace {

void check_window(const char* op, int64_t height, int64_t width, int64_t window) {
  LOOM_CHECK(window > 0 && height > 0 && width > 0 && height % window == 0 && width % window == 0,
             "{}: the map {}x{} is not a whole number of {}x{} windows", op, height, width, window,
             window);
}

}  // namespace

Tensor window_partition(const Tensor& x, int64_t window) {
  LOOM_CHECK(x.defined() && x.dim() == 4, "window_partition: expected x [B, H, W, C], got {}",
             x.defined() ? shape_str(x.shape()) : "undefined");
  const int64_t B = x.size(0), H = x.size(1), W = x.size(2), C = x.size(3), w = window;
  check_window("window_partition", H, W, w);
  return x.reshape({B, H / w, w, W / w, w, C})  // (B, H/w, w, W/w, w, C)
      .permute({0, 1, 3, 2, 4, 5})              // (B, H/w, W/w, w, w, C)
      .reshape({B * (H / w) * (W / w), w * w, C});  // (B*nW, w*w, C): one copy
}

Tensor window_reverse(const Tensor& windows, int64_t window, int64_t height, int64_t width) {
  const int64_t w = window;
  check_window("window_reverse", height, width, w);
  const int64_t per_image = (height / w) * (width / w);
  LOOM_CHECK(windows.defined() && windows.dim() == 3 && windows.size(1) == w * w &&
                 windows.size(0) % per_image == 0,
             "window_reverse: expected windows [B * {}, {}, C] of a {}x{} map, got {}", per_image,
             w * w, height, width, windows.defined() ? shape_str(windows.shape()) : "undefined");
  const int64_t B = windows.size(0) / per_image, C = windows.size(2);
  return windows.reshape({B, height / w, width / w, w, w, C})  // (B, H/w, W/w, w, w, C)
      .permute({0, 1, 3, 2, 4, 5})                             // (B, H/w, w, W/w, w, C)
      .reshape({B, height, width, C});                         // (B, H, W, C): one copy
}

Tensor relative_position_index(int64_t window, Device device) {
  LOOM_CHECK(window > 0, "relative_position_index: window {} must be positive", window);
  const int64_t w = window, N = w * w;
  std::vector<int64_t> index(static_cast<size_t>(N * N));
  for (int64_t i = 0; i < N; ++i)      // query pixel (i / w, i % w)
    for (int64_t j = 0; j < N; ++j) {  // key pixel (j / w, j % w)
      const int64_t dy = i / w - j / w + (w - 1), dx = i % w - j % w + (w - 1);  // in [0, 2w-2]
      index[static_cast<size_t>(i * N + j)] = dy * (2 * w - 1) + dx;
    }
  return tensor_i64(index, {N, N}).to(device);  // (N, N)
}

Tensor shifted_window_mask(int64_t height, int64_t width, int64_t window, int64_t shift,
                           Device device) {
  check_window("shifted_window_mask", height, width, window);
  LOOM_CHECK(shift > 0 && shift < window,
             "shifted_window_mask: shift {} outside (0, window {})", shift, window);
  // Region label along one axis of length n: [0, n - w) -> 0, [n - w, n - shift) -> 1, rest 2.
  auto region = [&](int64_t p, int64_t n) {
    return p < n - window ? 0 : (p < n - shift ? 1 : 2);
  };
  std::vector<float> labels(static_cast<size_t>(height * width));  // (H, W) map of labels 0..8
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x)
      labels[static_cast<size_t>(y * width + x)] =
          static_cast<float>(3 * region(y, height) + region(x, width));
  const Tensor win = window_partition(tensor(labels, {1, height, width, 1}), window)  // (nW, N, 1)
                         .squeeze(2);                                                 // (nW, N)
  const Tensor differs = ne(win.unsqueeze(1), win.unsqueeze(2));  // (nW, N, N): key j vs query i
  return (differs * -100.0f).to(device);                          // (nW, N, N) 0 / -100
}

}  // namespace loom::models
