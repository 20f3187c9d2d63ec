// Elementwise kernels: copy/cast (float32, bfloat16, int64, bool), fill, arange, unary functions
// and their derivatives, binary arithmetic, comparisons and bitwise ops, where, axpy. Unary ops,
// their derivatives and floating binary arithmetic take float32 or bfloat16 for each operand
// (Operand::bf16): the values are computed in float32 and a bfloat16 result is rounded once, so
// a bfloat16 op costs one pass over memory, not a cast in, the op, and a cast out.
//
// Thread mapping (the general kernels): a grid-stride loop over the row-major index
// space of the output; thread t handles elements t, t + T, t + 2T, ... (T = threads in the
// grid), so consecutive threads touch consecutive output elements and global memory accesses
// coalesce. Inputs arrive already broadcast to the output's shape (stride 0 along broadcast
// dims). On the contiguous fast path (Layout::contiguous) element i of every operand, the
// output included, is simply data[i]; otherwise element_offsets() turns i into each operand's
// own storage offset (outputs are contiguous in practice, but a strided one works too).
//
// Vector fast path (copy/cast, fill, unary forward and backward, float32 binary, axpy), taken
// instead of the general kernel when
// the layout is contiguous and every operand's address is a multiple of a whole vector, thread t
// of the grid-stride loop handles vector v = t, t + T, ...: the N consecutive elements
// [v*N, v*N + N) of every operand, moved by one 16-byte access per operand (N = 16 bytes over
// the widest element: 4 for float32, 8 for bfloat16 alone; a float32 <-> bfloat16 cast moves
// 16 bytes on the float32 side and 8 on the bfloat16 side). Consecutive threads still touch
// consecutive vectors, so a warp reads and writes one run of memory; the last numel % N
// elements (the tail) go one per thread to the grid's first threads. Two more vector kernels
// cover strided layouts whose rows stay whole: a copy whose innermost dim has stride 1 on both
// sides (a permute of attention's heads, a row broadcast to every row) moves vectors along it,
// and bias_unary reads its bias row's vector (v mod row_vectors) for vector v of a dense x.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cmath>
#include <type_traits>

#include "backends/cuda/device.h"
#include "backends/cuda/device_utils.cuh"
#include "backends/cuda/launch_plan.h"
#include "backends/elementwise/binary_math.h"
#include "backends/elementwise/elementwise.cuh"
#include "backends/elementwise/elementwise.h"
#include "backends/unary_math.h"
#include "core/bfloat16.h"

