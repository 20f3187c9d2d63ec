// CudaBackend: the Backend kernel table for NVIDIA GPUs. Backend (backends/backend.cpp) has
// checked the arguments and made the inputs of the row-based kernels contiguous before any
// *_impl here runs; each one hands raw pointers to a launcher from kernels.h, or to cuBLAS for
// matrix products. All work is queued in order on
// one stream; the host waits only at host <-> device copies and synchronize(), where it also
// reads the error flags of the checked kernels (see "device-side errors" below). The work may
// also be recorded into a CUDA graph and replayed with one launch ("graphs" below).
#include "backends/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <list>
#include <memory>
#include <string>
#include <string_view>
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
// CUDA_LAUNCH_BLOCKING=1, PyTorch's switch (the CUDA runtime reads it too), starts it on.
std::atomic<bool> g_launch_blocking{[] {
  const char* value = std::getenv("CUDA_LAUNCH_BLOCKING");
  return value != nullptr && std::string_view(value) == "1";
}()};

using cuda::Elementwise;
using cuda::matrix_layout;
using cuda::matrix_operand;
using cuda::plan_elementwise;

template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// Every Scratch block goes back to the backend's memory (the caching allocator, or a graph's
// pool during a capture) when the method returns.
class ScratchBlocks final : public cuda::Scratch {
 public:
  explicit ScratchBlocks(Backend& memory) : memory_(memory) {}
  ~ScratchBlocks() {
    for (void* block : blocks_) memory_.deallocate(block, 0);
  }
  ScratchBlocks(const ScratchBlocks&) = delete;
  ScratchBlocks& operator=(const ScratchBlocks&) = delete;
  void* get(size_t bytes) override {
    blocks_.reserve(blocks_.size() + 1);  // so push_back cannot throw and leak the block
    blocks_.push_back(memory_.allocate(bytes));
    return blocks_.back();
  }

 private:
  Backend& memory_;
  std::vector<void*> blocks_;
};

// The pointers and sizes of the tensors of a multi-tensor launch.
std::vector<cuda::FloatTensor> float_tensors(std::span<const Tensor> xs) {
  std::vector<cuda::FloatTensor> tensors(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) tensors[i] = {xs[i].data_ptr<float>(), xs[i].numel()};
  return tensors;
}

// A stored gemm operand: `rows` x `cols` with row stride `ld`, batch items `stride` apart.
struct Matrix {
  const void* data;
  int64_t rows, cols, ld, stride;
};

// Whether gemm_impl runs `g` in launch_gemm_rows (gemm.cu) rather than cuBLAS: a product of at
// most kGemmRowsMax rows with a Linear's weight [n, k], as in decoding (a row per token or beam).
// It is a matrix-vector product, bound by reading the weight once; cuBLAS's GEMV kernels read
// GPT-2's weights at 0.4-0.8 TB/s on an H200 (of 4.8), and a bias took a launch of its own.
constexpr int64_t kGemmRowsMaxK = 16384;  // beyond it a warp per output column is too little
bool few_rows(const GemmArgs& g) {
  return g.batch == 1 && g.m <= cuda::kGemmRowsMax && g.k > 0 && g.k <= kGemmRowsMaxK &&
         !g.trans_a && g.trans_b;
}

cudaDataType cuda_type(DType type) { return type == DType::BFloat16 ? CUDA_R_16BF : CUDA_R_32F; }

int to_int(int64_t value, const char* what) {
  LOOM_CHECK(value >= 0 && value <= INT_MAX,
             "gemm: {} = {} does not fit the 32-bit ints cuBLAS takes", what, value);
  return static_cast<int>(value);
}

// What the CUDA attention kernels (attention.cu) take beyond Backend's checks: head_dim up to
// 128, and one block per (problem, tile of at least 16 rows) within grid.x's 2^31 - 1.
void check_attention_launch(const char* op, const AttentionArgs& args) {
  LOOM_CHECK(args.head_dim <= 128, "{}: head_dim {} is above the CUDA kernel's 128", op,
             args.head_dim);
  const int64_t tiles = (std::max(args.q_len, args.kv_len) + 15) / 16;
  LOOM_CHECK(args.n <= INT_MAX / tiles, "{}: {} problems of {} tiles exceed the CUDA grid", op,
             args.n, tiles);
}

