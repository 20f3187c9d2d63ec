// The optimizer kernels (optimizer.h): Backend's checks, then the CPU loops.
#include <cmath>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "backends/contract.h"
#include "backends/cpu/loops.h"
#include "backends/optimizer/optimizer.h"
#include "core/error.h"

namespace loom {

// ---------------------------------------------------------------------------- the public methods
void Backend::adam_step(const AdamArgs& args, Tensor& param, const Tensor& grad, Tensor& m,
                        Tensor& v) {
  const Contract c{device_, "adam_step"};
  const int64_t n = param.numel();
  c.output(param, DType::Float32, n, "param");
  c.input(grad, DType::Float32, n, "grad");
  c.output(m, DType::Float32, n, "exp_avg");
  c.output(v, DType::Float32, n, "exp_avg_sq");
  LOOM_CHECK(args.bias1 > 0.0f && args.bias2 > 0.0f,
             "adam_step: bias corrections must be positive (1 - beta^step), got {} and {}",
             args.bias1, args.bias2);
  if (n > 0)
    run(cpu::adam_step, LOOM_CUDA_IMPL(cuda::adam_step), args, param, contiguous(grad), m, v);
}

void Backend::adam_step_multi(const AdamArgs& args, std::span<Tensor> params,
                              std::span<const Tensor> grads, std::span<Tensor> ms,
                              std::span<Tensor> vs) {
  const Contract c{device_, "adam_step_multi"};
  const size_t count = params.size();
  LOOM_CHECK(grads.size() == count && ms.size() == count && vs.size() == count,
             "adam_step_multi: the lists differ in length: {} params, {} grads, {} exp_avg, {} "
             "exp_avg_sq",
             count, grads.size(), ms.size(), vs.size());
  LOOM_CHECK(args.bias1 > 0.0f && args.bias2 > 0.0f,
             "adam_step_multi: bias corrections must be positive (1 - beta^step), got {} and {}",
             args.bias1, args.bias2);
  // adam_step's checks on each tensor, every one before any update; the kernel sees the
  // non-empty tensors only, with contiguous gradients.
  std::vector<Tensor> p, g, m, v;
  p.reserve(count), g.reserve(count), m.reserve(count), v.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    try {
      c.on_device(params[i], "param");
      const int64_t n = params[i].numel();
      c.output(params[i], DType::Float32, n, "param");
      c.dtype(grads[i], DType::Float32, "grad");
      c.same_shape(grads[i], params[i], "grad");
      c.output(ms[i], DType::Float32, n, "exp_avg");
      c.output(vs[i], DType::Float32, n, "exp_avg_sq");
    } catch (const Error& e) {
      LOOM_FAIL("{} (tensor {} of {})", e.what(), i, count);
    }
    if (params[i].numel() == 0) continue;
    p.push_back(params[i]);
    g.push_back(contiguous(grads[i]));
    m.push_back(ms[i]);
    v.push_back(vs[i]);
  }
  if (!p.empty())
    run(cpu::adam_step_multi, LOOM_CUDA_IMPL(cuda::adam_step_multi), args, std::span<Tensor>(p),
        std::span<const Tensor>(g), std::span<Tensor>(m), std::span<Tensor>(v));
}

void Backend::sum_of_squares_multi(std::span<const Tensor> xs, Tensor& out) {
  const Contract c{device_, "sum_of_squares_multi"};
  c.output(out, DType::Float32, 1, "out");
  std::vector<Tensor> inputs;
  inputs.reserve(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    try {
      c.dtype(xs[i], DType::Float32, "x");
    } catch (const Error& e) {
      LOOM_FAIL("{} (tensor {} of {})", e.what(), i, xs.size());
    }
    if (xs[i].numel() > 0) inputs.push_back(contiguous(xs[i]));
  }
  if (inputs.empty()) {
    fill(out, 0.0);
  } else {
    run(cpu::sum_of_squares_multi, LOOM_CUDA_IMPL(cuda::sum_of_squares_multi),
        std::span<const Tensor>(inputs), out);
  }
}

void Backend::scale_multi(std::span<Tensor> xs, float alpha) {
  const Contract c{device_, "scale_multi"};
  std::vector<Tensor> outputs;
  outputs.reserve(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    try {
      c.on_device(xs[i], "x");
      c.output(xs[i], DType::Float32, xs[i].numel(), "x");
    } catch (const Error& e) {
      LOOM_FAIL("{} (tensor {} of {})", e.what(), i, xs.size());
    }
    if (xs[i].numel() > 0) outputs.push_back(xs[i]);
  }
  if (!outputs.empty())
    run(cpu::scale_multi, LOOM_CUDA_IMPL(cuda::scale_multi), std::span<Tensor>(outputs), alpha);
}

// ---------------------------------------------------------------------------- the CPU
// One Adam / AdamW step (Kingma & Ba 2015; Loshchilov & Hutter 2019 for the decoupled weight
// decay) on a contiguous float32 parameter, in place, in the same operation order as
// torch.optim.Adam(W) (non-foreach path):
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps;   param -= lr / (1 - beta1^t) * m / denom.
void cpu::adam_step(const AdamArgs& args, Tensor& param, const Tensor& grad, Tensor& m, Tensor& v) {
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
void cpu::adam_step_multi(const AdamArgs& args, std::span<Tensor> params,
                          std::span<const Tensor> grads, std::span<Tensor> ms,
                          std::span<Tensor> vs) {
  for (size_t i = 0; i < params.size(); ++i)
    adam_step(args, params[i], grads[i], ms[i], vs[i]);
}

// ---------------------------------------------------------------------------- clip_grad_norm
// One tensor after the other (the lists save launches on CUDA only). The sum of squares runs in
// double: the order of the additions, split over the threads, changes only bits far below
// float32's.
void cpu::sum_of_squares_multi(std::span<const Tensor> xs, Tensor& out) {
  double total = 0.0;
  for (const Tensor& x : xs) {
    const float* p = x.data_ptr<float>();
    const int64_t n = x.numel();
    double sum = 0.0;
#pragma omp parallel for simd reduction(+ : sum) schedule(static) if (n >= 4 * cpu::kGrainCheap)
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(p[i]) * p[i];
    total += sum;
  }
  out.data_ptr<float>()[0] = static_cast<float>(total);
}

void cpu::scale_multi(std::span<Tensor> xs, float alpha) {
  for (Tensor& x : xs) {
    float* p = x.data_ptr<float>();
    cpu::parallel_for(0, x.numel(), cpu::kGrainCheap, [=](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) p[i] *= alpha;
    });
  }
}

}  // namespace loom
