// What a data-parallel trainer does beside nn::DistributedDataParallel: split each global batch
// between the ranks, agree on numbers (the loss to print, the planned step count), and weight a
// loss whose examples are split unevenly. The pattern of examples/train_*.cpp:
//
//   distributed::init();                                 // a job of one without a launcher
//   nn::DistributedDataParallel ddp(model);              // rank 0's weights everywhere
//   const int64_t global_batch = batch * distributed::world_size();
//   ... every rank draws the same global batch (same seed), then trains on its part:
//   Tensor x = distributed::rank_chunk(global_x);        // (batch, ...) of (global_batch, ...)
//   loss.backward();  opt.step();                        // gradients averaged in backward
//   progress.add(distributed::all_reduce_value(loss.item(), ReduceOp::Mean));  // global loss
//   total = distributed::broadcast_value(planned);       // every rank stops at the same step
//
// Every function here is a collective (all ranks call it, in the same order) except rank_chunk
// and rank_stride; in a job of one each returns its input.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "distributed/distributed.h"

namespace loom::distributed {

// ---------------------------------------------------------------- a global batch, split

// This rank's contiguous rows of a global batch: torch.tensor_split(batch, world_size())[rank()],
// i.e. rows [rank * n, (rank + 1) * n) with n = batch.size(0) / world_size(), contiguous. Throws
// loom::Error unless the rows divide evenly.
Tensor rank_chunk(const Tensor& batch);

// This rank's items of a list: items[rank], items[rank + world_size], ... (DistributedSampler's
// indices[rank::num_replicas]). For a list sorted by length (a length bucket) the ranks get
// equal amounts of work. A list shorter than world_size() leaves some ranks none.
template <class T>
std::vector<T> rank_stride(const std::vector<T>& items) {
  std::vector<T> mine;
  for (size_t i = static_cast<size_t>(rank()); i < items.size();
       i += static_cast<size_t>(world_size()))
    mine.push_back(items[i]);
  return mine;
}

// ---------------------------------------------------------------- numbers every rank agrees on

// A number reduced over the ranks (torch: all_reduce of a one-element tensor, then .item()), in
// float32 precision; ReduceOp::Mean for "the loss of the global batch".
double all_reduce_value(double value, ReduceOp op = ReduceOp::Sum);
// Several at once (one collective): the loss and its terms.
std::vector<double> all_reduce_values(const std::vector<double>& values,
                                      ReduceOp op = ReduceOp::Sum);
// The exact sum of an integer over the ranks (examples, tokens, boxes).
int64_t all_reduce_count(int64_t count);
// `root`'s value of a number every rank computed (timings differ between ranks: the step count
// planned from them must be one rank's, or the ranks stop at different steps and hang).
int64_t broadcast_value(int64_t value, int root = 0);

// ---------------------------------------------------------------- uneven shares of a batch

// The loss to call backward on when each rank's share of the global batch holds a different
// number of the items its loss averages over (target tokens of a length bucket, masked
// positions): local_mean x world_size() x local_count / (local_count summed over the ranks).
// DDP averages the ranks' gradients, so the result is the gradient of the mean over every item
// of the global batch, as one process with the whole batch computes it; and
// all_reduce_value(loss.item(), ReduceOp::Mean) is that mean. A rank with local_count 0 gets a
// zero loss (still connected to the graph, so its gradient hooks fire); so does every rank if
// the whole batch has no item. In a job of one, local_mean itself.
Tensor global_mean_loss(const Tensor& local_mean, int64_t local_count);

}  // namespace loom::distributed
