// The launchers of loom's CUDA kernels: plain functions over raw device pointers, called by
// CudaBackend (cuda_backend.cpp) once Backend (backends/backend.cpp) has checked the tensors.
// Each .cu file implements one family: elementwise.cu, gemm.cu, reduce.cu, index.cu, nn.cu, ...
// Every launch goes to `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backends/backend.h"

namespace loom::cuda {

// ---------------------------------------------------------------------------- layouts
// An elementwise launch walks the row-major index space of `shape`; each operand reads or
// writes element i at data + sum_d coord_d(i) * strides[d]. CudaBackend merges dims before
// launching (a contiguous tensor of any rank becomes one dim), so kMaxDims bounds only
// genuinely strided views.
constexpr int kMaxDims = 8;

struct Layout {
  int ndim = 0;
  int64_t numel = 0;
  int64_t shape[kMaxDims] = {};
  bool contiguous = false;  // every operand has stride 1 over the single merged dim
  bool index32 = false;     // numel and every operand offset fit in 32 bits (cheaper division)
};

struct Operand {
  void* data = nullptr;
  int64_t strides[kMaxDims] = {};  // in elements
  // The elements are bfloat16 (else float32), for the kernels that take either: unary and its
  // backward, binary arithmetic. plan_elementwise sets it from the tensor.
  bool bf16 = false;
};

// A flag that kernels raise instead of throwing (device code cannot throw): the first thread
// that finds a bad index stores it and where it was; the host reads the flag at its next wait
// for the GPU (CudaBackend's "device-side errors").
struct DeviceErrorFlag {
  int raised;
  long long value;
  long long position;
};

// Temporary device memory for multi-pass kernels. Blocks come from the caching allocator and
// go back when the Scratch dies; that is safe while kernels still run, because everything is
// ordered on the one stream, so a later user of the block waits for them.
class Scratch {
 public:
  virtual void* get(size_t bytes) = 0;