namespace loom::cuda {
namespace {

template <typename T>
__device__ __forceinline__ T& at(const Operand& operand, int64_t offset) {
  return static_cast<T*>(operand.data)[offset];
}

// ---------------------------------------------------------------------------- vector fast path
// N elements of T as one aligned unit: a load or store of a Vec is a single 16-byte (or 8-byte)
// memory access (PyTorch's aligned_vector).
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// Elements per thread of the fast path: 16 bytes of the widest operand type.
template <typename... Ts>
constexpr int kVecWidth = static_cast<int>(16 / std::max({sizeof(Ts)...}));

template <int N, typename T>
__device__ __forceinline__ Vec<T, N> load_vec(const T* data, int64_t v) {
  return reinterpret_cast<const Vec<T, N>*>(data)[v];
}

// f applied lane by lane to N-element vectors of the inputs.
template <int N, typename Out, typename F, typename... In>
__device__ __forceinline__ Vec<Out, N> map_vec(const F& f, const Vec<In, N>&... x) {
  Vec<Out, N> out;
#pragma unroll
  for (int j = 0; j < N; ++j) out.v[j] = f(x.v[j]...);
  return out;
}

// out[i] = f(in[i]...) for i < n over contiguous, vector-aligned operands (out may be one of
// the inputs: each element is read before it is written, by the same thread).
template <int N, typename Out, typename F, typename... In>
__global__ void vector_kernel(int64_t n, F f, Out* out, const In*... in) {
  LOOM_GRID_STRIDE_LOOP(v, n / N) {
    reinterpret_cast<Vec<Out, N>*>(out)[v] = map_vec<N, Out>(f, load_vec<N>(in, v)...);
  }
  const int64_t tail = n / N * N + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tail < n) out[tail] = f(in[tail]...);
}

inline bool vector_aligned(const void* data, size_t bytes) {
  return reinterpret_cast<uintptr_t>(data) % bytes == 0;
}

template <typename T>
using OperandFor = const Operand&;  // one Operand per input type

// Launches vector_kernel when the layout is contiguous and every operand is aligned to a whole
// vector; returns false (nothing launched) otherwise, for the caller's strided kernel.
template <typename Out, typename... In, typename F>
bool launch_vector(const Layout& layout, const F& f, const Operand& out, OperandFor<In>... in,
                   cudaStream_t stream) {
  constexpr int N = kVecWidth<Out, In...>;
  if (!layout.contiguous || !vector_aligned(out.data, N * sizeof(Out)) ||
      !(vector_aligned(in.data, N * sizeof(In)) && ...))
    return false;
  vector_kernel<N><<<grid_for(std::max<int64_t>(layout.numel / N, 1)), kBlock, 0, stream>>>(
      layout.numel, f, static_cast<Out*>(out.data), static_cast<const In*>(in.data)...);
  return true;
}

// ---------------------------------------------------------------------------- copy, fill
// float -> int64 truncates toward zero; NaN and values beyond int64 give INT64_MIN, as on the
// CPU backend (that is what x86 produces; the GPU's own conversion would saturate instead).
// bfloat16 (core/bfloat16.h) converts through float32: exactly from bfloat16, rounding to nearest
// even into it; a bfloat16 -> bfloat16 copy keeps the bits (NaN payloads included). To bool:
// nonzero (NaN included) is true; from bool: 1 and 0.
template <typename Dst, typename Src>
__device__ __forceinline__ Dst convert(Src x) {
  if constexpr (std::is_same_v<Dst, Src>) {
    return x;
  } else if constexpr (std::is_same_v<Src, BFloat16>) {
    return convert<Dst>(static_cast<float>(x));
  } else if constexpr (std::is_same_v<Dst, bool>) {
    return static_cast<float>(x) != 0.0f;  // exact for int64 too: only 0 gives 0.0f
  } else if constexpr (std::is_same_v<Dst, BFloat16>) {
    return BFloat16(static_cast<float>(x));
  } else if constexpr (std::is_same_v<Dst, int64_t> && std::is_same_v<Src, float>) {
    constexpr float kLimit = 9.2233720368547758e18f;  // 2^63
    return x > -kLimit && x < kLimit ? static_cast<int64_t>(x) : LLONG_MIN;
  } else {
    return static_cast<Dst>(x);
  }
}

template <typename Dst>
struct ConvertTo {
  template <typename Src>
  __device__ __forceinline__ Dst operator()(Src x) const {
    return convert<Dst>(x);
  }
};

// f on float values with its result stored as Out (a bfloat16 rounded once): the vector path of
// the ops that compute in float32 on float32 or bfloat16 operands.
template <typename Out, class F>
struct AsFloat {
  F f;
  template <typename... In>
  __device__ __forceinline__ Out operator()(In... x) const {
    return convert<Out>(f(convert<float>(x)...));
  }
};

// An element of a float32-or-bfloat16 operand as float, and a float stored into one: the
// general (strided) kernels of those ops.
__device__ __forceinline__ float load_float(const Operand& o, int64_t offset) {
  return o.bf16 ? static_cast<float>(static_cast<const BFloat16*>(o.data)[offset])
                : static_cast<const float*>(o.data)[offset];
}
__device__ __forceinline__ void store_float(const Operand& o, int64_t offset, float value) {
  if (o.bf16)
    static_cast<BFloat16*>(o.data)[offset] = BFloat16(value);
  else
    static_cast<float*>(o.data)[offset] = value;
}

// The vector path of f over `out` and one or two inputs that are all float32 or all bfloat16,
// and for two inputs the mixed cases autocast produces: a float32 result of a float32 and a
// bfloat16 input (a residual add of a bfloat16 branch), and a bfloat16 result of a float32 and
// a bfloat16 input (a derivative: a float32 gradient times a bfloat16 input's). false: nothing
// launched, the caller runs the general kernel.
template <class F>
bool launch_vector_floating(const Layout& layout, const F& f, const Operand& out, const Operand& x,
                            cudaStream_t stream) {
  if (!out.bf16 && !x.bf16) return launch_vector<float, float>(layout, f, out, x, stream);
  if (out.bf16 && x.bf16)
    return launch_vector<BFloat16, BFloat16>(layout, AsFloat<BFloat16, F>{f}, out, x, stream);
  return false;
}
template <class F>
bool launch_vector_floating(const Layout& layout, const F& f, const Operand& out, const Operand& a,
                            const Operand& b, cudaStream_t stream) {
  const AsFloat<float, F> to_float{f};
  if (!out.bf16 && !a.bf16 && !b.bf16)
    return launch_vector<float, float, float>(layout, f, out, a, b, stream);
  if (out.bf16 && a.bf16 && b.bf16)
    return launch_vector<BFloat16, BFloat16, BFloat16>(layout, AsFloat<BFloat16, F>{f}, out, a, b,
                                                       stream);
  if (!out.bf16 && !a.bf16 && b.bf16)
    return launch_vector<float, float, BFloat16>(layout, to_float, out, a, b, stream);
  if (!out.bf16 && a.bf16 && !b.bf16)
    return launch_vector<float, BFloat16, float>(layout, to_float, out, a, b, stream);
  if (out.bf16 && !a.bf16 && b.bf16)
    return launch_vector<BFloat16, float, BFloat16>(layout, AsFloat<BFloat16, F>{f}, out, a, b,
                                                    stream);
  return false;
}

template <typename Src, typename Dst>
__global__ void copy_kernel(Layout layout, Operand src, Operand dst) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) {
    const auto o = element_offsets(i, layout, src, dst);
    at<Dst>(dst, o.at[1]) = convert<Dst>(at<Src>(src, o.at[0]));
  }
}

