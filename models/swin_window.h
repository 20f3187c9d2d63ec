// The window helpers of the Swin Transformer (Liu et al. 2021, "Swin Transformer: Hierarchical
// Vision Transformer using Shifted Windows", sec. 3.2), as pure functions after
// microsoft/Swin-Transformer's models/swin_transformer.py:
//
//   window_partition   [B, H, W, C] -> [B * nW, w*w, C]   self-attention runs inside each window
//   window_reverse     [B * nW, w*w, C] -> [B, H, W, C]    and the windows are put back
//   relative_position_index  [w*w, w*w] int64   row of the bias table for each (query, key) pair
//   shifted_window_mask      [nW, w*w, w*w]     0 / -100: after the cyclic shift, a window may
//                                              hold pixels of regions that were not neighbours
//
// nW = (H / w) * (W / w) windows, taken row-major; inside a window the w*w pixels are row-major.
// The partition and its reverse are a reshape and a permute (one copy each), so they are
// differentiable through the ops they are made of.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace loom::models {

// x [B, H, W, C] -> windows [B * nW, w*w, C], nW = (H / w) * (W / w). H and W must be
// multiples of w.
Tensor window_partition(const Tensor& x, int64_t window);

// windows [B * nW, w*w, C] -> x [B, H, W, C]; the inverse of window_partition.
Tensor window_reverse(const Tensor& windows, int64_t window, int64_t height, int64_t width);

// Sec. 3.2, "Relative position bias": the relative offset (dy, dx) of a query and a key in one
// w x w window lies in [-(w-1), w-1]^2, so a table of (2w-1)^2 rows holds one bias per offset
// (and head). index[i, j] = (dy + w - 1) * (2w - 1) + (dx + w - 1) for query pixel i and key
// pixel j (row-major in the window) -> int64 [w*w, w*w], values in [0, (2w-1)^2).
Tensor relative_position_index(int64_t window, Device device = Device::CPU);

// Sec. 3.2, "Efficient batch computation for shifted configuration": the map [H, W] is rolled
// by (-shift, -shift), so the last windows of each row and column hold pixels from up to 4
// regions that are not adjacent in the image. Labelling the 3 x 3 regions (rows and columns
// split at H - w and H - shift) and masking the pairs with different labels gives the
// additive mask [nW, w*w, w*w]: 0 where query and key share a region, -100 elsewhere (the
// official value: exp(-100) vanishes next to the other scores). 0 < shift < w.
Tensor shifted_window_mask(int64_t height, int64_t width, int64_t window, int64_t shift,
                           Device device = Device::CPU);

}  // namespace loom::models
