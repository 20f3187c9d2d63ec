// The exercise of docs/learn/09-vit.md: PatchEmbed::forward is ViT's eq. 1, x_p^i E + b for the
// patches in row-major order, each patch flattened channel by channel, row by row. The
// reference below walks the pixels with plain loops, so it shares nothing with the code it
// checks (no Conv2d, no reshape or permute), and the gradients go through finite differences.
#include "models/vit.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

// 3 channels and 4x4 patches of a 12x12 image: 9 patches, P^2 C = 48 values each.
models::ViTConfig patch_config() {
  models::ViTConfig c;
  c.image_size = 12;
  c.patch_size = 4;
  c.in_channels = 3;
  c.d_model = 5;
  c.n_head = 1;
  c.d_ff = 8;
  return c;
}

// Eq. 1's x_p^i E + b, one dot product at a time: token i = r * (W / p) + c is the patch whose
// top-left pixel is (r p, c p); its value (ch, dy, dx) meets E's column ch * p^2 + dy * p + dx.
std::vector<float> eq1_by_loops(const std::vector<float>& image, const std::vector<float>& weight,
                                const std::vector<float>& bias, int64_t B, int64_t C, int64_t H,
                                int64_t W, int64_t p, int64_t D) {
  const int64_t rows = H / p, cols = W / p, n = rows * cols;
  std::vector<float> out(static_cast<size_t>(B * n * D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t d = 0; d < D; ++d) {
          double sum = bias[static_cast<size_t>(d)];
          for (int64_t ch = 0; ch < C; ++ch)
            for (int64_t dy = 0; dy < p; ++dy)
              for (int64_t dx = 0; dx < p; ++dx) {
                const int64_t y = r * p + dy, x = c * p + dx;
                const size_t pixel = static_cast<size_t>(((b * C + ch) * H + y) * W + x);
                const size_t e = static_cast<size_t>(((d * C + ch) * p + dy) * p + dx);
                sum += static_cast<double>(image[pixel]) * weight[e];
              }
          out[static_cast<size_t>((b * n + r * cols + c) * D + d)] = static_cast<float>(sum);
        }
  return out;
}

}  // namespace

TEST_CASE("PatchEmbed is eq. 1: each patch, flattened (channel, row, column), times E plus b") {
  manual_seed(17);
  const models::ViTConfig config = patch_config();
  const models::PatchEmbed embed(config);
  const int64_t B = 2, C = 3, H = 12, W = 12, p = 4, D = 5;
  const Tensor images = randn({B, C, H, W});
  const Tensor tokens = embed.forward(images);
  REQUIRE(tokens.shape() == Shape{B, 9, D});
  const std::vector<float> expected =
      eq1_by_loops(images.to_vector(), embed.proj->weight.to_vector(),
                   embed.proj->bias.to_vector(), B, C, H, W, p, D);
  check_close(tokens, tensor(expected, {B, 9, D}), 1e-5f, 1e-5f, "tokens");
  // Patches are tokens in row-major order: a pixel changed in patch (1, 2) moves token 5 only.
  Tensor moved = images.clone();
  moved.narrow(2, 5, 1).narrow(3, 9, 1).fill_(10.0f);  // pixel (5, 9): patch row 1, column 2
  const Tensor diff = (embed.forward(moved) - tokens).abs().sum(-1);  // (B, 9)
  const std::vector<float> d = diff.to_vector();
  for (int64_t i = 0; i < 9; ++i) {
    CAPTURE(i);
    CHECK((i == 5 ? d[static_cast<size_t>(i)] > 0.0f : d[static_cast<size_t>(i)] == 0.0f));
  }
}

TEST_CASE("gradcheck: PatchEmbed in the images, E and b") {
  manual_seed(18);
  models::ViTConfig config = patch_config();
  config.image_size = 4;
  config.patch_size = 2;
  config.in_channels = 2;
  config.d_model = 3;
  const models::PatchEmbed embed(config);
  const Tensor images = randn({1, 2, 4, 4});
  auto f = weighted([&](const std::vector<Tensor>& t) { return embed.forward(t[0]); });
  gradcheck(f, {images}, 1e-2f, 2e-2f, 2e-3f, "images");
  // The parameters are handles to the module's storage: gradcheck perturbs them in place.
  auto g = weighted([&](const std::vector<Tensor>&) { return embed.forward(images); });
  gradcheck(g, {embed.proj->weight, embed.proj->bias}, 1e-2f, 2e-2f, 2e-3f, "E and b");
}