// A copy whose innermost dim has stride 1 in both operands, as vectors of N along that dim:
// a permute that keeps each row whole (attention's heads, (B, T, nh, hs) <-> (B, nh, T, hs)), a
// slice of columns, a row broadcast to every row (a Linear's bias as its GEMM's initial C).
// The layout is the copy's own with the innermost size and every outer stride divided by N, so
// element_offsets counts vectors.
template <int N, typename Src, typename Dst>
__global__ void copy_rows_vector_kernel(Layout layout, Operand src, Operand dst) {
  LOOM_GRID_STRIDE_LOOP(v, layout.numel) {
    const auto o = element_offsets(v, layout, src, dst);
    reinterpret_cast<Vec<Dst, N>*>(dst.data)[o.at[1]] =
        map_vec<N, Dst>(ConvertTo<Dst>{}, load_vec<N>(static_cast<const Src*>(src.data), o.at[0]));
  }
}

template <typename T>
struct FillWith {
  T value;
  __device__ __forceinline__ T operator()() const { return value; }
};

template <typename T>
__global__ void fill_kernel(Layout layout, Operand dst, T value) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) {
    at<T>(dst, element_offsets(i, layout, dst).at[0]) = value;
  }
}

// out[i] = start + i * step; float32 as one fused multiply-add, rounded once, as on the CPU.
__global__ void arange_float_kernel(float* out, int64_t n, float start, float step) {
  LOOM_GRID_STRIDE_LOOP(i, n) { out[i] = __fmaf_rn(step, static_cast<float>(i), start); }
}
__global__ void arange_int64_kernel(int64_t* out, int64_t n, int64_t start, int64_t step) {
  LOOM_GRID_STRIDE_LOOP(i, n) { out[i] = start + step * i; }
}

// ---------------------------------------------------------------------------- unary
// The table holds the formulas (backends/unary_math.h), CudaMath (device_utils.cuh) the math
// library; each op gets its own kernel instantiation.

template <class Op>
struct UnaryForward {
  Op op;
  __device__ __forceinline__ float operator()(float x) const { return op.forward(x); }
};

// The backward of an op that reads x or y: `saved` is that one.
template <class Op>
struct UnaryBackward {
  Op op;
  __device__ __forceinline__ float operator()(float grad, float saved) const {
    return op.backward(grad, Op::reads == unary::Reads::Input ? saved : 0.0f,
                       Op::reads == unary::Reads::Output ? saved : 0.0f);
  }
  __device__ __forceinline__ float operator()(float grad) const {  // reads neither
    return op.backward(grad, 0.0f, 0.0f);
  }
};

template <class Op>
__global__ void unary_kernel(Op op, Layout layout, Operand x, Operand out) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) {
    const auto o = element_offsets(i, layout, x, out);
    store_float(out, o.at[1], op.forward(load_float(x, o.at[0])));
  }
}

// Only the operand the derivative reads is loaded; the other has null data.
template <class Op>
__global__ void unary_backward_kernel(Op op, Layout layout, Operand grad, Operand x, Operand y,
                                      Operand out) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) {
    const auto o = element_offsets(i, layout, grad, x, y, out);
    float xv = 0.0f, yv = 0.0f;
    if constexpr (Op::reads == unary::Reads::Input) xv = load_float(x, o.at[1]);
    if constexpr (Op::reads == unary::Reads::Output) yv = load_float(y, o.at[2]);
    store_float(out, o.at[3], op.backward(load_float(grad, o.at[0]), xv, yv));
  }
}

