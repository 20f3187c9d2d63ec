// FrozenBatchNorm2d: BatchNorm2d whose statistics and affine parameters are fixed, as
// torchvision.ops.FrozenBatchNorm2d and facebookresearch/detr's models/backbone.py use for a
// pretrained ResNet (batch statistics of small detection batches would be too noisy to train,
// Carion et al. 2020, sec. 4). Its four tensors are buffers, never trained, with PyTorch's
// names so a state_dict loads name-for-name:
//   weight, bias, running_mean, running_var  [C]
//   y = (x - running_mean) / sqrt(running_var + eps) * weight + bias,  eps 1e-5 (DETR's)
// PyTorch's BatchNorm2d checkpoints carry num_batches_tracked, which this layer ignores on load.
#pragma once

#include "nn/module.h"

namespace loom::nn {

class FrozenBatchNorm2d : public Module {
 public:
  explicit FrozenBatchNorm2d(int64_t num_features, float eps = 1e-5f);

  // x [N, C, H, W] -> same shape; no statistics are computed or updated, in training or not.
  Tensor forward(const Tensor& x) const;
  std::string extra_repr() const override;

  int64_t num_features;
  float eps;
  Tensor weight, bias, running_mean, running_var;  // [C] buffers: ones, zeros, zeros, ones
};

}  // namespace loom::nn
