// The sliding windows the window tests walk (tests/nn/test_window_ops.cpp on the CPU,
// tests/cuda/test_cuda_window.cpp against it on CUDA): plain, strided, padded, dilated, and all
// at once, non-square; three keep the width at stride 1 (the CPU im2col's shifted-copy path),
// one dilated, one wider than tall, one that loses rows; the last is DETR's small backbone's
// (3 x 3, stride 2, padding 1). The strided ones have short rows: the CPU reads and adds their
// pixels through a map per tap.
#pragma once

#include <vector>

#include "backends/window/window.h"

namespace loom::testing {

inline const std::vector<WindowGeometry> kWindowCases = {
    {{3, 3}, {1, 1}, {1, 1}, {1, 1}}, {{2, 2}, {2, 2}, {0, 0}, {1, 1}},
    {{3, 2}, {2, 1}, {1, 0}, {1, 2}}, {{2, 3}, {1, 3}, {1, 1}, {2, 1}},
    {{1, 1}, {1, 1}, {0, 0}, {1, 1}}, {{3, 3}, {1, 1}, {2, 2}, {2, 2}},
    {{1, 5}, {1, 1}, {0, 2}, {1, 1}}, {{5, 3}, {1, 1}, {0, 1}, {1, 1}},
    {{3, 3}, {2, 2}, {1, 1}, {1, 1}}};

}  // namespace loom::testing
