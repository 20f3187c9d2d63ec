// Fused neural-network kernels: counter-based random numbers, layer norm forward/backward,
// softmax cross-entropy forward/backward and the Adam(W) update. Each one replaces a chain
// of elementwise and reduction launches with a single pass over memory.
#include <cmath>
#include <cstdint>

#include "backends/cuda/device_utils.cuh"
#include "backends/cuda/multi_tensor.cuh"
#include "core/bfloat16.h"
#include "core/rng.h"

namespace loom::cuda {
namespace {

// ---------------------------------------------------------------------------- random numbers
// Thread mapping: one thread per element, grid-stride. Element i is a pure function of
// (seed, offset + i) (core/rng.h, shared with the CPU backend), so the GPU draws exactly the
// CPU's uniforms; normals may differ in the last bits, where CUDA's logf/cosf/sqrtf round
// differently from the C library's.
__global__ void rand_uniform_kernel(float* out, int64_t n, uint64_t seed, uint64_t offset) {
  LOOM_GRID_STRIDE_LOOP(i, n) { out[i] = philox_uniform(offset + i, seed); }
}

__global__ void rand_normal_kernel(float* out, int64_t n, uint64_t seed, uint64_t offset) {
  LOOM_GRID_STRIDE_LOOP(i, n) { out[i] = philox_normal(offset + i, seed); }
}

// ---------------------------------------------------------------------------- layer norm
// Ba et al. 2016: y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps), with the
// biased variance over the row, as torch.nn.LayerNorm.
// Thread mapping: one block per row (grid-stride over rows), threads strided along the row.
// As on the CPU, both sums run in double and the variance is a second sweep over
// (x - mean)^2, which does not cancel like E[x^2] - mean^2 for rows with a large mean.
// With a residual (add_layer_norm) the row is x + residual: the first sweep writes it to `sum`,
// and the later sweeps read it back there (each thread its own elements: no barrier needed).
// The residual is float32 or bfloat16 (R; a bfloat16 branch is added in float32).
template <typename R>
__global__ void layer_norm_kernel(const float* x, const R* residual, const float* weight,
                                  const float* bias, int64_t rows, int64_t cols, float eps,
                                  float* sum_out, float* y, float* mean, float* rstd) {
  __shared__ double shared[kWarp];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * cols;
    double sum = 0.0;
    if (residual) {
      const R* rr = residual + row * cols;
      float* sr = sum_out + row * cols;
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        const float v = xr[j] + static_cast<float>(rr[j]);
        sr[j] = v;
        sum += v;
      }
      xr = sr;
    } else {
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += xr[j];
    }
    const float mu = static_cast<float>(block_sum(sum, shared) / static_cast<double>(cols));
    double sq = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float d = xr[j] - mu;
      sq += static_cast<double>(d * d);
    }
    const double var = block_sum(sq, shared) / static_cast<double>(cols);
    const float r = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float normed = (xr[j] - mu) * r;
      y[row * cols + j] = (weight ? normed * weight[j] : normed) + (bias ? bias[j] : 0.0f);
    }
    if (threadIdx.x == 0) {
      mean[row] = mu;
      rstd[row] = r;
    }
  }
}

// The same normalisation, sums and rounding for rows of at most kWarpRowCols columns, with one
// warp per row (kWarpRows rows per block): each lane holds its elements j = lane + 32 i in
// registers, so the row is read once (the kernel above sweeps it three times) and the sums are
// warp shuffles, with no barrier. Decoding normalises one row at a time, which took the block
// kernel 5.2 us on an H200, mostly waiting: three dependent sweeps and four barriers.
// Every warp of a block runs the same number of loop trips (whole rows or none: `active`).
constexpr int kWarpRowCols = 1024;
constexpr int kPerLane = kWarpRowCols / kWarp;
constexpr int kWarpRows = 4;

