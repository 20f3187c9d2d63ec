// The kernel table of one device. Everything above backends/ calls these functions and never
// loops over tensor elements itself. The contract, checked once for every device by the public
// methods below, which throw loom::Error naming the op and the shapes, dtypes or devices at
// fault:
//   * Every tensor is defined and on the backend's device; float32 unless stated (int64 for
//     indices and targets; copy, fill, where, comparisons, reductions and index kernels also
//     take int64 data). bfloat16 tensors are taken by copy (any dtype to any), fill, gemm
//     (GemmArgs), index_copy, move_rows (on the CPU), add_layer_norm's residual, and as any
//     operand of unary,
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
//
// The kernels come in families, one folder each (llm.c keeps one file per kernel family):
//   elementwise/    copy, fill, arange, the unary functions (unary_math.h) alone or after a
//                   bias add, binary arithmetic and comparisons, where, axpy
//   reduce/         sum, max, min, argmax, argmin along the middle axis
//   softmax/        softmax and log_softmax, forward and backward
//   scan/           running sums and products along the middle axis (cumsum, cumprod)
//   gemm/           matrix products (GemmArgs): OpenBLAS, cuBLAS and a kernel for a few rows
//   index/          index_select, index_add, index_copy, move_rows, gather, scatter_add, scatter
//   sort/           sort and topk along the middle axis (values and indices)
//   mask_index/     the positions of advanced indexing: nonzero, and index tensors combined
//                   into flat positions (Tensor::index with tensors)
//   random/         Philox uniform and normal numbers, random bits, multinomial draws
//   layer_norm/     layer_norm and add_layer_norm, forward and backward
//   cross_entropy/  softmax cross-entropy, forward and backward
//   optimizer/      the Adam(W) step (AdamArgs) and clip_grad_norm's kernels, over one tensor
//                   or many per launch
//   attention/      fused scaled-dot-product attention (AttentionArgs)
//   sample/         next-token sampling
//   window/         sliding windows over images: im2col, col2im, max pooling and its backward
//   batch_norm/     batch normalisation's statistics, normalisation and backward, per channel
// A family's folder holds <family>.h, its argument types and the signature of each kernel,
// which every device implements (cpu::name and cuda::name); <family>.cpp, the family's public
// methods below (the checks, written once, then Backend::run, which calls the implementation of
// the backend's device) and the CPU implementation, the reference the CUDA one is tested
// against (a large family splits it into cpu_*.cpp files); and <family>.cu (or a few .cu
// files), the CUDA kernels, their launchers and cuda::name. An implementation may assume the
// contract holds, that its row-wise inputs are contiguous, and that there is work to do (the
// public method returns early on empty tensors). What only the kernel can check, the values in
// index and target tensors, it checks itself. What the families share is the contract's checks
// (contract.h), the CPU's memory and loop machinery (cpu/) and the CUDA device: its memory,
// stream, graphs, cuBLAS handle and launch plans (cuda/).
//
// A new unary op needs no change here: see the recipe in backends/unary_math.h. A new kernel
// family (a softmax-like op) is four files: <family>.h, <family>.cpp and <family>.cu in its
// folder, and here its public method and the include of its header.
#pragma once

#include <cstdint>
#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>

#include "backends/attention/attention.h"
#include "backends/cross_entropy/cross_entropy.h"
#include "backends/elementwise/elementwise.h"
#include "backends/gemm/gemm.h"
#include "backends/index/index.h"
#include "backends/layer_norm/layer_norm.h"
#include "backends/mask_index/mask_index.h"
#include "backends/optimizer/optimizer.h"
#include "backends/random/random.h"
#include "backends/reduce/reduce.h"
#include "backends/sample/sample.h"
#include "backends/scan/scan.h"
#include "backends/softmax/softmax.h"
#include "backends/sort/sort.h"
#include "backends/unary_math.h"
#include "backends/window/window.h"
#include "backends/batch_norm/batch_norm.h"
#include "core/profiler.h"
#include "core/tensor.h"

