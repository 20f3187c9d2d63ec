// One Adam / AdamW step (Kingma & Ba 2015; Loshchilov & Hutter 2019 for the decoupled weight
// decay) on a contiguous float32 parameter, in place, in the same operation order as
// torch.optim.Adam(W) (non-foreach path):
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps;   param -= lr / (1 - beta1^t) * m / denom.
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/loops.h"

namespace loom {

void CpuBackend::adam_step_impl(const AdamArgs& args, Tensor& param, const Tensor& grad, Tensor& m,
                                Tensor& v) {
  const int64_t n = param.numel();
  float* p = param.data_ptr<float>();
  const float* g = grad.data_ptr<float>();
  float* mp = m.data_ptr<float>();
  float* vp = v.data_ptr<float>();
  const float b1 = args.beta1, b2 = args.beta2, eps = args.eps;
  const float step_size = args.lr / args.bias1;
  const float inv_sqrt_bias2 = 1.0f / std::sqrt(args.bias2);
  // Coupled (Adam) decay adds wd * param to the gradient; decoupled (AdamW) shrinks the
  // parameter directly. Exactly one of the two factors is active.
  const float coupled = args.decoupled ? 0.0f : args.weight_decay;
  const float shrink = args.decoupled ? 1.0f - args.lr * args.weight_decay : 1.0f;
  cpu::parallel_for(0, n, cpu::kGrainCheap, [=](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) {
      const float gi = g[i] + coupled * p[i];
      const float mi = b1 * mp[i] + (1.0f - b1) * gi;
      const float vi = b2 * vp[i] + (1.0f - b2) * gi * gi;
      mp[i] = mi;
      vp[i] = vi;
      p[i] = p[i] * shrink - step_size * mi / (std::sqrt(vi) * inv_sqrt_bias2 + eps);
    }
  });
}

// One tensor after the other, each with the parallel loop above: the numbers are those of one
// adam_step per tensor by construction.
void CpuBackend::adam_step_multi_impl(const AdamArgs& args, std::span<Tensor> params,
                                      std::span<const Tensor> grads, std::span<Tensor> ms,
                                      std::span<Tensor> vs) {
  for (size_t i = 0; i < params.size(); ++i)
    adam_step_impl(args, params[i], grads[i], ms[i], vs[i]);
}

}  // namespace loom