template <typename R>
__global__ void layer_norm_warp_kernel(const float* x, const R* residual, const float* weight,
                                       const float* bias, int64_t rows, int64_t cols, float eps,
                                       float* sum_out, float* y, float* mean, float* rstd) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * kWarpRows; first < rows;
       first += static_cast<int64_t>(gridDim.x) * kWarpRows) {
    const int64_t row = first + threadIdx.x / kWarp;
    const bool active = row < rows;
    float v[kPerLane];
    double sum = 0.0;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t j = lane + i * kWarp;
      v[i] = 0.0f;
      if (!active || j >= cols) continue;
      v[i] = x[row * cols + j];
      if (residual) {
        v[i] += static_cast<float>(residual[row * cols + j]);
        sum_out[row * cols + j] = v[i];
      }
      sum += v[i];
    }
    const float mu = static_cast<float>(warp_reduce(sum, SumOp{}) / static_cast<double>(cols));
    double sq = 0.0;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const float d = v[i] - mu;
      if (active && lane + i * kWarp < cols) sq += static_cast<double>(d * d);
    }
    const double var = warp_reduce(sq, SumOp{}) / static_cast<double>(cols);
    const float r = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t j = lane + i * kWarp;
      if (!active || j >= cols) continue;
      const float normed = (v[i] - mu) * r;
      y[row * cols + j] = (weight ? normed * weight[j] : normed) + (bias ? bias[j] : 0.0f);
    }
    if (active && lane == 0) {
      mean[row] = mu;
      rstd[row] = r;
    }
  }
}

template <typename R>
void layer_norm_rows(const float* x, const R* residual, const float* weight, const float* bias,
                     int64_t rows, int64_t cols, float eps, float* sum, float* y, float* mean,
                     float* rstd, cudaStream_t stream) {
  if (cols <= kWarpRowCols)
    layer_norm_warp_kernel<<<grid_for(ceil_div(rows, kWarpRows), 1), kWarpRows * kWarp, 0,
                             stream>>>(x, residual, weight, bias, rows, cols, eps, sum, y, mean,
                                       rstd);
  else
    layer_norm_kernel<<<grid_for(rows, 1), row_threads(cols), 0, stream>>>(
        x, residual, weight, bias, rows, cols, eps, sum, y, mean, rstd);
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight, xhat = (x-mean)*rstd.
// Thread mapping as layer_norm_kernel; the two row means come from one sweep.
__global__ void layer_norm_dx_kernel(const float* dy, const float* x, const float* weight,
                                     const float* mean, const float* rstd, int64_t rows,
                                     int64_t cols, float* dx) {
  __shared__ float shared[kWarp];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * cols;
    const float* dyr = dy + row * cols;
    const float mu = mean[row], r = rstd[row];
    float sum_g = 0.0f, sum_g_xhat = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float g = weight ? dyr[j] * weight[j] : dyr[j];
      sum_g += g;
      sum_g_xhat += g * (xr[j] - mu) * r;
    }
    const float mean_g = block_sum(sum_g, shared) / static_cast<float>(cols);
    const float mean_g_xhat = block_sum(sum_g_xhat, shared) / static_cast<float>(cols);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float g = weight ? dyr[j] * weight[j] : dyr[j];
      dx[row * cols + j] = r * (g - mean_g - (xr[j] - mu) * r * mean_g_xhat);
    }
  }
}

constexpr int kParamRows = 8;  // threadIdx.y extent of layer_norm_param_grad_kernel

// dweight[c] = sum_r dy[r, c] * xhat[r, c], dbias[c] = sum_r dy[r, c], over a chunk of rows.
// Thread mapping: blocks of 32 x 8 threads; blockIdx.x = chunk * tiles + tile picks 32
// consecutive columns (threadIdx.x, coalesced) and a chunk of rows, which the 8 rows of
// threads (threadIdx.y) share by taking every 8th row. Partials [chunks, cols] (null = skip).
__global__ void layer_norm_param_grad_kernel(const float* dy, const float* x, const float* mean,
                                             const float* rstd, int64_t rows, int64_t cols,
                                             int64_t chunk_len, float* dweight, float* dbias) {
  __shared__ float partial_w[kParamRows][kWarp], partial_b[kParamRows][kWarp];
  const int64_t tiles = ceil_div(cols, kWarp);
  const int64_t chunk = blockIdx.x / tiles, c = (blockIdx.x % tiles) * kWarp + threadIdx.x;
  const int64_t begin = chunk * chunk_len, end = min(rows, begin + chunk_len);
  float acc_w = 0.0f, acc_b = 0.0f;
  if (c < cols) {
    for (int64_t r = begin + threadIdx.y; r < end; r += kParamRows) {
      const float g = dy[r * cols + c];
      acc_w += g * (x[r * cols + c] - mean[r]) * rstd[r];
      acc_b += g;
    }
  }
  partial_w[threadIdx.y][threadIdx.x] = acc_w;
  partial_b[threadIdx.y][threadIdx.x] = acc_b;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int k = 1; k < kParamRows; ++k) {
      acc_w += partial_w[k][threadIdx.x];
      acc_b += partial_b[k][threadIdx.x];
    }
    if (dweight) dweight[chunk * cols + c] = acc_w;
    if (dbias) dbias[chunk * cols + c] = acc_b;
  }
}

