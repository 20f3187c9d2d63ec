// Linear: y = x W^T + b, PyTorch's layout (weight [out_features, in_features]).
#pragma once

#include "nn/activation.h"
#include "nn/module.h"

namespace loom::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);

  // x [..., in_features] -> [..., out_features]
  Tensor forward(const Tensor& x) const;
  // activate(forward(x), act) as one op (linear_activation, autograd/ops.h): in inference one
  // GEMM that applies act as it writes its output; in training the GEMM without the bias, then
  // act(product + bias) (bias_gelu etc.; on the CPU written by the same GEMM as it finishes
  // each band of rows) (nn::feed_forward).
  Tensor forward_activation(const Tensor& x, Activation activation) const;
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
