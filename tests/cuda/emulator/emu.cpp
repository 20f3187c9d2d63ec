// The emulator's scheduler (one fiber per CUDA thread), and host versions of the CUDA runtime
// and cuBLAS calls that loom's CUDA code makes (backends/cuda/cuda_backend.cpp, the kernel
// families' backends/<family>/*.cu). See emu.h.
#include "emu.h"

#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

#include "core/bfloat16.h"

namespace emu {

uint3 block_idx{0, 0, 0};
dim3 block_dim, grid_dim;

namespace {

// The counters behind stream_work(), stream_synchronizations() and graph_launches().
unsigned long long g_stream_work = 0, g_synchronizations = 0, g_graph_launches = 0;
unsigned long long g_recorded_work = 0;  // operations recorded into captures
long long g_device_blocks = 0;  // behind device_blocks()
constexpr size_t kStack = 64 * 1024;

struct Fiber {
  ucontext_t context;
  uint3 idx;
  bool done = false;
  bool waiting = false;
  std::unique_ptr<char[]> stack{new char[kStack]};
};

ucontext_t scheduler;
std::vector<Fiber> fibers;
int current = 0;
int threads = 0;
const std::function<void()>* body = nullptr;
// Per thread: the largest value a collective publishes (mma_ptx.h: 6 registers of 32 bits).
constexpr size_t kShuffleBytesPerThread = 32;
std::vector<char> shuffle_space;
std::vector<unsigned char> dynamic_space;  // the dynamic shared memory of the running block
std::map<const void*, int> max_dynamic;    // cudaFuncAttributeMaxDynamicSharedMemorySize

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "cuda emulator: %s (block %u,%u,%u)\n", what, block_idx.x, block_idx.y,
               block_idx.z);
  std::abort();
}

void fiber_main() {
  (*body)();
  fibers[current].done = true;
  swapcontext(&fibers[current].context, &scheduler);
  fail("a finished fiber was resumed");
}

// Runs one block: every fiber until it finishes or waits at a barrier; when all live fibers
// wait, the barrier opens. A barrier that some threads never reach is a divergence error.
void run_block() {
  for (int t = 0; t < threads; ++t) {
    Fiber& f = fibers[t];
    f.idx = {static_cast<unsigned>(t % block_dim.x),
             static_cast<unsigned>((t / block_dim.x) % block_dim.y),
             static_cast<unsigned>(t / (block_dim.x * block_dim.y))};
    f.done = f.waiting = false;
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack.get();
    f.context.uc_stack.ss_size = kStack;
    f.context.uc_link = nullptr;
    makecontext(&f.context, fiber_main, 0);
  }
  for (;;) {
    for (int t = 0; t < threads; ++t) {
      if (fibers[t].done || fibers[t].waiting) continue;
      current = t;
      swapcontext(&scheduler, &fibers[t].context);
    }
    int done = 0;
    for (int t = 0; t < threads; ++t) done += fibers[t].done;
    if (done == threads) return;
    if (done > 0) fail("__syncthreads or a shuffle not reached by every thread of the block");
    for (int t = 0; t < threads; ++t) fibers[t].waiting = false;
  }
}

}  // namespace

// ---------------------------------------------------------------------------- capture
// The stream's capture state (one stream): the operations recorded so far, and whether
// something the capture cannot record has invalidated it.
struct Capture {
  bool active = false, invalidated = false;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::vector<std::function<void()>> work;
};
Capture g_capture;
thread_local cudaStreamCaptureMode g_thread_mode = cudaStreamCaptureModeGlobal;

// Whether `op` was recorded into the stream's capture (true); else (false) it is counted as
// queued work and the caller runs it now.
bool captured(std::function<void()> op) {
  if (g_capture.active) {
    g_capture.work.push_back(std::move(op));
    ++g_recorded_work;
    return true;
  }
  ++g_stream_work;
  return false;
}

// For what a capture cannot record: false (and the capture invalidated) during a capture.
bool allowed_outside_capture(bool unsafe_only) {
  if (!g_capture.active) return true;
  if (unsafe_only && (g_capture.mode == cudaStreamCaptureModeRelaxed ||
                      g_thread_mode == cudaStreamCaptureModeRelaxed))
    return true;
  g_capture.invalidated = true;
  return false;
}

const uint3& thread_idx() { return fibers[current].idx; }
int linear_thread() { return current; }
int block_threads() { return threads; }

void barrier() {
  fibers[current].waiting = true;
  swapcontext(&fibers[current].context, &scheduler);
}

void* shuffle_buffer(size_t bytes) {
  if (shuffle_space.size() < bytes) fail("shuffle buffer too small");
  return shuffle_space.data();
}

