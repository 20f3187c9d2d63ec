// The optimizer kernels (optimizer.h): Backend's checks, then the CPU loops.
#include <algorithm>
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

namespace {
// The tensors of xs that an in-place multi-tensor kernel writes: each float32, contiguous and on
// `device` (else an error naming the op and the tensor's index), and not empty.
std::vector<Tensor> multi_outputs(Device device, const char* op, std::span<Tensor> xs) {
  const Contract c{device, op};
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
  return outputs;
}
}  // namespace

void Backend::scale_multi(std::span<Tensor> xs, float alpha) {
  std::vector<Tensor> outputs = multi_outputs(device_, "scale_multi", xs);
  if (!outputs.empty())
    run(cpu::scale_multi, LOOM_CUDA_IMPL(cuda::scale_multi), std::span<Tensor>(outputs), alpha);
}

void Backend::zero_multi(std::span<Tensor> xs) {
  std::vector<Tensor> outputs = multi_outputs(device_, "zero_multi", xs);
  if (!outputs.empty())
    run(cpu::zero_multi, LOOM_CUDA_IMPL(cuda::zero_multi), std::span<Tensor>(outputs));
}

// ---------------------------------------------------------------------------- the CPU
namespace {

// One Adam / AdamW step (Kingma & Ba 2015; Loshchilov & Hutter 2019 for the decoupled weight
// decay) on elements [begin, end) of a contiguous float32 parameter, in place, in the same
// operation order as torch.optim.Adam(W) (non-foreach path):
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps;   param -= lr / (1 - beta1^t) * m / denom.
// Each element's update reads only its own four values, so how a tensor (or a list of them) is
// cut among threads changes no bit.
class AdamUpdate {
 public:
  explicit AdamUpdate(const AdamArgs& args)
      : b1_(args.beta1), b2_(args.beta2), eps_(args.eps), step_size_(args.lr / args.bias1),
        inv_sqrt_bias2_(1.0f / std::sqrt(args.bias2)),
        // Coupled (Adam) decay adds wd * param to the gradient; decoupled (AdamW) shrinks the
        // parameter directly. Exactly one of the two factors is active.
        coupled_(args.decoupled ? 0.0f : args.weight_decay),
        shrink_(args.decoupled ? 1.0f - args.lr * args.weight_decay : 1.0f) {}

  void operator()(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, int64_t begin,
                  int64_t end) const {
    float* p = param.data_ptr<float>();
    const float* g = grad.data_ptr<float>();
    float* mp = m.data_ptr<float>();
    float* vp = v.data_ptr<float>();
    const float b1 = b1_, b2 = b2_, eps = eps_, step_size = step_size_;
    const float inv_sqrt_bias2 = inv_sqrt_bias2_, coupled = coupled_, shrink = shrink_;
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
      const float gi = g[i] + coupled * p[i];
      const float mi = b1 * mp[i] + (1.0f - b1) * gi;
      const float vi = b2 * vp[i] + (1.0f - b2) * gi * gi;
      mp[i] = mi;
      vp[i] = vi;
      p[i] = p[i] * shrink - step_size * mi / (std::sqrt(vi) * inv_sqrt_bias2 + eps);
    }
  }

 private:
  float b1_, b2_, eps_, step_size_, inv_sqrt_bias2_, coupled_, shrink_;
};

// The element counts of a list of tensors, for parallel_for_items.
template <class T>
std::vector<int64_t> sizes_of(std::span<T> xs) {
  std::vector<int64_t> sizes(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) sizes[i] = xs[i].numel();
  return sizes;
}

}  // namespace

void cpu::adam_step(const AdamArgs& args, Tensor& param, const Tensor& grad, Tensor& m, Tensor& v) {
  const AdamUpdate update(args);
  cpu::parallel_for(0, param.numel(), cpu::kGrainCheap,
                    [&](int64_t b, int64_t e) { update(param, grad, m, v, b, e); });
}

