// torch::indexing on CUDA against the CPU (autograd/indexing.h): basic and advanced index,
// index_put (in and out of place, accumulating), masked_select, nonzero and the shape ops, values
// and gradients; and an index out of range raised by add_flat_index's device-side check.
// Without a GPU the cases return at once (test_cuda.cpp's first case reports that once).
#include <functional>
#include <string>
#include <vector>

#include "cuda_parity.h"
#include "test_util.h"

using namespace loom;
using namespace loom::indexing;
using loom::testing::check_close;
using loom::testing::compare_op;

namespace {

using Inputs = std::vector<Tensor>;

}  // namespace

TEST_CASE("indexing on CUDA matches the CPU: basic, advanced, index_put and the shape ops") {
  LOOM_REQUIRE_GPU();
  manual_seed(3);
  const Tensor x = randn({5, 4, 6});
  const Tensor rows = tensor_i64({4, 0, -1, 0}, {4});
  const Tensor cols = tensor_i64({1, 5, 2, 1}, {4});
  const Tensor mask = randn({5, 4}) > 0.0f;
  compare_op("slices",
             [](const Inputs& t) {
               return t[0].index({Slice(1, None, 2), -1, None});
             },
             {x});
  compare_op("rows", [](const Inputs& t) { return t[0].index({t[1]}); }, {x, rows});
  compare_op("pair_separated",
             [](const Inputs& t) {
               return t[0].index({t[1], Slice(), t[2]});
             },
             {x, rows, cols});
  compare_op("mask", [](const Inputs& t) { return t[0].index({t[1]}); }, {x, mask});
  compare_op("mask_after_slice",
             [](const Inputs& t) {
               return t[0].index({Slice(), t[1].index({0})});
             },
             {x, mask});
  compare_op("index_put", [](const Inputs& t) { return index_put(t[0], {t[1]}, t[2]); },
             {x, tensor_i64({3, 1}, {2}), randn({4, 6})});
  compare_op("index_put_accumulate",
             [](const Inputs& t) { return index_put(t[0], std::vector<Tensor>{t[1]}, t[2], true); },
             {x, rows, randn({6})});
  compare_op("index_put_inplace",
             [](const Inputs& t) {
               Tensor y = t[0].clone();
               y.index_put_({t[1]}, t[2]);
               y.index_put_({Slice(), 0}, 2.0f);
               return y;
             },
             {x, mask, randn({1})});
  compare_op("masked_select", [](const Inputs& t) { return masked_select(t[0], t[1]); },
             {x.index({Ellipsis, 0}), mask});
  compare_op("nonzero", [](const Inputs& t) { return nonzero(t[0]); }, {mask});
  compare_op("shape_ops",
             [](const Inputs& t) {
               return flip(repeat(unbind(t[0], 1)[2], {2, 1}), {0, 1}).unflatten(0, {2, 5});
             },
             {x});
}

TEST_CASE("indexing on CUDA: an index out of range is a loom::Error") {
  LOOM_REQUIRE_GPU();
  Tensor x = zeros({3, 4}, Device::CUDA);
  testing::expect_error(
      [&] {
        x.index({tensor_i64({0, 3}, {2}).to(Device::CUDA)}).to(Device::CPU);
      },
      {"index", "3"});
}
