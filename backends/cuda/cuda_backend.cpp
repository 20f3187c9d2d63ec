// CudaBackend: the Backend kernel table for NVIDIA GPUs. Every method checks what its kernel
// relies on (device, dtype, sizes, contiguity of outputs), makes strided inputs of the
// row-based kernels contiguous (as the CPU backend does), then hands raw pointers to a
// launcher from kernels.h, or to cuBLAS for matrix products. All work is queued in order on
// one stream; the host waits only at host <-> device copies and for the index-error flag.
#include "backends/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "backends/cuda/allocator.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch_plan.h"
#include "core/error.h"

#define LOOM_CUBLAS_CHECK(call)                                                                 \
  do {                                                                                          \
    const cublasStatus_t loom_cublas_status_ = (call);                                          \
    LOOM_CHECK(loom_cublas_status_ == CUBLAS_STATUS_SUCCESS, "cuBLAS error in {} at {}:{}: {}", \
               #call, __FILE__, __LINE__, cublasGetStatusString(loom_cublas_status_));          \
  } while (0)

namespace loom {
namespace {

std::atomic<bool> g_tf32{false};

using cuda::Elementwise;
using cuda::matrix_layout;
using cuda::matrix_operand;
using cuda::plan_elementwise;
using Tensors = std::initializer_list<const Tensor*>;

// ---------------------------------------------------------------------------- argument checks
void expect_cuda(const Tensor& t, const char* op, const char* name) {
  LOOM_CHECK(t.defined(), "{}: {} is undefined", op, name);
  LOOM_CHECK(t.device() == Device::CUDA, "{}: {} is on the {}, expected cuda", op, name,
             device_name(t.device()));
}

void expect_dtype(const Tensor& t, DType dtype, const char* op, const char* name) {
  expect_cuda(t, op, name);
  LOOM_CHECK(t.dtype() == dtype, "{}: {} must be {}, got {}", op, name, dtype_name(dtype),
             dtype_name(t.dtype()));
}

void expect_numel(const Tensor& t, int64_t numel, const char* op, const char* name) {
  LOOM_CHECK(t.numel() == numel, "{}: {} has shape {} ({} elements), expected {} elements", op,
             name, shape_str(t.shape()), t.numel(), numel);
}

// An output (or an input the kernel reads as a dense array): on the device, of the dtype,
// contiguous, with `numel` elements.
void expect_output(const Tensor& t, DType dtype, int64_t numel, const char* op, const char* name) {
  expect_dtype(t, dtype, op, name);
  LOOM_CHECK(t.is_contiguous(), "{}: {} (shape {}) must be contiguous", op, name,
             shape_str(t.shape()));
  expect_numel(t, numel, op, name);
}

void expect_same_shape(const Tensor& t, const Tensor& out, const char* op, const char* name) {
  LOOM_CHECK(t.shape() == out.shape(), "{}: {} has shape {}, expected {} (the output's)", op, name,
             shape_str(t.shape()), shape_str(out.shape()));
}

void expect_extents(int64_t outer, int64_t n, int64_t inner, const char* op) {
  LOOM_CHECK(outer >= 0 && n >= 0 && inner >= 0, "{}: negative extent [{},{},{}]", op, outer, n,
             inner);
}

template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// Every Scratch block goes back to the caching allocator when the method returns.
class ScratchBlocks final : public cuda::Scratch {
 public:
  explicit ScratchBlocks(CachingAllocator& allocator) : allocator_(allocator) {}
  ~ScratchBlocks() {
    for (void* block : blocks_) allocator_.deallocate(block);
  }
  ScratchBlocks(const ScratchBlocks&) = delete;
  ScratchBlocks& operator=(const ScratchBlocks&) = delete;
  void* get(size_t bytes) override {
    blocks_.reserve(blocks_.size() + 1);  // so push_back cannot throw and leak the block
    blocks_.push_back(allocator_.allocate(bytes));
    return blocks_.back();
  }

 private:
  CachingAllocator& allocator_;
  std::vector<void*> blocks_;
};

// A stored gemm operand: `rows` x `cols` with row stride `ld`, batch items `stride` apart.
struct Matrix {
  const float* data;
  int64_t rows, cols, ld, stride;
};

int to_int(int64_t value, const char* what) {
  LOOM_CHECK(value >= 0 && value <= INT_MAX,
             "gemm: {} = {} does not fit the 32-bit ints cuBLAS takes", what, value);
  return static_cast<int>(value);
}

// ---------------------------------------------------------------------------- the backend
class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    LOOM_CUDA_CHECK(cudaSetDevice(0));
    LOOM_CUDA_CHECK(cudaStreamCreate(&stream_));
    LOOM_CUBLAS_CHECK(cublasCreate(&cublas_));
    LOOM_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    void* flag = nullptr;
    LOOM_CUDA_CHECK(cudaMalloc(&flag, sizeof(cuda::DeviceErrorFlag)));
    error_flag_ = static_cast<cuda::DeviceErrorFlag*>(flag);
  }
  // Never destroyed (see cuda_backend()): tensors freed during static destruction still
  // find their allocator, and the driver reclaims everything at exit.
  ~CudaBackend() override = default;

  // --- memory ---
  void* allocate(size_t bytes) override { return allocator_.allocate(bytes); }
  void deallocate(void* ptr, size_t /*bytes*/) override { allocator_.deallocate(ptr); }

  // Host <-> device copies wait for the stream, as PyTorch's default (non_blocking=False)
  // .to("cuda") does: the host buffer may be freed or reused as soon as the call returns, and
  // cudaMemcpyAsync from pageable memory is only documented as "might be synchronous".
  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    LOOM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    synchronize();
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    LOOM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    synchronize();
  }
  void synchronize() override { LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  // --- layout and fill ---
  void copy(const Tensor& src, Tensor& dst) override {
    expect_cuda(src, "copy", "src");
    expect_cuda(dst, "copy", "dst");
    expect_same_shape(src, dst, "copy", "src");
    if (dst.numel() == 0) return;
    if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
      LOOM_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(),
                                      dst.numel() * element_size(dst.dtype()),
                                      cudaMemcpyDeviceToDevice, stream_));
      return;
    }
    const Elementwise plan = plan_elementwise("copy", dst.shape(), {&dst, &src});
    cuda::launch_copy(plan.layout, plan.operands[1], src.dtype(), plan.operands[0], dst.dtype(),
                      stream_);
  }

  void fill(Tensor& dst, double value) override {
    expect_cuda(dst, "fill", "dst");
    if (dst.numel() == 0) return;
    // +0 is all-zero bits for float32 and int64 alike (-0.0 is not, so it takes the kernel).
    if (value == 0.0 && !std::signbit(value) && dst.is_contiguous()) {
      LOOM_CUDA_CHECK(
          cudaMemsetAsync(dst.raw_data(), 0, dst.numel() * element_size(dst.dtype()), stream_));
      return;
    }
    const Elementwise plan = plan_elementwise("fill", dst.shape(), {&dst});
    cuda::launch_fill(plan.layout, plan.operands[0], dst.dtype(), value, stream_);
  }

  // --- elementwise ---
  void unary(UnaryOp op, const Tensor& x, Tensor& out, float a, float b) override {
    expect_dtype(x, DType::Float32, "unary", "input");
    expect_dtype(out, DType::Float32, "unary", "out");
    expect_same_shape(x, out, "unary", "input");
    if (out.numel() == 0) return;
    const Elementwise plan = plan_elementwise("unary", out.shape(), {&out, &x});
    cuda::launch_unary(op, plan.layout, plan.operands[1], plan.operands[0], a, b, stream_);
  }

  // The caller may pass only the tensor the derivative needs (see derivative_uses_x/_y);
  // a needed y that is missing is recomputed from x inside the kernel.
  void unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y, Tensor& out,
                      float a, float b) override {
    const char* name = "unary_backward";
    expect_dtype(grad, DType::Float32, name, "grad");
    expect_dtype(out, DType::Float32, name, "out");
    expect_same_shape(grad, out, name, "grad");
    const bool need_y = cuda::derivative_uses_y(op);
    const bool use_y = need_y && y.defined();
    const bool use_x = cuda::derivative_uses_x(op) || (need_y && !y.defined());
    const Tensor none;
    const Tensor& xs = use_x ? x : none;
    const Tensor& ys = use_y ? y : none;
    if (use_x) {
      expect_dtype(x, DType::Float32, name, need_y ? "x (needed to recompute y)" : "x");
      expect_same_shape(x, out, name, "x");
    }
    if (use_y) {
      expect_dtype(y, DType::Float32, name, "y");
      expect_same_shape(y, out, name, "y");
    }
    if (out.numel() == 0) return;
    const Elementwise plan = plan_elementwise(name, out.shape(), {&out, &grad, &xs, &ys});
    cuda::launch_unary_backward(op, plan.layout, plan.operands[1], plan.operands[2],
                                plan.operands[3], plan.operands[0], a, b, stream_);
  }

  void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) override {
    const bool comparison = op >= BinaryOp::Eq;
    if (comparison) {
      expect_cuda(a, "binary", "a");
      expect_dtype(b, a.dtype(), "binary", "b");
    } else {
      expect_dtype(a, DType::Float32, "binary", "a");
      expect_dtype(b, DType::Float32, "binary", "b");
    }
    expect_dtype(out, DType::Float32, "binary", "out");
    expect_same_shape(a, out, "binary", "a");
    expect_same_shape(b, out, "binary", "b");
    if (out.numel() == 0) return;
    const Elementwise plan = plan_elementwise("binary", out.shape(), {&out, &a, &b});
    cuda::launch_binary(op, plan.layout, plan.operands[1], plan.operands[2], a.dtype(),
                        plan.operands[0], stream_);
  }

  void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) override {
    expect_cuda(cond, "where", "cond");
    expect_cuda(out, "where", "out");
    expect_dtype(a, out.dtype(), "where", "a");
    expect_dtype(b, out.dtype(), "where", "b");
    for (const Tensor* t : Tensors{&cond, &a, &b}) expect_same_shape(*t, out, "where", "an input");
    if (out.numel() == 0) return;
    const Elementwise plan = plan_elementwise("where", out.shape(), {&out, &cond, &a, &b});
    cuda::launch_where(plan.layout, plan.operands[1], cond.dtype(), plan.operands[2],
                       plan.operands[3], out.dtype(), plan.operands[0], stream_);
  }

  void axpy(float alpha, const Tensor& src, Tensor& dst) override {
    expect_output(dst, DType::Float32, dst.numel(), "axpy", "dst");
    expect_output(src, DType::Float32, dst.numel(), "axpy", "src");
    if (dst.numel() == 0) return;
    cuda::launch_axpy(dst.numel(), alpha, src.data_ptr<float>(), dst.data_ptr<float>(), stream_);
  }

  // --- reductions ---
  void reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
              Tensor& out) override {
    const char* name = reduce_name(op);
    expect_extents(outer, n, inner, name);
    expect_cuda(x, name, "input");
    expect_numel(x, outer * n * inner, name, "input");
    const bool arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
    expect_output(out, arg ? DType::Int64 : x.dtype(), outer * inner, name, "out");
    if (outer * inner == 0) return;
    LOOM_CHECK(n > 0 || op == ReduceOp::Sum,
               "{}: cannot reduce an empty dimension (input has {} elements along it)", name, n);
    const Tensor xc = contiguous_input(x);
    ScratchBlocks scratch(allocator_);
    cuda::launch_reduce(op, xc.raw_data(), xc.dtype(), outer, n, inner, out.raw_data(), scratch,
                        stream_);
  }

  void softmax(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log,
               Tensor& out) override {
    const char* op = log ? "log_softmax" : "softmax";
    expect_extents(outer, n, inner, op);
    const int64_t numel = outer * n * inner;
    expect_dtype(x, DType::Float32, op, "input");
    expect_numel(x, numel, op, "input");
    expect_output(out, DType::Float32, numel, op, "out");
    if (numel == 0) return;
    const Tensor xc = contiguous_input(x);
    cuda::launch_softmax(xc.data_ptr<float>(), outer, n, inner, log, out.data_ptr<float>(),
                         stream_);
  }

  void softmax_backward(const Tensor& grad, const Tensor& y, int64_t outer, int64_t n,
                        int64_t inner, bool log, Tensor& out) override {
    const char* op = log ? "log_softmax_backward" : "softmax_backward";
    expect_extents(outer, n, inner, op);
    const int64_t numel = outer * n * inner;
    expect_dtype(grad, DType::Float32, op, "grad");
    expect_numel(grad, numel, op, "grad");
    expect_dtype(y, DType::Float32, op, "output");
    expect_numel(y, numel, op, "output");
    expect_output(out, DType::Float32, numel, op, "out");
    if (numel == 0) return;
    const Tensor gc = contiguous_input(grad), yc = contiguous_input(y);
    cuda::launch_softmax_backward(gc.data_ptr<float>(), yc.data_ptr<float>(), outer, n, inner, log,
                                  out.data_ptr<float>(), stream_);
  }

  // --- matrix products ---
  // cuBLAS is column-major, and a row-major matrix read as column-major is its transpose. So
  // the row-major C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T: the
  // operands swap places, m and n swap, and each keeps its own transpose flag and ld.
  void gemm(const GemmArgs& g) override {
    LOOM_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 0,
               "gemm: negative size m={} n={} k={} batch={}", g.m, g.n, g.k, g.batch);
    if (g.m == 0 || g.n == 0 || g.batch == 0) return;
    LOOM_CHECK(g.c != nullptr, "gemm: null output pointer for a [{},{}] result", g.m, g.n);
    LOOM_CHECK(g.k == 0 || (g.a != nullptr && g.b != nullptr),
               "gemm: null input pointer (m={} n={} k={})", g.m, g.n, g.k);
    LOOM_CHECK(g.m == 1 || g.ldc >= g.n,
               "gemm: output row stride {} is smaller than its {} columns", g.ldc, g.n);
    LOOM_CHECK(g.batch == 1 || g.stride_c != 0,
               "gemm: the {} batch items would all write the same output matrix (stride_c = 0)",
               g.batch);
    const int64_t ldc = g.m == 1 ? std::max(g.ldc, g.n) : g.ldc;
    if (g.k == 0) {  // an empty sum: C = beta * C
      cuda::launch_scale(matrix_layout(g.batch, g.m, g.n), matrix_operand(g.c, g.stride_c, ldc),
                         g.beta, stream_);
      return;
    }
    ScratchBlocks scratch(allocator_);
    const Matrix a = legal_operand(
        {g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.stride_a}, g.batch, scratch);
    const Matrix b = legal_operand(
        {g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.stride_b}, g.batch, scratch);
    set_math_mode();
    LOOM_CUBLAS_CHECK(cublasSgemmStridedBatched(
        cublas_, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        to_int(g.n, "n"), to_int(g.m, "m"), to_int(g.k, "k"), &g.alpha, b.data, to_int(b.ld, "ldb"),
        b.stride, a.data, to_int(a.ld, "lda"), a.stride, &g.beta, g.c, to_int(ldc, "ldc"),
        g.stride_c, to_int(g.batch, "batch")));
  }

  // --- indexing ---
  void index_select(const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                    Tensor& out) override {
    const char* op = "index_select";
    expect_extents(outer, n, inner, op);
    LOOM_CHECK(index.dim() <= 1, "{}: index must be 1-D, got shape {}", op,
               shape_str(index.shape()));
    expect_dtype(index, DType::Int64, op, "index");
    expect_cuda(x, op, "input");
    expect_numel(x, outer * n * inner, op, "input");
    const int64_t k = index.numel();
    expect_output(out, x.dtype(), outer * k * inner, op, "out");
    if (k == 0) return;
    const Tensor xc = contiguous_input(x), idx = contiguous_input(index);
    clear_error_flag();
    cuda::launch_index_select(xc.raw_data(), element_size(xc.dtype()), outer, n, inner,
                              idx.data_ptr<int64_t>(), k, out.raw_data(), error_flag_, stream_);
    check_index_flag(op, n);
  }

  void index_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                 Tensor& out) override {
    const char* op = "index_add";
    expect_extents(outer, n, inner, op);
    LOOM_CHECK(index.dim() <= 1, "{}: index must be 1-D, got shape {}", op,
               shape_str(index.shape()));
    expect_dtype(index, DType::Int64, op, "index");
    expect_output(out, out.dtype(), outer * n * inner, op, "out");
    const int64_t k = index.numel();
    expect_dtype(src, out.dtype(), op, "src");
    expect_numel(src, outer * k * inner, op, "src");
    if (k == 0) return;
    const Tensor sc = contiguous_input(src), idx = contiguous_input(index);
    clear_error_flag();
    cuda::launch_index_add(sc.raw_data(), out.dtype(), outer, n, inner, idx.data_ptr<int64_t>(), k,
                           out.raw_data(), error_flag_, stream_);
    check_index_flag(op, n);
  }

  void gather(const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
              Tensor& out) override {
    const char* op = "gather";
    const int64_t k = index_depth(index, outer, n, inner, op);
    expect_cuda(x, op, "input");
    expect_numel(x, outer * n * inner, op, "input");
    expect_output(out, x.dtype(), outer * k * inner, op, "out");
    if (index.numel() == 0) return;
    const Tensor xc = contiguous_input(x), idx = contiguous_input(index);
    clear_error_flag();
    cuda::launch_gather(xc.raw_data(), element_size(xc.dtype()), outer, n, inner,
                        idx.data_ptr<int64_t>(), k, out.raw_data(), error_flag_, stream_);
    check_index_flag(op, n);
  }

  void scatter_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                   Tensor& out) override {
    const char* op = "scatter_add";
    const int64_t k = index_depth(index, outer, n, inner, op);
    expect_output(out, out.dtype(), outer * n * inner, op, "out");
    expect_dtype(src, out.dtype(), op, "src");
    expect_numel(src, outer * k * inner, op, "src");
    if (index.numel() == 0) return;
    const Tensor sc = contiguous_input(src), idx = contiguous_input(index);
    clear_error_flag();
    cuda::launch_scatter_add(sc.raw_data(), out.dtype(), outer, n, inner, idx.data_ptr<int64_t>(),
                             k, out.raw_data(), error_flag_, stream_);
    check_index_flag(op, n);
  }

  // --- random numbers ---
  void rand_uniform(Tensor& out, uint64_t seed, uint64_t offset) override {
    expect_output(out, DType::Float32, out.numel(), "rand", "out");
    if (out.numel() == 0) return;
    cuda::launch_rand_uniform(out.data_ptr<float>(), out.numel(), seed, offset, stream_);
  }
  void rand_normal(Tensor& out, uint64_t seed, uint64_t offset) override {
    expect_output(out, DType::Float32, out.numel(), "randn", "out");
    if (out.numel() == 0) return;
    cuda::launch_rand_normal(out.data_ptr<float>(), out.numel(), seed, offset, stream_);
  }

  // --- fused neural-network kernels ---
  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y,
                  Tensor& mean, Tensor& rstd) override {
    const char* op = "layer_norm";
    const int64_t rows = mean.numel(), cols = layer_norm_cols(x, rows, op);
    LOOM_CHECK(cols > 0 || rows == 0, "{}: cannot normalise rows of 0 elements", op);
    expect_dtype(x, DType::Float32, op, "input");
    expect_param(weight, cols, op, "weight");
    expect_param(bias, cols, op, "bias");
    expect_output(y, DType::Float32, rows * cols, op, "out");
    expect_output(mean, DType::Float32, rows, op, "mean");
    expect_output(rstd, DType::Float32, rows, op, "rstd");
    if (rows == 0) return;
    const Tensor xc = contiguous_input(x);
    cuda::launch_layer_norm(xc.data_ptr<float>(), ptr<float>(weight), ptr<float>(bias), rows, cols,
                            eps, y.data_ptr<float>(), mean.data_ptr<float>(),
                            rstd.data_ptr<float>(), stream_);
  }

  void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                           const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dweight,
                           Tensor& dbias) override {
    const char* op = "layer_norm_backward";
    const int64_t rows = mean.numel(), cols = layer_norm_cols(x, rows, op);
    expect_dtype(x, DType::Float32, op, "input");
    expect_dtype(dy, DType::Float32, op, "grad");
    expect_numel(dy, rows * cols, op, "grad");
    expect_param(weight, cols, op, "weight");
    expect_output(mean, DType::Float32, rows, op, "mean");
    expect_output(rstd, DType::Float32, rows, op, "rstd");
    expect_output(dx, DType::Float32, rows * cols, op, "dx");
    if (dweight.defined()) expect_output(dweight, DType::Float32, cols, op, "dweight");
    if (dbias.defined()) expect_output(dbias, DType::Float32, cols, op, "dbias");
    if (rows * cols == 0) {
      for (Tensor* t : {&dweight, &dbias})
        if (t->defined()) fill(*t, 0.0);
      return;
    }
    const Tensor xc = contiguous_input(x), dyc = contiguous_input(dy);
    ScratchBlocks scratch(allocator_);
    cuda::launch_layer_norm_backward(dyc.data_ptr<float>(), xc.data_ptr<float>(),
                                     ptr<float>(weight), mean.data_ptr<float>(),
                                     rstd.data_ptr<float>(), rows, cols, dx.data_ptr<float>(),
                                     ptr<float>(dweight), ptr<float>(dbias), scratch, stream_);
  }

  void cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                     float label_smoothing, Tensor& losses, Tensor& lse) override {
    const char* op = "cross_entropy";
    const int64_t rows = target.numel(), classes = cross_entropy_classes(logits, target, op);
    expect_output(losses, DType::Float32, rows, op, "losses");
    expect_output(lse, DType::Float32, rows, op, "lse");
    if (rows == 0) return;
    const Tensor xc = contiguous_input(logits), tc = contiguous_input(target);
    clear_error_flag();
    cuda::launch_cross_entropy(xc.data_ptr<float>(), tc.data_ptr<int64_t>(), rows, classes,
                               ignore_index, label_smoothing, losses.data_ptr<float>(),
                               lse.data_ptr<float>(), error_flag_, stream_);
    check_target_flag(op, classes, ignore_index);
  }

  void cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& lse,
                              int64_t ignore_index, float label_smoothing, float scale,
                              Tensor& dlogits) override {
    const char* op = "cross_entropy_backward";
    const int64_t rows = target.numel(), classes = cross_entropy_classes(logits, target, op);
    expect_dtype(lse, DType::Float32, op, "lse");
    expect_numel(lse, rows, op, "lse");
    expect_output(dlogits, DType::Float32, rows * classes, op, "dlogits");
    if (rows * classes == 0) return;
    const Tensor xc = contiguous_input(logits), tc = contiguous_input(target);
    const Tensor lc = contiguous_input(lse);
    clear_error_flag();
    cuda::launch_cross_entropy_backward(
        xc.data_ptr<float>(), tc.data_ptr<int64_t>(), lc.data_ptr<float>(), rows, classes,
        ignore_index, label_smoothing, scale, dlogits.data_ptr<float>(), error_flag_, stream_);
    check_target_flag(op, classes, ignore_index);
  }

  void adam_step(const AdamArgs& args, Tensor& param, const Tensor& grad, Tensor& m,
                 Tensor& v) override {
    const char* op = "adam_step";
    const int64_t n = param.numel();
    expect_output(param, DType::Float32, n, op, "param");
    expect_dtype(grad, DType::Float32, op, "grad");
    expect_numel(grad, n, op, "grad");
    expect_output(m, DType::Float32, n, op, "exp_avg");
    expect_output(v, DType::Float32, n, op, "exp_avg_sq");
    LOOM_CHECK(args.bias1 > 0.0f && args.bias2 > 0.0f,
               "{}: bias corrections must be positive (1 - beta^step), got {} and {}", op,
               args.bias1, args.bias2);
    if (n == 0) return;
    const Tensor gc = contiguous_input(grad);
    cuda::launch_adam(args, n, param.data_ptr<float>(), gc.data_ptr<float>(), m.data_ptr<float>(),
                      v.data_ptr<float>(), stream_);
  }

 private:
  // Kernels that index their inputs as dense arrays get t itself when it is contiguous, else
  // a contiguous copy (e.g. of a broadcast gradient), as in the CPU backend.
  Tensor contiguous_input(const Tensor& t) {
    if (!t.defined() || t.is_contiguous()) return t;
    Tensor c = Tensor::empty(t.shape(), t.dtype(), Device::CUDA);
    copy(t, c);
    return c;
  }

  // BLAS requires ld >= max(1, cols). A single row may carry any stride (the stride of a size-1
  // dim), so it gets the minimum; a real multi-row operand with ld < cols (a broadcast row,
  // stride 0) is copied into a dense scratch buffer first.
  Matrix legal_operand(Matrix op, int64_t batch, cuda::Scratch& scratch) {
    if (op.rows == 1) {
      op.ld = std::max(op.ld, op.cols);
      return op;
    }
    if (op.ld >= op.cols) return op;
    const int64_t items = op.stride == 0 ? 1 : batch, size = op.rows * op.cols;
    void* dense = scratch.get(static_cast<size_t>(items * size) * sizeof(float));
    cuda::launch_copy(matrix_layout(items, op.rows, op.cols),
                      matrix_operand(op.data, op.stride, op.ld), DType::Float32,
                      matrix_operand(dense, size, op.cols), DType::Float32, stream_);
    return {static_cast<const float*>(dense), op.rows, op.cols, op.cols, op.stride == 0 ? 0 : size};
  }

  static const char* reduce_name(ReduceOp op) {
    switch (op) {
      case ReduceOp::Sum:
        return "sum";
      case ReduceOp::Max:
        return "max";
      case ReduceOp::Min:
        return "min";
      case ReduceOp::ArgMax:
        return "argmax";
      case ReduceOp::ArgMin:
        return "argmin";
    }
    return "reduce";
  }

  // k of an [outer, k, inner] index (gather, scatter_add), checked.
  static int64_t index_depth(const Tensor& index, int64_t outer, int64_t n, int64_t inner,
                             const char* op) {
    expect_extents(outer, n, inner, op);
    expect_dtype(index, DType::Int64, op, "index");
    const int64_t slices = outer * inner;
    LOOM_CHECK(slices > 0 ? index.numel() % slices == 0 : index.numel() == 0,
               "{}: index with {} elements does not split into [{}, k, {}]", op, index.numel(),
               outer, inner);
    return slices > 0 ? index.numel() / slices : 0;
  }

  // rows = mean.numel(); cols follows from x.
  static int64_t layer_norm_cols(const Tensor& x, int64_t rows, const char* op) {
    expect_cuda(x, op, "input");
    LOOM_CHECK(rows > 0 ? x.numel() % rows == 0 : x.numel() == 0,
               "{}: input of shape {} does not split into {} rows", op, shape_str(x.shape()), rows);
    return rows > 0 ? x.numel() / rows : 0;
  }

  // weight/bias may be undefined (no affine transform); defined ones have cols elements.
  static void expect_param(const Tensor& t, int64_t cols, const char* op, const char* name) {
    if (!t.defined()) return;
    expect_output(t, DType::Float32, cols, op, name);
  }

  static int64_t cross_entropy_classes(const Tensor& logits, const Tensor& target, const char* op) {
    expect_dtype(logits, DType::Float32, op, "logits");
    expect_dtype(target, DType::Int64, op, "target");
    const int64_t rows = target.numel();
    LOOM_CHECK(rows > 0 ? logits.numel() % rows == 0 : logits.numel() == 0,
               "{}: logits of shape {} do not split into {} rows (one per target)", op,
               shape_str(logits.shape()), rows);
    const int64_t classes = rows > 0 ? logits.numel() / rows : 0;
    LOOM_CHECK(classes > 0 || rows == 0, "{}: logits have 0 classes", op);
    return classes;
  }

  void set_math_mode() {
    const bool tf32 = g_tf32.load();
    if (tf32 == tf32_active_) return;
    LOOM_CUBLAS_CHECK(
        cublasSetMathMode(cublas_, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    tf32_active_ = tf32;
  }

  void clear_error_flag() {
    LOOM_CUDA_CHECK(cudaMemsetAsync(error_flag_, 0, sizeof(cuda::DeviceErrorFlag), stream_));
  }

  // Waits for the kernel and reads the flag back (kernels cannot throw).
  cuda::DeviceErrorFlag read_error_flag() {
    cuda::DeviceErrorFlag flag{};
    copy_to_host(&flag, error_flag_, sizeof flag);
    return flag;
  }

  void check_index_flag(const char* op, int64_t n) {
    const cuda::DeviceErrorFlag flag = read_error_flag();
    LOOM_CHECK(!flag.raised,
               "{}: index {} (at position {}) is out of range for a dimension of size {}; valid "
               "indices are [0, {})",
               op, flag.value, flag.position, n, n);
  }

  void check_target_flag(const char* op, int64_t classes, int64_t ignore_index) {
    const cuda::DeviceErrorFlag flag = read_error_flag();
    LOOM_CHECK(!flag.raised,
               "{}: target {} at position {} is out of range for {} classes; valid targets are "
               "[0, {}) or ignore_index ({})",
               op, flag.value, flag.position, classes, classes, ignore_index);
  }

  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  bool tf32_active_ = false;
  cuda::DeviceErrorFlag* error_flag_ = nullptr;
  CachingAllocator allocator_{cuda::device_memory()};
};

}  // namespace

bool cuda_device_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: clear the error, report "none"
    return false;
  }
  return count > 0;
}

Backend& cuda_backend() {
  // Created on first use and deliberately never destroyed (see ~CudaBackend).
  static CudaBackend* const instance = new CudaBackend();
  return *instance;
}

void cuda_set_tf32(bool enabled) { g_tf32.store(enabled); }
bool cuda_tf32_enabled() { return g_tf32.load(); }

}  // namespace loom
