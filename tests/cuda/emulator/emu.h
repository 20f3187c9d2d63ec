// A CPU emulator of the parts of the CUDA execution model that loom's kernels use, so that
// the CUDA side of loom (backends/<family>/*.cu, backends/cuda) can be run and tested on a
// machine without a GPU (see run_emulated.sh).
// Every CUDA thread of a block is a fiber (ucontext); a block's fibers run until they all
// reach the same __syncthreads or warp shuffle, which is enforced: a block where some threads
// wait at a barrier that others never reach is reported as an error. __shared__ variables are
// statics (one block runs at a time). The CUDA runtime and cuBLAS calls of that code
// are replaced by host versions that follow their documented contracts (column-major cuBLAS
// with its leading-dimension rules). What it cannot show: real memory-model races, timing,
// the accuracy of CUDA's math library, and hardware limits beyond those checked at launch.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

using std::max;
using std::min;

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x, y, z;
};

namespace emu {
extern uint3 block_idx;
extern dim3 block_dim, grid_dim;
const uint3& thread_idx();
int linear_thread();
int block_threads();
void barrier();
void* shuffle_buffer(size_t bytes);
void launch(dim3 grid, dim3 block, const std::function<void()>& body);
// A launch with dynamic shared memory (the third <<<>>> argument, when not a literal 0):
// `shared_bytes` over 48 KB must have been allowed for `kernel` by cudaFuncSetAttribute
// (cudaFuncAttributeMaxDynamicSharedMemorySize), as on the GPU; the block reads the bytes
// through dynamic_shared() (128-byte aligned, zeroed only at allocation).
void launch(dim3 grid, dim3 block, size_t shared_bytes, const void* kernel,
            const std::function<void()>& body);
unsigned char* dynamic_shared();
void set_max_dynamic_shared(const void* kernel, int bytes);
// How many times the host has waited for the "GPU" (cudaStreamSynchronize calls) so far: the
// tests count the waits of a loop that should not wait.
unsigned long long stream_synchronizations();
// How many operations the host has queued on the stream so far: kernel launches, cuBLAS
// products, copies and memsets (each one launch on a GPU), and graph launches (one each,
// however much work the graph replays; work recorded into a graph is not queued).
unsigned long long stream_work();
// How many operations have been recorded into stream captures so far (each a node of a graph).
unsigned long long recorded_work();
// How many times a CUDA graph has been launched (cudaGraphLaunch) so far.
unsigned long long graph_launches();
// How many blocks of device memory are held (cudaMalloc'd and not yet cudaFree'd).
long long device_blocks();
}  // namespace emu

#define threadIdx (::emu::thread_idx())
#define blockIdx (::emu::block_idx)
#define blockDim (::emu::block_dim)
#define gridDim (::emu::grid_dim)

inline void __syncthreads() { emu::barrier(); }
// Float arithmetic with an explicit round-to-nearest (never contracted into a fused multiply-add
// except where __fmaf_rn asks for one), as CUDA's intrinsics of the same names.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
// Here a warp barrier is a block barrier (every fiber of the block waits), so a kernel must call
// __syncwarp and __any_sync where every warp of the block calls them the same number of times.
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  if (mask != 0xffffffffu) std::abort();  // full warps only
  emu::barrier();
}

// Every lane publishes its value, all wait, each reads its partner's, all wait again.
template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int delta) {
  if (mask != 0xffffffffu || emu::block_threads() % 32 != 0) std::abort();  // full warps only
  T* slots = static_cast<T*>(emu::shuffle_buffer(sizeof(T) * emu::block_threads()));
  const int me = emu::linear_thread(), lane = me % 32;
  slots[me] = value;
  emu::barrier();
  const T other = slots[me - lane + (lane ^ delta)];
  emu::barrier();
  return other;
}

// Whether `predicate` is nonzero in any lane of the warp (published and read like a shuffle).
inline int __any_sync(unsigned mask, int predicate) {
  if (mask != 0xffffffffu || emu::block_threads() % 32 != 0) std::abort();  // full warps only
  int* slots = static_cast<int*>(emu::shuffle_buffer(sizeof(int) * emu::block_threads()));
  const int me = emu::linear_thread(), first = me - me % 32;
  slots[me] = predicate != 0;
  emu::barrier();
  int any = 0;
  for (int l = 0; l < 32; ++l) any |= slots[first + l];
  emu::barrier();
  return any;
}

// One OS thread runs every fiber, so plain read-modify-writes are atomic.
inline int atomicCAS(int* address, int compare, int value) {
  const int old = *address;
  if (old == compare) *address = value;
  return old;
}
inline float atomicAdd(float* address, float value) {
  const float old = *address;
  *address = old + value;
  return old;
}
struct float2 {
  float x, y;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float2 atomicAdd(float2* address, float2 value) {  // sm_90's vector atomic
  const float2 old = *address;
  *address = {old.x + value.x, old.y + value.y};
  return old;
}
inline unsigned atomicAdd(unsigned* address, unsigned value) {
  const unsigned old = *address;
  *address = old + value;
  return old;
}
// One block runs at a time and memory is the host's: a fence orders nothing more, and a load
// that bypasses L1 (__ldcg) is a plain load.
inline void __threadfence() {}
template <typename T>
T __ldcg(const T* address) {
  return *address;
}
inline unsigned long long atomicAdd(unsigned long long* address, unsigned long long value) {
  const unsigned long long old = *address;
  *address = old + value;
  return old;
}

// ---------------------------------------------------------------------------- runtime API
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorNoDevice = 100,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
};
enum cudaMemcpyKind {
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
};
struct CUstream_st;
using cudaStream_t = CUstream_st*;

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetLastError();
const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream);
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream);

// Stream capture and graphs. Between cudaStreamBeginCapture and cudaStreamEndCapture the
// launches, device-to-device copies, memsets and cuBLAS products queued on the stream are
// recorded (their arguments, and cuBLAS's host alpha and beta, by value) instead of run;
// cudaGraphLaunch runs the recording. As on a GPU, a capture is invalidated (and the call
// fails with cudaErrorStreamCaptureUnsupported) by what it cannot record: a copy to or from the
// host, cudaStreamSynchronize, and, unless the capture or the calling thread is in relaxed
// mode, cudaMalloc and cudaFree.
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
struct CUgraph_st;
using cudaGraph_t = CUgraph_st*;
struct CUgraphExec_st;
using cudaGraphExec_t = CUgraphExec_st*;
cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode);
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
// Up to 227 KB per block, as on an H100/H200.
template <class T>
cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attribute, int value) {
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || value > 227 * 1024)
    return cudaErrorInvalidValue;
  emu::set_max_dynamic_shared(reinterpret_cast<const void*>(entry), value);
  return cudaSuccess;
}

// ---------------------------------------------------------------------------- cuBLAS
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 };
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 };
struct cublasContext;
using cublasHandle_t = cublasContext*;

cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes);
const char* cublasGetStatusString(cublasStatus_t status);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long stride_a, const float* B, int ldb,
                                         long long stride_b, const float* beta, float* C, int ldc,
                                         long long stride_c, int batch);
// The mixed-precision GEMM, for float32 and bfloat16 (CUDA_R_16BF) operands and results,
// accumulated in float32 (CUBLAS_COMPUTE_32F; the emulator sums in double and rounds once).
enum cudaDataType { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType a_type,
                                          int lda, long long stride_a, const void* B,
                                          cudaDataType b_type, int ldb, long long stride_b,
                                          const void* beta, void* C, cudaDataType c_type, int ldc,
                                          long long stride_c, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t algo);