// Every tensor's elements in one parallel loop (a model's parameters, a hundred and more, in
// one region rather than one each): the numbers are those of one adam_step per tensor.
void cpu::adam_step_multi(const AdamArgs& args, std::span<Tensor> params,
                          std::span<const Tensor> grads, std::span<Tensor> ms,
                          std::span<Tensor> vs) {
  const AdamUpdate update(args);
  const std::vector<int64_t> sizes = sizes_of(params);
  cpu::parallel_for_items(sizes, cpu::kGrainCheap, [&](size_t i, int64_t b, int64_t e) {
    update(params[i], grads[i], ms[i], vs[i], b, e);
  });
}

// ---------------------------------------------------------------------------- clip_grad_norm
// The sum of the squares of every element of every tensor, in double (a float's square is exact
// in a double). Each tensor is cut into blocks of kSquaresBlock elements; a block's squares are
// added into 16 running sums, element j into sum j % 16 (four independent vectors of doubles,
// where one running sum would wait on each addition), which are then added in order; the blocks'
// sums are added in the order of the tensors and the blocks. The blocks depend on the tensors'
// sizes alone, so the result is the same on any number of threads. (Before 2026-12-03 each
// tensor took a parallel region of its own and summed one element after another below 65,536
// elements: 1.1-1.6 ms a step for detr-fmnist's 1.7 million parameters.)
namespace {

constexpr int64_t kSquaresBlock = 4096, kSquaresLanes = 16;

double sum_of_squares(const float* x, int64_t n) {
  double lanes[kSquaresLanes] = {};
  int64_t i = 0;
  for (; i + kSquaresLanes <= n; i += kSquaresLanes)
#pragma omp simd
    for (int64_t j = 0; j < kSquaresLanes; ++j)
      lanes[j] += static_cast<double>(x[i + j]) * static_cast<double>(x[i + j]);
  for (int64_t j = 0; i + j < n; ++j)
    lanes[j] += static_cast<double>(x[i + j]) * static_cast<double>(x[i + j]);
  double sum = 0.0;
  for (double lane : lanes) sum += lane;
  return sum;
}

}  // namespace

void cpu::sum_of_squares_multi(std::span<const Tensor> xs, Tensor& out) {
  struct Block {
    const float* data;
    int64_t count;
  };
  std::vector<Block> blocks;
  for (const Tensor& x : xs)
    for (int64_t b = 0; b < x.numel(); b += kSquaresBlock)
      blocks.push_back({x.data_ptr<float>() + b, std::min(kSquaresBlock, x.numel() - b)});
  std::vector<double> sums(blocks.size());
  cpu::parallel_for(0, static_cast<int64_t>(blocks.size()), cpu::kGrainCheap / kSquaresBlock,
                    [&](int64_t first, int64_t last) {
                      for (int64_t b = first; b < last; ++b)
                        sums[b] = sum_of_squares(blocks[b].data, blocks[b].count);
                    });
  double total = 0.0;
  for (double sum : sums) total += sum;
  out.data_ptr<float>()[0] = static_cast<float>(total);
}

// Every tensor's elements in one parallel loop, as adam_step_multi.
void cpu::scale_multi(std::span<Tensor> xs, float alpha) {
  const std::vector<int64_t> sizes = sizes_of(xs);
  cpu::parallel_for_items(sizes, cpu::kGrainCheap, [&](size_t i, int64_t b, int64_t e) {
    float* p = xs[i].data_ptr<float>();
#pragma omp simd
    for (int64_t j = b; j < e; ++j) p[j] *= alpha;
  });
}

void cpu::zero_multi(std::span<Tensor> xs) {
  const std::vector<int64_t> sizes = sizes_of(xs);
  cpu::parallel_for_items(sizes, cpu::kGrainCheap, [&](size_t i, int64_t b, int64_t e) {
    float* p = xs[i].data_ptr<float>();
    std::fill(p + b, p + e, 0.0f);
  });
}

}  // namespace loom
