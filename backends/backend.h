// The kernel table of one device. Everything above backends/ calls these functions and never
// loops over tensor elements itself; the CPU table is in backends/cpu, the CUDA one in
// backends/cuda. Conventions shared by every kernel:
//   * `out` tensors are allocated by the caller, contiguous, on the same device as the inputs.
//   * Elementwise inputs have already been expanded (broadcast) to out's shape, so they may
//     have arbitrary strides, including 0; kernels take fast paths for contiguous inputs.
//   * Reductions, softmax and the index kernels see their input as a contiguous
//     [outer, n, inner] block and work along the middle axis.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace loom {

enum class UnaryOp {
  Neg, Exp, Log, Sqrt, Rsqrt, Tanh, Sigmoid, Relu, Gelu, GeluTanh, Abs, Sin, Cos, Sign,
  Pow,     // x^a
  Affine,  // a*x + b   (scalar add/sub/mul)
  RDiv,    // a / x
  Clamp,   // min(max(x, a), b)
};

enum class BinaryOp {
  Add, Sub, Mul, Div, Pow, Maximum, Minimum,
  Eq, Ne, Lt, Le, Gt, Ge,  // comparisons: float32 1/0 result; inputs float32 or int64 (same)
};

enum class ReduceOp { Sum, Max, Min, ArgMax, ArgMin };  // Arg* write int64

struct GemmArgs {
  // C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b] for b in [0, batch); row-major matrices.
  // op(X) = X^T when trans is set. lda/ldb/ldc are row strides in elements; stride_* the
  // distance between consecutive batch items (0 = the same matrix for every item).
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  float alpha = 1.0f, beta = 0.0f;
  const float* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const float* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  float* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
};

struct AdamArgs {
  // One decoupled-or-not Adam(W) update on a contiguous float32 parameter, in place:
  //   g = grad + weight_decay*param            (if !decoupled)
  //   param *= 1 - lr*weight_decay             (if decoupled)
  //   m = beta1*m + (1-beta1) g;  v = beta2*v + (1-beta2) g^2
  //   param -= lr * (m / bias1) / (sqrt(v / bias2) + eps)
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  float bias1 = 1.0f, bias2 = 1.0f;  // 1 - beta^step
  bool decoupled = false;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // --- memory ---
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void synchronize() {}

  // --- layout and fill ---
  virtual void copy(const Tensor& src, Tensor& dst) = 0;  // same shape; any strides; may cast
  virtual void fill(Tensor& dst, double value) = 0;       // dst may be strided

  // --- elementwise ---
  virtual void unary(UnaryOp op, const Tensor& x, Tensor& out, float a, float b) = 0;
  // out = grad * d op(x)/dx, given the input x and the forward output y.
  virtual void unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y,
                              Tensor& out, float a, float b) = 0;
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) = 0;
  virtual void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) = 0;
  // dst += alpha * src (same shape, both contiguous): gradient accumulation, optimizers.
  virtual void axpy(float alpha, const Tensor& src, Tensor& dst) = 0;

  // --- reductions over the middle axis of contiguous [outer, n, inner] -> [outer, inner] ---
  virtual void reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                      Tensor& out) = 0;
  virtual void softmax(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log,
                       Tensor& out) = 0;
  // out = dL/dx from grad = dL/dy and y = softmax(x) (or log_softmax(x) when log).
  virtual void softmax_backward(const Tensor& grad, const Tensor& y, int64_t outer, int64_t n,
                                int64_t inner, bool log, Tensor& out) = 0;

  // --- matrix products ---
  virtual void gemm(const GemmArgs& args) = 0;

  // --- indexing; x is contiguous [outer, n, inner], index int64 ---
  // out[o, j, i] = x[o, index[j], i]            (index 1-D of length k; out [outer, k, inner])
  virtual void index_select(const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                            const Tensor& index, Tensor& out) = 0;
  // out[o, index[j], i] += src[o, j, i]         (the backward of index_select)
  virtual void index_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                         const Tensor& index, Tensor& out) = 0;
  // out[o, j, i] = x[o, index[o, j, i], i]      (index [outer, k, inner], like torch.gather)
  virtual void gather(const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                      const Tensor& index, Tensor& out) = 0;
  // out[o, index[o, j, i], i] += src[o, j, i]   (the backward of gather)
  virtual void scatter_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                           const Tensor& index, Tensor& out) = 0;

  // --- random numbers: element i uses Philox counter (offset + i), key seed ---
  virtual void rand_uniform(Tensor& out, uint64_t seed, uint64_t offset) = 0;  // [0, 1)
  virtual void rand_normal(Tensor& out, uint64_t seed, uint64_t offset) = 0;   // N(0, 1)

  // --- fused neural-network kernels ---
  // x, y: contiguous [rows, cols]; weight/bias [cols] (may be undefined); mean/rstd [rows].
  virtual void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                          Tensor& y, Tensor& mean, Tensor& rstd) = 0;
  // Writes dx (always), dweight/dbias (when defined) from dy, x and the saved mean/rstd.
  virtual void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                   const Tensor& mean, const Tensor& rstd, Tensor& dx,
                                   Tensor& dweight, Tensor& dbias) = 0;
  // Softmax cross-entropy per row. logits [rows, classes] contiguous, target int64 [rows].
  // Writes losses [rows] (0 for ignored rows) and lse [rows] (log-sum-exp, for backward).
  virtual void cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                             float label_smoothing, Tensor& losses, Tensor& lse) = 0;
  // dlogits = scale * (softmax - smoothed one-hot) per non-ignored row, 0 for ignored rows.
  virtual void cross_entropy_backward(const Tensor& logits, const Tensor& target,
                                      const Tensor& lse, int64_t ignore_index,
                                      float label_smoothing, float scale,
                                      Tensor& dlogits) = 0;
  virtual void adam_step(const AdamArgs& args, Tensor& param, const Tensor& grad, Tensor& m,
                         Tensor& v) = 0;
};

// The kernel table of a device; throws loom::Error for CUDA when it is not available.
Backend& backend(Device device);
Backend& cpu_backend();
bool cuda_available();

}  // namespace loom