// op(x + b) and grad * op'(x + b) on float values, the bias first: the add of a bias fused
// into the unary op after it (bias_gelu), one pass instead of two. Both kernels of each way
// (strided and vector) compute through these.
template <class Op>
struct BiasForward {
  Op op;
  __device__ __forceinline__ float operator()(float b, float x) const { return op.forward(x + b); }
};
template <class Op>
struct BiasBackward {
  Op op;
  __device__ __forceinline__ float operator()(float b, float grad, float x) const {
    return op.backward(grad, x + b, 0.0f);
  }
};

template <class Op>
__global__ void bias_unary_kernel(Op op, Layout layout, Operand x, Operand bias, Operand out) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) {
    const auto o = element_offsets(i, layout, x, bias, out);
    store_float(out, o.at[2],
                BiasForward<Op>{op}(load_float(bias, o.at[1]), load_float(x, o.at[0])));
  }
}

template <class Op>
__global__ void bias_unary_backward_kernel(Op op, Layout layout, Operand grad, Operand x,
                                           Operand bias, Operand out) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) {
    const auto o = element_offsets(i, layout, grad, x, bias, out);
    store_float(out, o.at[3],
                BiasBackward<Op>{op}(load_float(bias, o.at[2]), load_float(grad, o.at[0]),
                                     load_float(x, o.at[1])));
  }
}

// The vector path of bias_unary and its backward: out and the inputs dense [rows, cols] (cols a
// multiple of N), the bias a [cols] row; vector v covers columns [c*N, c*N + N) of row
// v / (cols/N), c = v mod (cols/N), and reads the bias's vector c. Index: uint32_t when the
// vector count fits (a cheaper division), else int64_t.
template <int N, typename Index, typename Out, typename Bias, typename F, typename... In>
__global__ void bias_vector_kernel(int64_t rows, int64_t cols, F f, Out* out, const Bias* bias,
                                   const In*... in) {
  const Index row_vectors = static_cast<Index>(cols / N);
  LOOM_GRID_STRIDE_LOOP(v, rows * row_vectors) {
    const Index c = static_cast<Index>(v) % row_vectors;
    reinterpret_cast<Vec<Out, N>*>(out)[v] =
        map_vec<N, Out>(f, load_vec<N>(bias, c), load_vec<N>(in, v)...);
  }
}

// bias_vector_kernel, if the layout allows it: [rows, cols] with out and every input dense,
// the bias's strides (0, 1), cols a multiple of N, every address vector-aligned.
template <typename Out, typename Bias, typename... In, typename F>
bool launch_bias_vector(const Layout& layout, const F& f, const Operand& out, const Operand& bias,
                        OperandFor<In>... in, cudaStream_t stream) {
  constexpr int N = kVecWidth<Out, Bias, In...>;
  if (layout.ndim != 2 || bias.strides[0] != 0 || bias.strides[1] != 1) return false;
  const int64_t rows = layout.shape[0], cols = layout.shape[1];
  auto dense = [&](const Operand& o, size_t bytes) {
    return o.strides[0] == cols && o.strides[1] == 1 && vector_aligned(o.data, N * bytes);
  };
  if (cols % N != 0 || !dense(out, sizeof(Out)) || !(dense(in, sizeof(In)) && ...) ||
      !vector_aligned(bias.data, N * sizeof(Bias)))
    return false;
  const int64_t n = rows * (cols / N);
  const unsigned grid = grid_for(n);
  auto* o = static_cast<Out*>(out.data);
  const auto* b = static_cast<const Bias*>(bias.data);
  if (n < (int64_t{1} << 31))
    bias_vector_kernel<N, uint32_t>
        <<<grid, kBlock, 0, stream>>>(rows, cols, f, o, b, static_cast<const In*>(in.data)...);
  else
    bias_vector_kernel<N, int64_t>
        <<<grid, kBlock, 0, stream>>>(rows, cols, f, o, b, static_cast<const In*>(in.data)...);
  return true;
}

