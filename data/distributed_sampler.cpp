// DistributedSampler: the epoch's order, padded or cut to a multiple of the replicas, dealt
// round-robin (PyTorch's indices[rank:total_size:num_replicas]).
#include "data/distributed_sampler.h"

#include <numeric>

#include "core/error.h"
#include "data/splitmix.h"

namespace loom::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank,
                                       bool shuffle, uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed) {
  LOOM_CHECK(dataset_size >= 0, "DistributedSampler: dataset size {} is negative", dataset_size);
  LOOM_CHECK(num_replicas >= 1, "DistributedSampler: num_replicas {} must be at least 1",
             num_replicas);
  LOOM_CHECK(rank >= 0 && rank < num_replicas,
             "DistributedSampler: rank {} is not in [0, {}) (num_replicas {})", rank,
             num_replicas, num_replicas);
  // drop_last: the tail that does not fill a round is left out; else the order is padded.
  num_samples_ = drop_last ? dataset_size / num_replicas
                           : (dataset_size + num_replicas - 1) / num_replicas;
  LOOM_CHECK(!(dataset_size > 0 && num_samples_ == 0),
             "DistributedSampler: drop_last with {} examples for {} replicas leaves every "
             "replica empty",
             dataset_size, num_replicas);
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> order(static_cast<size_t>(dataset_size_));
  if (shuffle_)
    order = random_permutation(dataset_size_, mix_seeds(seed_, static_cast<uint64_t>(epoch_)));
  else
    std::iota(order.begin(), order.end(), int64_t{0});
  const int64_t total = num_samples_ * num_replicas_;
  // Pad by wrapping around (repeatedly, if the data set is smaller than the padding).
  for (size_t i = 0; static_cast<int64_t>(order.size()) < total; ++i) order.push_back(order[i]);
  std::vector<int64_t> shard;
  shard.reserve(static_cast<size_t>(num_samples_));
  for (int64_t i = rank_; i < total; i += num_replicas_)
    shard.push_back(order[static_cast<size_t>(i)]);
  return shard;
}

}  // namespace loom::data
