// Chapter 09 (docs/learn/09-vit.md): the Vision Transformer.
// Cuts a 28x28 image into 16 patches of 7x7, checks that ViT's patch embedding (a Conv2d with
// kernel = stride = patch) is eq. 1's "flatten each patch, multiply by E", follows the shapes
// through the model, and draws the image beside its patches. Then (with Fashion-MNIST
// installed) trains the ViT briefly and draws three pictures of what it learned: attention
// rollout over test images, the mean attention distance of every head, and the cosine
// similarity of the position embeddings.
//   learn_09_vit [out.png]   (default learn_09_vit.png; vit_rollout.png,
//                             vit_attention_distance.png and vit_position_embeddings.png beside it)
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "examples/learn/learn.h"
#include "loom.h"
using namespace loom;

namespace {

// The identity matrix (n, n).
Tensor identity(int64_t n) {
  std::vector<float> values(static_cast<size_t>(n * n), 0.0f);
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i * n + i)] = 1.0f;
  return tensor(values, {n, n});
}

// Attention rollout (Abnar & Zuidema 2020, eq. 1): the residual connection around each
// attention counts as attending to oneself, A' = (A + I) / 2 with A averaged over the heads,
// and the blocks compose by matrix products, rollout = A'_L ... A'_1. Row 0 of the rollout says
// how much of each input token flows into the class token's last representation.
//   attentions: per block (B, heads, 1 + N, 1 + N) -> (B, N), the class token's row over patches
Tensor attention_rollout(const std::vector<Tensor>& attentions) {
  const int64_t T = attentions[0].size(-1);
  Tensor rollout = identity(T);
  for (const Tensor& a : attentions) {
    const Tensor mixed = (a.mean(1) + identity(T)) * 0.5f;  // (B, T, T), rows still sum to 1
    rollout = matmul(mixed, rollout);                       // (B, T, T)
  }
  return rollout.select(1, 0).narrow(1, 1, T - 1);  // (B, N)
}

// The distance in pixels between the centres of the patches of a side x side grid of p x p
// patches, (N, N), patches in token order.
Tensor patch_distances(int64_t side, int64_t p) {
  std::vector<float> pixels;
  for (int64_t q = 0; q < side * side; ++q)
    for (int64_t k = 0; k < side * side; ++k)
      pixels.push_back(static_cast<float>(p) * std::hypot(float(q / side - k / side),
                                                         float(q % side - k % side)));
  return tensor(pixels, {side * side, side * side});
}

// The mean attention distance of every head (Dosovitskiy et al. 2021, fig. 7 right and appendix
// D.7): for a patch query, the distance in pixels to each patch key weighted by its attention
// (the class token left out, the patches' weights renormalised to sum to 1), averaged over the
// queries and the images. The "receptive field" of a head, as a CNN's grows with depth.
//   attentions: per block (B, heads, 1 + N, 1 + N); distance (N, N) -> (blocks, heads)
Tensor mean_attention_distance(const std::vector<Tensor>& attentions, const Tensor& distance) {
  const int64_t N = distance.size(0);
  std::vector<Tensor> blocks;
  for (const Tensor& a : attentions) {
    Tensor w = a.narrow(2, 1, N).narrow(3, 1, N);  // patch queries x patch keys (B, h, N, N)
    w = w / w.sum(-1, true);
    blocks.push_back((w * distance).sum(-1).mean({0, 2}));  // (h)
  }
  return stack(blocks, 0);  // (blocks, heads)
}

// Each head as a point (block, distance), for plot_lines: NaN between points keeps them apart.
data::Series head_points(const std::string& name, const Tensor& distance) {
  data::Series points{name, {}, {}};
  for (int64_t b = 0; b < distance.size(0); ++b)
    for (int64_t h = 0; h < distance.size(1); ++h) {
      points.x.insert(points.x.end(), {double(b), NAN});
      points.y.insert(points.y.end(), {distance.select(0, b).select(0, h).item(), NAN});
    }
  return points;
}

// Images (B, 1, H, W), normalised as the model reads them, each scaled to 112 x 112 above the
// same image lit by its rollout (B, side * side): viridis over the patches, min to max.
data::Image rollout_picture(const Tensor& images, const Tensor& rollout, int64_t side) {
  const float black = data::normalize_fashion_mnist_pixel(0),
              white = data::normalize_fashion_mnist_pixel(255);
  std::vector<data::Image> plain, lit;
  for (int64_t i = 0; i < images.size(0); ++i) {
    plain.push_back(data::resize_nearest(
        data::to_image(images.select(0, i).select(0, 0), black, white), 112, 112));
    const Tensor map = rollout.select(0, i).reshape({side, side});
    const data::Image heat = data::heatmap(map, map.min().item(), map.max().item());
    lit.push_back(data::blend(plain.back(), data::resize_nearest(heat, 112, 112), 0.6f));
  }
  plain.insert(plain.end(), lit.begin(), lit.end());
  return data::tile(plain, images.size(0), 6);
}

// The cosine similarity of the patches' position embeddings, pos_embed (1, 1 + N, D) -> (N, N)
// (the class token's left out).
Tensor position_similarity(const Tensor& pos_embed) {
  const Tensor e = nn::functional::normalize(
      pos_embed.select(0, 0).narrow(0, 1, pos_embed.size(1) - 1), 2.0f, 1);  // (N, D), unit
  return matmul(e, e.t());                                                     // (N, N)
}