// ---------------------------------------------------------------------------- binary
// op on two T values into an Out (backend.h's contract decides which combinations come):
// comparisons of float, int64 or bool into bool or float (1/0); arithmetic on float (computed
// in float32 for float32 and bfloat16 operands) or int64; bitwise ops on int64 or bool. Each
// branch is compiled only for the types it takes. Maximum/Minimum propagate NaN from either
// side, as torch.maximum does; the divisions are PyTorch's (binary_math.h).
template <typename Out, typename T>
__device__ __forceinline__ Out binary_apply(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::Eq:
      return static_cast<Out>(a == b);
    case BinaryOp::Ne:
      return static_cast<Out>(a != b);
    case BinaryOp::Lt:
      return static_cast<Out>(a < b);
    case BinaryOp::Le:
      return static_cast<Out>(a <= b);
    case BinaryOp::Gt:
      return static_cast<Out>(a > b);
    case BinaryOp::Ge:
      return static_cast<Out>(a >= b);
    default:
      break;
  }
  if constexpr (!std::is_same_v<T, bool>) {
    switch (op) {
      case BinaryOp::Add:
        return a + b;
      case BinaryOp::Sub:
        return a - b;
      case BinaryOp::Mul:
        return a * b;
      case BinaryOp::Maximum:
        return binary::maximum(a, b);
      case BinaryOp::Minimum:
        return binary::minimum(a, b);
      case BinaryOp::FloorDiv:
        return binary::floor_div(a, b);
      case BinaryOp::TruncDiv:
        return binary::trunc_div(a, b);
      default:
        break;
    }
  }
  if constexpr (std::is_same_v<T, float>) {
    if (op == BinaryOp::Div) return a / b;
    if (op == BinaryOp::Pow) return powf(a, b);
  } else {
    switch (op) {
      case BinaryOp::BitAnd:
        return a & b;
      case BinaryOp::BitOr:
        return a | b;
      case BinaryOp::BitXor:
        return a ^ b;
      default:
        break;
    }
  }
  return Out{};
}

struct BinaryFloat {
  BinaryOp op;
  __device__ __forceinline__ float operator()(float a, float b) const {
    return binary_apply<float>(op, a, b);
  }
};

// Floating arithmetic: each operand float32 or bfloat16 (Operand::bf16), computed in float32.
__global__ void binary_float_kernel(BinaryOp op, Layout layout, Operand a, Operand b,
                                    Operand out) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) {
    const auto o = element_offsets(i, layout, a, b, out);
    store_float(out, o.at[2],
                binary_apply<float>(op, load_float(a, o.at[0]), load_float(b, o.at[1])));
  }
}