 protected:
  ~Scratch() = default;
};

// ---------------------------------------------------------------------------- elementwise.cu
void launch_copy(const Layout& layout, const Operand& src, DType src_type, const Operand& dst,
                 DType dst_type, cudaStream_t stream);
void launch_fill(const Layout& layout, const Operand& dst, DType type, double value,
                 cudaStream_t stream);
// out[i] = start + i * step over n contiguous float32 or int64 elements (Backend::arange).
void launch_arange(void* out, DType type, int64_t n, double start, double step,
                   cudaStream_t stream);
// Every Operand may be strided, outputs included (stride 0 only for inputs). The math of each
// unary op is in backends/unary_math.h. x float32 -> out float32.
void launch_unary(UnaryOp op, const Layout& layout, const Operand& x, const Operand& out, float a,
                  float b, cudaStream_t stream);
// out = grad * d op(x)/dx. Of x and y, only the one the derivative reads (unary::backward_reads)
// has data; the other is a null Operand.
void launch_unary_backward(UnaryOp op, const Layout& layout, const Operand& grad, const Operand& x,
                           const Operand& y, const Operand& out, float a, float b,
                           cudaStream_t stream);
// out = op(x + bias) and out = grad * op'(x + bias) (Backend::bias_unary: op's derivative reads
// its input); every operand float32 or bfloat16, computed in float32; bias usually a broadcast.
void launch_bias_unary(UnaryOp op, const Layout& layout, const Operand& x, const Operand& bias,
                       const Operand& out, cudaStream_t stream);
void launch_bias_unary_backward(UnaryOp op, const Layout& layout, const Operand& grad,
                                const Operand& x, const Operand& bias, const Operand& out,
                                cudaStream_t stream);
// Arithmetic: a, b and out each float32 or bfloat16 (Operand::bf16), computed in float32.
// Comparisons: a, b of in_type (float32 or int64), out float32.
void launch_binary(BinaryOp op, const Layout& layout, const Operand& a, const Operand& b,
                   DType in_type, const Operand& out, cudaStream_t stream);
// out = cond != 0 ? a : b; a, b and out share `type`.
void launch_where(const Layout& layout, const Operand& cond, DType cond_type, const Operand& a,
                  const Operand& b, DType type, const Operand& out, cudaStream_t stream);
void launch_axpy(int64_t n, float alpha, const float* src, float* dst, cudaStream_t stream);
// x = alpha * x in place over a float32 strided view (0 writes zeros without reading x).
void launch_scale(const Layout& layout, const Operand& x, float alpha, cudaStream_t stream);

// ---------------------------------------------------------------------------- gemm.cu
// C = alpha A W^T + beta C + bias for A [m, k] with m <= kGemmRowsMax (row stride lda; any for
// one row), W [n, k] (row stride ldb: a Linear's weight), C [m, n] (row stride ldc), bias float32
// [n] or null, then `activation` if `activate`: GemmArgs' product of a few rows (batch 1,
// trans_b, not trans_a), summed in float32 and rounded once. A and W float32 or both bfloat16;
// C float32, or bfloat16 for bfloat16 A.
constexpr int64_t kGemmRowsMax = 8;
struct GemmRowsArgs {
  int64_t m, n, k;
  const void* a;
  int64_t lda;
  const void* b;
  int64_t ldb;
  void* c;
  int64_t ldc;
  float alpha, beta;
  const float* bias;
  bool activate;
  UnaryOp activation;  // Relu, Gelu or GeluTanh
};
void launch_gemm_rows(const GemmRowsArgs& args, DType ab_type, DType c_type, cudaStream_t stream);
// C = beta * C + bias (GemmArgs::bias, beta != 0) over `batch` matrices [m, n] of c_type, row
// stride ldc, stride_c apart: the start of a cuBLAS product with a bias that adds to C (with
// beta 0, a Linear's, the bias is copied by launch_copy).
void launch_bias_rows(void* c, DType c_type, int64_t batch, int64_t m, int64_t n, int64_t ldc,
                      int64_t stride_c, float beta, const float* bias, cudaStream_t stream);

// ---------------------------------------------------------------------------- reduce.cu
// x contiguous [outer, n, inner] of `type` -> out [outer, inner] of `type` (int64 for Arg*;
// float32 for the sum of a bfloat16 x, the one reduction bfloat16 takes).
void launch_reduce(ReduceOp op, const void* x, DType type, int64_t outer, int64_t n, int64_t inner,
                   void* out, Scratch& scratch, cudaStream_t stream);
void launch_softmax(const float* x, int64_t outer, int64_t n, int64_t inner, bool log, float* out,
                    cudaStream_t stream);
void launch_softmax_backward(const float* grad, const float* y, int64_t outer, int64_t n,
                             int64_t inner, bool log, float* out, cudaStream_t stream);

// ---------------------------------------------------------------------------- index.cu
// Index arrays are contiguous int64; an out-of-range index raises `error` (value = the index,
// position = where it sits in the index array). index_select and gather copy elements of
// `element_size` bytes (4: float32, 8: int64; index_copy also 2: bfloat16); the accumulating
// kernels take float32 or int64.
void launch_index_select(const void* x, size_t element_size, int64_t outer, int64_t n,
                         int64_t inner, const int64_t* index, int64_t k, void* out,
                         DeviceErrorFlag* error, cudaStream_t stream);
void launch_index_add(const void* src, DType type, int64_t outer, int64_t n, int64_t inner,
                      const int64_t* index, int64_t k, void* out, DeviceErrorFlag* error,
                      cudaStream_t stream);
void launch_index_copy(const void* src, size_t element_size, int64_t outer, int64_t n,
                       int64_t inner, const int64_t* index, int64_t k, void* out,
                       DeviceErrorFlag* error, cudaStream_t stream);
void launch_gather(const void* x, size_t element_size, int64_t outer, int64_t n, int64_t inner,
                   const int64_t* index, int64_t k, void* out, DeviceErrorFlag* error,
                   cudaStream_t stream);
void launch_scatter_add(const void* src, DType type, int64_t outer, int64_t n, int64_t inner,
                        const int64_t* index, int64_t k, void* out, DeviceErrorFlag* error,
                        cudaStream_t stream);

// ---------------------------------------------------------------------------- nn.cu
void launch_rand_uniform(float* out, int64_t n, uint64_t seed, uint64_t offset,
                         cudaStream_t stream);
void launch_rand_normal(float* out, int64_t n, uint64_t seed, uint64_t offset, cudaStream_t stream);
// weight/bias may be null (no affine transform). residual and sum are both null (layer_norm)
// or both set (add_layer_norm: the rows normalised are x + residual, written to sum); the
// residual is float32, or bfloat16 when residual_bf16.
void launch_layer_norm(const float* x, const void* residual, bool residual_bf16,
                       const float* weight, const float* bias, int64_t rows, int64_t cols,
                       float eps, float* sum, float* y, float* mean, float* rstd,
                       cudaStream_t stream);
// dweight/dbias may be null (not wanted); weight may be null (identity).
void launch_layer_norm_backward(const float* dy, const float* x, const float* weight,
                                const float* mean, const float* rstd, int64_t rows, int64_t cols,
                                float* dx, float* dweight, float* dbias, Scratch& scratch,
                                cudaStream_t stream);
// logits: rows of `classes` values, row r at logits + r * ld (ld >= classes: padded rows are read
// in place), float32 or bfloat16 (logits_bf16); dlogits contiguous, of the logits' dtype.
void launch_cross_entropy(const void* logits, bool logits_bf16, const int64_t* target, int64_t rows,
                          int64_t classes, int64_t ld, int64_t ignore_index, float label_smoothing,
                          float* losses, float* lse, DeviceErrorFlag* error, cudaStream_t stream);
// scale_by (may be null): a device float that multiplies scale.
void launch_cross_entropy_backward(const void* logits, bool logits_bf16, const int64_t* target,
                                   const float* lse, int64_t rows, int64_t classes, int64_t ld,
                                   int64_t ignore_index, float label_smoothing, float scale,
                                   const float* scale_by, void* dlogits, DeviceErrorFlag* error,
                                   cudaStream_t stream);
void launch_adam(const AdamArgs& args, int64_t n, float* param, const float* grad, float* m,
                 float* v, cudaStream_t stream);
// One tensor of a multi-tensor Adam step: n > 0 contiguous elements at each pointer.
struct AdamTensor {
  float* param;
  const float* grad;
  float* m;
  float* v;
  int64_t n;
};
// Tensors per launch of launch_adam_multi (its pointer table is the kernel's argument).
constexpr int kAdamMultiTensors = 92;
// launch_adam on each tensor, bit for bit, in ceil(count / kAdamMultiTensors) launches.
void launch_adam_multi(const AdamArgs& args, const AdamTensor* tensors, size_t count,
                       cudaStream_t stream);

// ---------------------------------------------------------------------------- multi_tensor.cu
// The multi-tensor kernels of clip_grad_norm: each launch reads up to kMultiTensors tensors
// (n > 0 contiguous float32 elements each).
struct FloatTensor {
  float* data;
  int64_t n;
};
constexpr int kMultiTensors = 200;
// out[0] = sum of x^2 over all the tensors, accumulated in double: one launch per kMultiTensors
// tensors writes the partial sum of each chunk, one more adds them up in a fixed order.
void launch_sum_of_squares_multi(const FloatTensor* xs, size_t count, float* out,
                                 Scratch& scratch, cudaStream_t stream);
// x *= alpha over all the tensors, in place.
void launch_scale_multi(const FloatTensor* xs, size_t count, float alpha, cudaStream_t stream);

// ---------------------------------------------------------------------------- attention.cu
// Fused attention (AttentionArgs, backends/backend.h): q, k, v, out, dout, dq, dk, dv contiguous
// [n, T, head_dim] (the forward's k and v: matrices args.kv_stride elements apart) of `type`
// (float32, or bfloat16 as its uint16 bits); lse float32 [n, q_len]; mask float32 read through
// `layout`, or null. head_dim 1..128 (padded to 32, 64 or 128).
// decode_counters: kDecodeCounters zeros in device memory, which the forward's decoding kernel
// uses (and leaves zero) to find the last block of each problem; one array per stream.
#ifdef LOOM_CUDA_EMULATED
constexpr int64_t kDecodeCounters = 8;  // so that the tests' 12 heads take two launches
#else
constexpr int64_t kDecodeCounters = int64_t{1} << 16;
#endif
void launch_attention_forward(const AttentionArgs& args, DType type, const void* q, const void* k,
                              const void* v, const float* mask, const AttentionMaskLayout& layout,
                              void* out, float* lse, Scratch& scratch, unsigned* decode_counters,
                              cudaStream_t stream);
void launch_attention_backward(const AttentionArgs& args, DType type, const void* dout,
                               const void* q, const void* k, const void* v, const float* mask,
                               const AttentionMaskLayout& layout, const void* out,
                               const float* lse, void* dq, void* dk, void* dv, Scratch& scratch,
                               cudaStream_t stream);

// ---------------------------------------------------------------------------- sample.cu
// Backend::sample: logits contiguous [rows, n] -> int64 out [rows]. probs: scratch of rows * n
// doubles when temperature > 0 (may be null for greedy decoding); `scratch` gives greedy
// decoding over long rows its partial maxima. offset_by: null, or one int64 in device memory
// added to offset by the kernel.
void launch_sample(const float* logits, int64_t rows, int64_t n, float temperature, int64_t top_k,
                   float top_p, uint64_t seed, uint64_t offset, const int64_t* offset_by,
                   double* probs, int64_t* out, Scratch& scratch, cudaStream_t stream);

}  // namespace loom::cuda
