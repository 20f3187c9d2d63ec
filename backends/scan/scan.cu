// Running sums and products over the middle axis of a contiguous [outer, n, inner] block, with
// the two thread mappings of reduce.cu:
//   * inner == 1 (cumsum over the last dim): one block owns a row and scans it a tile at a time
//     in shared memory;
//   * inner > 1: one thread per (o, i) column, consecutive threads on consecutive i, so every
//     step along n reads a contiguous run.
// The running value is float32, as PyTorch's CUDA scans keep it.
#include <cstdint>

#include "backends/cuda/device.h"
#include "backends/cuda/device_utils.cuh"
#include "backends/scan/scan.h"

namespace loom::cuda {
namespace {

template <ScanOp Op>
__device__ __forceinline__ float combine(float a, float b) {
  return Op == ScanOp::Sum ? a + b : a * b;
}
template <ScanOp Op>
__device__ __forceinline__ float identity() {
  return Op == ScanOp::Sum ? 0.0f : 1.0f;
}

// One block per row (grid-stride over rows), walking it blockDim.x elements at a time: each
// tile is scanned in shared memory (Hillis & Steele 1986: log2(blockDim.x) steps, step d adding
// the value d places back), then the carry of the tiles before it is combined in.
template <ScanOp Op>
__global__ void scan_rows_kernel(const float* x, int64_t rows, int64_t n, bool reverse,
                                 float* out) {
  __shared__ float tile[kBlock];
  const int tid = threadIdx.x;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * n;
    float* yr = out + row * n;
    float carry = identity<Op>();
    for (int64_t base = 0; base < n; base += blockDim.x) {
      const int64_t step = base + tid;
      const int64_t j = reverse ? n - 1 - step : step;
      float v = step < n ? xr[j] : identity<Op>();
      tile[tid] = v;
      __syncthreads();
      for (int d = 1; d < static_cast<int>(blockDim.x); d *= 2) {
        const float before = tid >= d ? tile[tid - d] : identity<Op>();
        __syncthreads();
        tile[tid] = v = combine<Op>(before, v);
        __syncthreads();
      }
      if (step < n) yr[j] = combine<Op>(carry, v);
      carry = combine<Op>(carry, tile[blockDim.x - 1]);
      __syncthreads();  // every thread has read the tile's total before the next tile
    }
  }
}

template <ScanOp Op>
__global__ void scan_columns_kernel(const float* x, int64_t outer, int64_t n, int64_t inner,
                                    bool reverse, float* out) {
  LOOM_GRID_STRIDE_LOOP(t, outer * inner) {
    const int64_t base = (t / inner) * n * inner + t % inner;
    float acc = identity<Op>();
    for (int64_t step = 0; step < n; ++step) {
      const int64_t at = base + (reverse ? n - 1 - step : step) * inner;
      out[at] = acc = combine<Op>(acc, x[at]);
    }
  }
}

// cumprod's backward along one column, as the CPU's cumprod_backward_column (scan.cpp), whose
// comment gives the formula: before the first zero z the reverse sum of g y divided by x, at z
// the sum taken directly, past z zero.
__global__ void cumprod_backward_kernel(const float* g, const float* x, int64_t outer, int64_t n,
                                        int64_t inner, float* out) {
  LOOM_GRID_STRIDE_LOOP(t, outer * inner) {
    const int64_t base = (t / inner) * n * inner + t % inner;
    int64_t z = 0;
    while (z < n && x[base + z * inner] != 0.0f) ++z;
    float before = 1.0f;
    for (int64_t j = 0; j < z; ++j) {
      const int64_t at = base + j * inner;
      before *= x[at];
      out[at] = g[at] * before;
    }
    if (z < n) {
      float p = before, at_zero = 0.0f;
      for (int64_t j = z; j < n; ++j) {
        const int64_t at = base + j * inner;
        if (j > z) p *= x[at];
        at_zero += g[at] * p;
        if (j > z) out[at] = 0.0f;
      }
      out[base + z * inner] = at_zero;
    }
    float acc = 0.0f;
    for (int64_t k = z - 1; k >= 0; --k) {
      const int64_t at = base + k * inner;
      acc += out[at];
      out[at] = acc / x[at];
    }
  }
}

template <ScanOp Op>
void launch_scan(const float* x, int64_t outer, int64_t n, int64_t inner, bool reverse, float* out,
                 cudaStream_t stream) {
  if (inner == 1)
    scan_rows_kernel<Op><<<grid_for(outer, 1), kBlock, 0, stream>>>(x, outer, n, reverse, out);
  else
    scan_columns_kernel<Op>
        <<<grid_for(outer * inner), kBlock, 0, stream>>>(x, outer, n, inner, reverse, out);
  LOOM_CUDA_CHECK_LAUNCH();
}

}  // namespace

// ---------------------------------------------------------------------------- the kernels
void scan(ScanOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse,
          Tensor& out) {
  const float* xp = x.data_ptr<float>();
  float* yp = out.data_ptr<float>();
  if (op == ScanOp::Sum)
    launch_scan<ScanOp::Sum>(xp, outer, n, inner, reverse, yp, stream());
  else
    launch_scan<ScanOp::Prod>(xp, outer, n, inner, reverse, yp, stream());
}

void cumprod_backward(const Tensor& grad, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                      Tensor& out) {
  cumprod_backward_kernel<<<grid_for(outer * inner), kBlock, 0, stream()>>>(
      grad.data_ptr<float>(), x.data_ptr<float>(), outer, n, inner, out.data_ptr<float>());
  LOOM_CUDA_CHECK_LAUNCH();
}

}  // namespace loom::cuda
