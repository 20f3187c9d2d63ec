// Padding, interpolation and adaptive average pooling: each moves values along the spatial dims
// one dim at a time, so each is an index_select (a gather of source positions, its backward
// index_add) or a small matrix applied along the dim (a weighted sum of source positions, its
// backward the transposed matrix). The indices and weights are computed on the host from the
// sizes alone, as PyTorch's kernels compute them, and the ops run on any device.
#include <cmath>
#include <string>
#include <vector>

#include "autograd/internal.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "nn/functional.h"

namespace loom::nn::functional {

namespace {

using detail::shape_of;  // autograd/internal.h

// x with its dim `dim` replaced by x.index_select(dim, index) (source positions on the host).
Tensor gather_along(const Tensor& x, int64_t dim, std::vector<int64_t> index) {
  const int64_t count = static_cast<int64_t>(index.size());
  return index_select(x, dim, tensor_i64(std::move(index), {count}).to(x.device()));
}

// x [..., in] with `matrix` [out, in] applied along dim `dim` (the last or the one before it):
// out[..., o, ...] = sum_i matrix[o, i] x[..., i, ...].
Tensor apply_along(const Tensor& x, int64_t dim, std::vector<float> matrix, int64_t out) {
  const int64_t in = x.size(dim);
  const Tensor m = tensor(std::move(matrix), {out, in}).to(x.device());  // [out, in]
  if (dim == x.dim() - 1) return matmul(x, m.t());  // [..., in] @ [in, out] -> [..., out]
  return matmul(m, x);                              // [out, in] @ [..., in, W] -> [..., out, W]
}

// --- pad ---------------------------------------------------------------------------------------
enum class PadMode { Constant, Reflect, Replicate, Circular };

PadMode pad_mode(const std::string& mode) {
  if (mode == "constant") return PadMode::Constant;
  if (mode == "reflect") return PadMode::Reflect;
  if (mode == "replicate") return PadMode::Replicate;
  if (mode == "circular") return PadMode::Circular;
  LOOM_FAIL("pad: unknown mode '{}' (expected constant, reflect, replicate or circular)", mode);
}

// The source position of each output position along a dim of size n padded by (before, after);
// n itself stands for the constant slot (constant mode).
std::vector<int64_t> pad_index(int64_t n, int64_t before, int64_t after, PadMode mode) {
  std::vector<int64_t> index;
  for (int64_t o = 0; o < n + before + after; ++o) {
    const int64_t i = o - before;  // the position in x, maybe outside [0, n)
    if (i >= 0 && i < n) {
      index.push_back(i);
      continue;
    }
    switch (mode) {
      case PadMode::Constant:
        index.push_back(n);
        break;
      case PadMode::Reflect:  // mirrored about the edge, which is not repeated
        index.push_back(i < 0 ? -i : 2 * (n - 1) - i);
        break;
      case PadMode::Replicate:
        index.push_back(i < 0 ? 0 : n - 1);
        break;
      case PadMode::Circular:
        index.push_back(((i % n) + n) % n);
        break;
    }
  }
  return index;
}

// --- interpolate -------------------------------------------------------------------------------
// PyTorch's ratio of input to output coordinates (area_pixel_compute_scale), in float as its
// float32 kernels: with align_corners the corner centres map onto each other; otherwise 1/scale
// when a scale factor was given, else in/out.
float source_scale(int64_t in, int64_t out, bool align_corners, double scale_factor) {
  if (align_corners) return out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0;
  if (scale_factor > 0) return static_cast<float>(1.0 / scale_factor);
  return static_cast<float>(in) / static_cast<float>(out);
}

// Nearest: output o reads input min(floor(o * scale), in - 1) (PyTorch's "nearest").
std::vector<int64_t> nearest_index(int64_t in, int64_t out, double scale_factor) {
  const float scale = source_scale(in, out, false, scale_factor);
  std::vector<int64_t> index;
  for (int64_t o = 0; o < out; ++o)
    index.push_back(std::min(static_cast<int64_t>(std::floor(o * scale)), in - 1));
  return index;
}

// Linear: output o is the mix of the two inputs around its source coordinate, as a row of an
// [out, in] matrix (upsample_linear1d; bilinear is this along H, then along W).
std::vector<float> linear_matrix(int64_t in, int64_t out, bool align_corners,
                                 double scale_factor) {
  const float scale = source_scale(in, out, align_corners, scale_factor);
  std::vector<float> m(out * in, 0.0f);
  for (int64_t o = 0; o < out; ++o) {
    float src = align_corners ? scale * o : scale * (o + 0.5f) - 0.5f;
    src = std::max(src, 0.0f);  // the half-pixel shift may point before the first centre
    const int64_t i0 = std::min(static_cast<int64_t>(src), in - 1);
    const int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
    const float w1 = src - static_cast<float>(i0);
    m[o * in + i0] += 1.0f - w1;
    m[o * in + i1] += w1;
  }
  return m;
}

// --- adaptive average pooling ------------------------------------------------------------------
// Row o averages inputs [floor(o in / out), ceil((o + 1) in / out)) (PyTorch's start_index and
// end_index): windows that cover the input and overlap when the sizes do not divide.
std::vector<float> adaptive_matrix(int64_t in, int64_t out) {
  std::vector<float> m(out * in, 0.0f);
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = (o * in) / out, end = ((o + 1) * in + out - 1) / out;
    for (int64_t i = start; i < end; ++i) m[o * in + i] = 1.0f / static_cast<float>(end - start);
  }
  return m;
}

Tensor adaptive_avg_pool(const Tensor& x, const std::vector<int64_t>& output_size,
                         const char* op) {
  const int64_t k = static_cast<int64_t>(output_size.size());
  LOOM_CHECK(x.defined() && (x.dim() == k + 1 || x.dim() == k + 2),
             "{}: expected input of {} or {} dims, got {}", op, k + 1, k + 2, shape_of(x));
  Tensor y = x;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t dim = x.dim() - k + j, out = output_size[j];
    LOOM_CHECK(out > 0 && x.size(dim) > 0, "{}: output size {} for input {} (both positive)", op,
               shape_str(output_size), shape_str(x.shape()));
    y = apply_along(y, dim, adaptive_matrix(x.size(dim), out), out);
  }
  return y;
}

}  // namespace

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, const std::string& mode,
           float value) {
  // x [..., d_k, ..., d_last] -> each of the last pads.size() / 2 dims grown by its two pads
  const PadMode kind = pad_mode(mode);
  LOOM_CHECK(x.defined() && pads.size() % 2 == 0 &&
                 static_cast<int64_t>(pads.size()) / 2 <= x.dim(),
             "pad: {} pads for input {} (two per padded dim, at most two per dim)", pads.size(),
             shape_of(x));
  Tensor y = x;
  for (size_t p = 0; p < pads.size() / 2; ++p) {
    const int64_t dim = x.dim() - 1 - static_cast<int64_t>(p);  // the last dim first
    const int64_t n = x.size(dim), before = pads[2 * p], after = pads[2 * p + 1];
    if (before == 0 && after == 0) continue;
    LOOM_CHECK(n + before + after > 0 && n > 0,
               "pad: pads ({}, {}) of dim {} of input {} leave it empty", before, after, dim,
               shape_str(x.shape()));
    LOOM_CHECK(kind != PadMode::Reflect || (before < n && after < n),
               "pad: reflect pads ({}, {}) must be smaller than dim {} of input {}", before,
               after, dim, shape_str(x.shape()));
    LOOM_CHECK(kind != PadMode::Circular || (before <= n && after <= n),
               "pad: circular pads ({}, {}) may not exceed dim {} of input {}", before, after,
               dim, shape_str(x.shape()));
    Tensor source = y;
    if (kind == PadMode::Constant) {
      // One extra slice holding the value, which every padded position reads.
      Shape slot_shape = y.shape();
      slot_shape[dim] = 1;
      source = cat({y, full(slot_shape, value, y.device())}, dim);
    }
    y = gather_along(source, dim, pad_index(n, before, after, kind));
  }
  return y;
}

