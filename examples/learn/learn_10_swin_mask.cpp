// Chapter 10 (docs/learn/10-swin.md): Swin's shifted windows, their mask and the relative bias.
// On the first stage of swin-fmnist (a 14x14 token map, 7x7 windows, shift 3) it prints which
// region each token of the rolled map comes from, draws that map beside the four 49x49 masks of
// models/swin_window.h's shifted_window_mask, and prints the relative position index of a 2x2
// window.
//   learn_10_swin_mask [out.png]   (default learn_10_swin_mask.png)
#include <cstdio>
#include <string>

#include "examples/learn/learn.h"
#include "loom.h"
using namespace loom;
namespace F = nn::functional;

int main(int argc, char** argv) {
  const std::string out = learn::picture_path(argc, argv,
                                              "Chapter 10 (docs/learn/10-swin.md): Swin's "
                                              "shifted-window mask and relative position index.");
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
  // Window 0 holds one region only, so nothing is blocked there.
  return sum(mask.select(0, 0)).item() == 0.0f && sum(mask.select(0, 3)).item() < 0.0f ? 0 : 1;
}
