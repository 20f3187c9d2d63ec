// distributed/data_parallel.h on every rank of the job (2 under ctest's mpirun, or 1): the split
// of a global batch, the numbers every rank agrees on, and the weighting of uneven shares, which
// with DDP must give the gradient of one process holding the whole batch. Every rank builds the
// whole batch from a fixed seed and computes that reference itself.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "loom.h"
#include "test_util.h"

using namespace loom;
namespace dist = loom::distributed;

TEST_CASE(
    "rank_chunk gives each rank its contiguous rows; the ranks' rows together are the batch") {
  const int64_t w = dist::world_size(), r = dist::rank();
  const Tensor batch = arange_f(0.0f, static_cast<float>(w * 3 * 2)).reshape({w * 3, 2});
  const Tensor mine = dist::rank_chunk(batch);  // (3, 2)
  CHECK(mine.shape() == Shape({3, 2}));
  CHECK(mine.is_contiguous());
  CHECK(mine.to_vector() == batch.narrow(0, r * 3, 3).contiguous().to_vector());
  const std::vector<Tensor> all = dist::all_gather(mine);  // in rank order
  std::vector<float> joined;
  for (const Tensor& part : all)
    for (float v : part.to_vector()) joined.push_back(v);
  CHECK(joined == batch.to_vector());
  CHECK_THROWS_AS(dist::rank_chunk(tensor({1.0f}, {})), Error);  // 0-d: no rows
  if (w > 1)
    CHECK_THROWS_WITH_AS(dist::rank_chunk(zeros({w * 3 + 1, 2})),
                         doctest::Contains("does not split evenly"), Error);
}

TEST_CASE("rank_stride takes every world_size-th item from the rank's own") {
  const int w = dist::world_size(), r = dist::rank();
  const std::vector<int> items{0, 1, 2, 3, 4, 5, 6};
  std::vector<int> expected;
  for (int i = r; i < 7; i += w) expected.push_back(i);
  CHECK(dist::rank_stride(items) == expected);
  // Fewer items than ranks: the last ranks get none.
  CHECK(dist::rank_stride(std::vector<int>{9}) ==
        (r == 0 ? std::vector<int>{9} : std::vector<int>{}));
}

TEST_CASE("all_reduce_value(s), all_reduce_count and broadcast_value agree on every rank") {
  const int w = dist::world_size(), r = dist::rank();
  CHECK(dist::all_reduce_value(r + 0.5) == doctest::Approx(w * (w - 1) / 2.0 + 0.5 * w));
  CHECK(dist::all_reduce_value(2.0 * r, dist::ReduceOp::Mean) == doctest::Approx(w - 1.0));
  const std::vector<double> sums = dist::all_reduce_values({1.0, 0.25 * r, -3.0});
  REQUIRE(sums.size() == 3);
  CHECK(sums[0] == doctest::Approx(w));
  CHECK(sums[1] == doctest::Approx(0.25 * w * (w - 1) / 2.0));
  CHECK(sums[2] == doctest::Approx(-3.0 * w));
  // int64 exactly, beyond float32's 2^24.
  const int64_t big = (int64_t{1} << 40) + 1;
  CHECK(dist::all_reduce_count(big + r) == big * w + w * (w - 1) / 2);
  CHECK(dist::broadcast_value(1000 + r) == 1000);  // rank 0's, whatever each rank computed
  CHECK(dist::broadcast_value(1000 + r, w - 1) == 1000 + w - 1);
  CHECK_THROWS_AS(dist::broadcast_value(1, w), Error);
}

namespace {

// Cross-entropy of a linear classifier over items [N, 4] -> 3 classes, mean over the items.
Tensor mean_loss(nn::Linear& model, const Tensor& x, const Tensor& y) {
  return nn::functional::cross_entropy(model.forward(x), y);
}

}  // namespace

