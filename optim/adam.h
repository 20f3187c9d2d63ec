// Adam (Kingma & Ba 2015, Algorithm 1) and AdamW (Loshchilov & Hutter 2019, Algorithm 2), as
// torch.optim.Adam / AdamW compute them. For each parameter, at its step t:
//
//   Adam:   g = grad + weight_decay * param     (L2 penalty, which Adam rescales per element)
//   AdamW:  param *= 1 - lr * weight_decay      (decay decoupled from the adaptive step)
//   m = beta1 * m + (1 - beta1) * g             first-moment estimate
//   v = beta2 * v + (1 - beta2) * g^2           second raw-moment estimate
//   param -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
//
// The update is one fused kernel of the parameter's device (Backend::adam_step), so it runs
// wherever the parameters live. A parameter group whose parameters all sit on one device,
// contiguous, is updated in one Backend::adam_step_multi call (per step count, when some
// parameters skipped steps): on CUDA a handful of launches for the whole group instead of one
// per parameter, with the same numbers.
#pragma once

#include "optim/optimizer.h"

namespace loom {
struct AdamArgs;  // backends/optimizer/optimizer.h
}  // namespace loom

namespace loom::optim {

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, float lr, float beta1 = 0.9f, float beta2 = 0.999f,
       float eps = 1e-8f, float weight_decay = 0.0f);
  // Each group brings its own lr and weight_decay.
  explicit Adam(std::vector<ParamGroup> groups, float beta1 = 0.9f, float beta2 = 0.999f,
                float eps = 1e-8f);

  float beta1() const { return beta1_; }
  float beta2() const { return beta2_; }
  float eps() const { return eps_; }

 protected:
  Adam(const char* name, std::vector<ParamGroup> groups, float beta1, float beta2, float eps,
       bool decoupled);

 private:
  LOOM_OPTIMIZER_OVERRIDES;
  void update_group(const ParamGroup& group, std::span<Tensor> params,
                    std::span<const Tensor> grads, std::span<ParamState*> states) override;
  // The kernel arguments of a step of `group` on parameters at step `step`.
  AdamArgs args(const ParamGroup& group, int64_t step) const;
  // exp_avg and exp_avg_sq, zeros on the parameter's device, at a parameter's first update.
  static void init_state(const Tensor& param, ParamState& state);
  float beta1_, beta2_, eps_;
  bool decoupled_;  // AdamW's weight decay
};

// Adam with decoupled weight decay: the default for training transformers (BERT, GPT).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, float lr, float beta1 = 0.9f, float beta2 = 0.999f,
        float eps = 1e-8f, float weight_decay = 0.01f);
  explicit AdamW(std::vector<ParamGroup> groups, float beta1 = 0.9f, float beta2 = 0.999f,
                 float eps = 1e-8f);
};

}  // namespace loom::optim