// ---------------------------------------------------------------------------- cross-entropy
// loss = -sum_c q_c log softmax(x)_c with q = (1 - s) onehot(t) + s / C (label smoothing,
// Szegedy et al. 2016, PyTorch's definition), which simplifies to
// lse - ((1 - s) x_t + s mean_c x_c). Ignored rows get loss 0.
// Thread mapping: one block per row of logits (grid-stride over rows), threads strided along
// the classes; thread 0 writes the row's loss and log-sum-exp. Row r starts at logits + r * ld.
// T: float or BFloat16 logits (an LM head under autocast), computed in float32.
template <typename T>
__global__ void cross_entropy_kernel(const T* logits, const int64_t* target, int64_t rows,
                                     int64_t classes, int64_t ld, int64_t ignore_index,
                                     float smoothing, float* losses, float* lse,
                                     DeviceErrorFlag* error) {
  __shared__ float shared[kWarp];
  __shared__ double shared_sum[kWarp];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x = logits + row * ld;
    float max = -INFINITY;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      max = fmaxf(max, static_cast<float>(x[c]));
    max = block_max(max, shared);
    float sum_exp = 0.0f;
    double sum_x = 0.0;  // for the smoothing term's mean, in double as on the CPU
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      const float v = static_cast<float>(x[c]);
      sum_exp += expf(v - max);
      sum_x += v;
    }
    sum_exp = block_sum(sum_exp, shared);
    sum_x = block_sum(sum_x, shared_sum);
    if (threadIdx.x == 0) {
      const float row_lse = max + logf(sum_exp);
      const int64_t t = target[row];
      float loss = 0.0f;
      if (t != ignore_index) {
        if (t < 0 || t >= classes) {
          raise_error(error, t, row);
        } else {
          const float mean_x = static_cast<float>(sum_x / static_cast<double>(classes));
          const float smooth = smoothing != 0.0f ? smoothing * mean_x : 0.0f;
          loss = row_lse - ((1.0f - smoothing) * static_cast<float>(x[t]) + smooth);
        }
      }
      losses[row] = loss;
      lse[row] = row_lse;
    }
  }
}

// dlogits = scale * (softmax(x) - q), 0 on ignored rows.
// Thread mapping: one thread per logit, grid-stride; the row's target and lse are re-read
// by every thread of the row (from cache). logits rows are ld apart, dlogits' are contiguous.
// Index: uint32_t when every offset fits (a 32-bit division per element instead of a 64-bit
// one, which costs several times more: an LM head has 4e8 logits), else int64_t.
// T: float or BFloat16, the logits' and dlogits' type (a bfloat16 gradient rounded once).
template <typename Index, typename T>
__global__ void cross_entropy_backward_kernel(const T* logits, const int64_t* target,
                                              const float* lse, int64_t rows, int64_t classes,
                                              int64_t ld, int64_t ignore_index, float smoothing,
                                              float scale_arg, const float* scale_by, T* dlogits,
                                              DeviceErrorFlag* error) {
  const float scale = scale_by ? scale_arg * *scale_by : scale_arg;
  const float uniform = smoothing / static_cast<float>(classes);
  const Index n = static_cast<Index>(classes);
  LOOM_GRID_STRIDE_LOOP(e, rows * classes) {
    const Index row = static_cast<Index>(e) / n, c = static_cast<Index>(e) - row * n;
    const int64_t t = target[row];
    float d = 0.0f;
    if (t != ignore_index) {
      if (t < 0 || t >= classes) {
        raise_error(error, t, row);
      } else {
        d = scale * (expf(static_cast<float>(logits[row * ld + c]) - lse[row]) - uniform);
        if (c == t) d -= scale * (1.0f - smoothing);
      }
    }
    dlogits[e] = T(d);
  }
}