// ---------------------------------------------------------------------------- the backend
class CudaBackend final : public Backend {
 public:
  CudaBackend() : Backend(Device::CUDA) {
    LOOM_CUDA_CHECK(cudaSetDevice(0));
    LOOM_CUDA_CHECK(cudaStreamCreate(&stream_));
    LOOM_CUBLAS_CHECK(cublasCreate(&cublas_));
    LOOM_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    // cuBLAS's workspace is ours (32 MiB, NVIDIA's size for Hopper), so a product recorded in a
    // graph capture never makes cuBLAS allocate one (set after cublasSetStream, which resets it).
    LOOM_CUDA_CHECK(cudaMalloc(&cublas_workspace_, kCublasWorkspace));
    LOOM_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspace));
    void* flags = nullptr;
    LOOM_CUDA_CHECK(cudaMalloc(&flags, kErrorSlots * sizeof(cuda::DeviceErrorFlag)));
    LOOM_CUDA_CHECK(
        cudaMemsetAsync(flags, 0, kErrorSlots * sizeof(cuda::DeviceErrorFlag), stream_));
    error_flags_ = static_cast<cuda::DeviceErrorFlag*>(flags);
    void* counters = nullptr;
    LOOM_CUDA_CHECK(cudaMalloc(&counters, cuda::kDecodeCounters * sizeof(unsigned)));
    LOOM_CUDA_CHECK(
        cudaMemsetAsync(counters, 0, cuda::kDecodeCounters * sizeof(unsigned), stream_));
    decode_counters_ = static_cast<unsigned*>(counters);
  }
  // Never destroyed (see cuda_backend()): tensors freed during static destruction still
  // find their allocator, and the driver reclaims everything at exit.
  ~CudaBackend() override = default;

  // --- memory ---
  // During a capture, blocks come from the capture's pool (see "graphs" below).
  void* allocate(size_t bytes) override {
    return capture_ ? capture_->pool->memory.allocate(bytes) : allocator_.allocate(bytes);
  }
  void deallocate(void* ptr, size_t /*bytes*/) override {
    if (allocator_.deallocate(ptr)) return;
    for (auto pool = pools_.begin(); pool != pools_.end(); ++pool) {
      if (!pool->memory.deallocate(ptr)) continue;
      if (pool->retired && pool->memory.allocated_bytes() == 0) release(pool);
      return;
    }
  }

  // Host <-> device copies wait for the stream, as PyTorch's default (non_blocking=False)
  // .to("cuda") does: the host buffer may be freed or reused as soon as the call returns, and
  // cudaMemcpyAsync from pageable memory is only documented as "might be synchronous".
  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    check_not_capturing("a copy from the host");
    LOOM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    synchronize();
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    check_not_capturing("a copy to the host");
    LOOM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    synchronize();
  }
  // Waits for every queued kernel, then throws for the first error they flagged (see
  // "device-side errors" below). The flags' copies are queued behind the kernels: one wait.
  void synchronize() override {
    check_not_capturing("synchronize()");
    std::vector<Check> checks;
    checks.swap(checks_);
    std::vector<cuda::DeviceErrorFlag> flags(checks.size());
    if (!checks.empty()) read_flags(error_flags_, flags);
    // Each graph replayed since the last wait has its own flags (see "graphs").
    std::vector<std::pair<const Recording*, std::vector<cuda::DeviceErrorFlag>>> replayed;
    for (const Recording* graph : replayed_) {
      replayed.emplace_back(graph, std::vector<cuda::DeviceErrorFlag>(graph->checks.size()));
      read_flags(graph->flags, replayed.back().second);
    }
    replayed_.clear();
    LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (size_t i = 0; i < checks.size(); ++i)
      if (flags[i].raised) raise_device_error(checks[i], flags[i]);
    for (const auto& [graph, graph_flags] : replayed)
      for (size_t i = 0; i < graph_flags.size(); ++i)
        if (graph_flags[i].raised) raise_device_error(graph->checks[i], graph_flags[i], true);
  }

  // --- graphs ---
  void begin_capture() override;
  std::unique_ptr<DeviceGraph> end_capture() override;
  void abort_capture() noexcept override;

 protected:
  // --- layout and fill ---
  void copy_impl(const Tensor& src, Tensor& dst) override {
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

  void fill_impl(Tensor& dst, double value) override {
    // +0 is all-zero bits for float32 and int64 alike (-0.0 is not, so it takes the kernel).
    if (value == 0.0 && !std::signbit(value) && dst.is_contiguous()) {
      LOOM_CUDA_CHECK(
          cudaMemsetAsync(dst.raw_data(), 0, dst.numel() * element_size(dst.dtype()), stream_));
      return;
    }
    const Elementwise plan = plan_elementwise("fill", dst.shape(), {&dst});
    cuda::launch_fill(plan.layout, plan.operands[0], dst.dtype(), value, stream_);
  }

  void arange_impl(Tensor& dst, double start, double step) override {
    cuda::launch_arange(dst.raw_data(), dst.dtype(), dst.numel(), start, step, stream_);
  }

  // --- elementwise ---
  void unary_impl(UnaryOp op, const Tensor& x, Tensor& out, float a, float b) override {
    const Elementwise plan = plan_elementwise("unary", out.shape(), {&out, &x});
    cuda::launch_unary(op, plan.layout, plan.operands[1], plan.operands[0], a, b, stream_);
  }

  // Of x and y only the one the derivative reads is defined; the other plans as a null Operand.
  void unary_backward_impl(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y,
                           Tensor& out, float a, float b) override {
    const Elementwise plan = plan_elementwise("unary_backward", out.shape(), {&out, &grad, &x, &y});
    cuda::launch_unary_backward(op, plan.layout, plan.operands[1], plan.operands[2],
                                plan.operands[3], plan.operands[0], a, b, stream_);
  }

  void bias_unary_impl(UnaryOp op, const Tensor& x, const Tensor& bias, Tensor& out) override {
    const Elementwise plan = plan_elementwise("bias_unary", out.shape(), {&out, &x, &bias});
    cuda::launch_bias_unary(op, plan.layout, plan.operands[1], plan.operands[2], plan.operands[0],
                            stream_);
  }

  void bias_unary_backward_impl(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& bias,
                                Tensor& out) override {
    const Elementwise plan =
        plan_elementwise("bias_unary_backward", out.shape(), {&out, &grad, &x, &bias});
    cuda::launch_bias_unary_backward(op, plan.layout, plan.operands[1], plan.operands[2],
                                     plan.operands[3], plan.operands[0], stream_);
  }

  void binary_impl(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) override {
    const Elementwise plan = plan_elementwise("binary", out.shape(), {&out, &a, &b});
    cuda::launch_binary(op, plan.layout, plan.operands[1], plan.operands[2], a.dtype(),
                        plan.operands[0], stream_);
  }

  void where_impl(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) override {
    const Elementwise plan = plan_elementwise("where", out.shape(), {&out, &cond, &a, &b});
    cuda::launch_where(plan.layout, plan.operands[1], cond.dtype(), plan.operands[2],
                       plan.operands[3], out.dtype(), plan.operands[0], stream_);
  }

  void axpy_impl(float alpha, const Tensor& src, Tensor& dst) override {
    cuda::launch_axpy(dst.numel(), alpha, src.data_ptr<float>(), dst.data_ptr<float>(), stream_);
  }

  // --- reductions ---
  void reduce_impl(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                   Tensor& out) override {
    ScratchBlocks scratch(*this);
    cuda::launch_reduce(op, x.raw_data(), x.dtype(), outer, n, inner, out.raw_data(), scratch,
                        stream_);
  }

  void softmax_impl(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log,
                    Tensor& out) override {
    cuda::launch_softmax(x.data_ptr<float>(), outer, n, inner, log, out.data_ptr<float>(), stream_);
  }

  void softmax_backward_impl(const Tensor& grad, const Tensor& y, int64_t outer, int64_t n,
                             int64_t inner, bool log, Tensor& out) override {
    cuda::launch_softmax_backward(grad.data_ptr<float>(), y.data_ptr<float>(), outer, n, inner, log,
                                  out.data_ptr<float>(), stream_);
  }

  // --- matrix products ---
  // cuBLAS is column-major, and a row-major matrix read as column-major is its transpose. So
  // the row-major C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T: the
  // operands swap places, m and n swap, and each keeps its own transpose flag and ld.
  void gemm_impl(const GemmArgs& g) override {
    const int64_t ldc = g.m == 1 ? std::max(g.ldc, g.n) : g.ldc;
    if (few_rows(g)) {
      cuda::launch_gemm_rows(
          {g.m, g.n, g.k, g.a, g.lda, g.b, g.ldb, g.c, ldc, g.alpha, g.beta, g.bias,
           g.activation.has_value(), g.activation.value_or(UnaryOp::Relu)},
          g.ab_type, g.c_type, stream_);
      return;
    }
    if (g.bias != nullptr) {  // cuBLAS starts from C = beta C + bias
      if (g.beta == 0.0f)     // a Linear's: the bias row copied into every row (by vectors)
        cuda::launch_copy(matrix_layout(g.batch, g.m, g.n), matrix_operand(g.bias, 0, 0),
                          DType::Float32, matrix_operand(g.c, g.stride_c, ldc), g.c_type, stream_);
      else
        cuda::launch_bias_rows(g.c, g.c_type, g.batch, g.m, g.n, ldc, g.stride_c, g.beta, g.bias,
                               stream_);
      GemmArgs rest = g;
      rest.bias = nullptr;
      rest.beta = 1.0f;
      return gemm_impl(rest);
    }
    if (g.activation) {  // the product, then a pass of the activation over C (rounded twice)
      GemmArgs rest = g;
      rest.activation.reset();
      gemm_impl(rest);
      cuda::Operand c = matrix_operand(g.c, g.stride_c, ldc);
      c.bf16 = g.c_type == DType::BFloat16;
      cuda::launch_unary(*g.activation, matrix_layout(g.batch, g.m, g.n), c, c, 0.0f, 0.0f,
                         stream_);
      return;
    }
    if (g.k == 0) {  // an empty sum: C = beta * C
      LOOM_CHECK(g.c_type == DType::Float32,
                 "gemm: an empty product (k = 0) into a bfloat16 result is not supported on cuda "
                 "(m={} n={})",
                 g.m, g.n);
      cuda::launch_scale(matrix_layout(g.batch, g.m, g.n), matrix_operand(g.c, g.stride_c, ldc),
                         g.beta, stream_);
      return;
    }
    ScratchBlocks scratch(*this);
    const Matrix a =
        legal_operand({g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.stride_a},
                      g.ab_type, g.batch, scratch);
    const Matrix b =
        legal_operand({g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.stride_b},
                      g.ab_type, g.batch, scratch);
    // cuBLAS is column-major: the row-major C = A B is computed as C^T = B^T A^T.
    const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (g.ab_type == DType::BFloat16) {
      // bfloat16 operands on tensor cores, accumulated in float32; C float32 or bfloat16.
      LOOM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
          cublas_, op_b, op_a, to_int(g.n, "n"), to_int(g.m, "m"), to_int(g.k, "k"), &g.alpha,
          b.data, CUDA_R_16BF, to_int(b.ld, "ldb"), b.stride, a.data, CUDA_R_16BF,
          to_int(a.ld, "lda"), a.stride, &g.beta, g.c, cuda_type(g.c_type), to_int(ldc, "ldc"),
          g.stride_c, to_int(g.batch, "batch"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      return;
    }
    set_math_mode();
    LOOM_CUBLAS_CHECK(cublasSgemmStridedBatched(
        cublas_, op_b, op_a, to_int(g.n, "n"), to_int(g.m, "m"), to_int(g.k, "k"), &g.alpha,
        static_cast<const float*>(b.data), to_int(b.ld, "ldb"), b.stride,
        static_cast<const float*>(a.data), to_int(a.ld, "lda"), a.stride, &g.beta,
        static_cast<float*>(g.c), to_int(ldc, "ldc"), g.stride_c, to_int(g.batch, "batch")));
  }

  // --- indexing ---
  void index_select_impl(const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                         const Tensor& index, Tensor& out) override {
    cuda::launch_index_select(x.raw_data(), element_size(x.dtype()), outer, n, inner,
                              index.data_ptr<int64_t>(), index.numel(), out.raw_data(),
                              error_flag({"index_select", n}), stream_);
    after_checked_launch();
  }

  void index_copy_impl(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                       const Tensor& index, Tensor& out) override {
    cuda::launch_index_copy(src.raw_data(), element_size(out.dtype()), outer, n, inner,
                            index.data_ptr<int64_t>(), index.numel(), out.raw_data(),
                            error_flag({"index_copy", n}), stream_);
    after_checked_launch();
  }

  void index_add_impl(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                      const Tensor& index, Tensor& out) override {
    cuda::launch_index_add(src.raw_data(), out.dtype(), outer, n, inner, index.data_ptr<int64_t>(),
                           index.numel(), out.raw_data(), error_flag({"index_add", n}), stream_);
    after_checked_launch();
  }

  void gather_impl(const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                   Tensor& out) override {
    cuda::launch_gather(x.raw_data(), element_size(x.dtype()), outer, n, inner,
                        index.data_ptr<int64_t>(), index_depth(index, outer, inner), out.raw_data(),
                        error_flag({"gather", n}), stream_);
    after_checked_launch();
  }

  void scatter_add_impl(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                        const Tensor& index, Tensor& out) override {
    cuda::launch_scatter_add(src.raw_data(), out.dtype(), outer, n, inner,
                             index.data_ptr<int64_t>(), index_depth(index, outer, inner),
                             out.raw_data(), error_flag({"scatter_add", n}), stream_);
    after_checked_launch();
  }

  // --- random numbers ---
  void rand_uniform_impl(Tensor& out, uint64_t seed, uint64_t offset) override {
    cuda::launch_rand_uniform(out.data_ptr<float>(), out.numel(), seed, offset, stream_);
  }
  void rand_normal_impl(Tensor& out, uint64_t seed, uint64_t offset) override {
    cuda::launch_rand_normal(out.data_ptr<float>(), out.numel(), seed, offset, stream_);
  }

  // --- fused neural-network kernels ---
  void layer_norm_impl(const Tensor& x, const Tensor& residual, const Tensor& weight,
                       const Tensor& bias, float eps, Tensor& sum, Tensor& y, Tensor& mean,
                       Tensor& rstd) override {
    const int64_t rows = mean.numel(), cols = x.numel() / rows;
    cuda::launch_layer_norm(x.data_ptr<float>(), residual.defined() ? residual.raw_data() : nullptr,
                            residual.defined() && residual.dtype() == DType::BFloat16,
                            ptr<float>(weight), ptr<float>(bias), rows, cols, eps, ptr<float>(sum),
                            y.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(),
                            stream_);
  }

  void layer_norm_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dweight,
                                Tensor& dbias) override {
    const int64_t rows = mean.numel(), cols = x.numel() / rows;
    ScratchBlocks scratch(*this);
    cuda::launch_layer_norm_backward(dy.data_ptr<float>(), x.data_ptr<float>(), ptr<float>(weight),
                                     mean.data_ptr<float>(), rstd.data_ptr<float>(), rows, cols,
                                     dx.data_ptr<float>(), ptr<float>(dweight), ptr<float>(dbias),
                                     scratch, stream_);
  }

  void cross_entropy_impl(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                          float label_smoothing, Tensor& losses, Tensor& lse) override {
    const int64_t rows = target.numel(), classes = logits.numel() / rows;
    cuda::launch_cross_entropy(
        logits.raw_data(), logits.dtype() == DType::BFloat16, target.data_ptr<int64_t>(), rows,
        classes, logits_row_stride(logits), ignore_index, label_smoothing, losses.data_ptr<float>(),
        lse.data_ptr<float>(), error_flag({"cross_entropy", classes, ignore_index}), stream_);
    after_checked_launch();
  }

  void cross_entropy_backward_impl(const Tensor& logits, const Tensor& target, const Tensor& lse,
                                   int64_t ignore_index, float label_smoothing, float scale,
                                   const Tensor& scale_by, Tensor& dlogits) override {
    const int64_t rows = target.numel(), classes = logits.numel() / rows;
    cuda::launch_cross_entropy_backward(
        logits.raw_data(), logits.dtype() == DType::BFloat16, target.data_ptr<int64_t>(),
        lse.data_ptr<float>(), rows, classes, logits_row_stride(logits), ignore_index,
        label_smoothing, scale, ptr<float>(scale_by), dlogits.raw_data(),
        error_flag({"cross_entropy_backward", classes, ignore_index}), stream_);
    after_checked_launch();
  }

  void adam_step_impl(const AdamArgs& args, Tensor& param, const Tensor& grad, Tensor& m,
                      Tensor& v) override {
    cuda::launch_adam(args, param.numel(), param.data_ptr<float>(), grad.data_ptr<float>(),
                      m.data_ptr<float>(), v.data_ptr<float>(), stream_);
  }

  void adam_step_multi_impl(const AdamArgs& args, std::span<Tensor> params,
                            std::span<const Tensor> grads, std::span<Tensor> ms,
                            std::span<Tensor> vs) override {
    std::vector<cuda::AdamTensor> tensors(params.size());
    for (size_t i = 0; i < params.size(); ++i)
      tensors[i] = {params[i].data_ptr<float>(), grads[i].data_ptr<float>(),
                    ms[i].data_ptr<float>(), vs[i].data_ptr<float>(), params[i].numel()};
    cuda::launch_adam_multi(args, tensors.data(), tensors.size(), stream_);
  }

  void sum_of_squares_multi_impl(std::span<const Tensor> xs, Tensor& out) override {
    ScratchBlocks scratch(*this);
    const std::vector<cuda::FloatTensor> tensors = float_tensors(xs);
    cuda::launch_sum_of_squares_multi(tensors.data(), tensors.size(), out.data_ptr<float>(),
                                      scratch, stream_);
  }

  void scale_multi_impl(std::span<Tensor> xs, float alpha) override {
    const std::vector<cuda::FloatTensor> tensors =
        float_tensors(std::span<const Tensor>(xs.data(), xs.size()));
    cuda::launch_scale_multi(tensors.data(), tensors.size(), alpha, stream_);
  }

  void attention_forward_impl(const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& mask, const AttentionArgs& args, Tensor& out,
                              Tensor& lse) override {
    check_attention_launch("attention_forward", args);
    ScratchBlocks scratch(*this);  // the decoding kernel's partial results
    cuda::launch_attention_forward(args, q.dtype(), q.raw_data(), k.raw_data(), v.raw_data(),
                                   ptr<float>(mask), attention_mask_layout(mask), out.raw_data(),
                                   lse.data_ptr<float>(), scratch, decode_counters_, stream_);
  }

  void attention_backward_impl(const Tensor& dout, const Tensor& q, const Tensor& k,
                               const Tensor& v, const Tensor& mask, const Tensor& out,
                               const Tensor& lse, const AttentionArgs& args, Tensor& dq,
                               Tensor& dk, Tensor& dv) override {
    check_attention_launch("attention_backward", args);
    ScratchBlocks scratch(*this);
    cuda::launch_attention_backward(args, q.dtype(), dout.raw_data(), q.raw_data(), k.raw_data(),
                                    v.raw_data(), ptr<float>(mask), attention_mask_layout(mask),
                                    out.raw_data(), lse.data_ptr<float>(), dq.raw_data(),
                                    dk.raw_data(), dv.raw_data(), scratch, stream_);
  }

  void sample_impl(const Tensor& logits, float temperature, int64_t top_k, float top_p,
                   uint64_t seed, uint64_t offset, const Tensor& offset_by, Tensor& out) override {
    const int64_t rows = out.numel(), n = logits.numel() / rows;
    ScratchBlocks scratch(*this);
    double* probs = temperature > 0.0f
                        ? static_cast<double*>(scratch.get(sizeof(double) * rows * n))
                        : nullptr;
    cuda::launch_sample(logits.data_ptr<float>(), rows, n, temperature, top_k, top_p, seed, offset,
                        ptr<int64_t>(offset_by), probs, out.data_ptr<int64_t>(), scratch, stream_);
  }

 private:
  // BLAS requires ld >= max(1, cols). A single row may carry any stride (the stride of a size-1
  // dim), so it gets the minimum; a real multi-row operand with ld < cols (a broadcast row,
  // stride 0) is copied into a dense scratch buffer first.
  Matrix legal_operand(Matrix op, DType type, int64_t batch, cuda::Scratch& scratch) {
    if (op.rows == 1) {
      op.ld = std::max(op.ld, op.cols);
      return op;
    }
    if (op.ld >= op.cols) return op;
    const int64_t items = op.stride == 0 ? 1 : batch, size = op.rows * op.cols;
    void* dense = scratch.get(static_cast<size_t>(items * size) * element_size(type));
    cuda::launch_copy(matrix_layout(items, op.rows, op.cols),
                      matrix_operand(op.data, op.stride, op.ld), type,
                      matrix_operand(dense, size, op.cols), type, stream_);
    return {dense, op.rows, op.cols, op.cols, op.stride == 0 ? 0 : size};
  }

  // k of an index that splits into [outer, k, inner] (Backend has checked that it does).
  static int64_t index_depth(const Tensor& index, int64_t outer, int64_t inner) {
    return index.numel() / (outer * inner);
  }

  void set_math_mode() {
    const bool tf32 = g_tf32.load();
    if (tf32 == tf32_active_) return;
    LOOM_CUBLAS_CHECK(
        cublasSetMathMode(cublas_, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    tf32_active_ = tf32;
  }

  // --- device-side errors ---
  // Kernels cannot throw. One that meets a bad value (an index out of range, a target outside
  // the classes) skips it and raises a flag in device memory. Each checked launch gets a flag of
  // its own, and the host keeps what its message needs. The flags are read where the host waits
  // for the GPU anyway (a copy to or from the host, synchronize()), so a checked op costs no
  // round trip, and the first raised flag becomes a loom::Error there: as in PyTorch, an error
  // on the GPU is reported at a later call. With CUDA_LAUNCH_BLOCKING=1 (or
  // cuda_set_launch_blocking(true)) each checked launch is waited for and raises at its own call.
  struct Check {
    const char* op;
    int64_t n;                 // the indexed dimension's size, or the number of classes
    int64_t ignore_index = 0;  // targets only
    bool target = false;
    Check(const char* op_, int64_t n_) : op(op_), n(n_) {}
    Check(const char* op_, int64_t classes, int64_t ignore)
        : op(op_), n(classes), ignore_index(ignore), target(true) {}
  };
  static constexpr size_t kErrorSlots = 256;  // a full set is read (one wait) before reuse

  // The flag for the next checked launch; during a capture, one of the graph's own flags.
  cuda::DeviceErrorFlag* error_flag(const Check& check) {
    if (capture_) {
      std::vector<Check>& checks = capture_->recording->checks;
      LOOM_CHECK(checks.size() < kErrorSlots,
                 "graph capture: more than {} checked launches ({} ...) in one graph", kErrorSlots,
                 check.op);
      checks.push_back(check);
      return capture_->recording->flags + (checks.size() - 1);
    }
    if (checks_.size() == kErrorSlots) synchronize();  // reads and clears every flag
    checks_.push_back(check);
    return error_flags_ + (checks_.size() - 1);
  }

  void after_checked_launch() {
    if (g_launch_blocking.load() && !capture_) synchronize();
  }

  // Queues the copy of `flags.size()` device flags into `flags` and their reset to 0.
  void read_flags(cuda::DeviceErrorFlag* device_flags, std::vector<cuda::DeviceErrorFlag>& flags) {
    const size_t bytes = flags.size() * sizeof(cuda::DeviceErrorFlag);
    if (bytes == 0) return;
    LOOM_CUDA_CHECK(
        cudaMemcpyAsync(flags.data(), device_flags, bytes, cudaMemcpyDeviceToHost, stream_));
    LOOM_CUDA_CHECK(cudaMemsetAsync(device_flags, 0, bytes, stream_));
  }

  [[noreturn]] static void raise_device_error(const Check& c, const cuda::DeviceErrorFlag& flag,
                                              bool in_graph = false) {
    const std::string where =
        in_graph ? " (raised on the GPU by a replayed CUDA graph, reported at the next wait for it)"
        : g_launch_blocking.load()
            ? ""
            : " (raised on the GPU, reported at the next wait for it; CUDA_LAUNCH_BLOCKING=1 "
              "reports it at the call)";
    if (c.target)
      LOOM_FAIL("{}: target {} at position {} is out of range for {} classes; valid targets are "
                "[0, {}) or ignore_index ({}){}",
                c.op, flag.value, flag.position, c.n, c.n, c.ignore_index, where);
    LOOM_FAIL("{}: index {} (at position {}) is out of range for a dimension of size {}; valid "
              "indices are [0, {}){}",
              c.op, flag.value, flag.position, c.n, c.n, where);
  }

  // --- graphs ---
  // A capture records the stream's work into a CUDA graph (cudaStreamBeginCapture ...
  // cudaStreamEndCapture), which cudaGraphLaunch replays with one launch. A replay runs the same
  // kernels on the same addresses, so:
  //   * blocks allocated during the capture come from a pool that belongs to the graph, never
  //     handed to anyone else while the graph lives (a replay rewrites them). A pool outlives
  //     its graph while tensors still hold blocks of it, then its memory is released;
  //   * the checked kernels of a graph raise flags of the graph's own (one per launch), read
  //     at the first wait after a replay;
  //   * nothing may need the host to wait: a copy to or from the host, synchronize() or a
  //     kernel that waits under CUDA_LAUNCH_BLOCKING throws check_not_capturing's error.
  struct Pool {
    CachingAllocator memory{cuda::device_memory()};
    bool retired = false;  // its graph is gone; released when its last block is freed
  };
  // What a replay needs besides the executable graph: the flags and what they check.
  struct Recording {
    cuda::DeviceErrorFlag* flags = nullptr;  // kErrorSlots of them, in the graph's pool
    std::vector<Check> checks;
  };
  struct Capture {
    Pool* pool = nullptr;
    std::unique_ptr<Recording> recording;
  };
  class Graph;

  void check_not_capturing(const char* what) const {
    LOOM_CHECK(!capture_,
               "graph capture: {} needs the host to wait for the GPU, which a CUDA graph cannot "
               "record; move it before or after the captured work",
               what);
  }
  // A recording is gone (its graph destroyed, or its capture failed): its flags go back to the
  // pool, and the pool is released once no tensor holds a block of it.
  void discard(Pool* pool, const Recording& recording) noexcept {
    pool->memory.deallocate(recording.flags);
    retire(pool);
  }
  void retire(Pool* pool) noexcept {
    pool->retired = true;
    for (auto it = pools_.begin(); it != pools_.end(); ++it)
      if (&*it == pool && pool->memory.allocated_bytes() == 0) return release(it);
  }
  void release(std::list<Pool>::iterator pool) noexcept {
    pool->memory.empty_cache();  // cudaFree for every block
    pools_.erase(pool);
  }

  static constexpr size_t kCublasWorkspace = size_t{32} << 20;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;
  bool tf32_active_ = false;
  cuda::DeviceErrorFlag* error_flags_ = nullptr;  // kErrorSlots of them
  std::vector<Check> checks_;                       // the launches that hold flags, in order
  unsigned* decode_counters_ = nullptr;  // cuda::kDecodeCounters zeros (launch_attention_forward)
  CachingAllocator allocator_{cuda::device_memory()};
  std::list<Pool> pools_;                   // of live graphs, and retired ones still in use
  std::unique_ptr<Capture> capture_;        // set between begin_capture and end_capture
  std::vector<const Recording*> replayed_;  // graphs replayed since the last wait
};

// An instantiated graph: replay() is one cudaGraphLaunch on the backend's stream.
class CudaBackend::Graph final : public DeviceGraph {
 public:
  Graph(CudaBackend& backend, cudaGraphExec_t exec, Pool* pool,
        std::unique_ptr<Recording> recording)
      : backend_(backend), exec_(exec), pool_(pool), recording_(std::move(recording)) {}
  ~Graph() override {
    std::erase(backend_.replayed_, recording_.get());  // its flags are no longer read
    (void)cudaGraphExecDestroy(exec_);
    backend_.discard(pool_, *recording_);
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  void replay() override {
    backend_.check_not_capturing("replaying a graph");
    LOOM_CUDA_CHECK(cudaGraphLaunch(exec_, backend_.stream_));
    if (!recording_->checks.empty() &&
        std::find(backend_.replayed_.begin(), backend_.replayed_.end(), recording_.get()) ==
            backend_.replayed_.end())
      backend_.replayed_.push_back(recording_.get());
    if (g_launch_blocking.load()) backend_.synchronize();
  }

 private:
  CudaBackend& backend_;
  cudaGraphExec_t exec_;
  Pool* pool_;
  std::unique_ptr<Recording> recording_;
};

void CudaBackend::begin_capture() {
  LOOM_CHECK(!capture_, "graph capture: a capture is already in progress (captures do not nest)");
  // Work queued before stays queued (and its flags pending): the capture records what follows.
  Pool& pool = pools_.emplace_back();
  auto capture = std::make_unique<Capture>();
  capture->pool = &pool;
  capture->recording = std::make_unique<Recording>();
  try {
    const size_t bytes = kErrorSlots * sizeof(cuda::DeviceErrorFlag);
    capture->recording->flags = static_cast<cuda::DeviceErrorFlag*>(pool.memory.allocate(bytes));
    LOOM_CUDA_CHECK(cudaMemsetAsync(capture->recording->flags, 0, bytes, stream_));
    LOOM_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  } catch (...) {
    discard(&pool, *capture->recording);
    throw;
  }
  capture_ = std::move(capture);
}

std::unique_ptr<DeviceGraph> CudaBackend::end_capture() {
  LOOM_CHECK(capture_, "graph capture: end_capture() without begin_capture()");
  std::unique_ptr<Capture> capture = std::move(capture_);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaError_t status = cudaStreamEndCapture(stream_, &graph);
  if (status == cudaSuccess) status = cudaGraphInstantiate(&exec, graph, 0);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);  // the executable keeps what it needs
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    discard(capture->pool, *capture->recording);
    LOOM_CUDA_CHECK(status);
  }
  return std::make_unique<Graph>(*this, exec, capture->pool, std::move(capture->recording));
}

void CudaBackend::abort_capture() noexcept {
  if (!capture_) return;
  std::unique_ptr<Capture> capture = std::move(capture_);
  cudaGraph_t graph = nullptr;
  (void)cudaStreamEndCapture(stream_, &graph);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();
  discard(capture->pool, *capture->recording);
}

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

void cuda_set_launch_blocking(bool enabled) { g_launch_blocking.store(enabled); }
bool cuda_launch_blocking() { return g_launch_blocking.load(); }

}  // namespace loom