Tensor interpolate(const Tensor& x, const InterpolateOptions& options) {
  // x [N, C, L] or [N, C, H, W] -> [N, C, out...]
  LOOM_CHECK(x.defined() && (x.dim() == 3 || x.dim() == 4),
             "interpolate: expected input [N, C, L] or [N, C, H, W], got {}", shape_of(x));
  const size_t spatial = static_cast<size_t>(x.dim() - 2);
  LOOM_CHECK(options.size.empty() != options.scale_factor.empty(),
             "interpolate: give either size or scale_factor");
  LOOM_CHECK(options.size.empty() || options.size.size() == spatial,
             "interpolate: size {} for input {} (one per spatial dim)",
             shape_str(options.size), shape_str(x.shape()));
  LOOM_CHECK(options.scale_factor.empty() || options.scale_factor.size() == spatial,
             "interpolate: {} scale factors for input {} (one per spatial dim)",
             options.scale_factor.size(), shape_str(x.shape()));
  const std::string& mode = options.mode;
  const bool linear = mode == (x.dim() == 3 ? "linear" : "bilinear");
  LOOM_CHECK(mode == "nearest" || linear,
             "interpolate: mode '{}' for input {} (nearest, or linear for 3-D and bilinear for "
             "4-D input)", mode, shape_str(x.shape()));
  LOOM_CHECK(linear || !options.align_corners,
             "interpolate: align_corners only applies to the linear modes, not '{}'", mode);
  Tensor y = x;
  for (size_t j = 0; j < spatial; ++j) {
    const int64_t dim = 2 + static_cast<int64_t>(j), in = x.size(dim);
    const double scale = options.scale_factor.empty() ? 0.0 : options.scale_factor[j];
    const int64_t out = options.size.empty()
                            ? static_cast<int64_t>(std::floor(static_cast<double>(in) * scale))
                            : options.size[j];
    LOOM_CHECK(out > 0 && in > 0,
               "interpolate: input {} to an empty output (size {}, scale factor {})",
               shape_str(x.shape()), out, scale);
    y = linear ? apply_along(y, dim, linear_matrix(in, out, options.align_corners, scale), out)
               : gather_along(y, dim, nearest_index(in, out, scale));
  }
  return y;
}

Tensor interpolate(const Tensor& x, const std::vector<int64_t>& size, const std::string& mode,
                   bool align_corners) {
  return interpolate(x, InterpolateOptions{.size = size, .mode = mode,
                                           .align_corners = align_corners});
}

Tensor adaptive_avg_pool2d(const Tensor& x, ExpandingArray<2> output_size) {
  // x [N, C, H, W] or [C, H, W] -> [..., out_h, out_w]
  return adaptive_avg_pool(x, {output_size[0], output_size[1]}, "adaptive_avg_pool2d");
}

Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size) {
  // x [N, C, L] or [C, L] -> [..., output_size]
  return adaptive_avg_pool(x, {output_size}, "adaptive_avg_pool1d");
}

}  // namespace loom::nn::functional
