// Elementwise kernels: copy/cast (float32, bfloat16, int64), fill, unary functions and their derivatives, binary
// arithmetic and comparisons, where, axpy.
//
// Thread mapping (every kernel in this file): a grid-stride loop over the row-major index
// space of the output; thread t handles elements t, t + T, t + 2T, ... (T = threads in the
// grid), so consecutive threads touch consecutive output elements and global memory accesses
// coalesce. Inputs arrive already broadcast to the output's shape (stride 0 along broadcast
// dims). On the contiguous fast path (Layout::contiguous) element i of every operand, the
// output included, is simply data[i]; otherwise element_offsets() turns i into each operand's
// own storage offset (outputs are contiguous in practice, but a strided one works too).
#include <climits>
#include <cmath>
#include <type_traits>

#include "backends/cuda/device_utils.cuh"
#include "backends/unary_math.h"
#include "core/bfloat16.h"

namespace loom::cuda {
namespace {

template <typename T>
__device__ __forceinline__ T& at(const Operand& operand, int64_t offset) {
  return static_cast<T*>(operand.data)[offset];
}

// ---------------------------------------------------------------------------- copy, fill
// float -> int64 truncates toward zero; NaN and values beyond int64 give INT64_MIN, as on the
// CPU backend (that is what x86 produces; the GPU's own conversion would saturate instead).
// bfloat16 (core/bfloat16.h) converts through float32: exactly from bfloat16, rounding to nearest
// even into it; a bfloat16 -> bfloat16 copy keeps the bits (NaN payloads included).
template <typename Dst, typename Src>
__device__ __forceinline__ Dst convert(Src x) {
  if constexpr (std::is_same_v<Dst, Src>) {
    return x;
  } else if constexpr (std::is_same_v<Src, BFloat16>) {
    return convert<Dst>(static_cast<float>(x));
  } else if constexpr (std::is_same_v<Dst, BFloat16>) {
    return BFloat16(static_cast<float>(x));
  } else if constexpr (std::is_same_v<Dst, int64_t> && std::is_same_v<Src, float>) {
    constexpr float kLimit = 9.2233720368547758e18f;  // 2^63
    return x > -kLimit && x < kLimit ? static_cast<int64_t>(x) : LLONG_MIN;
  } else {
    return static_cast<Dst>(x);
  }
}

template <typename Src, typename Dst>
__global__ void copy_kernel(Layout layout, Operand src, Operand dst) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) {
    const auto o = element_offsets(i, layout, src, dst);
    at<Dst>(dst, o.at[1]) = convert<Dst>(at<Src>(src, o.at[0]));
  }
}

template <typename T>
__global__ void fill_kernel(Layout layout, Operand dst, T value) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) { at<T>(dst, element_offsets(i, layout, dst).at[0]) = value; }
}

// ---------------------------------------------------------------------------- unary
// CUDA's math library for the unary table (backends/unary_math.h); the table holds the
// formulas, each op gets its own kernel instantiation.
constexpr float kSqrtHalf = 0.70710678118654752f;  // 1/sqrt(2)

struct CudaMath {
  static LOOM_HOST_DEVICE float exp(float x) { return expf(x); }
  static LOOM_HOST_DEVICE float log(float x) { return logf(x); }
  static LOOM_HOST_DEVICE float sqrt(float x) { return sqrtf(x); }  // (rsqrtf is only 2 ulp)
  static LOOM_HOST_DEVICE float tanh(float x) { return tanhf(x); }
  static LOOM_HOST_DEVICE float sin(float x) { return sinf(x); }
  static LOOM_HOST_DEVICE float cos(float x) { return cosf(x); }
  static LOOM_HOST_DEVICE float abs(float x) { return fabsf(x); }
  static LOOM_HOST_DEVICE float pow(float x, float a) { return powf(x, a); }
  static LOOM_HOST_DEVICE float normal_cdf(float x) { return 0.5f * (1.0f + erff(x * kSqrtHalf)); }
};

