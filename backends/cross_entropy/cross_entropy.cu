// Softmax cross-entropy on the GPU (cross_entropy.h), forward and backward, each one pass over
// the logits.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cross_entropy/cross_entropy.h"
#include "backends/cuda/device.h"
#include "backends/cuda/device_utils.cuh"
#include "core/bfloat16.h"

namespace loom::cuda {
namespace {

// Whether row `row`, of target t, takes part in the loss: t is not ignore_index and lies in
// [0, classes). A target outside raises `error` (its row then counts as ignored).
__device__ __forceinline__ bool counted(int64_t t, int64_t row, int64_t classes,
                                        int64_t ignore_index, DeviceErrorFlag* error) {
  if (t == ignore_index) return false;
  if (t >= 0 && t < classes) return true;
  raise_error(error, t, row);
  return false;
}

// loss = -sum_c q_c log softmax(x)_c with q = (1 - s) onehot(t) + s / C (label smoothing,
// Szegedy et al. 2016, PyTorch's definition), which simplifies to
// lse - ((1 - s) x_t + s mean_c x_c). Ignored rows get loss 0 and lse 0, their logits unread.
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
    if (target[row] == ignore_index) {  // the whole block skips the row (no barrier below)
      if (threadIdx.x == 0) losses[row] = lse[row] = 0.0f;
      continue;
    }
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
      if (counted(t, row, classes, ignore_index, error)) {
        const float mean_x = static_cast<float>(sum_x / static_cast<double>(classes));
        const float smooth = smoothing != 0.0f ? smoothing * mean_x : 0.0f;
        loss = row_lse - ((1.0f - smoothing) * static_cast<float>(x[t]) + smooth);
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
    if (counted(t, row, classes, ignore_index, error)) {
      d = scale * (expf(static_cast<float>(logits[row * ld + c]) - lse[row]) - uniform);
      if (c == t) d -= scale * (1.0f - smoothing);
    }
    dlogits[e] = T(d);
  }
}

}  // namespace

// ---------------------------------------------------------------------------- launchers
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

// logits: rows of `classes` values, row r at logits + r * ld (ld >= classes: padded rows are read
// in place), float32 or bfloat16 (logits_bf16); dlogits contiguous, of the logits' dtype.
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

// scale_by (may be null): a device float that multiplies scale.
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

// ---------------------------------------------------------------------------- the kernels
// Each launch gets an error flag of its own for the targets (device.h), and waits for the kernel
// only under CUDA_LAUNCH_BLOCKING=1.
void cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                   float label_smoothing, Tensor& losses, Tensor& lse) {
  const int64_t rows = target.numel(), classes = logits.numel() / rows;
  launch_cross_entropy(
      logits.raw_data(), logits.dtype() == DType::BFloat16, target.data_ptr<int64_t>(), rows,
      classes, logits_row_stride(logits), ignore_index, label_smoothing, losses.data_ptr<float>(),
      lse.data_ptr<float>(), target_error_flag("cross_entropy", classes, ignore_index), stream());
  after_checked_launch();
}

void cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& lse,
                            int64_t ignore_index, float label_smoothing, float scale,
                            const Tensor& scale_by, Tensor& dlogits) {
  const int64_t rows = target.numel(), classes = logits.numel() / rows;
  launch_cross_entropy_backward(
      logits.raw_data(), logits.dtype() == DType::BFloat16, target.data_ptr<int64_t>(),
      lse.data_ptr<float>(), rows, classes, logits_row_stride(logits), ignore_index,
      label_smoothing, scale, ptr<float>(scale_by), dlogits.raw_data(),
      target_error_flag("cross_entropy_backward", classes, ignore_index), stream());
  after_checked_launch();
}

}  // namespace loom::cuda
