// DistributedSampler: which examples each process of a data-parallel job reads in an epoch,
// as torch.utils.data.distributed.DistributedSampler.
//
//   data::DistributedSampler sampler(dataset->size(), distributed::world_size(),
//                                    distributed::rank(), /*shuffle=*/true, /*seed=*/1234);
//   sampler.set_epoch(epoch);                  // a new order every epoch, the same on every rank
//   for (int64_t i : sampler.indices()) ...    // this rank's shard of the epoch
//
// The epoch's order is the DataLoader's (the SplitMix64 permutation of (seed, epoch); index
// order without shuffle). It is padded by wrapping around to a multiple of num_replicas (or,
// with drop_last, cut down to one), and rank r takes every num_replicas-th index from r. So the
// shards of an epoch are disjoint (but for the padding), have equal sizes, and together hold
// every example; and the first k indices of every shard together are the first
// k * num_replicas indices of the epoch's order, whatever num_replicas is.
#pragma once

#include <cstdint>
#include <vector>

namespace loom::data {

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank,
                     bool shuffle = true, uint64_t seed = 0, bool drop_last = false);

  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  // This rank's indices for the current epoch.
  std::vector<int64_t> indices() const;
  // How many indices each rank gets per epoch (len(sampler) in PyTorch).
  int64_t size() const { return num_samples_; }

 private:
  int64_t dataset_size_, num_replicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
};

}  // namespace loom::data
