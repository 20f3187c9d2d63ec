// The kernel table of one device. Everything above backends/ calls these functions and never
// loops over tensor elements itself; the CPU table is in backends/cpu, the CUDA one in
// backends/cuda. The contract, checked once for every device by the public methods below
// (backends/backend.cpp), which throw loom::Error naming the op and the shapes, dtypes or
// devices at fault:
//   * Every tensor is defined and on the backend's device; float32 unless stated (int64 for
//     indices and targets; copy, fill, where, comparisons, reductions and index kernels also
//     take int64 data). bfloat16 tensors are taken by copy (any dtype to any), fill, gemm
//     (GemmArgs), index_copy, add_layer_norm's residual, and as any operand of unary,
//     unary_backward and the arithmetic
//     binary ops, which compute in float32 and round a bfloat16 result once (the CPU on float32
//     copies, CUDA in its kernels): the other ops on them compute in float32 (autograd/ops.h).
//   * `out` tensors are allocated by the caller, on the same device as the inputs, with the
//     stated shape or element count; outputs of row-wise kernels (reductions, softmax, index,
//     the nn kernels, axpy, rand, adam) must be contiguous.
//   * Elementwise inputs have already been expanded (broadcast) to out's shape, so they may
//     have arbitrary strides, including 0; kernels take fast paths for contiguous inputs.
//   * Reductions, softmax and the index kernels see their input as a contiguous
//     [outer, n, inner] block and work along the middle axis; a strided input is copied to a
//     contiguous one before the kernel sees it.
// A device implements the protected *_impl kernels (NVI: the public method checks, then calls
// the kernel). An *_impl may assume the contract holds, that its row-wise inputs are contiguous,
// and that there is work to do (the public method returns early on empty tensors). What only
// the kernel can check, the values in index and target tensors, it checks itself.
//
// A new unary op needs no change here: see the recipe in backends/unary_math.h. A new kernel
// family (a softmax-like op) is: the public method and its *_impl here; its checks in
// backend.cpp; the CPU loop (a cpu/*.cpp file, declared in cpu/cpu_backend.h); the CUDA kernel
// and launcher (a cuda/*.cu file, declared in cuda/kernels.h) and the *_impl that calls the
// launcher (cuda/cuda_backend.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "backends/unary_math.h"
#include "core/tensor.h"

namespace loom {

// UnaryOp (Neg, Exp, ..., Pow: x^a, Affine: a*x + b, RDiv: a/x, Clamp: min(max(x, a), b)) and
// the math of each op live in backends/unary_math.h, the one table both devices instantiate.

// Recorded device work (Backend::end_capture), replayed with one launch.
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  virtual void replay() = 0;
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
  // Element types: A and B are both float32 or both bfloat16, C is float32 or bfloat16. Products
  // are always accumulated in float32 (bfloat16 products are exact in float32: cuBLAS's
  // CUBLAS_COMPUTE_32F on tensor cores, float32 BLAS on the upcast values on the CPU); a
  // bfloat16 C is rounded once, at the end.
  DType ab_type = DType::Float32, c_type = DType::Float32;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  // A float32 row of n values (or null) that C starts from: C = alpha op(A) op(B) + beta C +
  // bias, the bias added to every row of every batch item (a Linear's y = x W^T + b, torch's
  // addmm with a broadcast input). A bfloat16 C takes the bias rounded to bfloat16, as
  // PyTorch's autocast casts addmm's input.
  const float* bias = nullptr;
  // An activation (relu, gelu or gelu_tanh) applied to every value of C as it is written, after
  // the bias and before a bfloat16 C is rounded: C = act(alpha op(A) op(B) + beta C + bias), a
  // Linear and its activation as one product (cuBLASLt's RELU_BIAS / GELU_BIAS epilogues).
  std::optional<UnaryOp> activation;
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

struct AttentionArgs {
  // Fused scaled-dot-product attention (FlashAttention-2, Dao 2023) over n = batch * heads
  // independent problems: out[b] = dropout(softmax(scale * q[b] k[b]^T + mask[b] + causal)) v[b].
  // q/out [n, q_len, head_dim], k/v [n, kv_len, head_dim] (d_k = d_v = head_dim).
  int64_t n = 0, q_len = 0, kv_len = 0, head_dim = 0;
  // Elements from one problem's K (and V) matrix to the next's. 0 (the caller's usual value):
  // kv_len * head_dim, contiguous K and V. The forward also reads K and V whose rows are
  // contiguous and whose matrices lie kv_stride >= kv_len * head_dim apart (a KV cache's window
  // in place), as k's and v's strides must then say; the backward takes them contiguous.
  int64_t kv_stride = 0;
  float scale = 1.0f;
  bool causal = false;       // key j is visible to query i iff j <= query_offset + i
  int64_t query_offset = 0;  // as AttentionOptions::query_offset
  // Dropout on the probabilities: element (b, i, j) is kept iff
  // philox_uniform(offset + (b * q_len + i) * kv_len + j, seed) >= dropout_p (core/rng.h), the
  // same draw as loom::dropout on the [n, q_len, kv_len] probabilities; kept ones are scaled by
  // 1 / (1 - dropout_p). 0 = no dropout.
  float dropout_p = 0.0f;
  uint64_t seed = 0, offset = 0;
};

// Problems of at most this many queries and no dropout (KV-cache decoding: one query per step)
// run on CUDA in the split-key decoding kernel (backends/cuda/attention.cu), which
// scaled_dot_product_attention then takes by default in float32 too.
constexpr int64_t kAttentionDecodeQueries = 8;

// Where a fused attention kernel reads mask element (b, i, j): at
// batch_offset(b) + i * row_stride + j * col_stride from the mask's data pointer, b split into
// its coordinates over the mask's leading dims (size-1 dims dropped; stride 0 = broadcast).
struct AttentionMaskLayout {
  static constexpr int kMaxLead = 6;
  int nlead = 0;
  int64_t lead_size[kMaxLead] = {}, lead_stride[kMaxLead] = {};
  int64_t row_stride = 0, col_stride = 0;

