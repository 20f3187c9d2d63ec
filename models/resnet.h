// ResNet (He et al. 2016, "Deep Residual Learning for Image Recognition") as the trunk of a
// detector: torchvision's resnet50 layout with FrozenBatchNorm2d, without the pooling and the
// classifier, returning the last stage's features (DETR's backbone, Carion et al. 2020, sec. 3.2).
//
//   images (B, C, H, W) -> conv1 7x7 stride 2 -> bn1 -> ReLU -> max-pool 3x3 stride 2
//                       -> layer1 .. layer4: stacks of Bottleneck blocks, stride 1, 2, 2, 2
//                       -> C5 (B, 32 width, H/32, W/32)            (2048 channels for ResNet-50)
//
//   Bottleneck (He et al. 2016, fig. 5 right; torchvision's "v1.5": the stride on the 3x3):
//     x -> conv1 1x1 -> bn1 -> ReLU -> conv2 3x3 (stride) -> bn2 -> ReLU -> conv3 1x1 (4 planes)
//       -> bn3, + x (or downsample(x) = 1x1 conv (stride) + BN when the shape changes) -> ReLU
//
// Parameter names are torchvision's (conv1, bn1, layer1.0.conv1, ..., layer2.0.downsample.0,
// layer2.0.downsample.1, ...), so a torchvision or DETR state_dict loads name-for-name. Convs
// have no bias; every BatchNorm is a FrozenBatchNorm2d (eps 1e-5), whose tensors are buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/container.h"
#include "nn/conv2d.h"
#include "nn/frozen_batch_norm.h"
#include "nn/module.h"

namespace loom::models {

struct ResNetConfig {
  int64_t in_channels = 3;
  std::vector<int64_t> layers = {3, 4, 6, 3};  // Bottleneck blocks per stage (ResNet-50)
  int64_t width = 64;                          // planes of layer1; stage s has width * 2^s
  // Channels of the output: 4 * width * 8 (2048 for ResNet-50).
  int64_t out_channels() const { return width * 32; }
};

class Bottleneck : public nn::Module {
 public:
  Bottleneck(int64_t in_channels, int64_t planes, int64_t stride);
  // x (B, in, H, W) -> (B, 4 planes, H / stride, W / stride)
  Tensor forward(const Tensor& x) const;

  std::shared_ptr<nn::Conv2d> conv1, conv2, conv3;
  std::shared_ptr<nn::FrozenBatchNorm2d> bn1, bn2, bn3;
  std::shared_ptr<nn::Sequential> downsample;  // null when the identity fits
};

class ResNet : public nn::Module {
 public:
  explicit ResNet(const ResNetConfig& config);
  // images (B, in_channels, H, W) -> layer4's features (B, out_channels, ~H/32, ~W/32)
  Tensor forward(const Tensor& images) const;

  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::FrozenBatchNorm2d> bn1;
  std::vector<std::shared_ptr<nn::ModuleList<Bottleneck>>> stages;  // layer1 .. layer4

 private:
  ResNetConfig config_;
};

}  // namespace loom::models