// Fig. 7 (center): tile (r, c) shows row r * side + c of the similarity, the similarity of
// patch (r, c)'s position embedding with every patch's, in the patches' layout, on [-1, 1].
data::Image similarity_tiles(const Tensor& similarity, int64_t side) {
  std::vector<data::Image> tiles;
  for (int64_t i = 0; i < side * side; ++i) {
    const Tensor row = similarity.select(0, i).reshape({side, side});
    tiles.push_back(
        data::resize_nearest(data::heatmap(row, -1.0f, 1.0f), 16 * side, 16 * side));
  }
  return data::tile(tiles, side, 4);
}

// The mean similarity of pairs of patches `steps` apart on the grid (|dr| + |dc|).
float similarity_at(const Tensor& similarity, int64_t side, int64_t steps) {
  const std::vector<float> s = similarity.to_vector();
  double total = 0.0;
  int pairs = 0;
  for (int64_t i = 0; i < side * side; ++i)
    for (int64_t j = 0; j < side * side; ++j)
      if (std::abs(i / side - j / side) + std::abs(i % side - j % side) == steps)
        total += s[static_cast<size_t>(i * side * side + j)], ++pairs;
  return static_cast<float>(total / pairs);
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string out = learn::picture_path(
      argc, argv,
      "Chapter 09 (docs/learn/09-vit.md): patches as tokens, the shapes through ViT, and what a "
      "briefly trained ViT attends to.");
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
  const bool shapes_ok = diff < 1e-5f && logits.shape() == Shape{1, config.num_classes};
  if (!std::filesystem::exists(std::string(data::kFashionMnistDir) +
                               "/train-images-idx3-ubyte.gz")) {
    std::printf("(no Fashion-MNIST in %s: no training, no pictures of a trained ViT)\n",
                data::kFashionMnistDir);
    return shapes_ok ? 0 : 1;
  }

  // A brief training: AdamW on the first kSteps x 32 training images, one pass, in order.
  constexpr int64_t kSteps = 300, kBatch = 32;
  const data::FashionMNIST train(data::kFashionMnistDir, "train"),
      test(data::kFashionMnistDir, "t10k");
  const Tensor probe = test.images(0, 256);  // the images the attention is measured on
  std::vector<Tensor> initial, trained;      // per block (256, heads, 1 + N, 1 + N)
  {
    NoGradGuard no_grad;
    vit.forward(probe, &initial);
  }
  vit.train();
  optim::AdamW opt(vit.parameters(), 2e-3f, 0.9f, 0.999f, 1e-8f, 0.05f);
  for (int64_t step = 0; step < kSteps; ++step) {
    const Tensor loss = nn::functional::cross_entropy(
        vit.forward(train.images(step * kBatch, kBatch)), train.labels(step * kBatch, kBatch));
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (step % 100 == 0 || step == kSteps - 1)
      std::printf("step %3lld  loss %.4f\n", static_cast<long long>(step), loss.item());
  }
  vit.eval();
  NoGradGuard no_grad;
  const Tensor correct = vit.forward(test.images(0, 1000)).argmax(1).eq(test.labels(0, 1000));
  const float accuracy = correct.to(DType::Float32).mean().item();
  vit.forward(probe, &trained);
  std::printf("test accuracy on 1000 images: %.3f\n", accuracy);

  const Tensor distance = patch_distances(side, p);
  const Tensor before = mean_attention_distance(initial, distance),
               after = mean_attention_distance(trained, distance);  // (blocks, heads)
  const float uniform = distance.mean().item();  // a head that attends to every patch equally
  std::printf("mean attention distance in pixels (uniform attention: %.1f), initialised -> "
              "trained:\n", uniform);
  for (int64_t b = 0; b < after.size(0); ++b) {
    std::printf("  block %lld:", static_cast<long long>(b));
    for (int64_t h = 0; h < after.size(1); ++h)
      std::printf("  %4.1f -> %4.1f", before.select(0, b).select(0, h).item(),
                  after.select(0, b).select(0, h).item());
    std::printf("\n");
  }
  const Tensor similarity = position_similarity(vit.pos_embed);
  std::printf("position embeddings, mean cosine similarity of patches |dr| + |dc| apart:\n");
  std::vector<float> by_steps;
  for (int64_t steps = 1; steps <= 2 * (side - 1); ++steps) {
    by_steps.push_back(similarity_at(similarity, side, steps));
    std::printf("  %lld: %5.2f", static_cast<long long>(steps), by_steps.back());
  }
  std::printf("\n");

  const std::string rollout_png = learn::picture_beside(out, "vit_rollout.png"),
                    distance_png = learn::picture_beside(out, "vit_attention_distance.png"),
                    position_png = learn::picture_beside(out, "vit_position_embeddings.png");
  data::write_png(rollout_picture(probe.narrow(0, 0, 6), attention_rollout(trained).narrow(0, 0, 6),
                                  side),
                  rollout_png);
  const data::Series even{"uniform attention", {-0.5, after.size(0) - 0.5}, {uniform, uniform}};
  data::save_plot(distance_png,
                  {head_points("initialised", before), head_points("trained", after), even},
                  {.title = "mean attention distance of each head",
                   .x_label = "block",
                   .y_label = "pixels",
                   .width = 480,
                   .height = 360});
  data::write_png(similarity_tiles(similarity, side), position_png);
  std::printf("wrote %s\nwrote %s\nwrote %s\n", rollout_png.c_str(), distance_png.c_str(),
              position_png.c_str());
  // Initialised, every head spreads its attention evenly (about the mean distance between two
  // patches); trained, the heads differ. Neighbouring patches' embeddings have grown alike,
  // far ones not.
  const auto spread = [](const Tensor& d) { return (d.max() - d.min()).item(); };
  const bool trained_ok = accuracy > 0.6f && spread(after) > 3 * spread(before) &&
                          by_steps.front() > by_steps.back() + 0.2f;
  return shapes_ok && trained_ok ? 0 : 1;
} catch (const std::exception& e) {
  return learn::fail(e);
}
