// data::DistributedSampler: per-rank shards of an epoch, as PyTorch's DistributedSampler.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "data/dataloader.h"
#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "core/error.h"

using namespace loom;
using data::DistributedSampler;

namespace {
std::vector<std::vector<int64_t>> shards(int64_t n, int64_t replicas, bool shuffle, uint64_t seed,
                                         int64_t epoch, bool drop_last = false) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t r = 0; r < replicas; ++r) {
    DistributedSampler s(n, replicas, r, shuffle, seed, drop_last);
    s.set_epoch(epoch);
    out.push_back(s.indices());
  }
  return out;
}
}  // namespace

TEST_CASE("DistributedSampler shards are disjoint, equal and cover the data set") {
  const auto parts = shards(12, 3, true, 7, 0);
  std::set<int64_t> all;
  for (const auto& p : parts) {
    CHECK(p.size() == 4);
    all.insert(p.begin(), p.end());
  }
  CHECK(all.size() == 12);  // disjoint and complete
  CHECK(*all.begin() == 0);
  CHECK(*all.rbegin() == 11);
}

TEST_CASE("DistributedSampler pads by wrapping around as PyTorch, or drops the tail") {
  // 10 examples, 4 replicas, no shuffle: order 0..9 padded with 0,1 -> shards by rank stride.
  auto parts = shards(10, 4, false, 0, 0);
  CHECK(parts[0] == std::vector<int64_t>{0, 4, 8});
  CHECK(parts[1] == std::vector<int64_t>{1, 5, 9});
  CHECK(parts[2] == std::vector<int64_t>{2, 6, 0});
  CHECK(parts[3] == std::vector<int64_t>{3, 7, 1});
  // A data set smaller than the padding wraps more than once.
  parts = shards(2, 5, false, 0, 0);
  for (int64_t r = 0; r < 5; ++r) CHECK(parts[static_cast<size_t>(r)] == std::vector<int64_t>{r % 2});
  // drop_last: 10 over 4 replicas gives 2 each, the last two examples left out.
  parts = shards(10, 4, false, 0, 0, /*drop_last=*/true);
  CHECK(parts[0] == std::vector<int64_t>{0, 4});
  CHECK(parts[3] == std::vector<int64_t>{3, 7});
}

TEST_CASE("DistributedSampler reshuffles per epoch, identically on every rank's view") {
  const auto e0 = shards(100, 2, true, 3, 0), e1 = shards(100, 2, true, 3, 1),
             again = shards(100, 2, true, 3, 0);
  CHECK(e0 == again);  // (seed, epoch) decides everything
  CHECK(e0[0] != e1[0]);
  std::set<int64_t> seen(e1[0].begin(), e1[0].end());
  seen.insert(e1[1].begin(), e1[1].end());
  CHECK(seen.size() == 100);
}

TEST_CASE("DistributedSampler with one replica is the DataLoader's epoch order") {
  auto dataset = std::make_shared<data::TensorDataset>(
      std::vector<Tensor>{Tensor::empty({37, 1}, DType::Int64)});
  const data::DataLoader loader(dataset, 4, /*shuffle=*/true, /*seed=*/9);
  DistributedSampler one(37, 1, 0, true, 9);
  one.set_epoch(5);
  CHECK(one.indices() == loader.epoch_order(5));
}

TEST_CASE("DistributedSampler's first k per rank are the epoch's first k * replicas, any world") {
  // What lets a run resume with another number of processes: after k batches of b per rank,
  // the job has read exactly the first k * b * replicas examples of the epoch's order.
  const DistributedSampler single(64, 1, 0, true, 11);
  const std::vector<int64_t> order = single.indices();
  for (int64_t replicas : {2, 4}) {
    const auto parts = shards(64, replicas, true, 11, 0);
    const int64_t k = 3;
    std::vector<int64_t> first, expected(order.begin(), order.begin() + k * replicas);
    for (const auto& p : parts) first.insert(first.end(), p.begin(), p.begin() + k);
    std::sort(first.begin(), first.end());
    std::sort(expected.begin(), expected.end());
    CHECK(first == expected);
  }
}

TEST_CASE("DistributedSampler rejects impossible arguments, naming them") {
  CHECK_THROWS_WITH_AS(DistributedSampler(10, 0, 0), doctest::Contains("num_replicas 0"), Error);
  CHECK_THROWS_WITH_AS(DistributedSampler(10, 2, 2), doctest::Contains("rank 2 is not in [0, 2)"),
                       Error);
  CHECK_THROWS_WITH_AS(DistributedSampler(3, 4, 0, true, 0, true),
                       doctest::Contains("leaves every replica empty"), Error);
}
