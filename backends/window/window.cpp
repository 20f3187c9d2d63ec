// Sliding windows (window.h): Backend's checks, then the CPU loops, one plane (an image channel)
// per task: each plane's columns, sums and maxima are written by one thread, so col2im and the
// pooling backward add into their plane without races, in the same order on any thread count.
#include "backends/window/window.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/backend.h"
#include "backends/contract.h"
#include "backends/cpu/loops.h"
#include "core/error.h"

namespace loom {

// ---------------------------------------------------------------------------- the public methods
void check_window_geometry(const WindowGeometry& w, const char* op) {
  for (int d = 0; d < 2; ++d)
    LOOM_CHECK(w.kernel[d] > 0 && w.stride[d] > 0 && w.padding[d] >= 0 && w.dilation[d] > 0,
               "{}: invalid window: kernel ({}, {}), stride ({}, {}), padding ({}, {}), "
               "dilation ({}, {})",
               op, w.kernel[0], w.kernel[1], w.stride[0], w.stride[1], w.padding[0],
               w.padding[1], w.dilation[0], w.dilation[1]);
}

namespace {

struct OutputSize {
  int64_t h, w;
};

// Positive extents, a valid window and at least one window position each way.
OutputSize check_window(const Contract& c, int64_t planes, int64_t height, int64_t width,
                        const WindowGeometry& w) {
  LOOM_CHECK(planes > 0 && height > 0 && width > 0, "{}: empty image stack [{}, {}, {}]", c.op,
             planes, height, width);
  check_window_geometry(w, c.op);
  const OutputSize out{w.output_size(0, height), w.output_size(1, width)};
  LOOM_CHECK(out.h > 0 && out.w > 0, "{}: an image of {}x{} is smaller than the window", c.op,
             height, width);
  return out;
}

}  // namespace

void Backend::im2col(const Tensor& x, const ColumnLayout& layout, int64_t height, int64_t width,
                     const WindowGeometry& w, float pad_value, Tensor& cols) {
  const Contract c{device_, "im2col"};
  LOOM_CHECK(layout.images > 0 && layout.channels > 0, "im2col: empty stack of {} images of {} "
             "channels", layout.images, layout.channels);
  const int64_t planes = layout.planes();
  const OutputSize out = check_window(c, planes, height, width, w);
  c.input(x, DType::Float32, planes * height * width, "input");
  c.output(cols, DType::Float32, planes * w.kernel[0] * w.kernel[1] * out.h * out.w, "cols");
  run(cpu::im2col, LOOM_CUDA_IMPL(cuda::im2col), contiguous(x), layout, height, width, w,
      pad_value, cols);
}

void Backend::col2im(const Tensor& cols, const ColumnLayout& layout, int64_t height, int64_t width,
                     const WindowGeometry& w, Tensor& x) {
  const Contract c{device_, "col2im"};
  LOOM_CHECK(layout.images > 0 && layout.channels > 0, "col2im: empty stack of {} images of {} "
             "channels", layout.images, layout.channels);
  const int64_t planes = layout.planes();
  const OutputSize out = check_window(c, planes, height, width, w);
  c.input(cols, DType::Float32, planes * w.kernel[0] * w.kernel[1] * out.h * out.w, "cols");
  c.output(x, DType::Float32, planes * height * width, "out");
  run(cpu::col2im, LOOM_CUDA_IMPL(cuda::col2im), contiguous(cols), layout, height, width, w,
      x);
}

void Backend::max_pool2d(const Tensor& x, int64_t planes, int64_t height, int64_t width,
                         const WindowGeometry& w, Tensor& y, Tensor& argmax) {
  const Contract c{device_, "max_pool2d"};
  const OutputSize out = check_window(c, planes, height, width, w);
  c.input(x, DType::Float32, planes * height * width, "input");
  c.output(y, DType::Float32, planes * out.h * out.w, "out");
  c.output(argmax, DType::Int64, planes * out.h * out.w, "indices");
  run(cpu::max_pool2d, LOOM_CUDA_IMPL(cuda::max_pool2d), contiguous(x), planes, height, width, w,
      y, argmax);
}

void Backend::max_pool2d_backward(const Tensor& dy, const Tensor& argmax, int64_t planes,
                                  int64_t height, int64_t width, const WindowGeometry& w,
                                  Tensor& dx) {
  const Contract c{device_, "max_pool2d_backward"};
  const OutputSize out = check_window(c, planes, height, width, w);
  c.input(dy, DType::Float32, planes * out.h * out.w, "grad");
  c.input(argmax, DType::Int64, planes * out.h * out.w, "indices");
  c.output(dx, DType::Float32, planes * height * width, "out");
  run(cpu::max_pool2d_backward, LOOM_CUDA_IMPL(cuda::max_pool2d_backward), contiguous(dy),
      contiguous(argmax), planes, height, width, w, dx);
}

// ---------------------------------------------------------------------------- the CPU
namespace cpu {
namespace {

// The window positions o in [lo, hi) whose pixel o * stride + offset lies inside [0, size).
struct Span {
  int64_t lo, hi;
};
Span inside(int64_t offset, int64_t stride, int64_t size, int64_t positions) {
  const int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int64_t hi = size - offset <= 0 ? 0 : (size - offset + stride - 1) / stride;
  return {std::min(lo, positions), std::clamp(hi, std::min(lo, positions), positions)};
}

// What im2col and col2im both walk: each plane's kh * kw taps, a column of out_h * out_w
// positions per tap.
struct Columns {
  int64_t out_h, out_w, taps, positions;
};
Columns columns_of(const WindowGeometry& w, int64_t height, int64_t width) {
  const int64_t out_h = w.output_size(0, height), out_w = w.output_size(1, width);
  return {out_h, out_w, w.kernel[0] * w.kernel[1], out_h * out_w};
}

// The plane task t works on. With the batch last, the rows of one channel's tap for images
// 0, 1, 2, ... lie one after another, so going channel by channel reads or writes each tap's
// rows in memory order (nine streams for a 3x3 kernel, not nine jumps per plane).
int64_t plane_of_task(const ColumnLayout& layout, int64_t t) {
  return layout.batch_last ? (t % layout.images) * layout.channels + t / layout.images : t;
}

// A column of a window at stride 1 whose rows are as wide as the image's (out_w == width): the
// image moved up by `down` rows and left by `right` columns (either may be negative), pad_value
// where that leaves the image. The rows inside are one contiguous copy, long enough to vectorise
// well where a copy per row of 14 or 28 pixels is mostly overhead; the pixels that copy brings
// round from the next or previous row (each row's first or last columns) then become pad_value.
void shifted_copy(const float* image, int64_t height, int64_t width, int64_t out_h, int64_t down,
                  int64_t right, float pad_value, float* col) {
  const int64_t first_row = std::clamp<int64_t>(-down, 0, out_h);  // rows [first, last) inside
  const int64_t last_row = std::clamp<int64_t>(height - down, first_row, out_h);
  std::fill(col, col + first_row * width, pad_value);
  std::fill(col + last_row * width, col + out_h * width, pad_value);
  if (first_row == last_row) return;
  // Without the first `-right` pixels (or the last `right`), so that no read leaves the image.
  const int64_t begin = first_row * width + std::max<int64_t>(-right, 0);
  const int64_t end = last_row * width - std::max<int64_t>(right, 0);
  const float* from = image + down * width + right;
#pragma omp simd
  for (int64_t q = begin; q < end; ++q) col[q] = from[q];
  const int64_t wrapped = std::min(std::abs(right), width);  // per row, at its start or end
  for (int64_t oh = first_row; oh < last_row; ++oh) {
    float* row = col + oh * width + (right < 0 ? 0 : width - wrapped);
    std::fill(row, row + wrapped, pad_value);
  }
}

// Strided windows (a 3 x 3 convolution of stride 2 above all) read a few pixels per row of a
// column: over an 8 x 8 map, 4. Walked row by row, each row costs two fills and a strided loop
// for those few pixels. Instead a call maps, once, each position q of each tap's column to the
// pixel it reads in its plane (row * width + column, or -1 in the padding); the maps depend on
// the geometry alone, and every plane then reads (im2col) or adds into (col2im) its pixels
// through them, one loop over a column's positions that the compiler turns into vector
// gathers. Within one tap no two positions share a pixel (the stride is at least 1), so col2im's
// loop adds each pixel's contributions tap after tap, in the order of the row-by-row loops: the
// same sums. On 2 cores (2026-12-03), detr-fmnist's stride-2 convolutions of 32 images: over
// 16 x 16 maps im2col 527-556 -> 352-357 us and col2im 391-398 -> 314-321, over 8 x 8 maps
// 466-494 -> 193-202 and 295-298 -> 193-201, col2im over 32 x 32 maps 685-687 -> 530-545; rows of
// 32 positions and more (its first convolution's, over 64 x 64) ran faster row by row, and keep
// the rows, as do planes of 2^31 pixels and more.
constexpr int64_t kMappedRows = 32;  // rows of fewer positions than this go through the maps
std::vector<int32_t> tap_pixel_maps(const WindowGeometry& w, int64_t height, int64_t width,
                                    const Columns& c) {
  std::vector<int32_t> maps(static_cast<size_t>(c.taps * c.positions));
  for (int64_t i = 0; i < w.kernel[0]; ++i)
    for (int64_t j = 0; j < w.kernel[1]; ++j) {
      int32_t* map = maps.data() + (i * w.kernel[1] + j) * c.positions;
      for (int64_t oh = 0; oh < c.out_h; ++oh) {
        const int64_t r = oh * w.stride[0] + i * w.dilation[0] - w.padding[0];
        for (int64_t ow = 0; ow < c.out_w; ++ow) {
          const int64_t col = ow * w.stride[1] + j * w.dilation[1] - w.padding[1];
          const bool inside = r >= 0 && r < height && col >= 0 && col < width;
          map[oh * c.out_w + ow] = inside ? static_cast<int32_t>(r * width + col) : -1;
        }
      }
    }
  return maps;
}

bool maps_taps(const WindowGeometry& w, int64_t height, int64_t width, const Columns& c) {
  return w.stride[1] > 1 && c.out_w < kMappedRows && height * width < (int64_t{1} << 31);
}

// A strided window whose positions per row equal the image's pixels per row divided by the
// stride (rounded up), as a 3 x 3 convolution of stride 2 and padding 1 has, reads its image
// through the image's phases (space to depth): phase (a, b) of a plane is the plane of its
// pixels (r * sh + a, c * sw + b), ceil(H / sh) x ceil(W / sw) of them. Tap (i, j) of window
// (oh, ow) reads pixel (oh * sh + o_r, ow * sw + o_c), o_r = i * dh - ph and o_c = j * dw - pw,
// which is pixel (oh + floor(o_r / sh), ow + floor(o_c / sw)) of phase (o_r mod sh, o_c mod sw).
// So a tap's column is one phase moved by a whole number of rows and columns, as a stride-1
// window's column is the image moved (shifted_copy): a few contiguous copies where the maps
// gather one pixel at a time. A phase's pixels past the image's edge (its last row or column
// when H or W is not a multiple of the stride) hold pad_value, as the padding does. col2im adds
// each tap's column into the phases, row by row, and then writes the image from them: each pixel
// takes its contributions tap after tap, as the maps add them, so the sums are the same to the
// bit. A phase's rows must be long enough to pay for the copies' setup: from kPhaseRows
// positions a row on. On 2 cores (2026-12-04), detr-fmnist's convolutions over its batch of 32,
// 32 x 32 -> 16 x 16: im2col 0.59-0.61 -> 0.43-0.45 ms, col2im 0.82-1.03 -> 0.55-0.56; 64 x 64
// -> 32 x 32 (one channel): im2col 0.058 -> 0.037. Over 16 x 16 -> 8 x 8 the maps were faster
// (im2col 0.31 against 0.45), over 8 x 8 -> 4 x 4 far faster (0.15 against 0.57).
constexpr int64_t kPhaseRows = 16;
struct Phases {
  int64_t sh, sw, height, width;  // the strides, and each phase's rows and columns
  int64_t size() const { return height * width; }
  int64_t count() const { return sh * sw; }
  // The columns of phase column b (0 <= b < sw) that lie inside an image `image_width` wide.
  int64_t columns_inside(int64_t b, int64_t image_width) const {
    return (image_width - b + sw - 1) / sw;
  }
};
Phases phases_of(const WindowGeometry& w, int64_t height, int64_t width) {
  const int64_t sh = w.stride[0], sw = w.stride[1];
  return {sh, sw, (height + sh - 1) / sh, (width + sw - 1) / sw};
}
bool uses_phases(const WindowGeometry& w, int64_t height, int64_t width, const Columns& c) {
  return (w.stride[0] > 1 || w.stride[1] > 1) && c.out_w >= kPhaseRows &&
         c.out_w == phases_of(w, height, width).width;
}

// Where tap (i, j) reads: its phase (o_r mod sh, o_c mod sw), at `offset` floats into the
// buffer of split_phases, moved down floor(o_r / sh) rows and right floor(o_c / sw) columns.
struct TapInPhases {
  int64_t offset, down, right;
};
TapInPhases tap_in_phases(const WindowGeometry& w, const Phases& ph, int64_t i, int64_t j) {
  const auto phase_of = [](int64_t o, int64_t s) { return ((o % s) + s) % s; };
  const int64_t o_r = i * w.dilation[0] - w.padding[0], o_c = j * w.dilation[1] - w.padding[1];
  const int64_t a = phase_of(o_r, ph.sh), b = phase_of(o_c, ph.sw);
  return {(a * ph.sw + b) * ph.size(), (o_r - a) / ph.sh, (o_c - b) / ph.sw};
}

// Every phase of one plane into `phases` (phase (a, b) at (a * sw + b) * size()), pad_value for
// the pixels past the image's edge.
void split_phases(const float* image, int64_t height, int64_t width, const Phases& ph,
                  float pad_value, float* phases) {
  for (int64_t a = 0; a < ph.sh; ++a)
    for (int64_t b = 0; b < ph.sw; ++b) {
      float* phase = phases + (a * ph.sw + b) * ph.size();
      const int64_t columns = ph.columns_inside(b, width);
      for (int64_t r = 0; r < ph.height; ++r) {
        float* out = phase + r * ph.width;
        const int64_t row = r * ph.sh + a;
        if (row >= height) {
          std::fill(out, out + ph.width, pad_value);
          continue;
        }
        const float* in = image + row * width + b;
        for (int64_t c = 0; c < columns; ++c) out[c] = in[c * ph.sw];
        std::fill(out + columns, out + ph.width, pad_value);
      }
    }
}

// The image from its phases (split_phases' inverse over the pixels inside the image).
void join_phases(const float* phases, const Phases& ph, int64_t height, int64_t width,
                 float* image) {
  for (int64_t row = 0; row < height; ++row) {
    const int64_t a = row % ph.sh, r = row / ph.sh;
    for (int64_t b = 0; b < ph.sw; ++b) {
      const float* in = phases + (a * ph.sw + b) * ph.size() + r * ph.width;
      float* out = image + row * width + b;
      const int64_t columns = ph.columns_inside(b, width);
      for (int64_t c = 0; c < columns; ++c) out[c * ph.sw] = in[c];
    }
  }
}

// col += into the phase moved down `down` rows and right `right` columns: shifted_copy's adjoint
// (the positions that fall outside the phase give nothing back), row by row.
void shifted_add(const float* col, int64_t out_h, int64_t down, int64_t right, float* phase,
                 int64_t height, int64_t width) {
  const Span cs = inside(right, 1, width, width);
  for (int64_t oh = 0; oh < out_h; ++oh) {
    const int64_t r = oh + down;
    if (r < 0 || r >= height) continue;
    float* row = phase + r * width + right;
    const float* in = col + oh * width;
#pragma omp simd
    for (int64_t ow = cs.lo; ow < cs.hi; ++ow) row[ow] += in[ow];
  }
}

}  // namespace

void im2col(const Tensor& x, const ColumnLayout& layout, int64_t height, int64_t width,
            const WindowGeometry& w, float pad_value, Tensor& cols) {
  // Plain variables, not a structured binding: the lambda below captures them, which clang
  // allows only from version 16 (scripts/fuzz.sh builds with Debian's clang 14).
  const Columns c = columns_of(w, height, width);
  const int64_t out_h = c.out_h, out_w = c.out_w, kk = c.taps, positions = c.positions;
  const float* xp = x.data_ptr<float>();
  float* cp = cols.data_ptr<float>();
  // Stride 1 with the padding that keeps the width (a 3x3 kernel with padding 1, ...).
  const bool same_width = w.stride[0] == 1 && w.stride[1] == 1 && out_w == width;
  if (uses_phases(w, height, width, c)) {
    const Phases ph = phases_of(w, height, width);
    parallel_for_each(layout.planes(), kk * positions, [&](int64_t task) {
      const int64_t p = plane_of_task(layout, task);
      thread_local std::vector<float> buffer;
      buffer.resize(static_cast<size_t>(ph.count() * ph.size()));
      split_phases(xp + p * height * width, height, width, ph, pad_value, buffer.data());
      for (int64_t i = 0; i < w.kernel[0]; ++i)
        for (int64_t j = 0; j < w.kernel[1]; ++j) {
          const TapInPhases t = tap_in_phases(w, ph, i, j);
          shifted_copy(buffer.data() + t.offset, ph.height, ph.width, out_h, t.down, t.right,
                       pad_value, cp + layout.row(p, i * w.kernel[1] + j, kk) * positions);
        }
    });
    return;
  }
  if (maps_taps(w, height, width, c)) {
    const std::vector<int32_t> maps = tap_pixel_maps(w, height, width, c);
    parallel_for_each(layout.planes(), kk * positions, [&](int64_t task) {
      const int64_t p = plane_of_task(layout, task);
      const float* image = xp + p * height * width;
      for (int64_t tap = 0; tap < kk; ++tap) {
        const int32_t* map = maps.data() + tap * positions;
        float* col = cp + layout.row(p, tap, kk) * positions;
#pragma omp simd
        for (int64_t q = 0; q < positions; ++q) col[q] = map[q] >= 0 ? image[map[q]] : pad_value;
      }
    });
    return;
  }
  parallel_for_each(layout.planes(), kk * positions, [&](int64_t task) {
    const int64_t p = plane_of_task(layout, task);
    const float* image = xp + p * height * width;
    for (int64_t i = 0; i < w.kernel[0]; ++i)
      for (int64_t j = 0; j < w.kernel[1]; ++j) {
        float* col = cp + layout.row(p, i * w.kernel[1] + j, kk) * positions;  // [out_h, out_w]
        const int64_t col_offset = j * w.dilation[1] - w.padding[1];
        if (same_width) {
          shifted_copy(image, height, width, out_h, i * w.dilation[0] - w.padding[0], col_offset,
                       pad_value, col);
          continue;
        }
        const Span cs = inside(col_offset, w.stride[1], width, out_w);
        for (int64_t oh = 0; oh < out_h; ++oh, col += out_w) {
          const int64_t r = oh * w.stride[0] + i * w.dilation[0] - w.padding[0];
          if (r < 0 || r >= height) {
            std::fill(col, col + out_w, pad_value);
            continue;
          }
          const float* row = image + r * width + col_offset;
          std::fill(col, col + cs.lo, pad_value);
          if (w.stride[1] == 1)  // a contiguous run: a copy the compiler vectorises
            std::copy(row + cs.lo, row + cs.hi, col + cs.lo);
          else
            for (int64_t ow = cs.lo; ow < cs.hi; ++ow) col[ow] = row[ow * w.stride[1]];
          std::fill(col + cs.hi, col + out_w, pad_value);
        }
      }
  });
}

void col2im(const Tensor& cols, const ColumnLayout& layout, int64_t height, int64_t width,
            const WindowGeometry& w, Tensor& x) {
  const Columns c = columns_of(w, height, width);  // plain variables, as in im2col
  const int64_t out_h = c.out_h, out_w = c.out_w, kk = c.taps, positions = c.positions;
  const float* cp = cols.data_ptr<float>();
  float* xp = x.data_ptr<float>();
  if (uses_phases(w, height, width, c)) {
    const Phases ph = phases_of(w, height, width);
    parallel_for_each(layout.planes(), kk * positions, [&](int64_t task) {
      const int64_t p = plane_of_task(layout, task);
      thread_local std::vector<float> buffer;
      buffer.assign(static_cast<size_t>(ph.count() * ph.size()), 0.0f);
      for (int64_t i = 0; i < w.kernel[0]; ++i)  // tap after tap, as the maps add them
        for (int64_t j = 0; j < w.kernel[1]; ++j) {
          const TapInPhases t = tap_in_phases(w, ph, i, j);
          shifted_add(cp + layout.row(p, i * w.kernel[1] + j, kk) * positions, out_h, t.down,
                      t.right, buffer.data() + t.offset, ph.height, ph.width);
        }
      join_phases(buffer.data(), ph, height, width, xp + p * height * width);
    });
    return;
  }
  if (maps_taps(w, height, width, c)) {
    const std::vector<int32_t> maps = tap_pixel_maps(w, height, width, c);
    parallel_for_each(layout.planes(), kk * positions, [&](int64_t task) {
      const int64_t p = plane_of_task(layout, task);
      float* image = xp + p * height * width;
      std::fill(image, image + height * width, 0.0f);
      for (int64_t tap = 0; tap < kk; ++tap) {  // in the row-by-row loops' order (above)
        const int32_t* map = maps.data() + tap * positions;
        const float* col = cp + layout.row(p, tap, kk) * positions;
#pragma omp simd  // a tap's positions read distinct pixels: no two lanes add to one
        for (int64_t q = 0; q < positions; ++q)
          if (map[q] >= 0) image[map[q]] += col[q];
      }
    });
    return;
  }
  parallel_for_each(layout.planes(), kk * positions, [&](int64_t task) {
    const int64_t p = plane_of_task(layout, task);
    float* image = xp + p * height * width;
    std::fill(image, image + height * width, 0.0f);
    for (int64_t i = 0; i < w.kernel[0]; ++i)
      for (int64_t j = 0; j < w.kernel[1]; ++j) {
        const float* col = cp + layout.row(p, i * w.kernel[1] + j, kk) * positions;
        const int64_t col_offset = j * w.dilation[1] - w.padding[1];
        const Span cs = inside(col_offset, w.stride[1], width, out_w);
        for (int64_t oh = 0; oh < out_h; ++oh, col += out_w) {
          const int64_t r = oh * w.stride[0] + i * w.dilation[0] - w.padding[0];
          if (r < 0 || r >= height) continue;  // a padding row: nothing to give back
          float* row = image + r * width + col_offset;
          if (w.stride[1] == 1) {
#pragma omp simd
            for (int64_t ow = cs.lo; ow < cs.hi; ++ow) row[ow] += col[ow];
          } else {
            for (int64_t ow = cs.lo; ow < cs.hi; ++ow) row[ow * w.stride[1]] += col[ow];
          }
        }
      }
  });
}

namespace {

// The common windows (no padding, no dilation, a square kernel of 2 or 3 and a stride of 1 or 2,
// nn.MaxPool2d(2) above all) lie inside the image, so each row of windows reads its taps straight
// from the image rows: tap (i, j) of window (oh, ow) is pixel (oh * kStride + i, ow * kStride + j).
// With the window's size and stride known to the compiler, a group of kLanes windows of a row
// (their taps unrolled inside) becomes vector code without branches. Same comparison and tap
// order as the general loop below.
template <int32_t kKernel, int32_t kStride, int32_t kLanes>
void max_pool2d_lanes(const float* __restrict image, int32_t width, int32_t top, int32_t first,
                      float* __restrict y, int64_t* __restrict y_at) {
#pragma omp simd
  for (int32_t lane = 0; lane < kLanes; ++lane) {
    const int32_t corner = top + (first + lane) * kStride;  // tap (0, 0) of window first + lane
    float best = image[corner];  // the first tap wins its window whatever it holds
    int32_t best_at = corner;
    for (int32_t i = 0; i < kKernel; ++i)
      for (int32_t j = 0; j < kKernel; ++j) {
        if (i == 0 && j == 0) continue;  // the first tap, taken above
        const int32_t at = corner + i * width + j;
        const float v = image[at];
        const bool wins = (v > best) | (v != v);  // v != v: NaN
        best = wins ? v : best;
        best_at = wins ? at : best_at;
      }
    y[first + lane] = best;
    y_at[first + lane] = best_at;
  }
}

// A row of windows goes in groups of 8 (or 4 for a narrower row); the last group is moved back to
// end with the row, so it computes some windows twice (with the same result) rather than leaving
// a remainder to scalar code, whose NaN tests would branch.
template <int32_t kKernel, int32_t kStride>
void max_pool2d_inside(const float* xp, int64_t planes, int64_t height, int64_t width, float* yp,
                       int64_t* ap) {
  const int64_t out_h = (height - kKernel) / kStride + 1, out_w = (width - kKernel) / kStride + 1;
  const auto row_width = static_cast<int32_t>(width), row_windows = static_cast<int32_t>(out_w);
  const int64_t work = out_h * out_w * kKernel * kKernel;
  parallel_for(0, planes, std::max<int64_t>(1, kGrainCheap / work), [&](int64_t begin,
                                                                        int64_t end) {
    for (int64_t p = begin; p < end; ++p)
      for (int64_t oh = 0; oh < out_h; ++oh) {
        const float* image = xp + p * height * width;
        const auto top = static_cast<int32_t>(oh * kStride * width);  // the row's first tap
        float* y = yp + (p * out_h + oh) * out_w;
        int64_t* y_at = ap + (p * out_h + oh) * out_w;
        if (row_windows >= 8) {
          for (int32_t first = 0; first < row_windows; first += 8)
            max_pool2d_lanes<kKernel, kStride, 8>(image, row_width, top,
                                                  std::min(first, row_windows - 8), y, y_at);
        } else if (row_windows >= 4) {
          for (int32_t first = 0; first < row_windows; first += 4)
            max_pool2d_lanes<kKernel, kStride, 4>(image, row_width, top,
                                                  std::min(first, row_windows - 4), y, y_at);
        } else {
          for (int32_t first = 0; first < row_windows; ++first)
            max_pool2d_lanes<kKernel, kStride, 1>(image, row_width, top, first, y, y_at);
        }
      }
  });
}

// max_pool2d_inside<kernel, stride> for the window w, or false when w is not one of them.
bool max_pool2d_common(const float* xp, int64_t planes, int64_t height, int64_t width,
                       const WindowGeometry& w, float* yp, int64_t* ap) {
  const bool square = w.kernel[0] == w.kernel[1] && w.stride[0] == w.stride[1];
  if (!square || w.padding[0] != 0 || w.padding[1] != 0 || w.dilation[0] != 1 ||
      w.dilation[1] != 1)
    return false;
  const int64_t k = w.kernel[0], s = w.stride[0];
  if (k == 2 && s == 2) max_pool2d_inside<2, 2>(xp, planes, height, width, yp, ap);
  else if (k == 3 && s == 2) max_pool2d_inside<3, 2>(xp, planes, height, width, yp, ap);
  else if (k == 3 && s == 1) max_pool2d_inside<3, 1>(xp, planes, height, width, yp, ap);
  else if (k == 2 && s == 1) max_pool2d_inside<2, 1>(xp, planes, height, width, yp, ap);
  else return false;
  return true;
}

}  // namespace

// PyTorch's comparison (aten/src/ATen/native/cpu/MaxPoolKernel.cpp), a value wins its window
// when it is larger or NaN, so the first of equal maxima and the last NaN win, and a window of
// -inf reports its first pixel inside. The common windows go to max_pool2d_inside; any other
// (padding, dilation, other sizes) to loops that go kernel tap by kernel tap over all the
// windows of a plane at once, keeping their running maxima and positions (int32 within the
// plane: eight lanes beside eight floats) in scratch rows; where each window starts and where
// each tap lies from that start are computed once per call. The inner loop over the windows is
// selects without branches, which the compiler vectorises.
void max_pool2d(const Tensor& x, int64_t planes, int64_t height, int64_t width,
                const WindowGeometry& w, Tensor& y, Tensor& argmax) {
  LOOM_CHECK(height * width <= std::numeric_limits<int32_t>::max(),
             "max_pool2d: an image of {}x{} has more pixels than int32 positions", height, width);
  if (max_pool2d_common(x.data_ptr<float>(), planes, height, width, w, y.data_ptr<float>(),
                        argmax.data_ptr<int64_t>()))
    return;
  const int64_t out_h = w.output_size(0, height), out_w = w.output_size(1, width);
  const int64_t windows = out_h * out_w, taps = w.kernel[0] * w.kernel[1];
  // Window o's top-left pixel (maybe in the padding), and tap k's offset from it.
  std::vector<int32_t> start(static_cast<size_t>(windows)), offset(static_cast<size_t>(taps));
  for (int64_t oh = 0; oh < out_h; ++oh)
    for (int64_t ow = 0; ow < out_w; ++ow)
      start[oh * out_w + ow] = static_cast<int32_t>((oh * w.stride[0] - w.padding[0]) * width +
                                                    ow * w.stride[1] - w.padding[1]);
  // inside[k * windows + o]: tap k of window o lies in the image (all of them without padding).
  std::vector<uint8_t> inside(static_cast<size_t>(taps * windows), 1);
  for (int64_t i = 0; i < w.kernel[0]; ++i)
    for (int64_t j = 0; j < w.kernel[1]; ++j) {
      const int64_t k = i * w.kernel[1] + j;
      offset[k] = static_cast<int32_t>(i * w.dilation[0] * width + j * w.dilation[1]);
      for (int64_t oh = 0; oh < out_h; ++oh)
        for (int64_t ow = 0; ow < out_w; ++ow) {
          const int64_t r = oh * w.stride[0] - w.padding[0] + i * w.dilation[0];
          const int64_t c = ow * w.stride[1] - w.padding[1] + j * w.dilation[1];
          inside[k * windows + oh * out_w + ow] = r >= 0 && r < height && c >= 0 && c < width;
        }
    }
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  int64_t* ap = argmax.data_ptr<int64_t>();
  const int64_t grain = std::max<int64_t>(1, kGrainCheap / (windows * taps));
  parallel_for(0, planes, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> best_row(static_cast<size_t>(windows));
    std::vector<int32_t> at_row(static_cast<size_t>(windows));
    float* __restrict best = best_row.data();
    int32_t* __restrict best_at = at_row.data();
    const int32_t* __restrict from = start.data();
    for (int64_t p = begin; p < end; ++p) {
      const float* __restrict image = xp + p * height * width;
      std::fill(best, best + windows, -std::numeric_limits<float>::infinity());
      std::fill(best_at, best_at + windows, -1);
      for (int64_t k = 0; k < taps; ++k) {
        const int32_t off = offset[k];
        const uint8_t* __restrict in = inside.data() + k * windows;
#pragma omp simd
        for (int64_t o = 0; o < windows; ++o) {
          const int32_t at = from[o] + off;
          const float v = in[o] ? image[in[o] ? at : 0] : 0.0f;  // no read outside the plane
          const bool wins = in[o] & ((best_at[o] < 0) | (v > best[o]) | (v != v));  // v != v: NaN
          best[o] = wins ? v : best[o];
          best_at[o] = wins ? at : best_at[o];
        }
      }
      std::copy(best, best + windows, yp + p * windows);
      std::copy(best_at, best_at + windows, ap + p * windows);
    }
  });
}

void max_pool2d_backward(const Tensor& dy, const Tensor& argmax, int64_t planes, int64_t height,
                         int64_t width, const WindowGeometry& w, Tensor& dx) {
  const int64_t positions = w.output_size(0, height) * w.output_size(1, width);
  const float* gp = dy.data_ptr<float>();
  const int64_t* ap = argmax.data_ptr<int64_t>();
  float* xp = dx.data_ptr<float>();
  parallel_for_each(planes, height * width + positions, [&](int64_t p) {
    float* image = xp + p * height * width;
    std::fill(image, image + height * width, 0.0f);
    for (int64_t o = p * positions; o < (p + 1) * positions; ++o)
      if (ap[o] >= 0) image[ap[o]] += gp[o];
  });
}

}  // namespace cpu
}  // namespace loom
