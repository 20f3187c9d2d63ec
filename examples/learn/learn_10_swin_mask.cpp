// Chapter 10 (docs/learn/10-swin.md): Swin's shifted windows, their mask and the relative bias.
// On the first stage of swin-fmnist (a 14x14 token map, 7x7 windows, shift 3) it prints which
// region each token of the rolled map comes from, draws that map beside the four 49x49 masks of
// models/swin_window.h's shifted_window_mask, and prints the relative position index of a 2x2
// window. Then it draws the windows over an image (regular, shifted, and shifted by the cyclic
// roll with its regions) and follows an image through the stages: the hierarchy that patch
// merging builds, for swin-fmnist and for the paper's Swin-T.
//   learn_10_swin_mask [out.png]   (default learn_10_swin_mask.png; swin_windows.png and
//                                   swin_hierarchy.png beside it)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "examples/learn/learn.h"
#include "loom.h"
using namespace loom;
namespace F = nn::functional;

namespace {

const data::RGB kBlack{0, 0, 0}, kWindow{230, 40, 40}, kToken{150, 150, 150};

// `picture` with `title` above it.
data::Image titled(const data::Image& picture, const std::string& title) {
  const int64_t title_h = data::text_size(title)[1] + 6;
  data::Image out(std::max(picture.width, data::text_size(title)[0]), title_h + picture.height, 3,
                  255);
  data::draw_text(out, 0, 0, title, kBlack);
  data::paste(out, picture, 0, title_h);
  return out;
}

// Lines across and down a square picture of tokens `token` pixels wide: thin grey ones between
// tokens, red ones (3 pixels) at the window borders `cuts` (in tokens) and around it.
void draw_windows(data::Image& picture, int64_t token, const std::vector<int64_t>& cuts) {
  const int64_t side = picture.width;
  for (int64_t at = token; at < side; at += token) {
    data::draw_line(picture, at, 0, at, side - 1, kToken);
    data::draw_line(picture, 0, at, side - 1, at, kToken);
  }
  for (int64_t cut : cuts) {
    data::fill_rect(picture, cut * token - 1, 0, cut * token + 1, side - 1, kWindow);
    data::fill_rect(picture, 0, cut * token - 1, side - 1, cut * token + 1, kWindow);
  }
  data::draw_rect(picture, 0, 0, side - 1, side - 1, kWindow, 3);
}

// One stage of the hierarchy: an r x r map of tokens in a square of `side` pixels, windows of
// w x w tokens, and what the stage holds.
data::Image stage_picture(int64_t stage, int64_t r, int64_t w, int64_t channels) {
  const int64_t side = 168;
  data::Image picture(side, side, 3, 255);
  std::vector<int64_t> cuts;
  for (int64_t cut = w; cut < r; cut += w) cuts.push_back(cut);
  draw_windows(picture, side / r, cuts);
  return titled(picture, "stage " + std::to_string(stage + 1) + ": " + std::to_string(r) + "x" +
                             std::to_string(r) + " x " + std::to_string(channels));
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string out = learn::picture_path(argc, argv,
                                              "Chapter 10 (docs/learn/10-swin.md): Swin's "
                                              "shifted-window mask, relative position index, "
                                              "windows over an image and the stages.");
  const int64_t r = 14, w = 7, s = 3, N = w * w;

  // The region of each position of the rolled map, as shifted_window_mask labels it: after
  // roll(-s), rows [0, r-w) stay whole windows, [r-w, r-s) and [r-s, r) came from two different
  // places (the bottom of the image and, wrapped around, its top). Same for the columns.
  auto region = [&](int64_t p) { return p < r - w ? 0 : (p < r - s ? 1 : 2); };
  std::vector<float> labels;
  std::printf("regions of the rolled %lldx%lld map (A..I), windows of %lldx%lld:\n",
              static_cast<long long>(r), static_cast<long long>(r), static_cast<long long>(w),
              static_cast<long long>(w));
  for (int64_t y = 0; y < r; ++y) {
    if (y == w) std::printf("  -------+-------\n");
    std::printf("  ");
    for (int64_t x = 0; x < r; ++x) {
      const int label = 3 * region(y) + region(x);
      labels.push_back(static_cast<float>(label));
      std::printf("%s%c", x == w ? "|" : "", 'A' + label);
    }
    std::printf("\n");
  }

  const Tensor mask = models::shifted_window_mask(r, r, w, s);  // (nW, N, N): 0 or -100
  std::printf("\nshifted_window_mask(%lld, %lld, %lld, %lld): %s\n", static_cast<long long>(r),
              static_cast<long long>(r), static_cast<long long>(w), static_cast<long long>(s),
              shape_str(mask.shape()).c_str());
  for (int64_t win = 0; win < mask.size(0); ++win) {
    const float blocked = sum(lt(mask.select(0, win), 0.0f)).item();
    std::printf("  window %lld: %4.0f of %lld query-key pairs blocked\n",
                static_cast<long long>(win), blocked, static_cast<long long>(N * N));
  }

  // Left: the region map, 16 pixels a token, window borders in white. Right: the four masks,
  // 3 pixels a pair, yellow = attend (0), dark = blocked (-100).
  const int64_t cell = 16;
  data::Image map =
      data::resize_nearest(data::heatmap(tensor(labels, {r, r}), 0.0f, 8.0f), r * cell, r * cell);
  data::fill_rect(map, w * cell - 1, 0, w * cell, r * cell - 1, {255, 255, 255});
  data::fill_rect(map, 0, w * cell - 1, r * cell - 1, w * cell, {255, 255, 255});
  std::vector<data::Image> masks;
  for (int64_t win = 0; win < mask.size(0); ++win)
    masks.push_back(
        data::resize_nearest(data::heatmap(mask.select(0, win), -100.0f, 0.0f), 3 * N, 3 * N));
  data::write_png(data::tile({map, data::tile(masks, 2, 6)}, 2, 16), out);
  std::printf("wrote %s\n", out.c_str());

  // Relative position bias (sec. 3.2): the row of the ((2w-1)^2, heads) table each
  // (query, key) pair of a 2x2 window reads; equal offsets share a row.
  std::printf("\nrelative_position_index(2) (query pixel = row, key pixel = column):\n");
  const std::vector<int64_t> index = models::relative_position_index(2).to_vector_i64();
  for (int64_t i = 0; i < 4; ++i)
    std::printf("  %lld %lld %lld %lld\n", static_cast<long long>(index[i * 4]),
                static_cast<long long>(index[i * 4 + 1]), static_cast<long long>(index[i * 4 + 2]),
                static_cast<long long>(index[i * 4 + 3]));

  // The windows over a 28x28 image (a ring on a diagonal ramp), a token = 2x2 pixels = 16 on
  // screen. Layer l partitions the map into 2x2 windows; layer l + 1 shifts them by s tokens
  // (3x3 windows, fig. 2); the cyclic roll by -s (fig. 4) gives 2x2 windows again, over the
  // regions the mask keeps apart.
  std::vector<float> pixels;
  for (int y = 0; y < 28; ++y)
    for (int x = 0; x < 28; ++x)
      pixels.push_back(0.25f * float(x + y) / 54.0f +
                       std::exp(-std::pow(std::hypot(y - 13.5, x - 13.5) - 9.0, 2) / 4.0));
  const Tensor image = tensor(pixels, {28, 28});
  const int64_t token = 16, side = r * token;
  auto screen = [&](const Tensor& t) {
    return data::to_rgb(data::resize_nearest(data::to_image(t, 0.0f, 1.0f), side, side));
  };
  data::Image regular = screen(image), shifted = screen(image);
  draw_windows(regular, token, {w});
  draw_windows(shifted, token, {s, s + w});
  const Tensor rolled = image.roll({-2 * s, -2 * s}, {0, 1});  // torch.roll(x, (-s, -s)) in pixels
  data::Image regions = data::blend(
      screen(rolled),
      data::resize_nearest(data::heatmap(tensor(labels, {r, r}), 0.0f, 8.0f), side, side), 0.4f);
  draw_windows(regions, token, {w});
  for (int64_t label = 0; label < 9; ++label) {  // each region's letter at its centre
    const int64_t starts[] = {0, r - w, r - s, r};
    const int64_t x = (starts[label % 3] + starts[label % 3 + 1]) * token / 2,
                  y = (starts[label / 3] + starts[label / 3 + 1]) * token / 2;
    data::fill_rect(regions, x - 8, y - 10, x + 8, y + 10, {255, 255, 255});
    data::draw_text(regions, x - 5, y - 7, std::string(1, char('A' + label)), kBlack, 2);
  }
  const std::string windows_png = learn::picture_beside(out, "swin_windows.png");
  data::write_png(data::tile({titled(regular, "layer l: 2x2 windows of 7x7 tokens"),
                              titled(shifted, "layer l+1: shifted by 3 tokens"),
                              titled(regions, "layer l+1 computed: roll(-3), 2x2 windows")},
                             3, 16),
                  windows_png);

  // The hierarchy (sec. 3.1, fig. 1a): each PatchMerging halves the map's side and doubles the
  // channels. swin-fmnist is run on one image; Swin-T's stages are its config's.
  const models::SwinConfig small = models::SwinConfig::preset("swin-fmnist"),
                           swin_t = models::SwinConfig::preset("swin-t");
  models::Swin swin(small);
  swin.eval();
  NoGradGuard no_grad;
  Tensor x = swin.patch_embed->forward(image.reshape({1, 1, 28, 28}));  // (1, r0 * r0, D)
  std::printf("\nswin-fmnist, one 28x28 image: patch_embed (2x2 pixels a token) -> %s\n",
              shape_str(x.shape()).c_str());
  bool hierarchy_ok = true;
  std::vector<data::Image> stages;
  for (int64_t i = 0; i < swin.stages().size(); ++i) {
    const int64_t r_i = small.resolution(i), channels = small.embed_dim << i;
    hierarchy_ok = hierarchy_ok && x.shape() == Shape{1, r_i * r_i, channels};
    stages.push_back(stage_picture(i, r_i, small.stage_window(i), channels));
    x = swin.stages()[i]->forward(x);
    std::printf("  stage %lld: %lldx%lld tokens x %lld channels, %lld blocks%s -> %s\n",
                static_cast<long long>(i + 1), static_cast<long long>(r_i),
                static_cast<long long>(r_i), static_cast<long long>(channels),
                static_cast<long long>(small.depths[static_cast<size_t>(i)]),
                swin.stages()[i]->downsample ? ", PatchMerging" : "", shape_str(x.shape()).c_str());
  }
  std::printf("swin-t, 224x224 (4x4 pixels a token):");
  std::vector<data::Image> t_stages;
  for (int64_t i = 0; i < static_cast<int64_t>(swin_t.depths.size()); ++i) {
    const int64_t r_i = swin_t.resolution(i), channels = swin_t.embed_dim << i;
    t_stages.push_back(stage_picture(i, r_i, swin_t.stage_window(i), channels));
    std::printf("%s %lldx%lld x %lld", i == 0 ? "" : " ->", static_cast<long long>(r_i),
                static_cast<long long>(r_i), static_cast<long long>(channels));
  }
  std::printf("\n");
  const std::string hierarchy_png = learn::picture_beside(out, "swin_hierarchy.png");
  data::write_png(data::tile({titled(data::tile(stages, 4, 16), "swin-fmnist (28x28 images)"),
                              titled(data::tile(t_stages, 4, 16), "swin-t (224x224 images)")},
                             1, 24),
                  hierarchy_png);
  std::printf("wrote %s\nwrote %s\n", windows_png.c_str(), hierarchy_png.c_str());
  // Window 0 holds one region only, so nothing is blocked there.
  return sum(mask.select(0, 0)).item() == 0.0f && sum(mask.select(0, 3)).item() < 0.0f &&
                 hierarchy_ok
             ? 0
             : 1;
} catch (const std::exception& e) {
  return learn::fail(e);
}
