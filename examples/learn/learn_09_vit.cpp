// Chapter 09 (docs/learn/09-vit.md): the Vision Transformer.
// Cuts a 28x28 image into 16 patches of 7x7, checks that ViT's patch embedding (a Conv2d with
// kernel = stride = patch) is eq. 1's "flatten each patch, multiply by E", follows the shapes
// through the model, and draws the image beside its patches.
//   learn_09_vit [out.png]   (default learn_09_vit.png)
#include <cmath>
#include <cstdio>
#include <string>

#include "examples/learn/learn.h"
#include "loom.h"
using namespace loom;

int main(int argc, char** argv) {
  const std::string out = learn::picture_path(
      argc, argv,
      "Chapter 09 (docs/learn/09-vit.md): patches as tokens, and the shapes through ViT.");
  manual_seed(0);
  const models::ViTConfig config = models::ViTConfig::preset("vit-tiny-fmnist");
  models::ViT vit(config);
  vit.eval();
  const int64_t p = config.patch_size, D = config.d_model, side = config.image_size / p;

  // A ring: pixel (y, x) is bright where its distance from the centre is close to 9.
  std::vector<float> pixels;
  for (int y = 0; y < 28; ++y)
    for (int x = 0; x < 28; ++x)
      pixels.push_back(std::exp(-std::pow(std::hypot(y - 13.5, x - 13.5) - 9.0, 2) / 4.0));
  const Tensor image = tensor(pixels, {1, 1, 28, 28});  // (B, C, H, W)

  // Eq. 1 by hand: x_p (B, N, P^2 C), patches row-major, each flattened (c, dy, dx).
  const Tensor x_p = image
                         .reshape({1, 1, side, p, side, p})            // (B, C, H/p, p, W/p, p)
                         .permute({0, 2, 4, 1, 3, 5})                  // (B, H/p, W/p, C, p, p)
                         .reshape({1, side * side, p * p});            // (B, N, P^2 C)
  const Tensor E = vit.patch_embed->proj->weight.reshape({D, p * p});  // (D, P^2 C)
  const Tensor by_hand = matmul(x_p, E.t()) + vit.patch_embed->proj->bias;  // (B, N, D)
  const Tensor by_conv = vit.patch_embed->forward(image);                   // (B, N, D)
  const float diff = (by_hand - by_conv).abs().max().item();
  std::printf("patches x_p %s  @ E^T %s  = %s; the Conv2d gives %s, max |diff| %.1e\n",
              shape_str(x_p.shape()).c_str(), shape_str(E.t().shape()).c_str(),
              shape_str(by_hand.shape()).c_str(), shape_str(by_conv.shape()).c_str(), diff);

  std::vector<Tensor> attentions;
  const Tensor logits = vit.forward(image, &attentions);
  std::printf("cls_token %s + patches -> tokens (1, %lld, %lld), + pos_embed %s\n",
              shape_str(vit.cls_token.shape()).c_str(), static_cast<long long>(1 + side * side),
              static_cast<long long>(D), shape_str(vit.pos_embed.shape()).c_str());
  std::printf("%zu blocks, attention of each (B, heads, 1 + N, 1 + N) = %s\n", attentions.size(),
              shape_str(attentions[0].shape()).c_str());
  std::printf("class token row -> head -> logits %s\n", shape_str(logits.shape()).c_str());
  std::printf("parameters: %lld (ViTConfig::num_parameters: %lld)\n",
              static_cast<long long>(vit.num_parameters()),
              static_cast<long long>(config.num_parameters()));

  // The image (scaled x4) and its 16 patches, in token order, 4 to a row.
  std::vector<data::Image> patches;
  for (int64_t i = 0; i < side * side; ++i)
    patches.push_back(data::resize_nearest(
        data::to_image(x_p.select(1, i).reshape({p, p}), 0.0f, 1.0f), 4 * p, 4 * p));
  const data::Image whole =
      data::resize_nearest(data::to_image(image.reshape({28, 28}), 0, 1), 112, 112);
  data::write_png(data::tile({whole, data::tile(patches, side, 4)}, 2, 16), out);
  std::printf("wrote %s\n", out.c_str());
  return diff < 1e-5f && logits.shape() == Shape{1, config.num_classes} ? 0 : 1;
}
