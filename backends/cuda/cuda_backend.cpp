// CudaBackend: the CUDA device. Its memory (the caching allocator), host <-> device copies,
// the one stream all work is queued on in order, the cuBLAS handle, CUDA graphs and the error
// flags of the checked kernels; device.h hands these to the kernel families' CUDA
// implementations (backends/<family>/*.cu), which Backend's public methods run once they have
// checked the arguments and made the inputs of the row-based kernels contiguous. The host waits
// only at host <-> device copies and synchronize(), where it also reads the error flags of the
// checked kernels (see "device-side errors" below). The work may also be recorded into a CUDA
// graph and replayed with one launch ("graphs" below).
#include "backends/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cuda/allocator.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "core/error.h"

namespace loom {
namespace {

std::atomic<bool> g_tf32{false};
// CUDA_LAUNCH_BLOCKING=1, PyTorch's switch (the CUDA runtime reads it too), starts it on.
std::atomic<bool> g_launch_blocking{[] {
  const char* value = std::getenv("CUDA_LAUNCH_BLOCKING");
  return value != nullptr && std::string_view(value) == "1";
}()};

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

  // --- what the kernel families' CUDA code takes (device.h) ---
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cublasHandle_t cublas_float32() {
    set_math_mode();
    return cublas_;
  }
  unsigned* decode_counters() const { return decode_counters_; }
  cuda::DeviceErrorFlag* index_error_flag(const char* op, int64_t n) { return error_flag({op, n}); }
  cuda::DeviceErrorFlag* target_error_flag(const char* op, int64_t classes, int64_t ignore_index) {
    return error_flag({op, classes, ignore_index});
  }
  void after_checked_launch() {
    if (g_launch_blocking.load() && !capture_) synchronize();
  }

 private:
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
  unsigned* decode_counters_ = nullptr;  // cuda::kDecodeCounters zeros (cuda::decode_counters)
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

namespace {
CudaBackend& device() {
  // Created on first use and deliberately never destroyed (see ~CudaBackend).
  static CudaBackend* const instance = new CudaBackend();
  return *instance;
}
}  // namespace

Backend& cuda_backend() { return device(); }

// ---------------------------------------------------------------------------- device.h
namespace cuda {

cudaStream_t stream() { return device().stream(); }
cublasHandle_t cublas() { return device().cublas(); }
cublasHandle_t cublas_float32() { return device().cublas_float32(); }
unsigned* decode_counters() { return device().decode_counters(); }

DeviceErrorFlag* index_error_flag(const char* op, int64_t n) {
  return device().index_error_flag(op, n);
}
DeviceErrorFlag* target_error_flag(const char* op, int64_t classes, int64_t ignore_index) {
  return device().target_error_flag(op, classes, ignore_index);
}
void after_checked_launch() { device().after_checked_launch(); }

// Every block goes back to the device's memory (the caching allocator, or a graph's pool during
// a capture) when the Scratch dies.
Scratch::~Scratch() {
  for (void* block : blocks_) device().deallocate(block, 0);
}

void* Scratch::get(size_t bytes) {
  blocks_.reserve(blocks_.size() + 1);  // so push_back cannot throw and leak the block
  blocks_.push_back(device().allocate(bytes));
  return blocks_.back();
}

}  // namespace cuda

void cuda_set_tf32(bool enabled) { g_tf32.store(enabled); }
bool cuda_tf32_enabled() { return g_tf32.load(); }

void cuda_set_launch_blocking(bool enabled) { g_launch_blocking.store(enabled); }
bool cuda_launch_blocking() { return g_launch_blocking.load(); }

}  // namespace loom