template <class Op>
__global__ void unary_kernel(Op op, Layout layout, Operand x, Operand out) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) {
    const auto o = element_offsets(i, layout, x, out);
    at<float>(out, o.at[1]) = op.forward(at<float>(x, o.at[0]));
  }
}

// Only the operand the derivative reads is loaded; the other has null data.
template <class Op>
__global__ void unary_backward_kernel(Op op, Layout layout, Operand grad, Operand x, Operand y,
                                      Operand out) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) {
    const auto o = element_offsets(i, layout, grad, x, y, out);
    float xv = 0.0f, yv = 0.0f;
    if constexpr (Op::reads == unary::Reads::Input) xv = at<float>(x, o.at[1]);
    if constexpr (Op::reads == unary::Reads::Output) yv = at<float>(y, o.at[2]);
    at<float>(out, o.at[3]) = op.backward(at<float>(grad, o.at[0]), xv, yv);
  }
}

// ---------------------------------------------------------------------------- binary
// Comparisons on float32 or int64 (T) give 1/0; arithmetic is float32 only (CudaBackend
// checks), so its branches are compiled for float alone. Maximum/Minimum propagate NaN from
// either side, as torch.maximum does.
template <typename T>
__device__ __forceinline__ float binary_apply(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::Eq:
      return a == b ? 1.0f : 0.0f;
    case BinaryOp::Ne:
      return a != b ? 1.0f : 0.0f;
    case BinaryOp::Lt:
      return a < b ? 1.0f : 0.0f;
    case BinaryOp::Le:
      return a <= b ? 1.0f : 0.0f;
    case BinaryOp::Gt:
      return a > b ? 1.0f : 0.0f;
    case BinaryOp::Ge:
      return a >= b ? 1.0f : 0.0f;
    default:
      break;
  }
  if constexpr (std::is_same_v<T, float>) {
    switch (op) {
      case BinaryOp::Add:
        return a + b;
      case BinaryOp::Sub:
        return a - b;
      case BinaryOp::Mul:
        return a * b;
      case BinaryOp::Div:
        return a / b;
      case BinaryOp::Pow:
        return powf(a, b);
      case BinaryOp::Maximum:
        return a != a ? a : (b != b ? b : (a > b ? a : b));
      case BinaryOp::Minimum:
        return a != a ? a : (b != b ? b : (a < b ? a : b));
      default:
        break;
    }
  }
  return 0.0f;
}

template <typename T>
__global__ void binary_kernel(BinaryOp op, Layout layout, Operand a, Operand b, Operand out) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) {
    const auto o = element_offsets(i, layout, a, b, out);
    at<float>(out, o.at[2]) = binary_apply<T>(op, at<T>(a, o.at[0]), at<T>(b, o.at[1]));
  }
}

template <typename Cond, typename T>
__global__ void where_kernel(Layout layout, Operand cond, Operand a, Operand b, Operand out) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) {
    const auto o = element_offsets(i, layout, cond, a, b, out);
    // All three loads are issued before any is used, so their latencies overlap instead of
    // the value load waiting for the condition (a and b are valid at every position).
    const Cond c = at<Cond>(cond, o.at[0]);
    const T va = at<T>(a, o.at[1]), vb = at<T>(b, o.at[2]);
    at<T>(out, o.at[3]) = c != Cond{0} ? va : vb;
  }
}

__global__ void axpy_kernel(int64_t n, float alpha, const float* src, float* dst) {
  LOOM_GRID_STRIDE_LOOP(i, n) { dst[i] += alpha * src[i]; }
}

// x = alpha * x in place; alpha == 0 writes zeros without reading x (BLAS's beta == 0 rule).
__global__ void scale_kernel(Layout layout, Operand x, float alpha) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) {
    float& v = at<float>(x, element_offsets(i, layout, x).at[0]);
    v = alpha == 0.0f ? 0.0f : alpha * v;
  }
}

