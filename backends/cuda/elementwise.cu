// Elementwise kernels: copy/cast, fill, unary functions and their derivatives, binary
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

namespace loom::cuda {
namespace {

constexpr float kSqrtHalf = 0.70710678118654752f;     // 1/sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143268f;   // 1/sqrt(2*pi)
constexpr float kSqrt2OverPi = 0.79788456080286536f;  // sqrt(2/pi)
constexpr float kGeluCubic = 0.044715f;               // Hendrycks & Gimpel 2016, tanh form

template <typename T>
__device__ __forceinline__ T& at(const Operand& operand, int64_t offset) {
  return static_cast<T*>(operand.data)[offset];
}

// ---------------------------------------------------------------------------- copy, fill
// float -> int64 truncates toward zero; NaN and values beyond int64 give INT64_MIN, as on the
// CPU backend (that is what x86 produces; the GPU's own conversion would saturate instead).
template <typename Dst, typename Src>
__device__ __forceinline__ Dst convert(Src x) {
  if constexpr (std::is_same_v<Dst, int64_t> && std::is_same_v<Src, float>) {
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
// The same formulas, special cases and NaN rules as backends/cpu/unary.cpp, so both devices
// agree to rounding.
__device__ __forceinline__ float pow_forward(float x, float a) {
  if (a == 1.0f) return x;
  if (a == 2.0f) return x * x;
  if (a == 3.0f) return x * x * x;
  if (a == 0.5f) return sqrtf(x);
  if (a == -1.0f) return 1.0f / x;
  if (a == -0.5f) return 1.0f / sqrtf(x);
  if (a == 0.0f) return 1.0f;  // pow(x, 0) == 1, even for NaN
  return powf(x, a);
}

__device__ __forceinline__ float unary_forward(UnaryOp op, float x, float a, float b) {
  switch (op) {
    case UnaryOp::Neg:
      return -x;
    case UnaryOp::Exp:
      return expf(x);
    case UnaryOp::Log:
      return logf(x);
    case UnaryOp::Sqrt:
      return sqrtf(x);
    case UnaryOp::Rsqrt:
      return 1.0f / sqrtf(x);  // rsqrtf is only accurate to 2 ulp
    case UnaryOp::Tanh:
      return tanhf(x);
    case UnaryOp::Sigmoid:
      return 1.0f / (1.0f + expf(-x));
    case UnaryOp::Relu:
      return x < 0.0f ? 0.0f : x;  // NaN passes, as torch.relu
    case UnaryOp::Gelu:
      return x * 0.5f * (1.0f + erff(x * kSqrtHalf));  // x Phi(x)
    case UnaryOp::GeluTanh:
      return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
    case UnaryOp::Abs:
      return fabsf(x);
    case UnaryOp::Sin:
      return sinf(x);
    case UnaryOp::Cos:
      return cosf(x);
    case UnaryOp::Sign:
      return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x);  // sign(NaN) = NaN
    case UnaryOp::Pow:
      return pow_forward(x, a);
    case UnaryOp::Affine:
      return a * x + b;
    case UnaryOp::RDiv:
      return a / x;
    case UnaryOp::Clamp:
      return x < a ? a : (x > b ? b : x);  // NaN passes
  }
  return 0.0f;
}

// grad * d op(x)/dx.
__device__ __forceinline__ float unary_grad(UnaryOp op, float g, float x, float y, float a,
                                            float b) {
  switch (op) {
    case UnaryOp::Neg:
      return -g;
    case UnaryOp::Exp:
      return g * y;
    case UnaryOp::Log:
      return g / x;
    case UnaryOp::Sqrt:
      return 0.5f * g / y;
    case UnaryOp::Rsqrt:
      return -0.5f * g * y * y * y;  // d x^-1/2 = -x^-3/2 / 2 = -y^3 / 2
    case UnaryOp::Tanh:
      return g * (1.0f - y * y);
    case UnaryOp::Sigmoid:
      return g * y * (1.0f - y);
    case UnaryOp::Relu:
      return x > 0.0f ? g : 0.0f;
    case UnaryOp::Gelu: {  // d(x Phi(x)) = Phi(x) + x phi(x)
      const float cdf = 0.5f * (1.0f + erff(x * kSqrtHalf));
      const float pdf = expf(-0.5f * x * x) * kInvSqrt2Pi;
      return g * (cdf + x * pdf);
    }
    case UnaryOp::GeluTanh: {  // y = x/2 (1 + t), t = tanh(sqrt(2/pi) (x + c x^3))
      const float x2 = x * x;
      const float t = tanhf(kSqrt2OverPi * x * (1.0f + kGeluCubic * x2));
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x2);
      return g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
    }
    case UnaryOp::Abs:
      return x > 0.0f ? g : (x < 0.0f ? -g : 0.0f);  // 0 at 0, as PyTorch
    case UnaryOp::Sin:
      return g * cosf(x);
    case UnaryOp::Cos:
      return -g * sinf(x);
    case UnaryOp::Sign:
      return 0.0f;
    case UnaryOp::Pow:
      if (a == 0.0f) return 0.0f;
      if (a == 1.0f) return g;
      if (a == 2.0f) return 2.0f * g * x;
      return g * a * powf(x, a - 1.0f);
    case UnaryOp::Affine:
      return a * g;
    case UnaryOp::RDiv:
      return -a * g / (x * x);  // d(a/x) = -a/x^2
    case UnaryOp::Clamp:
      return x >= a && x <= b ? g : 0.0f;  // torch.clamp's rule
  }
  return 0.0f;
}

__global__ void unary_kernel(UnaryOp op, Layout layout, Operand x, Operand out, float a, float b) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) {
    const auto o = element_offsets(i, layout, x, out);
    at<float>(out, o.at[1]) = unary_forward(op, at<float>(x, o.at[0]), a, b);
  }
}