// ---------------------------------------------------------------------------- Adam(W)
// Kingma & Ba 2015, Algorithm 1; decoupled weight decay from Loshchilov & Hutter 2019. The
// operation order is torch.optim.Adam(W)'s (and the CPU backend's):
//   param = param * shrink - lr / bias1 * m / (sqrt(v) / sqrt(bias2) + eps).
// param, m and v are read and written once each, where the unfused update would make about ten
// passes over memory.
struct AdamConstants {
  float beta1, beta2, eps;
  float coupled;         // weight decay added to the gradient (Adam), else 0
  float shrink;          // 1 - lr * weight decay (AdamW), else 1
  float step_size;       // lr / bias1
  float inv_sqrt_bias2;  // 1 / sqrt(bias2)
};

AdamConstants adam_constants(const AdamArgs& args) {
  AdamConstants k{};
  k.beta1 = args.beta1;
  k.beta2 = args.beta2;
  k.eps = args.eps;
  k.coupled = args.decoupled ? 0.0f : args.weight_decay;
  k.shrink = args.decoupled ? 1.0f - args.lr * args.weight_decay : 1.0f;
  k.step_size = args.lr / args.bias1;
  k.inv_sqrt_bias2 = 1.0f / std::sqrt(args.bias2);
  return k;
}

// The update of one element, the one formula of both kernels below. Every rounding is spelled
// out (the _rn intrinsics are never fused further by the compiler), so a multi-tensor step,
// vectorised or not, is bit-identical to one launch per tensor: g, m, v and the denominator
// are each one fused multiply-add, the rest separately rounded operations.
__device__ __forceinline__ void adam_update(const AdamConstants& k, float& p, float grad,
                                            float& m, float& v) {
  const float g = __fmaf_rn(k.coupled, p, grad);
  m = __fmaf_rn(k.beta1, m, __fmul_rn(1.0f - k.beta1, g));
  v = __fmaf_rn(k.beta2, v, __fmul_rn(__fmul_rn(1.0f - k.beta2, g), g));
  const float denom = __fmaf_rn(__fsqrt_rn(v), k.inv_sqrt_bias2, k.eps);
  p = __fsub_rn(__fmul_rn(p, k.shrink), __fdiv_rn(__fmul_rn(k.step_size, m), denom));
}

__device__ __forceinline__ void adam_element(const AdamConstants& k, int64_t i, float* param,
                                             const float* grad, float* m, float* v) {
  float p = param[i], mi = m[i], vi = v[i];
  adam_update(k, p, grad[i], mi, vi);
  m[i] = mi;
  v[i] = vi;
  param[i] = p;
}

// Thread mapping: one thread per parameter element, grid-stride.
__global__ void adam_kernel(AdamConstants k, int64_t n, float* param, const float* grad, float* m,
                            float* v) {
  LOOM_GRID_STRIDE_LOOP(i, n) { adam_element(k, i, param, grad, m, v); }
}

// The multi-tensor step (multi_tensor.cuh): one block per chunk of kMultiChunk elements of a
// tensor, up to kAdamMultiTensors tensors per launch; threads stride through the chunk.
struct AdamTable {
  AdamConstants k;
  ChunkMap<kAdamMultiTensors> map;
  float* param[kAdamMultiTensors];
  const float* grad[kAdamMultiTensors];
  float* m[kAdamMultiTensors];
  float* v[kAdamMultiTensors];
};
static_assert(sizeof(AdamTable) <= 4096, "the table must fit in 4 KB of kernel parameters");

// Four floats moved as one 16-byte load or store.
struct alignas(16) Float4 {
  float x[4];
};