template <typename Src>
void copy_from(const Layout& layout, const Operand& src, const Operand& dst, DType dst_type,
               cudaStream_t stream) {
  const unsigned grid = grid_for(layout.numel);
  if (dst_type == DType::Float32)
    copy_kernel<Src, float><<<grid, kBlock, 0, stream>>>(layout, src, dst);
  else if (dst_type == DType::BFloat16)
    copy_kernel<Src, BFloat16><<<grid, kBlock, 0, stream>>>(layout, src, dst);
  else
    copy_kernel<Src, int64_t><<<grid, kBlock, 0, stream>>>(layout, src, dst);
}

template <typename Cond>
void where_with(const Layout& layout, const Operand& cond, const Operand& a, const Operand& b,
                DType type, const Operand& out, cudaStream_t stream) {
  const unsigned grid = grid_for(layout.numel);
  if (type == DType::Float32)
    where_kernel<Cond, float><<<grid, kBlock, 0, stream>>>(layout, cond, a, b, out);
  else
    where_kernel<Cond, int64_t><<<grid, kBlock, 0, stream>>>(layout, cond, a, b, out);
}

}  // namespace

// ---------------------------------------------------------------------------- launchers
void launch_copy(const Layout& layout, const Operand& src, DType src_type, const Operand& dst,
                 DType dst_type, cudaStream_t stream) {
  if (src_type == DType::Float32)
    copy_from<float>(layout, src, dst, dst_type, stream);
  else if (src_type == DType::BFloat16)
    copy_from<BFloat16>(layout, src, dst, dst_type, stream);
  else
    copy_from<int64_t>(layout, src, dst, dst_type, stream);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_fill(const Layout& layout, const Operand& dst, DType type, double value,
                 cudaStream_t stream) {
  const unsigned grid = grid_for(layout.numel);
  if (type == DType::Float32)
    fill_kernel<float><<<grid, kBlock, 0, stream>>>(layout, dst, static_cast<float>(value));
  else if (type == DType::BFloat16)
    fill_kernel<BFloat16><<<grid, kBlock, 0, stream>>>(layout, dst,
                                                       BFloat16(static_cast<float>(value)));
  else
    fill_kernel<int64_t><<<grid, kBlock, 0, stream>>>(layout, dst, static_cast<int64_t>(value));
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_unary(UnaryOp op, const Layout& layout, const Operand& x, const Operand& out, float a,
                  float b, cudaStream_t stream) {
  unary::visit<CudaMath>(op, a, b, [&](auto entry) {
    unary_kernel<<<grid_for(layout.numel), kBlock, 0, stream>>>(entry, layout, x, out);
  });
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_unary_backward(UnaryOp op, const Layout& layout, const Operand& grad, const Operand& x,
                           const Operand& y, const Operand& out, float a, float b,
                           cudaStream_t stream) {
  unary::visit<CudaMath>(op, a, b, [&](auto entry) {
    unary_backward_kernel<<<grid_for(layout.numel), kBlock, 0, stream>>>(entry, layout, grad, x, y,
                                                                         out);
  });
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_binary(BinaryOp op, const Layout& layout, const Operand& a, const Operand& b,
                   DType in_type, const Operand& out, cudaStream_t stream) {
  const unsigned grid = grid_for(layout.numel);
  if (in_type == DType::Float32)
    binary_kernel<float><<<grid, kBlock, 0, stream>>>(op, layout, a, b, out);
  else
    binary_kernel<int64_t><<<grid, kBlock, 0, stream>>>(op, layout, a, b, out);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_where(const Layout& layout, const Operand& cond, DType cond_type, const Operand& a,
                  const Operand& b, DType type, const Operand& out, cudaStream_t stream) {
  if (cond_type == DType::Float32)
    where_with<float>(layout, cond, a, b, type, out, stream);
  else
    where_with<int64_t>(layout, cond, a, b, type, out, stream);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_axpy(int64_t n, float alpha, const float* src, float* dst, cudaStream_t stream) {
  axpy_kernel<<<grid_for(n), kBlock, 0, stream>>>(n, alpha, src, dst);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_scale(const Layout& layout, const Operand& x, float alpha, cudaStream_t stream) {
  scale_kernel<<<grid_for(layout.numel), kBlock, 0, stream>>>(layout, x, alpha);
  LOOM_CUDA_CHECK_LAUNCH();
}

}  // namespace loom::cuda