// The other combinations: T inputs (float32 comparisons, int64, bool) and an Out result.
template <typename T, typename Out>
__global__ void binary_kernel(BinaryOp op, Layout layout, Operand a, Operand b, Operand out) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) {
    const auto o = element_offsets(i, layout, a, b, out);
    at<Out>(out, o.at[2]) = binary_apply<Out, T>(op, at<T>(a, o.at[0]), at<T>(b, o.at[1]));
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

struct Axpy {
  float alpha;
  __device__ __forceinline__ float operator()(float dst, float src) const {
    return dst + alpha * src;
  }
};

// x = alpha * x in place; alpha == 0 writes zeros without reading x (BLAS's beta == 0 rule).
__global__ void scale_kernel(Layout layout, Operand x, float alpha) {
  LOOM_GRID_STRIDE_LOOP(i, layout.numel) {
    float& v = at<float>(x, element_offsets(i, layout, x).at[0]);
    v = alpha == 0.0f ? 0.0f : alpha * v;
  }
}

// copy_rows_vector_kernel, if the layout allows it: at least 2 dims, the innermost of stride 1
// in both operands and a multiple of N long, every outer stride a multiple of N, both addresses
// vector-aligned.
template <typename Src, typename Dst>
bool launch_copy_rows_vector(const Layout& layout, const Operand& src, const Operand& dst,
                             cudaStream_t stream) {
  constexpr int N = kVecWidth<Src, Dst>;
  const int last = layout.ndim - 1;
  if (layout.ndim < 2 || src.strides[last] != 1 || dst.strides[last] != 1 ||
      layout.shape[last] % N != 0 || !vector_aligned(src.data, N * sizeof(Src)) ||
      !vector_aligned(dst.data, N * sizeof(Dst)))
    return false;
  Layout vectors = layout;
  Operand s = src, d = dst;
  for (int i = 0; i < last; ++i) {
    if (src.strides[i] % N != 0 || dst.strides[i] % N != 0) return false;
    s.strides[i] /= N;
    d.strides[i] /= N;
  }
  vectors.shape[last] /= N;
  vectors.numel /= N;
  copy_rows_vector_kernel<N, Src, Dst>
      <<<grid_for(std::max<int64_t>(vectors.numel, 1)), kBlock, 0, stream>>>(vectors, s, d);
  return true;
}

template <typename Src, typename Dst>
void copy_to(const Layout& layout, const Operand& src, const Operand& dst, cudaStream_t stream) {
  // The vector paths move 16 bytes of the wider side; int64 takes the plain kernel.
  if constexpr (!std::is_same_v<Src, int64_t> && !std::is_same_v<Dst, int64_t>) {
    if (launch_vector<Dst, Src>(layout, ConvertTo<Dst>{}, dst, src, stream)) return;
    if (launch_copy_rows_vector<Src, Dst>(layout, src, dst, stream)) return;
  }
  copy_kernel<Src, Dst><<<grid_for(layout.numel), kBlock, 0, stream>>>(layout, src, dst);
}

template <typename Src>
void copy_from(const Layout& layout, const Operand& src, const Operand& dst, DType dst_type,
               cudaStream_t stream) {
  if (dst_type == DType::Float32)
    copy_to<Src, float>(layout, src, dst, stream);
  else if (dst_type == DType::BFloat16)
    copy_to<Src, BFloat16>(layout, src, dst, stream);
  else if (dst_type == DType::Bool)
    copy_to<Src, bool>(layout, src, dst, stream);
  else
    copy_to<Src, int64_t>(layout, src, dst, stream);
}

template <typename Cond>
void where_with(const Layout& layout, const Operand& cond, const Operand& a, const Operand& b,
                DType type, const Operand& out, cudaStream_t stream) {
  const unsigned grid = grid_for(layout.numel);
  if (type == DType::Float32)
    where_kernel<Cond, float><<<grid, kBlock, 0, stream>>>(layout, cond, a, b, out);
  else if (type == DType::Bool)
    where_kernel<Cond, bool><<<grid, kBlock, 0, stream>>>(layout, cond, a, b, out);
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
  else if (src_type == DType::Bool)
    copy_from<bool>(layout, src, dst, dst_type, stream);
  else
    copy_from<int64_t>(layout, src, dst, dst_type, stream);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_fill(const Layout& layout, const Operand& dst, DType type, double value,
                 cudaStream_t stream) {
  const unsigned grid = grid_for(layout.numel);
  if (type == DType::Float32) {
    const float v = static_cast<float>(value);
    if (!launch_vector<float>(layout, FillWith<float>{v}, dst, stream))
      fill_kernel<float><<<grid, kBlock, 0, stream>>>(layout, dst, v);
  } else if (type == DType::BFloat16) {
    const BFloat16 v(static_cast<float>(value));
    if (!launch_vector<BFloat16>(layout, FillWith<BFloat16>{v}, dst, stream))
      fill_kernel<BFloat16><<<grid, kBlock, 0, stream>>>(layout, dst, v);
  } else if (type == DType::Bool)
    fill_kernel<bool><<<grid, kBlock, 0, stream>>>(layout, dst, value != 0.0);
  else
    fill_kernel<int64_t><<<grid, kBlock, 0, stream>>>(layout, dst, static_cast<int64_t>(value));
  LOOM_CUDA_CHECK_LAUNCH();
}

// out[i] = start + i * step over n contiguous float32 or int64 elements (Backend::arange).
void launch_arange(void* out, DType type, int64_t n, double start, double step,
                   cudaStream_t stream) {
  if (type == DType::Float32)
    arange_float_kernel<<<grid_for(n), kBlock, 0, stream>>>(
        static_cast<float*>(out), n, static_cast<float>(start), static_cast<float>(step));
  else
    arange_int64_kernel<<<grid_for(n), kBlock, 0, stream>>>(
        static_cast<int64_t*>(out), n, static_cast<int64_t>(start), static_cast<int64_t>(step));
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_unary(UnaryOp op, const Layout& layout, const Operand& x, const Operand& out, float a,
                  float b, cudaStream_t stream) {
  unary::visit<CudaMath>(op, a, b, [&](auto entry) {
    if (launch_vector_floating(layout, UnaryForward<decltype(entry)>{entry}, out, x, stream))
      return;
    unary_kernel<<<grid_for(layout.numel), kBlock, 0, stream>>>(entry, layout, x, out);
  });
  LOOM_CUDA_CHECK_LAUNCH();
}

// out = grad * d op(x)/dx. Of x and y, only the one the derivative reads (unary::backward_reads)
// has data; the other is a null Operand.
void launch_unary_backward(UnaryOp op, const Layout& layout, const Operand& grad, const Operand& x,
                           const Operand& y, const Operand& out, float a, float b,
                           cudaStream_t stream) {
  unary::visit<CudaMath>(op, a, b, [&](auto entry) {
    using Op = decltype(entry);
    const UnaryBackward<Op> f{entry};
    bool done = false;
    // out has the dtype of the input the derivative is for; grad may be float32 beside a
    // bfloat16 input (autocast: a float32 gradient from a product's backward).
    if constexpr (Op::reads == unary::Reads::Input)
      done = launch_vector_floating(layout, f, out, grad, x, stream);
    else if constexpr (Op::reads == unary::Reads::Output)
      done = launch_vector_floating(layout, f, out, grad, y, stream);
    else
      done = launch_vector_floating(layout, f, out, grad, stream);
    if (done) return;
    unary_backward_kernel<<<grid_for(layout.numel), kBlock, 0, stream>>>(entry, layout, grad, x, y,
                                                                         out);
  });
  LOOM_CUDA_CHECK_LAUNCH();
}

// out = op(x + bias) and out = grad * op'(x + bias) (Backend::bias_unary); every operand float32
// or bfloat16, computed in float32; bias usually a broadcast. Only ops whose derivative reads
// the input get here (Backend::bias_unary checks); the kernels are not instantiated for the
// others.
void launch_bias_unary(UnaryOp op, const Layout& layout, const Operand& x, const Operand& bias,
                       const Operand& out, cudaStream_t stream) {
  unary::visit<CudaMath>(op, 0.0f, 0.0f, [&](auto entry) {
    if constexpr (decltype(entry)::reads != unary::Reads::Output) {
      // The vector path for a float32 bias and x and out both float32 or both bfloat16.
      using F = BiasForward<decltype(entry)>;
      if (!bias.bf16 && x.bf16 == out.bf16 &&
          (x.bf16
               ? launch_bias_vector<BFloat16, float, BFloat16>(
                     layout, AsFloat<BFloat16, F>{F{entry}}, out, bias, x, stream)
               : launch_bias_vector<float, float, float>(layout, F{entry}, out, bias, x, stream)))
        return;
      bias_unary_kernel<<<grid_for(layout.numel), kBlock, 0, stream>>>(entry, layout, x, bias, out);
    }
  });
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_bias_unary_backward(UnaryOp op, const Layout& layout, const Operand& grad,
                                const Operand& x, const Operand& bias, const Operand& out,
                                cudaStream_t stream) {
  unary::visit<CudaMath>(op, 0.0f, 0.0f, [&](auto entry) {
    if constexpr (decltype(entry)::reads != unary::Reads::Output) {
      // The vector path for a float32 bias and grad, x and out all float32 or all bfloat16.
      using F = BiasBackward<decltype(entry)>;
      if (!bias.bf16 && grad.bf16 == x.bf16 && x.bf16 == out.bf16 &&
          (x.bf16 ? launch_bias_vector<BFloat16, float, BFloat16, BFloat16>(
                        layout, AsFloat<BFloat16, F>{F{entry}}, out, bias, grad, x, stream)
                  : launch_bias_vector<float, float, float, float>(layout, F{entry}, out, bias,
                                                                   grad, x, stream)))
        return;
      bias_unary_backward_kernel<<<grid_for(layout.numel), kBlock, 0, stream>>>(entry, layout, grad,
                                                                                x, bias, out);
    }
  });
  LOOM_CUDA_CHECK_LAUNCH();
}

// Floating arithmetic: a, b and out each float32 or bfloat16 (Operand::bf16), computed in
// float32. Otherwise a and b of in_type and out of out_type, as Backend::binary allows them.
void launch_binary(BinaryOp op, const Layout& layout, const Operand& a, const Operand& b,
                   DType in_type, const Operand& out, DType out_type, cudaStream_t stream) {
  const unsigned grid = grid_for(layout.numel);
  const bool to_bool = out_type == DType::Bool;
  if (is_arithmetic(op) && in_type != DType::Int64) {  // float32 or bfloat16 operands
    if (!launch_vector_floating(layout, BinaryFloat{op}, out, a, b, stream))
      binary_float_kernel<<<grid, kBlock, 0, stream>>>(op, layout, a, b, out);
  } else if (in_type == DType::Float32) {  // a comparison
    if (to_bool)
      binary_kernel<float, bool><<<grid, kBlock, 0, stream>>>(op, layout, a, b, out);
    else
      binary_kernel<float, float><<<grid, kBlock, 0, stream>>>(op, layout, a, b, out);
  } else if (in_type == DType::Int64) {
    if (to_bool)
      binary_kernel<int64_t, bool><<<grid, kBlock, 0, stream>>>(op, layout, a, b, out);
    else if (out_type == DType::Float32)
      binary_kernel<int64_t, float><<<grid, kBlock, 0, stream>>>(op, layout, a, b, out);
    else  // arithmetic or bitwise
      binary_kernel<int64_t, int64_t><<<grid, kBlock, 0, stream>>>(op, layout, a, b, out);
  } else {  // bool: a comparison or a bitwise op
    if (to_bool)
      binary_kernel<bool, bool><<<grid, kBlock, 0, stream>>>(op, layout, a, b, out);
    else
      binary_kernel<bool, float><<<grid, kBlock, 0, stream>>>(op, layout, a, b, out);
  }
  LOOM_CUDA_CHECK_LAUNCH();
}

// out = cond != 0 ? a : b; a, b and out share `type`.
void launch_where(const Layout& layout, const Operand& cond, DType cond_type, const Operand& a,
                  const Operand& b, DType type, const Operand& out, cudaStream_t stream) {
  if (cond_type == DType::Float32)
    where_with<float>(layout, cond, a, b, type, out, stream);
  else if (cond_type == DType::Bool)
    where_with<bool>(layout, cond, a, b, type, out, stream);
  else
    where_with<int64_t>(layout, cond, a, b, type, out, stream);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_axpy(int64_t n, float alpha, const float* src, float* dst, cudaStream_t stream) {
  Layout layout;  // one contiguous dim
  layout.ndim = 1, layout.numel = n, layout.shape[0] = n, layout.contiguous = true;
  Operand s, d;
  s.data = const_cast<float*>(src), d.data = dst;
  if (!launch_vector<float, float, float>(layout, Axpy{alpha}, d, d, s, stream))
    axpy_kernel<<<grid_for(n), kBlock, 0, stream>>>(n, alpha, src, dst);
  LOOM_CUDA_CHECK_LAUNCH();
}

void launch_scale(const Layout& layout, const Operand& x, float alpha, cudaStream_t stream) {
  scale_kernel<<<grid_for(layout.numel), kBlock, 0, stream>>>(layout, x, alpha);
  LOOM_CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------------------- the kernels
// The elementwise kernels of the CUDA device (elementwise.h): each plans its launch over out's
// shape (launch_plan.h) and queues it on the device's stream.
void copy(const Tensor& src, Tensor& dst) {
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    LOOM_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(),
                                    dst.numel() * element_size(dst.dtype()),
                                    cudaMemcpyDeviceToDevice, stream()));
    return;
  }
  const Elementwise plan = plan_elementwise("copy", dst.shape(), {&dst, &src});
  launch_copy(plan.layout, plan.operands[1], src.dtype(), plan.operands[0], dst.dtype(), stream());
}

void fill(Tensor& dst, double value) {
  // +0 is all-zero bits for float32 and int64 alike (-0.0 is not, so it takes the kernel).
  if (value == 0.0 && !std::signbit(value) && dst.is_contiguous()) {
    LOOM_CUDA_CHECK(
        cudaMemsetAsync(dst.raw_data(), 0, dst.numel() * element_size(dst.dtype()), stream()));
    return;
  }
  const Elementwise plan = plan_elementwise("fill", dst.shape(), {&dst});
  launch_fill(plan.layout, plan.operands[0], dst.dtype(), value, stream());
}

void arange(Tensor& dst, double start, double step) {
  launch_arange(dst.raw_data(), dst.dtype(), dst.numel(), start, step, stream());
}

void unary(UnaryOp op, const Tensor& x, Tensor& out, float a, float b) {
  const Elementwise plan = plan_elementwise("unary", out.shape(), {&out, &x});
  launch_unary(op, plan.layout, plan.operands[1], plan.operands[0], a, b, stream());
}

// Of x and y only the one the derivative reads is defined; the other plans as a null Operand.
void unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y, Tensor& out,
                    float a, float b) {
  const Elementwise plan = plan_elementwise("unary_backward", out.shape(), {&out, &grad, &x, &y});
  launch_unary_backward(op, plan.layout, plan.operands[1], plan.operands[2], plan.operands[3],
                        plan.operands[0], a, b, stream());
}

void bias_unary(UnaryOp op, const Tensor& x, const Tensor& bias, Tensor& out) {
  const Elementwise plan = plan_elementwise("bias_unary", out.shape(), {&out, &x, &bias});
  launch_bias_unary(op, plan.layout, plan.operands[1], plan.operands[2], plan.operands[0],
                    stream());
}

void bias_unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& bias,
                         Tensor& out) {
  const Elementwise plan =
      plan_elementwise("bias_unary_backward", out.shape(), {&out, &grad, &x, &bias});
  launch_bias_unary_backward(op, plan.layout, plan.operands[1], plan.operands[2],
                             plan.operands[3], plan.operands[0], stream());
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  const Elementwise plan = plan_elementwise("binary", out.shape(), {&out, &a, &b});
  launch_binary(op, plan.layout, plan.operands[1], plan.operands[2], a.dtype(), plan.operands[0],
                out.dtype(), stream());
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  const Elementwise plan = plan_elementwise("where", out.shape(), {&out, &cond, &a, &b});
  launch_where(plan.layout, plan.operands[1], cond.dtype(), plan.operands[2], plan.operands[3],
               out.dtype(), plan.operands[0], stream());
}

void axpy(float alpha, const Tensor& src, Tensor& dst) {
  launch_axpy(dst.numel(), alpha, src.data_ptr<float>(), dst.data_ptr<float>(), stream());
}

}  // namespace loom::cuda