__global__ void __launch_bounds__(kMultiThreads)
    adam_multi_kernel(const LOOM_GRID_CONSTANT AdamTable table) {
  const Chunk c = table.map.chunk(blockIdx.x);
  float* param = table.param[c.t];
  const float* grad = table.grad[c.t];
  float* m = table.m[c.t];
  float* v = table.v[c.t];
  int64_t scalar_from = c.begin;
  // Four elements per thread and step where all four tensors are 16-byte aligned (chunks begin
  // at multiples of 4 elements); the tail of the last chunk, and tensors that are views at an
  // odd offset, element by element.
  const uintptr_t addresses = reinterpret_cast<uintptr_t>(param) |
                              reinterpret_cast<uintptr_t>(grad) | reinterpret_cast<uintptr_t>(m) |
                              reinterpret_cast<uintptr_t>(v);
  if (addresses % sizeof(Float4) == 0) {
    scalar_from = c.begin + (c.end - c.begin) / 4 * 4;
    for (int64_t i = c.begin + 4 * threadIdx.x; i < scalar_from; i += 4 * blockDim.x) {
      Float4 p = *reinterpret_cast<const Float4*>(param + i);
      const Float4 g = *reinterpret_cast<const Float4*>(grad + i);
      Float4 mi = *reinterpret_cast<const Float4*>(m + i);
      Float4 vi = *reinterpret_cast<const Float4*>(v + i);
#pragma unroll
      for (int j = 0; j < 4; ++j) adam_update(table.k, p.x[j], g.x[j], mi.x[j], vi.x[j]);
      *reinterpret_cast<Float4*>(m + i) = mi;
      *reinterpret_cast<Float4*>(v + i) = vi;
      *reinterpret_cast<Float4*>(param + i) = p;
    }
  }
  for (int64_t i = scalar_from + threadIdx.x; i < c.end; i += blockDim.x)
    adam_element(table.k, i, param, grad, m, v);
}

}  // namespace