namespace {
// A launch's configuration is checked when it is queued (or recorded), as on a GPU.
void check_launch(dim3 grid, dim3 block) {
  const unsigned long long count = 1ull * block.x * block.y * block.z;
  if (count == 0 || count > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
      grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 ||
      grid.z > 65535)
    fail("invalid launch configuration");
}

void run_launch(dim3 grid, dim3 block, const std::function<void()>& kernel) {
  const unsigned long long count = 1ull * block.x * block.y * block.z;
  grid_dim = grid;
  block_dim = block;
  body = &kernel;
  threads = static_cast<int>(count);
  if (fibers.size() < count) fibers.resize(count);  // fibers (and stacks) are reused
  shuffle_space.assign(count * kShuffleBytesPerThread, 0);
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        block_idx = {x, y, z};
        run_block();
      }
}
}  // namespace

void launch(dim3 grid, dim3 block, const std::function<void()>& kernel) {
  check_launch(grid, block);
  if (!captured([=] { run_launch(grid, block, kernel); })) run_launch(grid, block, kernel);
}

unsigned char* dynamic_shared() {
  // 128-byte aligned, as the GPU aligns dynamic shared memory.
  const uintptr_t at = reinterpret_cast<uintptr_t>(dynamic_space.data());
  return dynamic_space.data() + (128 - at % 128) % 128;
}

void set_max_dynamic_shared(const void* kernel, int bytes) { max_dynamic[kernel] = bytes; }

void launch(dim3 grid, dim3 block, size_t shared_bytes, const void* kernel,
            const std::function<void()>& body_) {
  const auto allowed = max_dynamic.find(kernel);
  const size_t limit = allowed == max_dynamic.end() ? 48 * 1024 : allowed->second;
  if (shared_bytes > limit) fail("dynamic shared memory above the kernel's allowed size");
  check_launch(grid, block);
  auto run = [=] {
    dynamic_space.assign(shared_bytes + 128, 0);
    run_launch(grid, block, body_);
  };
  if (!captured(run)) run();
}

}  // namespace emu

// ---------------------------------------------------------------------------- runtime API
namespace {
cudaError_t last_error = cudaSuccess;
cudaError_t record(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
  return e;
}
}  // namespace

cudaError_t cudaGetDeviceCount(int* count) {
  if (std::getenv("LOOM_EMULATE_NO_GPU")) return record(cudaErrorNoDevice);
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : record(cudaErrorInvalidValue);
}
cudaError_t cudaGetLastError() {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
  }
  return "unknown error";
}
cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  static int dummy;
  *stream = reinterpret_cast<cudaStream_t>(&dummy);
  return cudaSuccess;
}
unsigned long long emu::stream_synchronizations() { return emu::g_synchronizations; }
unsigned long long emu::stream_work() { return emu::g_stream_work; }
unsigned long long emu::graph_launches() { return emu::g_graph_launches; }
unsigned long long emu::recorded_work() { return emu::g_recorded_work; }
long long emu::device_blocks() { return emu::g_device_blocks; }
cudaError_t cudaStreamSynchronize(cudaStream_t) {
  if (!emu::allowed_outside_capture(false)) return record(cudaErrorStreamCaptureUnsupported);
  ++emu::g_synchronizations;
  return cudaSuccess;
}
cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (!emu::allowed_outside_capture(true)) return record(cudaErrorStreamCaptureUnsupported);
  if (bytes > (size_t{1} << 36)) return record(cudaErrorMemoryAllocation);  // a 64 GiB "GPU"
  *ptr = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (*ptr == nullptr) return record(cudaErrorMemoryAllocation);
  ++emu::g_device_blocks;
  return cudaSuccess;
}
cudaError_t cudaFree(void* ptr) {
  if (!emu::allowed_outside_capture(true)) return record(cudaErrorStreamCaptureUnsupported);
  if (ptr != nullptr) --emu::g_device_blocks;
  std::free(ptr);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t) {
  if (bytes > 0 && (dst == nullptr || src == nullptr)) return record(cudaErrorInvalidValue);
  if (kind != cudaMemcpyDeviceToDevice && !emu::allowed_outside_capture(false))
    return record(cudaErrorStreamCaptureUnsupported);
  auto copy = [=] {
    if (bytes > 0) std::memmove(dst, src, bytes);
  };
  if (!emu::captured(copy)) copy();
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t) {
  if (bytes > 0 && dst == nullptr) return record(cudaErrorInvalidValue);
  auto set = [=] {
    if (bytes > 0) std::memset(dst, value, bytes);
  };
  if (!emu::captured(set)) set();
  return cudaSuccess;
}