// x or y may be missing (null data) when the derivative does not need it; a needed y that was
// not saved is recomputed from x.
__global__ void unary_backward_kernel(UnaryOp op, Layout layout, Operand grad, Operand x, Operand y,
                                      Operand out, float a, float b) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) {
    const auto o = element_offsets(i, layout, grad, x, y, out);
    const float xv = x.data ? at<float>(x, o.at[1]) : 0.0f;
    float yv = 0.0f;
    if (y.data)
      yv = at<float>(y, o.at[2]);
    else if (derivative_uses_y(op))
      yv = unary_forward(op, xv, a, b);
    at<float>(out, o.at[3]) = unary_grad(op, at<float>(grad, o.at[0]), xv, yv, a, b);
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
  else
    copy_from<int64_t>(layout, src, dst, dst_type, stream);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_fill(const Layout& layout, const Operand& dst, DType type, double value,
                 cudaStream_t stream) {
  const unsigned grid = grid_for(layout.numel);
  if (type == DType::Float32)
    fill_kernel<float><<<grid, kBlock, 0, stream>>>(layout, dst, static_cast<float>(value));
  else
    fill_kernel<int64_t><<<grid, kBlock, 0, stream>>>(layout, dst, static_cast<int64_t>(value));
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_unary(UnaryOp op, const Layout& layout, const Operand& x, const Operand& out, float a,
                  float b, cudaStream_t stream) {
  unary_kernel<<<grid_for(layout.numel), kBlock, 0, stream>>>(op, layout, x, out, a, b);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_unary_backward(UnaryOp op, const Layout& layout, const Operand& grad, const Operand& x,
                           const Operand& y, const Operand& out, float a, float b,
                           cudaStream_t stream) {
  unary_backward_kernel<<<grid_for(layout.numel), kBlock, 0, stream>>>(op, layout, grad, x, y, out,
                                                                       a, b);
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