// ---------------------------------------------------------------------------- launchers
void launch_rand_uniform(float* out, int64_t n, uint64_t seed, uint64_t offset,
                         cudaStream_t stream) {
  rand_uniform_kernel<<<grid_for(n), kBlock, 0, stream>>>(out, n, seed, offset);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_rand_normal(float* out, int64_t n, uint64_t seed, uint64_t offset,
                        cudaStream_t stream) {
  rand_normal_kernel<<<grid_for(n), kBlock, 0, stream>>>(out, n, seed, offset);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_layer_norm(const float* x, const void* residual, bool residual_bf16,
                       const float* weight, const float* bias, int64_t rows, int64_t cols,
                       float eps, float* sum, float* y, float* mean, float* rstd,
                       cudaStream_t stream) {
  if (residual_bf16)
    layer_norm_rows(x, static_cast<const BFloat16*>(residual), weight, bias, rows, cols, eps, sum,
                    y, mean, rstd, stream);
  else
    layer_norm_rows(x, static_cast<const float*>(residual), weight, bias, rows, cols, eps, sum, y,
                    mean, rstd, stream);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_layer_norm_backward(const float* dy, const float* x, const float* weight,
                                const float* mean, const float* rstd, int64_t rows, int64_t cols,
                                float* dx, float* dweight, float* dbias, Scratch& scratch,
                                cudaStream_t stream) {
  layer_norm_dx_kernel<<<grid_for(rows, 1), row_threads(cols), 0, stream>>>(dy, x, weight, mean,
                                                                            rstd, rows, cols, dx);
  LOOM_CUDA_CHECK_LAUNCH();
  if (!dweight && !dbias) return;
  // Column sums over rows: chunks of rows reduced by separate blocks into [chunks, cols]
  // partials, which the deterministic column reduction of reduce.cu then adds up.
  const int64_t tiles = ceil_div(cols, kWarp);
  const Split split = plan_split(tiles, rows, 8 * kParamRows);
  const bool direct = split.chunks == 1;
  const size_t partial_bytes = split.chunks * cols * sizeof(float);
  float* partial_w = !dweight ? nullptr
                     : direct ? dweight
                              : static_cast<float*>(scratch.get(partial_bytes));
  float* partial_b = !dbias   ? nullptr
                     : direct ? dbias
                              : static_cast<float*>(scratch.get(partial_bytes));
  layer_norm_param_grad_kernel<<<static_cast<unsigned>(tiles * split.chunks),
                                 dim3(kWarp, kParamRows), 0, stream>>>(
      dy, x, mean, rstd, rows, cols, split.chunk_len, partial_w, partial_b);
  LOOM_CUDA_CHECK_LAUNCH();
  if (direct) return;
  if (dweight)
    launch_reduce(ReduceOp::Sum, partial_w, DType::Float32, 1, split.chunks, cols, dweight, scratch,
                  stream);
  if (dbias)
    launch_reduce(ReduceOp::Sum, partial_b, DType::Float32, 1, split.chunks, cols, dbias, scratch,
                  stream);
}

namespace {

template <typename T>
void cross_entropy_typed(const T* logits, const int64_t* target, int64_t rows, int64_t classes,
                         int64_t ld, int64_t ignore_index, float label_smoothing, float* losses,
                         float* lse, DeviceErrorFlag* error, cudaStream_t stream) {
  cross_entropy_kernel<<<grid_for(rows, 1), row_threads(classes), 0, stream>>>(
      logits, target, rows, classes, ld, ignore_index, label_smoothing, losses, lse, error);
  LOOM_CUDA_CHECK_LAUNCH();
}

template <typename T>
void cross_entropy_backward_typed(const T* logits, const int64_t* target, const float* lse,
                                  int64_t rows, int64_t classes, int64_t ld, int64_t ignore_index,
                                  float label_smoothing, float scale, const float* scale_by,
                                  T* dlogits, DeviceErrorFlag* error, cudaStream_t stream) {
  const unsigned grid = grid_for(rows * classes);
  if (rows * std::max(ld, classes) < (int64_t{1} << 31))
    cross_entropy_backward_kernel<uint32_t><<<grid, kBlock, 0, stream>>>(
        logits, target, lse, rows, classes, ld, ignore_index, label_smoothing, scale, scale_by,
        dlogits, error);
  else
    cross_entropy_backward_kernel<int64_t><<<grid, kBlock, 0, stream>>>(
        logits, target, lse, rows, classes, ld, ignore_index, label_smoothing, scale, scale_by,
        dlogits, error);
  LOOM_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_cross_entropy(const void* logits, bool logits_bf16, const int64_t* target, int64_t rows,
                          int64_t classes, int64_t ld, int64_t ignore_index, float label_smoothing,
                          float* losses, float* lse, DeviceErrorFlag* error, cudaStream_t stream) {
  if (logits_bf16)
    cross_entropy_typed(static_cast<const BFloat16*>(logits), target, rows, classes, ld,
                        ignore_index, label_smoothing, losses, lse, error, stream);
  else
    cross_entropy_typed(static_cast<const float*>(logits), target, rows, classes, ld, ignore_index,
                        label_smoothing, losses, lse, error, stream);
}

void launch_cross_entropy_backward(const void* logits, bool logits_bf16, const int64_t* target,
                                   const float* lse, int64_t rows, int64_t classes, int64_t ld,
                                   int64_t ignore_index, float label_smoothing, float scale,
                                   const float* scale_by, void* dlogits, DeviceErrorFlag* error,
                                   cudaStream_t stream) {
  if (logits_bf16)
    cross_entropy_backward_typed(static_cast<const BFloat16*>(logits), target, lse, rows, classes,
                                 ld, ignore_index, label_smoothing, scale, scale_by,
                                 static_cast<BFloat16*>(dlogits), error, stream);
  else
    cross_entropy_backward_typed(static_cast<const float*>(logits), target, lse, rows, classes, ld,
                                 ignore_index, label_smoothing, scale, scale_by,
                                 static_cast<float*>(dlogits), error, stream);
}

void launch_adam(const AdamArgs& args, int64_t n, float* param, const float* grad, float* m,
                 float* v, cudaStream_t stream) {
  adam_kernel<<<grid_for(n), kBlock, 0, stream>>>(adam_constants(args), n, param, grad, m, v);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_adam_multi(const AdamArgs& args, const AdamTensor* tensors, size_t count,
                       cudaStream_t stream) {
  AdamTable table{};
  table.k = adam_constants(args);
  auto launch = [&] {
    if (table.map.count == 0) return;
    adam_multi_kernel<<<table.map.blocks(), kMultiThreads, 0, stream>>>(table);
    LOOM_CUDA_CHECK_LAUNCH();
    table.map.clear();
  };
  for (size_t i = 0; i < count; ++i) {
    const AdamTensor& x = tensors[i];
    if (table.map.full(x.n)) launch();
    const int t = table.map.add(x.n);
    table.param[t] = x.param;
    table.grad[t] = x.grad;
    table.m[t] = x.m;
    table.v[t] = x.v;
  }
  launch();
}

}  // namespace loom::cuda
