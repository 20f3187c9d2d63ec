// The Adam(W) step on the GPU (optimizer.h), on one tensor or on many per launch.
#include <cmath>
#include <cstdint>
#include <vector>

#include "backends/cuda/device.h"
#include "backends/cuda/device_utils.cuh"
#include "backends/optimizer/multi_tensor.cuh"
#include "backends/optimizer/optimizer.h"

namespace loom::cuda {

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

namespace {

// Kingma & Ba 2015, Algorithm 1; decoupled weight decay from Loshchilov & Hutter 2019. The
// operation order is torch.optim.Adam(W)'s (and the CPU backend's):
//   param = param * shrink - lr / bias1 * m / (sqrt(v) / sqrt(bias2) + eps).
// param, m and v are read and written once each, where the unfused update would make about ten
// passes over memory.
struct AdamConstants {
  float beta1, beta2, eps;
  float coupled;         // weight decay added to the gradient (Adam), else 0
  float shrink;          // 1 - lr * weight decay (AdamW), else 1
  float step_size;       // lr / bias1
  float inv_sqrt_bias2;  // 1 / sqrt(bias2)
};

AdamConstants adam_constants(const AdamArgs& args) {
  AdamConstants k{};
  k.beta1 = args.beta1;
  k.beta2 = args.beta2;
  k.eps = args.eps;
  k.coupled = args.decoupled ? 0.0f : args.weight_decay;
  k.shrink = args.decoupled ? 1.0f - args.lr * args.weight_decay : 1.0f;
  k.step_size = args.lr / args.bias1;
  k.inv_sqrt_bias2 = 1.0f / std::sqrt(args.bias2);
  return k;
}

// The update of one element, the one formula of both kernels below. Every rounding is spelled
// out (the _rn intrinsics are never fused further by the compiler), so a multi-tensor step,
// vectorised or not, is bit-identical to one launch per tensor: g, m, v and the denominator
// are each one fused multiply-add, the rest separately rounded operations.
__device__ __forceinline__ void adam_update(const AdamConstants& k, float& p, float grad,
                                            float& m, float& v) {
  const float g = __fmaf_rn(k.coupled, p, grad);
  m = __fmaf_rn(k.beta1, m, __fmul_rn(1.0f - k.beta1, g));
  v = __fmaf_rn(k.beta2, v, __fmul_rn(__fmul_rn(1.0f - k.beta2, g), g));
  const float denom = __fmaf_rn(__fsqrt_rn(v), k.inv_sqrt_bias2, k.eps);
  p = __fsub_rn(__fmul_rn(p, k.shrink), __fdiv_rn(__fmul_rn(k.step_size, m), denom));
}

__device__ __forceinline__ void adam_element(const AdamConstants& k, int64_t i, float* param,
                                             const float* grad, float* m, float* v) {
  float p = param[i], mi = m[i], vi = v[i];
  adam_update(k, p, grad[i], mi, vi);
  m[i] = mi;
  v[i] = vi;
  param[i] = p;
}

// Thread mapping: one thread per parameter element, grid-stride.
__global__ void adam_kernel(AdamConstants k, int64_t n, float* param, const float* grad, float* m,
                            float* v) {
  LOOM_GRID_STRIDE_LOOP(i, n) { adam_element(k, i, param, grad, m, v); }
}

// The multi-tensor step (multi_tensor.cuh): one block per chunk of kMultiChunk elements of a
// tensor, up to kAdamMultiTensors tensors per launch; threads stride through the chunk.
struct AdamTable {
  AdamConstants k;
  ChunkMap<kAdamMultiTensors> map;
  float* param[kAdamMultiTensors];
  const float* grad[kAdamMultiTensors];
  float* m[kAdamMultiTensors];
  float* v[kAdamMultiTensors];
};
static_assert(sizeof(AdamTable) <= 4096, "the table must fit in 4 KB of kernel parameters");

// Four floats moved as one 16-byte load or store.
struct alignas(16) Float4 {
  float x[4];
};

__global__ void __launch_bounds__(kMultiThreads)
    adam_multi_kernel(const LOOM_GRID_CONSTANT AdamTable table) {
  const Chunk c = table.map.chunk(blockIdx.x);
  float* param = table.param[c.t];
  const float* grad = table.grad[c.t];
  float* m = table.m[c.t];
  float* v = table.v[c.t];
  int64_t scalar_from = c.begin;
  // Four elements per thread and step where all four tensors are 16-byte aligned (chunks begin
  // at multiples of 4 elements); the tail of the last chunk, and tensors that are views at an
  // odd offset, element by element.
  const uintptr_t addresses = reinterpret_cast<uintptr_t>(param) |
                              reinterpret_cast<uintptr_t>(grad) | reinterpret_cast<uintptr_t>(m) |
                              reinterpret_cast<uintptr_t>(v);
  if (addresses % sizeof(Float4) == 0) {
    scalar_from = c.begin + (c.end - c.begin) / 4 * 4;
    for (int64_t i = c.begin + 4 * threadIdx.x; i < scalar_from; i += 4 * blockDim.x) {
      Float4 p = *reinterpret_cast<const Float4*>(param + i);
      const Float4 g = *reinterpret_cast<const Float4*>(grad + i);
      Float4 mi = *reinterpret_cast<const Float4*>(m + i);
      Float4 vi = *reinterpret_cast<const Float4*>(v + i);
#pragma unroll
      for (int j = 0; j < 4; ++j) adam_update(table.k, p.x[j], g.x[j], mi.x[j], vi.x[j]);
      *reinterpret_cast<Float4*>(m + i) = mi;
      *reinterpret_cast<Float4*>(v + i) = vi;
      *reinterpret_cast<Float4*>(param + i) = p;
    }
  }
  for (int64_t i = scalar_from + threadIdx.x; i < c.end; i += blockDim.x)
    adam_element(table.k, i, param, grad, m, v);
}

}  // namespace

// ---------------------------------------------------------------------------- launchers
void launch_adam(const AdamArgs& args, int64_t n, float* param, const float* grad, float* m,
                 float* v, cudaStream_t stream) {
  adam_kernel<<<grid_for(n), kBlock, 0, stream>>>(adam_constants(args), n, param, grad, m, v);
  LOOM_CUDA_CHECK_LAUNCH();
}

// launch_adam on each tensor, bit for bit, in ceil(count / kAdamMultiTensors) launches.
void launch_adam_multi(const AdamArgs& args, const AdamTensor* tensors, size_t count,
                       cudaStream_t stream) {
  AdamTable table{};
  table.k = adam_constants(args);
  auto launch = [&] {
    if (table.map.count == 0) return;
    adam_multi_kernel<<<table.map.blocks(), kMultiThreads, 0, stream>>>(table);
    LOOM_CUDA_CHECK_LAUNCH();
    table.map.clear();
  };
  for (size_t i = 0; i < count; ++i) {
    const AdamTensor& x = tensors[i];
    if (table.map.full(x.n)) launch();
    const int t = table.map.add(x.n);
    table.param[t] = x.param;
    table.grad[t] = x.grad;
    table.m[t] = x.m;
    table.v[t] = x.v;
  }
  launch();
}

// ---------------------------------------------------------------------------- the kernels
void adam_step(const AdamArgs& args, Tensor& param, const Tensor& grad, Tensor& m, Tensor& v) {
  launch_adam(args, param.numel(), param.data_ptr<float>(), grad.data_ptr<float>(),
              m.data_ptr<float>(), v.data_ptr<float>(), stream());
}

void adam_step_multi(const AdamArgs& args, std::span<Tensor> params,
                     std::span<const Tensor> grads, std::span<Tensor> ms, std::span<Tensor> vs) {
  std::vector<AdamTensor> tensors(params.size());
  for (size_t i = 0; i < params.size(); ++i)
    tensors[i] = {params[i].data_ptr<float>(), grads[i].data_ptr<float>(),
                  ms[i].data_ptr<float>(), vs[i].data_ptr<float>(), params[i].numel()};
  launch_adam_multi(args, tensors.data(), tensors.size(), stream());
}

}  // namespace loom::cuda