struct CUgraph_st {
  std::vector<std::function<void()>> work;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> work;
};
cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (mode == nullptr) return record(cudaErrorInvalidValue);
  std::swap(*mode, emu::g_thread_mode);
  return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode mode) {
  if (emu::g_capture.active) return record(cudaErrorInvalidValue);  // captures do not nest
  emu::g_capture = {true, false, mode, {}};
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* graph) {
  if (!emu::g_capture.active || graph == nullptr) return record(cudaErrorInvalidValue);
  const bool invalidated = emu::g_capture.invalidated;
  std::vector<std::function<void()>> work = std::move(emu::g_capture.work);
  emu::g_capture = {};
  if (invalidated) {
    *graph = nullptr;
    return record(cudaErrorStreamCaptureInvalidated);
  }
  *graph = new CUgraph_st{std::move(work)};
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (exec == nullptr || graph == nullptr) return record(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->work};
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t) {
  if (exec == nullptr) return record(cudaErrorInvalidValue);
  auto run = [exec] {
    for (const auto& op : exec->work) op();
  };
  if (emu::captured(run)) return cudaSuccess;
  ++emu::g_graph_launches;
  run();
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

// ---------------------------------------------------------------------------- cuBLAS
// Column-major C = alpha op(A) op(B) + beta C per batch item, with cuBLAS's argument rules:
// lda >= max(1, rows of A as stored), and beta == 0 does not read C.
cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  static int dummy;
  *handle = reinterpret_cast<cublasHandle_t>(&dummy);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetWorkspace(cublasHandle_t, void* workspace, size_t bytes) {
  return workspace != nullptr || bytes == 0 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}
const char* cublasGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_INVALID_VALUE";
}
namespace {
float load(const void* data, cudaDataType type, long long i) {
  return type == CUDA_R_16BF ? static_cast<float>(static_cast<const loom::BFloat16*>(data)[i])
                             : static_cast<const float*>(data)[i];
}
void store(void* data, cudaDataType type, long long i, float value) {
  if (type == CUDA_R_16BF)
    static_cast<loom::BFloat16*>(data)[i] = loom::BFloat16(value);
  else
    static_cast<float*>(data)[i] = value;
}
}  // namespace

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType a_type,
                                          int lda, long long stride_a, const void* B,
                                          cudaDataType b_type, int ldb, long long stride_b,
                                          const void* beta, void* C, cudaDataType c_type, int ldc,
                                          long long stride_c, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t) {
  const int a_rows = transa == CUBLAS_OP_N ? m : k, b_rows = transb == CUBLAS_OP_N ? k : n;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < std::max(1, a_rows) ||
      ldb < std::max(1, b_rows) || ldc < std::max(1, m) || a_type != b_type ||
      compute != CUBLAS_COMPUTE_32F)
    return CUBLAS_STATUS_INVALID_VALUE;
  // alpha and beta are host values: read at the call (a capture records them by value).
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  auto product = [=] {
    for (long long p = 0; p < batch; ++p)
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
          double acc = 0.0;
          for (int l = 0; l < k; ++l) {
            const float av =
                load(A, a_type, p * stride_a + (transa == CUBLAS_OP_N ? i + l * lda : l + i * lda));
            const float bv =
                load(B, b_type, p * stride_b + (transb == CUBLAS_OP_N ? l + j * ldb : j + l * ldb));
            acc += static_cast<double>(av) * bv;
          }
          const long long at = p * stride_c + i + static_cast<long long>(j) * ldc;
          const float old = be == 0.0f ? 0.0f : be * load(C, c_type, at);
          store(C, c_type, at, al * static_cast<float>(acc) + old);
        }
  };
  if (!emu::captured(product)) product();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long stride_a, const float* B, int ldb,
                                         long long stride_b, const float* beta, float* C, int ldc,
                                         long long stride_c, int batch) {
  const int a_rows = transa == CUBLAS_OP_N ? m : k, b_rows = transb == CUBLAS_OP_N ? k : n;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < std::max(1, a_rows) ||
      ldb < std::max(1, b_rows) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  const float al = *alpha, be = *beta;  // host values, read at the call
  auto product = [=] {
    for (int p = 0; p < batch; ++p) {
      const float* a = A + p * stride_a;
      const float* b = B + p * stride_b;
      float* c = C + p * stride_c;
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
          double acc = 0.0;
          for (int l = 0; l < k; ++l) {
            const float av = transa == CUBLAS_OP_N ? a[i + l * lda] : a[l + i * lda];
            const float bv = transb == CUBLAS_OP_N ? b[l + j * ldb] : b[j + l * ldb];
            acc += static_cast<double>(av) * bv;
          }
          float& out = c[i + j * ldc];
          out = al * static_cast<float>(acc) + (be == 0.0f ? 0.0f : be * out);
        }
    }
  };
  if (!emu::captured(product)) product();
  return CUBLAS_STATUS_SUCCESS;
}
