// The attention maps train_vision draws for a ViT at the end: where the class token looks in
// the last block, per head, laid over the test image (the figure of the seed lectures).
#pragma once

#include <fmt/format.h>

#include <string>
#include <vector>

#include "loom.h"

namespace loom::vision_example {

// The class token's attention to the N patches in the last block, [heads, N] -> a grid of
// patches, upsampled and laid over the image. One PNG per image, <dir>/attention_<i>.png, for
// the first `count` test images: the image with its class, then one panel per head.
inline void draw_attention_maps(models::ViT& vit, const data::FashionMNIST& test, int64_t count,
                                Device device, const std::string& dir) {
  nn::EvalGuard eval(vit);
  const int64_t side = vit.config().image_size / vit.config().patch_size;
  const int64_t scale = 8;
  const float black = test.black_value();
  const float white = data::normalize_fashion_mnist_pixel(255);
  for (int64_t i = 0; i < count && i < test.size(); ++i) {
    std::vector<Tensor> attentions;
    vit.forward(test.images(i, 1).to(device), &attentions);
    const Tensor last = attentions.back().to(Device::CPU);  // (1, heads, 1+N, 1+N)
    const int64_t heads = last.size(1);
    const Tensor cls_row = last.narrow(2, 0, 1).narrow(3, 1, side * side);       // (1, h, 1, N)
    const Tensor image = test.images(i, 1).reshape({test.rows(), test.cols()});  // normalised
    const data::Image base = data::resize_nearest(data::to_rgb(data::to_image(image, black, white)),
                                                  test.cols() * scale, test.rows() * scale);
    std::vector<data::Image> panels{base};
    for (int64_t h = 0; h < heads; ++h) {
      const Tensor grid = cls_row.narrow(1, h, 1).reshape({side, side});
      const data::Image heat = data::resize_nearest(data::heatmap(grid, 0.0f, max(grid).item()),
                                                    base.width, base.height);
      panels.push_back(data::blend(base, heat, 0.6f));
      data::draw_text(panels.back(), 4, 4, fmt::format("head {}", h), {255, 255, 255});
    }
    data::draw_text(panels.front(), 4, 4,
                    data::fashion_mnist_classes()[static_cast<size_t>(test.label_vector()[i])],
                    {255, 255, 255});
    data::write_png(data::tile(panels, heads + 1), fmt::format("{}/attention_{}.png", dir, i));
  }
}

}  // namespace loom::vision_example
