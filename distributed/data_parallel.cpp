// A global batch split between the ranks, numbers reduced or broadcast, and the weight of an
// uneven share: the helpers of distributed/data_parallel.h.
#include "distributed/data_parallel.h"

#include "autograd/ops.h"
#include "core/error.h"

namespace loom::distributed {

Tensor rank_chunk(const Tensor& batch) {
  LOOM_CHECK(batch.defined() && batch.dim() >= 1,
             "distributed::rank_chunk: expected a batch of at least one dimension, got {}",
             batch.defined() ? shape_str(batch.shape()) : "undefined");
  const int64_t world = world_size(), rows = batch.size(0) / world;
  LOOM_CHECK(batch.size(0) % world == 0,
             "distributed::rank_chunk: a batch {} of {} rows does not split evenly between {} "
             "processes",
             shape_str(batch.shape()), batch.size(0), world);
  if (world == 1) return batch;
  return batch.narrow(0, rank() * rows, rows).contiguous();
}

std::vector<double> all_reduce_values(const std::vector<double>& values, ReduceOp op) {
  if (world_size() == 1 || values.empty()) return values;
  Tensor t = tensor(std::vector<float>(values.begin(), values.end()),
                    {static_cast<int64_t>(values.size())});
  all_reduce(t, op);
  const std::vector<float> reduced = t.to_vector();
  return {reduced.begin(), reduced.end()};
}

double all_reduce_value(double value, ReduceOp op) { return all_reduce_values({value}, op)[0]; }

int64_t all_reduce_count(int64_t count) {
  if (world_size() == 1) return count;
  Tensor t = tensor_i64({count}, {1});
  all_reduce(t, ReduceOp::Sum);
  return t.to_vector_i64()[0];
}

int64_t broadcast_value(int64_t value, int root) {
  LOOM_CHECK(root >= 0 && root < world_size(),
             "distributed::broadcast_value: root {} is not a rank of a job of {}", root,
             world_size());
  if (world_size() == 1) return value;
  Tensor t = tensor_i64({value}, {1});
  broadcast(t, root);
  return t.to_vector_i64()[0];
}

Tensor global_mean_loss(const Tensor& local_mean, int64_t local_count) {
  LOOM_CHECK(local_mean.defined() && local_mean.numel() == 1 && local_count >= 0,
             "distributed::global_mean_loss: expected a one-element loss and a count >= 0, got "
             "{} and {}",
             local_mean.defined() ? shape_str(local_mean.shape()) : "undefined", local_count);
  if (world_size() == 1) return local_mean;
  const int64_t total = all_reduce_count(local_count);
  const double weight = total == 0
                            ? 0.0
                            : static_cast<double>(world_size()) * static_cast<double>(local_count) /
                                  static_cast<double>(total);
  return local_mean * static_cast<float>(weight);
}

}  // namespace loom::distributed
