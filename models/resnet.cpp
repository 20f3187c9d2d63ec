// ResNet trunk (He et al. 2016) in torchvision's layout, with frozen batch norm; see resnet.h.
#include "models/resnet.h"

#include <string>

#include "autograd/ops.h"
#include "core/error.h"
#include "nn/functional.h"

namespace loom::models {

Bottleneck::Bottleneck(int64_t in_channels, int64_t planes, int64_t stride) {
  conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(in_channels, planes, 1, 1, 0,
                                                                /*bias=*/false));
  bn1 = register_module("bn1", std::make_shared<nn::FrozenBatchNorm2d>(planes));
  conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(planes, planes, 3, stride, 1,
                                                                /*bias=*/false));
  bn2 = register_module("bn2", std::make_shared<nn::FrozenBatchNorm2d>(planes));
  conv3 = register_module("conv3", std::make_shared<nn::Conv2d>(planes, 4 * planes, 1, 1, 0,
                                                                /*bias=*/false));
  bn3 = register_module("bn3", std::make_shared<nn::FrozenBatchNorm2d>(4 * planes));
  if (stride != 1 || in_channels != 4 * planes) {  // the projection shortcut (He et al., eq. 2)
    downsample = register_module("downsample", std::make_shared<nn::Sequential>());
    downsample->push_back(
        std::make_shared<nn::Conv2d>(in_channels, 4 * planes, 1, stride, 0, /*bias=*/false));
    downsample->push_back(std::make_shared<nn::FrozenBatchNorm2d>(4 * planes));
  }
}

Tensor Bottleneck::forward(const Tensor& x) const {
  // x (B, in, H, W) -> (B, 4 planes, H', W'); y = relu(F(x) + shortcut(x)), He et al. eq. 1.
  Tensor y = relu(bn1->forward(conv1->forward(x)));  // (B, planes, H, W)
  y = relu(bn2->forward(conv2->forward(y)));         // (B, planes, H', W')
  y = bn3->forward(conv3->forward(y));               // (B, 4 planes, H', W')
  return relu(y + (downsample ? downsample->forward(x) : x));
}

ResNet::ResNet(const ResNetConfig& config) : config_(config) {
  LOOM_CHECK(config.in_channels > 0 && config.width > 0 && !config.layers.empty() &&
                 config.layers.size() == 4,
             "ResNet: expected in_channels > 0, width > 0 and 4 stages, got in_channels {}, "
             "width {}, {} stages",
             config.in_channels, config.width, config.layers.size());
  conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(config.in_channels, config.width, 7,
                                                                2, 3, /*bias=*/false));
  bn1 = register_module("bn1", std::make_shared<nn::FrozenBatchNorm2d>(config.width));
  int64_t channels = config.width;
  for (size_t s = 0; s < config.layers.size(); ++s) {
    LOOM_CHECK(config.layers[s] > 0, "ResNet: stage {} has {} blocks", s + 1, config.layers[s]);
    const int64_t planes = config.width << s, stride = s == 0 ? 1 : 2;
    auto stage = register_module("layer" + std::to_string(s + 1),
                                 std::make_shared<nn::ModuleList<Bottleneck>>());
    for (int64_t b = 0; b < config.layers[s]; ++b) {
      stage->push_back(std::make_shared<Bottleneck>(channels, planes, b == 0 ? stride : 1));
      channels = 4 * planes;
    }
    stages.push_back(stage);
  }
}

Tensor ResNet::forward(const Tensor& images) const {
  // images (B, C, H, W) -> (B, 32 width, H/32, W/32) (sizes rounded up at each stride)
  LOOM_CHECK(images.defined() && images.dim() == 4 && images.size(1) == config_.in_channels,
             "ResNet: expected images [B, {}, H, W], got {}", config_.in_channels,
             images.defined() ? shape_str(images.shape()) : "undefined");
  Tensor x = relu(bn1->forward(conv1->forward(images)));  // (B, width, H/2, W/2)
  x = nn::functional::max_pool2d(x, 3, 2, 1);             // (B, width, H/4, W/4)
  for (const auto& stage : stages)
    for (const auto& block : *stage) x = block->forward(x);
  return x;
}

}  // namespace loom::models