  LOOM_HOST_DEVICE int64_t batch_offset(int64_t b) const {
    int64_t offset = 0;
    for (int d = nlead - 1; d >= 0; --d) {
      offset += (b % lead_size[d]) * lead_stride[d];
      b /= lead_size[d];
    }
    return offset;
  }
};
// The layout of a mask that passed attention_forward's checks (an empty one if undefined).
AttentionMaskLayout attention_mask_layout(const Tensor& mask);

class Backend {
 public:
  explicit Backend(Device device) : device_(device) {}
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  Device device() const { return device_; }

  // --- memory: raw bytes, nothing to check, so each device implements these directly ---
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void synchronize() {}

  // --- layout and fill ---
  void copy(const Tensor& src, Tensor& dst);  // same shape; any strides; may cast
  void fill(Tensor& dst, double value);       // dst may be strided
  // dst[i] = start + i * step for contiguous float32 or int64 dst (as torch.arange), made on
  // the device itself: no host buffer copied over. float32: fma(step, float(i), start), rounded
  // once, on every device; int64: exact, with integral start and step.
  void arange(Tensor& dst, double start, double step);

  // --- elementwise ---
  void unary(UnaryOp op, const Tensor& x, Tensor& out, float a, float b);
  // out = grad * d op(x)/dx, given the input x and the forward output y. Only the one the
  // derivative reads (unary::backward_reads) must be defined; a y that is needed but not given
  // is recomputed from x.
  void unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y, Tensor& out,
                      float a, float b);
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out);
  // out = op(x + bias) in one pass: the add fused into the activation after it (a Linear's
  // bias on its way into GELU, Megatron-LM's bias_gelu). bias has x's shape (a [rows, cols]
  // broadcast view of a [cols] bias is the use); op is one whose derivative reads its input
  // (relu, gelu, gelu_tanh, ...). x, bias and out are float32 or bfloat16, computed in float32.
  void bias_unary(UnaryOp op, const Tensor& x, const Tensor& bias, Tensor& out);
  // out = grad * op'(x + bias), the same operands.
  void bias_unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& bias,
                           Tensor& out);
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out);
  // dst += alpha * src (same shape, both contiguous): gradient accumulation, optimizers.
  void axpy(float alpha, const Tensor& src, Tensor& dst);

  // --- reductions over the middle axis of contiguous [outer, n, inner] -> [outer, inner] ---
  // A sum also takes bfloat16 x and writes a float32 out (autocast keeps sums in float32; a
  // Linear's bias gradient is the column sums of a bfloat16 gradient), read without a copy.
  void reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out);
  void softmax(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log, Tensor& out);
  // out = dL/dx from grad = dL/dy and y = softmax(x) (or log_softmax(x) when log).
  void softmax_backward(const Tensor& grad, const Tensor& y, int64_t outer, int64_t n,
                        int64_t inner, bool log, Tensor& out);

  // --- matrix products ---
  void gemm(const GemmArgs& args);

  // --- indexing; x is contiguous [outer, n, inner], index int64 ---
  // out[o, j, i] = x[o, index[j], i]            (index 1-D of length k; out [outer, k, inner])
  void index_select(const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                    Tensor& out);
  // out[o, index[j], i] += src[o, j, i]         (the backward of index_select)
  void index_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                 Tensor& out);
  // out[o, index[j], i] = src[o, j, i]          (Tensor::index_copy_; any dtype, bfloat16 too;
  //                                              with repeated indices one of the rows wins)
  void index_copy(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                  Tensor& out);
  // out[o, j, i] = x[o, index[o, j, i], i]      (index [outer, k, inner], like torch.gather)
  void gather(const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
              Tensor& out);
  // out[o, index[o, j, i], i] += src[o, j, i]   (the backward of gather)
  void scatter_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                   Tensor& out);

  // --- random numbers: element i uses Philox counter (offset + i), key seed ---
  void rand_uniform(Tensor& out, uint64_t seed, uint64_t offset);  // [0, 1)
  void rand_normal(Tensor& out, uint64_t seed, uint64_t offset);   // N(0, 1)

  // --- fused neural-network kernels ---
  // x, y: [rows, cols]; weight/bias [cols] (may be undefined); mean/rstd [rows].
  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y,
                  Tensor& mean, Tensor& rstd);
  // sum = x + residual, then layer_norm of sum, in one pass over the rows: a pre-norm block's
  // residual add and the LayerNorm that follows it. x, residual, sum, y: [rows, cols].
  void add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                      const Tensor& bias, float eps, Tensor& sum, Tensor& y, Tensor& mean,
                      Tensor& rstd);
  // Writes dx (always), dweight/dbias (when defined) from dy, x and the saved mean/rstd.
  void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                           const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dweight,
                           Tensor& dbias);
  // Softmax cross-entropy per row. logits [rows, classes], target int64 [rows]. A 2-D logits
  // view whose rows are padded (row stride >= classes, unit stride within a row: an LM head's
  // output, see ops_matmul.cpp) is read in place, with no contiguous copy. The logits are
  // float32 or bfloat16 (an LM head under autocast), read as they are and computed in float32.
  // Writes losses [rows] (0 for ignored rows) and lse [rows] (log-sum-exp, for backward).
  void cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                     float label_smoothing, Tensor& losses, Tensor& lse);
  // dlogits = scale * (softmax - smoothed one-hot) per non-ignored row, 0 for ignored rows;
  // dlogits has the logits' dtype (a bfloat16 gradient rounded once from float32).
  // scale_by, when defined, is a float32 one-element tensor on the device that multiplies scale
  // (read by the kernel: a factor computed on the GPU needs no copy to the host).
  void cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& lse,
                              int64_t ignore_index, float label_smoothing, float scale,
                              Tensor& dlogits, const Tensor& scale_by = Tensor());
  void adam_step(const AdamArgs& args, Tensor& param, const Tensor& grad, Tensor& m, Tensor& v);
  // adam_step on lists of tensors with the same args (one parameter group at one step): element
  // i of params, grads, ms and vs is one adam_step's param, grad, m and v, with the same
  // checks, and the result is bit-identical to one adam_step per tensor. The CUDA backend updates
  // many tensors per launch (multi-tensor apply), the CPU backend loops over them. The lists
  // have the same length; a mismatch names the index at fault.
  void adam_step_multi(const AdamArgs& args, std::span<Tensor> params,
                       std::span<const Tensor> grads, std::span<Tensor> ms, std::span<Tensor> vs);
  // The multi-tensor kernels of clip_grad_norm (optim/clip_grad.h), many tensors per CUDA
  // launch as adam_step_multi. out (float32, one element) = the sum of x^2 over every element of
  // every tensor of xs (float32, any layout), accumulated in double; 0 for no elements.
  void sum_of_squares_multi(std::span<const Tensor> xs, Tensor& out);
  // x *= alpha in place for every x of xs (float32, contiguous).
  void scale_multi(std::span<Tensor> xs, float alpha);
  // Fused attention (AttentionArgs). q, k, v, out contiguous [n, T, head_dim], all float32 or
  // all bfloat16 (computed in float32, out rounded once); lse float32 [n, q_len], the
  // log-sum-exp of each row's scores (NaN for a row whose every key is blocked; its out is NaN,
  // as the unfused softmax gives). mask: undefined, or additive float32 [..., q_len, kv_len]
  // whose leading dims multiply to n, any strides (a broadcast view is read in place).
  void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                         const AttentionArgs& args, Tensor& out, Tensor& lse);
  // dq, dk, dv (q's dtype and shapes) from dout and the forward's out and lse (FA2: the
  // probabilities are recomputed from lse, D_i = rowsum(dout_i * out_i)).
  void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& mask, const Tensor& out, const Tensor& lse,
                          const AttentionArgs& args, Tensor& dq, Tensor& dk, Tensor& dv);

  // --- next-token sampling (models::sample_next) ---
  // One token per row of float32 logits [rows, n] into int64 out [rows]. temperature 0: the
  // argmax (the first one on ties). Otherwise softmax(logits / temperature) in double, cut to
  // the top_k largest logits (0 = all; ties at the k-th value are kept) and then to the
  // smallest set of most likely tokens whose probability reaches top_p (ties broken towards
  // the smaller id; the most likely token is always kept), inverted at the uniform
  // philox_uniform(offset + row, seed) (core/rng.h). A NaN logit: loom::Error on the CPU;
  // on CUDA (which does not wait for the kernel) the row's token is -1. offset_by, when
  // defined, is an int64 tensor of one element on this device whose value the kernel adds to
  // offset where it runs: a counter in device memory, which a recorded graph can advance.
  void sample(const Tensor& logits, float temperature, int64_t top_k, float top_p, uint64_t seed,
              uint64_t offset, Tensor& out, const Tensor& offset_by = {});

  // --- recording work for replay (CUDA graphs; core/graph.h) ---
  // Between begin_capture() and end_capture() the kernels, copies and products this device is
  // asked for are recorded instead of run; the returned graph replays them, on the same memory,
  // with one launch. Memory allocated during the capture comes from a pool that belongs to the
  // graph, so replays find their intermediates where the capture put them. Work that needs the
  // host to wait (a copy to or from the host, synchronize()) throws loom::Error. A device that
  // cannot record (the CPU) throws loom::Error from begin_capture(). abort_capture() ends a
  // capture that failed and drops what it recorded.
  virtual void begin_capture();
  virtual std::unique_ptr<DeviceGraph> end_capture();
  virtual void abort_capture() noexcept {}

 protected:
  // The kernels, one per public method above, with the same arguments, called after the checks.
  virtual void copy_impl(const Tensor& src, Tensor& dst) = 0;
  virtual void fill_impl(Tensor& dst, double value) = 0;
  virtual void arange_impl(Tensor& dst, double start, double step) = 0;  // contiguous, numel > 0
  virtual void unary_impl(UnaryOp op, const Tensor& x, Tensor& out, float a, float b) = 0;
  // x and y are defined exactly when the derivative reads them (see unary::backward_reads).
  virtual void unary_backward_impl(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y,
                                   Tensor& out, float a, float b) = 0;
  virtual void binary_impl(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) = 0;
  virtual void bias_unary_impl(UnaryOp op, const Tensor& x, const Tensor& bias, Tensor& out) = 0;
  virtual void bias_unary_backward_impl(UnaryOp op, const Tensor& grad, const Tensor& x,
                                        const Tensor& bias, Tensor& out) = 0;
  virtual void where_impl(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) = 0;
  virtual void axpy_impl(float alpha, const Tensor& src, Tensor& dst) = 0;
  // n > 0 (an empty Sum is a fill, done before).
  virtual void reduce_impl(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                           Tensor& out) = 0;
  virtual void softmax_impl(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log,
                            Tensor& out) = 0;
  virtual void softmax_backward_impl(const Tensor& grad, const Tensor& y, int64_t outer, int64_t n,
                                     int64_t inner, bool log, Tensor& out) = 0;
  // m, n, batch > 0; pointers and strides checked; k may be 0 (C = beta * C).
  virtual void gemm_impl(const GemmArgs& args) = 0;
  // The index kernels check the index values themselves.
  virtual void index_select_impl(const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                                 const Tensor& index, Tensor& out) = 0;
  virtual void index_add_impl(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                              const Tensor& index, Tensor& out) = 0;
  virtual void index_copy_impl(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                               const Tensor& index, Tensor& out) = 0;
  virtual void gather_impl(const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                           const Tensor& index, Tensor& out) = 0;
  virtual void scatter_add_impl(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                                const Tensor& index, Tensor& out) = 0;
  virtual void rand_uniform_impl(Tensor& out, uint64_t seed, uint64_t offset) = 0;
  virtual void rand_normal_impl(Tensor& out, uint64_t seed, uint64_t offset) = 0;
  // weight/bias undefined or [cols]; rows, cols > 0. residual and sum are both undefined
  // (layer_norm) or both [rows, cols] (add_layer_norm: the rows normalised are x + residual,
  // written to sum).
  virtual void layer_norm_impl(const Tensor& x, const Tensor& residual, const Tensor& weight,
                               const Tensor& bias, float eps, Tensor& sum, Tensor& y, Tensor& mean,
                               Tensor& rstd) = 0;
  virtual void layer_norm_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                        const Tensor& mean, const Tensor& rstd, Tensor& dx,
                                        Tensor& dweight, Tensor& dbias) = 0;
  // The cross-entropy kernels check the target values themselves; rows, classes > 0. logits is
  // contiguous or a [rows, classes] view with padded rows: row r starts logits_row_stride()
  // elements after row r - 1.
  virtual void cross_entropy_impl(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                  float label_smoothing, Tensor& losses, Tensor& lse) = 0;
  virtual void cross_entropy_backward_impl(const Tensor& logits, const Tensor& target,
                                           const Tensor& lse, int64_t ignore_index,
                                           float label_smoothing, float scale,
                                           const Tensor& scale_by, Tensor& dlogits) = 0;
  virtual void adam_step_impl(const AdamArgs& args, Tensor& param, const Tensor& grad, Tensor& m,
                              Tensor& v) = 0;
  // Non-empty lists of equal length, no tensor in them empty; grads contiguous.
  virtual void adam_step_multi_impl(const AdamArgs& args, std::span<Tensor> params,
                                    std::span<const Tensor> grads, std::span<Tensor> ms,
                                    std::span<Tensor> vs) = 0;
  // Non-empty lists of non-empty tensors, xs of sum_of_squares_multi contiguous.
  virtual void sum_of_squares_multi_impl(std::span<const Tensor> xs, Tensor& out) = 0;
  virtual void scale_multi_impl(std::span<Tensor> xs, float alpha) = 0;
  // n, q_len, kv_len, head_dim > 0.
  virtual void attention_forward_impl(const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor& mask, const AttentionArgs& args, Tensor& out,
                                      Tensor& lse) = 0;
  virtual void attention_backward_impl(const Tensor& dout, const Tensor& q, const Tensor& k,
                                       const Tensor& v, const Tensor& mask, const Tensor& out,
                                       const Tensor& lse, const AttentionArgs& args, Tensor& dq,
                                       Tensor& dk, Tensor& dv) = 0;
  // rows, n > 0; logits contiguous.
  virtual void sample_impl(const Tensor& logits, float temperature, int64_t top_k, float top_p,
                           uint64_t seed, uint64_t offset, const Tensor& offset_by,
                           Tensor& out) = 0;

 private:
  Tensor contiguous(const Tensor& t);  // t itself, or a contiguous copy on this device
  // t itself if it is a [rows > 1, cols] view whose rows have unit stride, else contiguous(t).
  Tensor unit_stride_rows(const Tensor& t);
  Device device_;
};

// The distance in elements between consecutive rows of a cross-entropy's logits (see
// Backend::cross_entropy_impl): the row stride of a 2-D view, else the row length.
int64_t logits_row_stride(const Tensor& logits);

// The kernel table of a device; throws loom::Error for CUDA when it is not available.
Backend& backend(Device device);
Backend& cpu_backend();
bool cuda_available();

}  // namespace loom
