// Linear: y = x W^T + b, PyTorch's layout (weight [out_features, in_features]).
#pragma once

#include "nn/module.h"

namespace loom::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);

  // x [..., in_features] -> [..., out_features]
  Tensor forward(const Tensor& x) const;
  // x W^T without the bias (Megatron-LM's skip_bias_add), for a caller that adds the bias fused
  // into the op after it: activate(forward_skip_bias(x), act, bias) is act(forward(x)) in one
  // pass fewer (nn::feed_forward).
  Tensor forward_skip_bias(const Tensor& x) const;
  std::string extra_repr() const override;
  // PyTorch's default: weight and bias U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform_, a=sqrt(5)).
  void reset_parameters();

  int64_t in_features, out_features;
  Tensor weight;  // [out_features, in_features]
  Tensor bias;    // [out_features], undefined when built with bias = false

 private:
  void check_input(const Tensor& x) const;
};

}  // namespace loom::nn