// A kernel family's CUDA implementation as Backend::run takes it: the function, or nullptr in a
// build without the CUDA backend, which has no CUDA implementations (and no CUDA device).
#ifdef LOOM_WITH_CUDA
#define LOOM_CUDA_IMPL(f) (f)
#else
#define LOOM_CUDA_IMPL(f) nullptr
#endif

namespace loom {

// UnaryOp (Neg, Exp, ..., Pow: x^a, Affine: a*x + b, RDiv: a/x, Clamp: min(max(x, a), b)) and
// the math of each op live in backends/unary_math.h, the one table both devices instantiate.

// Recorded device work (Backend::end_capture), replayed with one launch.
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  virtual void replay() = 0;
};

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
  // out = grad * op'(x + bias), the same operands; and, when dbias is defined (float32, one
  // element per column of out's last dim), the bias's gradient: out's sums over every leading
  // position, as reduce sums them (ReduceOp::Sum). On the CPU, for contiguous float32 operands
  // and a broadcast bias row, in the same pass as out (the same bits as the two kernels).
  void bias_unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& bias,
                           Tensor& out, Tensor& dbias);
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
  // out = softmax(x + bias) along the last dim: float32 x (any layout), bias a float32 view of
  // x's shape (bias.expand(x.shape()): an attention mask or bias), out contiguous of x's shape.
  // The same values as binary(Add) then softmax; on the CPU each row's sum is formed and
  // normalised while it is in the cache, never written out whole.
  void add_softmax(const Tensor& x, const Tensor& bias, Tensor& out);

  // --- running sums and products over the middle axis of contiguous [outer, n, inner] ---
  // out[o, j, i] = x[o, 0, i] + ... + x[o, j, i] (ScanOp::Sum; the product for ScanOp::Prod),
  // or x[o, j, i] + ... + x[o, n - 1, i] when `reverse`; out has x's shape.
  void scan(ScanOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse,
            Tensor& out);
  // out = dL/dx of out = cumprod(x) along the middle axis from grad = dL/dy, right where x
  // holds zeros (no division by x there).
  void cumprod_backward(const Tensor& grad, const Tensor& x, int64_t outer, int64_t n,
                        int64_t inner, Tensor& out);

  // --- sliding windows over a stack of images x [planes, H, W] (window.h) ---
  // cols, laid out as `layout` says: every window as a column, pad_value in the padding.
  void im2col(const Tensor& x, const ColumnLayout& layout, int64_t height, int64_t width,
              const WindowGeometry& w, float pad_value, Tensor& cols);
  // x [planes, H, W] = the sum of the columns back onto the pixels they came from.
  void col2im(const Tensor& cols, const ColumnLayout& layout, int64_t height, int64_t width,
              const WindowGeometry& w, Tensor& x);
  // y, argmax [planes, H_out, W_out]: each window's maximum and its position in the plane.
  void max_pool2d(const Tensor& x, int64_t planes, int64_t height, int64_t width,
                  const WindowGeometry& w, Tensor& y, Tensor& argmax);
  // dx [planes, H, W]: each dy at its window's argmax (summed where windows share a pixel).
  void max_pool2d_backward(const Tensor& dy, const Tensor& argmax, int64_t planes,
                           int64_t height, int64_t width, const WindowGeometry& w, Tensor& dx);

  // --- batch normalisation of x [N, C, S] per channel (batch_norm.h) ---
  // Training: mean and rstd [C] of the batch (biased variance), then y. Evaluation
  // (compute_stats false): y from the given mean and rstd.
  void batch_norm(const Tensor& x, int64_t n, int64_t channels, int64_t spatial,
                  const Tensor& weight, const Tensor& bias, float eps, bool compute_stats,
                  Tensor& mean, Tensor& rstd, Tensor& y);
  // dx (and dweight, dbias when defined) from dy; `training` says whether mean and rstd were
  // the batch's own (their gradient flows into dx) or fixed running statistics.
  void batch_norm_backward(const Tensor& dy, const Tensor& x, int64_t n, int64_t channels,
                           int64_t spatial, const Tensor& weight, const Tensor& mean,
                           const Tensor& rstd, bool training, Tensor& dx, Tensor& dweight,
                           Tensor& dbias);

  // --- matrix products ---
  void gemm(const GemmArgs& args);

  // --- indexing; x is contiguous [outer, n, inner], index int64 ---
  // out[o, j, i] = x[o, index[j], i]            (index 1-D of length k; out [outer, k, inner];
  //                                              on the CPU, x [n, inner] and out [k, inner] may
  //                                              be matrices of padded rows, outer 1)
  void index_select(const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                    Tensor& out);
  // out[o, index[j], i] += src[o, j, i]         (the backward of index_select)
  void index_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                 Tensor& out);
  // out[o, index[j], i] = src[o, j, i]          (Tensor::index_copy_; any dtype, bfloat16 too;
  //                                              with repeated indices one of the rows wins)
  void index_copy(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                  Tensor& out);
  // rows to[j] of out [n, inner] become what rows from[j] held, in place: every row is read
  // before any is written, as out.index_copy_(0, to, out.index_select(0, from)); with repeated
  // to[j] one of the rows wins. On the CPU, in any dtype, out may be a matrix of padded rows
  // (as index_copy's), and a row is copied aside first only where its source is itself written
  // (a KV cache's reorder, nn/kv_cache.cpp: mostly beams that continue a beam that stays); on a
  // GPU, float32 or int64, every row goes through a copy aside.
  void move_rows(const Tensor& from, const Tensor& to, int64_t n, int64_t inner, Tensor& out);
  // out[o, j, i] = x[o, index[o, j, i], i]      (index [outer, k, inner], like torch.gather)
  void gather(const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
              Tensor& out);
  // out[o, index[o, j, i], i] += src[o, j, i]   (the backward of gather)
  void scatter_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                   Tensor& out);
  // out[o, index[o, j, i], i] = src[o, j, i]    (torch.scatter; with repeated indices one of
  //                                              the writes wins: on the CPU the last)
  void scatter(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
               Tensor& out);

  // --- advanced indexing (backends/mask_index/mask_index.h) ---
  // The positions of x's nonzero (true) elements (x of any dtype and layout) in row-major
  // order, a new int64 tensor: flat offsets [count] when `flat`, else coordinates
  // [count, x.dim()]. Its size depends on the values, so it is allocated here; on CUDA the
  // host reads x (it waits for the count anyway).
  Tensor nonzero(const Tensor& x, bool flat);
  // out[e] += wrap(index[e]) * step, wrap(i) = i + n for i < 0, each index checked against
  // [-n, n) (an error names `op`): index and out int64 of the same element count, out
  // contiguous. Index tensors combined into flat positions of the dims they index.
  void add_flat_index(const char* op, const Tensor& index, int64_t n, int64_t step, Tensor& out);

  // --- sorting; x is contiguous [outer, n, inner] (backends/sort/sort.h) ---
  // The first args.k of each row (o, :, i) in order, NaN above every number, ties by index:
  // values (x's dtype: float32 or int64) and int64 indices, both [outer, k, inner].
  void sort(const Tensor& x, const SortArgs& args, Tensor& values, Tensor& indices);

  // --- random numbers: element i uses Philox counter (offset + i), key seed ---
  void rand_uniform(Tensor& out, uint64_t seed, uint64_t offset);  // [0, 1)
  void rand_normal(Tensor& out, uint64_t seed, uint64_t offset);   // N(0, 1)
  // Inverted dropout of float32 x in one pass: mask[i] = (u_i >= p) / (1 - p), with u_i the
  // uniform of counter offset + i (rand_uniform's), and out = x * mask; p in [0, 1). The same
  // bits as x * (ge(rand, p) * (1 / (1 - p))).
  void dropout(const Tensor& x, float p, uint64_t seed, uint64_t offset, Tensor& out,
               Tensor& mask);
  // int64 out: 63 random bits per element, uniform on [0, 2^63) (randperm's sort keys).
  void rand_bits(Tensor& out, uint64_t seed, uint64_t offset);
  // int64 out [rows, samples]: draws with replacement from the categories of each row of
  // float32 weights [rows, k] (finite, non-negative, positive row sums: the caller's checks),
  // the first category whose running sum of weights (in double) exceeds u * the row's total;
  // draw (r, s) takes its 53-bit uniform u from counter offset + r * samples + s.
  void multinomial(const Tensor& weights, uint64_t seed, uint64_t offset, Tensor& out);

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
  // Writes losses [rows] and lse [rows] (log-sum-exp, for backward); an ignored row gets 0 in
  // both, with no pass over its logits (a masked LM ignores 85% of its rows).
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
  // x = 0 in place for every x of xs (float32, contiguous): the gradients zeroed by
  // Optimizer::zero_grad(false), as PyTorch's _foreach_zero_.
  void zero_multi(std::span<Tensor> xs);
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

  // --- recording work for replay (CUDA graphs; backends/graph.h) ---
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

 private:
  // A kernel's CUDA implementation as run() takes it (LOOM_CUDA_IMPL(cuda::name): the function
  // or nullptr) and, unseen, the function that called run(): the public method, whose name
  // labels the kernel's time in the profiler (core/profiler.h). The default argument is
  // evaluated where the conversion happens, in the caller, so __builtin_FUNCTION() (GCC and
  // clang) gives the caller's name. std::source_location::current() would too, but clang 14 with
  // GCC 12's library does not have it (it needs clang 15's builtin).
  template <class Kernel>
  struct CudaKernel {
    CudaKernel(Kernel* f, const char* at = __builtin_FUNCTION()) : kernel(f), caller(at) {}
    CudaKernel(std::nullptr_t, const char* at = __builtin_FUNCTION())
        : kernel(nullptr), caller(at) {}
    Kernel* kernel;
    const char* caller;
  };
  // Runs the implementation of this backend's device: cpu(args...) on the CPU, else
  // cuda(args...) (given as LOOM_CUDA_IMPL(cuda::name)), as one scope of the profiler.
  template <class Kernel, class... Args>
  void run(Kernel* cpu, std::type_identity_t<CudaKernel<Kernel>> cuda, Args&&... args) const {
    profiler::Scope timed(cuda.caller);  // nothing but a flag's load when profiling is off
    if (timed.active()) describe(timed, args...);
    (device_ == Device::CPU ? cpu : cuda.kernel)(std::forward<Args>(args)...);
  }
  // What the profiler adds to a kernel's name: the function a unary kernel computes ("unary
  // Gelu"), and a product's FLOPs (2 per multiply-add).
  template <class First, class... Rest>
  static void describe(profiler::Scope& timed, const First& first, const Rest&...) {
    if constexpr (std::is_same_v<First, UnaryOp>) timed.describe(unary_op_name(first), 0);
    if constexpr (std::is_same_v<First, GemmArgs>) {
      timed.describe(nullptr, 2.0 * static_cast<double>(first.m) * static_cast<double>(first.n) *
                                  static_cast<double>(first.k) * static_cast<double>(first.batch));
      timed.describe_product(
          {first.m, first.n, first.k, first.batch, first.trans_a, first.trans_b});
    }
  }
  Tensor contiguous(const Tensor& t);  // t itself, or a contiguous copy on this device
  // t itself if it is a [rows > 1, cols] view whose rows have unit stride, else contiguous(t).
  Tensor unit_stride_rows(const Tensor& t);
  Device device_;
};

// The kernel table of a device; throws loom::Error for CUDA when it is not available.
Backend& backend(Device device);
Backend& cpu_backend();
bool cuda_available();

}  // namespace loom