TEST_CASE(
    "global_mean_loss + DDP over uneven shares gives the gradient of the whole batch's mean") {
  // 5 items: 3 and 2 on 2 ranks; 1 item: rank 1 computes on item 0 with weight 0.
  for (const int64_t n : {int64_t{5}, int64_t{1}}) {
    CAPTURE(n);
    manual_seed(21);
    const Tensor x = randn({n, 4});
    const Tensor y =
        tensor_i64(std::vector<int64_t>{2, 0, 1, 1, 2}, {5}).narrow(0, 0, n).contiguous();
    manual_seed(3);
    auto reference = std::make_shared<nn::Linear>(4, 3);
    manual_seed(3);
    auto model = std::make_shared<nn::Linear>(4, 3);
    nn::DistributedDataParallel ddp(model);
    const Tensor whole = mean_loss(*reference, x, y);
    whole.backward();

    std::vector<int64_t> all(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
    std::vector<int64_t> mine = dist::rank_stride(all);
    const auto count = static_cast<int64_t>(mine.size());
    if (mine.empty()) mine = {0};  // no items: compute on one, weighted 0
    const Tensor rows = tensor_i64(mine, {static_cast<int64_t>(mine.size())});
    const Tensor local = mean_loss(*model, index_select(x, 0, rows), index_select(y, 0, rows));
    const Tensor loss = dist::global_mean_loss(local, count);
    loss.backward();  // DDP averages over the ranks

    CHECK(dist::all_reduce_value(loss.item(), dist::ReduceOp::Mean) ==
          doctest::Approx(whole.item()).epsilon(1e-5));
    testing::check_close(model->weight.grad(), reference->weight.grad(), 1e-5f, 1e-6f, "weight");
    testing::check_close(model->bias.grad(), reference->bias.grad(), 1e-5f, 1e-6f, "bias");
  }
  CHECK_THROWS_AS(dist::global_mean_loss(zeros({2}), 1), Error);
  CHECK_THROWS_AS(dist::global_mean_loss(zeros({}), -1), Error);
}

TEST_CASE(
    "DETR's box terms with SetCriterion's num_boxes over ranks average to the whole batch's") {
  // 2 images per rank with 1..4 boxes each; the rank's normaliser is max(1, boxes of the global
  // batch / world size), as facebookresearch/detr's SetCriterion under DDP.
  const int64_t w = dist::world_size(), B = 2 * w, Q = 5, C = 3;
  manual_seed(8);
  const Tensor logits = randn({B, Q, C + 1});
  const Tensor boxes = sigmoid(randn({B, Q, 4})) * 0.5f + 0.1f;  // (B, Q, 4), w, h > 0
  std::vector<models::DETRTarget> targets;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = 1 + (b * 3) % 4;
    targets.push_back({tensor_i64(std::vector<int64_t>(static_cast<size_t>(n), b % C), {n}),
                       rand({n, 4}) * 0.4f + 0.1f});
  }
  const models::DETRLossConfig config{C};
  const models::DETRLossTerms whole = models::detr_loss_terms(logits, boxes, targets, config);

  const std::vector<models::DETRTarget> mine(targets.begin() + 2 * dist::rank(),
                                             targets.begin() + 2 * dist::rank() + 2);
  int64_t local_boxes = 0;
  for (const auto& t : mine) local_boxes += t.labels.size(0);
  const double num_boxes = std::max(
      1.0, static_cast<double>(dist::all_reduce_count(local_boxes)) / static_cast<double>(w));
  const models::DETRLossTerms part =
      models::detr_loss_terms(dist::rank_chunk(logits), dist::rank_chunk(boxes), mine, config,
                              static_cast<float>(num_boxes));
  const std::vector<double> mean =
      dist::all_reduce_values({part.loss_bbox.item(), part.loss_giou.item()}, dist::ReduceOp::Mean);
  CHECK(mean[0] == doctest::Approx(whole.loss_bbox.item()).epsilon(1e-5));
  CHECK(mean[1] == doctest::Approx(whole.loss_giou.item()).epsilon(1e-5));
  CHECK_THROWS_AS(models::detr_loss_terms(logits, boxes, targets, config, -1.0f), Error);
}
